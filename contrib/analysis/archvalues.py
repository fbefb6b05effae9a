"""The values the arch evaluator computes with: unknowns, tree functions, outside names.

A value is a frozenset of possibilities; an unknown stands for anything the GPU
does not decide, with what it may be as a boolean.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from contrib.analysis.pymodules import Scope

Cap = tuple[int, int]
Values = frozenset[Any]
LIMIT = 16  # possibilities kept per value before it becomes unknown


class _Unknown:
    """A value the GPU does not decide; ``truth`` is what it may be as a boolean."""

    def __init__(self, name: str, truth: frozenset[bool]) -> None:
        self.name, self.truth = name, truth

    def __repr__(self) -> str:
        return self.name


UNK = _Unknown("unknown", frozenset({True, False}))
UNK_T = _Unknown("unknown-true", frozenset({True}))
UNK_F = _Unknown("unknown-false", frozenset({False}))
ANY: Values = frozenset({UNK})
# The CUDA toolkit's version (``torch.version.cuda`` and what is computed from it).  The
# audit asks what the GPU decides with a toolkit that can build the target, so the
# toolkit is newer than any version the code compares it with: `cuda >= (12, 8)` is
# true, `cuda < "12.8"` false; tests of its equality stay unknown.
TOOLKIT = _Unknown("toolkit", frozenset({True}))
_ORDER = {ast.Gt: True, ast.GtE: True, ast.Lt: False, ast.LtE: False}


@dataclass(frozen=True)
class Func:
    """A function defined in the tree."""

    path: str
    node: ast.FunctionDef | ast.AsyncFunctionDef = None  # type: ignore[assignment]

    def __hash__(self) -> int:
        return hash((self.path, id(self.node)))


@dataclass(frozen=True)
class Partial:
    """``functools.partial(f, **kw)`` of a tree function."""

    func: Func
    args: tuple[Values, ...]
    kwargs: tuple[tuple[str, Values], ...]


@dataclass(frozen=True)
class Ext:
    """A name from outside the tree (``torch.cuda.get_device_capability``)."""

    dotted: str


@dataclass(frozen=True)
class ModRef:
    """A module of the tree, by path (``import pkg.utils as u``)."""

    path: str


@dataclass(frozen=True)
class Props:
    """``torch.cuda.get_device_properties(...)``: ``.major`` and ``.minor`` are the GPU's."""


IDENTITY = ("lru_cache", "cache", "wraps", "cached", "functools.cache")
BUILTINS: dict[str, Callable[..., Any]] = {
    "int": int, "str": str, "float": float, "bool": bool, "tuple": tuple, "list": tuple,
    "len": len, "min": min, "max": max, "abs": abs, "any": any, "all": all, "set": frozenset,
}
BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
}
CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}


def ordered(values: Values) -> list[Any]:
    """``values`` in an order that is the same on every run: a set of functions hashes
    by their nodes' ids, so its own order changes with the memory layout, and a walk
    that follows the first ones (or keeps the first call chains) would too."""
    return sorted(values, key=_order_key)


def _order_key(value: Any) -> tuple[int, str, int, int, str]:
    if isinstance(value, Func):
        node = value.node
        return (0, value.path, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), "")
    if isinstance(value, ModRef):
        return (1, value.path, 0, 0, "")
    if isinstance(value, Ext):
        return (2, value.dotted, 0, 0, "")
    if isinstance(value, Partial):
        return (3, value.func.path, getattr(value.func.node, "lineno", 0), 0, "")
    return (4, type(value).__name__, 0, 0, repr(value))


def truth_of(values: Values) -> frozenset[bool]:
    """What ``values`` may be as a boolean."""
    out: set[bool] = set()
    for value in values:
        if isinstance(value, _Unknown):
            out |= value.truth
        elif isinstance(value, Ext):
            out |= {True, False}
        else:
            try:
                out.add(bool(value))
            except Exception:
                out |= {True, False}
    return frozenset(out)


def vague(value: Any) -> bool:
    """Whether ``value`` holds an unknown anywhere (then operations on it are unknown)."""
    if isinstance(value, _Unknown | Ext | Func | Partial | ModRef | Props):
        return True
    return isinstance(value, tuple) and any(vague(v) for v in value)


def values_of(items: Iterable[Any]) -> Values:
    found = frozenset(items)
    return found if len(found) <= LIMIT else ANY


@dataclass
class Frame:
    """Where an expression is read: a module, and the function body around it (if any)."""

    path: str
    local: Scope | None = None
    env: dict[str, Values] | None = None  # a function run with its arguments bound
    key: int = 0  # identity of the function for the cache (0: module level)


def settled(value: Any, truth: bool) -> Any:
    """An unknown that is known to have been ``truth`` (it stopped an and/or)."""
    if isinstance(value, _Unknown | Ext):
        return UNK_T if truth else UNK_F
    return value


def hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def safe(op: Callable[..., Any], *operands: Any) -> Any:
    try:
        result = op(*operands)
    except Exception:
        return UNK
    return result if hashable(result) else UNK


def index(base: Any, key: Any) -> Any:
    if base is TOOLKIT:
        return TOOLKIT  # `cuda.split(".")[:2]`
    if vague(base) or (not isinstance(key, slice) and vague(key)) or not isinstance(base, tuple | str):
        return UNK
    return safe(operator.getitem, base, key)


def compare(op: ast.cmpop, a: Any, b: Any) -> set[bool]:
    if (a is TOOLKIT) != (b is TOOLKIT):
        return _toolkit_compare(op, a is TOOLKIT)
    function = CMPOPS.get(type(op))
    if function is None or vague(a) or vague(b):
        if isinstance(op, ast.Is | ast.IsNot) and (a is None) != (b is None) and not (
                isinstance(a, _Unknown) or isinstance(b, _Unknown)):
            return {isinstance(op, ast.IsNot)}
        return {True, False}
    result = safe(function, a, b)
    return {True, False} if isinstance(result, _Unknown) else {bool(result)}


def _toolkit_compare(op: ast.cmpop, toolkit_left: bool) -> set[bool]:
    """A comparison with the toolkit's version on one side (see :data:`TOOLKIT`)."""
    newer = _ORDER.get(type(op))
    if newer is not None:
        return {newer if toolkit_left else not newer}
    if isinstance(op, ast.Is | ast.IsNot):  # `torch.version.cuda is not None`
        return {isinstance(op, ast.IsNot)}
    return {True, False}


def toolkit_in(*values: Values) -> bool:
    """Whether any of ``values`` holds the toolkit's version."""
    return any(TOOLKIT in v for v in values)
