"""The values the arch evaluator computes with: unknowns, tree functions, outside names;
and what a gate admits (:class:`Capabilities`).

A value is a frozenset of possibilities; an unknown stands for anything the GPU
does not decide, with what it may be as a boolean.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from contrib.analysis.pymodules import Scope
from contrib.arch import KNOWN, Arch

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


class Toolkit(_Unknown):
    """The CUDA toolkit's version (``torch.version.cuda``, ``nvcc --version`` and what is
    computed from them).  ``version`` None: the audit asks what the GPU decides with a
    toolkit that can build the target, so it is newer than any version the code compares
    it with (``cuda >= (12, 8)`` true, ``cuda < "12.8"`` false, equality unknown).  A
    concrete ``(12, 9)`` (``contrib why --cuda 12.9``) compares as that release."""

    def __init__(self, version: tuple[int, int] | None = None) -> None:
        super().__init__("toolkit" if version is None else f"cuda-{version[0]}.{version[1]}",
                         frozenset({True}))
        self.version = version


TOOLKIT = Toolkit()
# A path to nvcc (``os.path.join(cuda_home, "bin/nvcc")``): what ``--version`` is asked of
# (:mod:`~contrib.analysis.archtoolkit`).
NVCC = _Unknown("nvcc", frozenset({True}))
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
    if isinstance(base, Toolkit):
        return base  # `cuda.split(".")[:2]`
    if vague(base) or (not isinstance(key, slice) and vague(key)) or not isinstance(base, tuple | str):
        return UNK
    return safe(operator.getitem, base, key)


def compare(op: ast.cmpop, a: Any, b: Any) -> set[bool]:
    a, b = _as_release(a), _as_release(b)
    if isinstance(a, Toolkit) != isinstance(b, Toolkit):
        toolkit, other = (a, b) if isinstance(a, Toolkit) else (b, a)
        if toolkit.version is None:
            return _toolkit_compare(op, toolkit is a)
        return _release_compare(op, toolkit.version, other, toolkit is a)
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


def _as_release(value: Any) -> Any:
    """``(major, minor)`` of a concrete toolkit (sglang's ``_jit_cuda_version()``: the
    two numbers of ``nvcc --version``'s match) is that toolkit."""
    if isinstance(value, tuple) and value and isinstance(value[0], Toolkit) \
            and value[0].version is not None and all(v is value[0] for v in value):
        return value[0]
    return value


def _release_compare(op: ast.cmpop, version: tuple[int, int], other: Any,
                     toolkit_left: bool) -> set[bool]:
    """A comparison of a concrete toolkit's version with ``other``: a version text
    (``"12.9"``), numbers (``(12, 8)``, what :func:`release` makes of ``Version("13.0")``)
    or a major alone (``13``: ``int(cuda.split(".")[0])`` is still the toolkit here, so
    its major is what it is compared by)."""
    function = CMPOPS.get(type(op))
    theirs = release(other)
    if function is None or theirs is None:
        return {True, False}
    mine = version[:len(theirs)] if isinstance(other, int) else version
    left, right = (mine, theirs) if toolkit_left else (theirs, mine)
    return {bool(function(left, right))}


def release(value: Any) -> tuple[int, ...] | None:
    """``"12.9"``, ``"12.9.1"``, ``12.8``, ``(12, 8)`` or ``13`` as numbers; None for
    anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,)
    if isinstance(value, float):
        value = str(value)
    if isinstance(value, str):
        parts = value.strip().split(".")
        return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None
    if isinstance(value, tuple) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def toolkit_in(*values: Values) -> bool:
    """Whether any of ``values`` holds the toolkit's version."""
    return any(isinstance(x, Toolkit) for v in values for x in v)


# -- what a gate admits -----------------------------------------------------------------
# ``supported_major_versions=[9, 10]`` admits majors; ``@supported_compute_capability([100,
# 103, 120])`` lists capabilities (major * 10 + minor), so it admits 12.0 and not 12.1:
# flashinfer opened ``nvfp4_attention_sm120_fwd`` to 12.1 apart (``[120]`` ->
# ``[120, 121]``, #3897), as it did ``fmha_v2_prefill_deepseek`` (``is_sm120a_supported``,
# whose body tests ``minor == 0``, widened by ``or is_sm121a_supported``, #2559).  A major
# is whole when every capability of it that was read (or, for a list, that nvcc knows) is
# admitted; otherwise its admitted capabilities are kept one by one.


@dataclass(frozen=True)
class Capabilities:
    """The capabilities a gate admits: ``whole`` majors, and ``single`` (major, minor)
    pairs of majors it splits.  Iterating gives the majors it admits anything of (the
    majors view older readers take); ask :meth:`admits` for one architecture."""

    whole: frozenset[int] = frozenset()
    single: frozenset[Cap] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "single",
                           frozenset(c for c in self.single if c[0] not in self.whole))

    @classmethod
    def of_majors(cls, majors: Iterable[int]) -> Capabilities:
        """Whole majors (a JIT build list, a major test)."""
        return cls(frozenset(majors))

    @classmethod
    def listed(cls, caps: Iterable[Cap]) -> Capabilities:
        """Capabilities a list names: a major is whole when every capability nvcc
        knows of it is listed (``[120, 121]`` is major 12; ``[100, 103]`` is not 10)."""
        named = frozenset(caps)
        majors = {major for major, _ in named}
        whole = frozenset(m for m in majors
                          if all((m, n) in named for a, n in KNOWN if a == m))
        return cls(whole, named)

    @classmethod
    def read(cls, truths: Iterable[tuple[Cap, bool]]) -> Capabilities:
        """Capabilities an expression was read on, each with whether it may be true
        there: a major is whole when it is true on every capability read of it."""
        seen: dict[int, list[bool]] = {}
        true: set[Cap] = set()
        for cap, truth in truths:
            seen.setdefault(cap[0], []).append(truth)
            if truth:
                true.add(cap)
        return cls(frozenset(m for m, t in seen.items() if all(t)), frozenset(true))

    def admits(self, major: int, minor: int) -> bool:
        """Whether the capability ``major.minor`` is admitted."""
        return major in self.whole or (major, minor) in self.single

    def admits_arch(self, arch: Arch) -> bool:
        """Whether ``arch`` is admitted, by its major and minor."""
        return self.admits(arch.major, arch.minor)

    def splits(self, major: int) -> bool:
        """Whether some capability of ``major`` is admitted and not all of it."""
        return major not in self.whole and any(c[0] == major for c in self.single)

    @property
    def majors(self) -> frozenset[int]:
        """Every major it admits a capability of."""
        return self.whole | {c[0] for c in self.single}

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.majors))

    def __len__(self) -> int:
        return len(self.majors)

    def __contains__(self, major: object) -> bool:
        return major in self.majors

    def numbers(self) -> str:
        """``10, 11, 12.0``: whole majors bare, single capabilities dotted, in order."""
        items = [(m, -1) for m in self.whole] + sorted(self.single)
        return ", ".join(str(m) if n < 0 else f"{m}.{n}" for m, n in sorted(items))

    def text(self) -> str:
        """``majors 9, 10``; ``majors 11, 12 and capabilities 10.0, 10.3``;
        ``capability 12.0``; ``majors none``."""
        parts = []
        if self.whole:
            parts.append("majors " + ", ".join(map(str, sorted(self.whole))))
        if self.single:
            word = "capability " if len(self.single) == 1 else "capabilities "
            parts.append(word + ", ".join(f"{m}.{n}" for m, n in sorted(self.single)))
        return " and ".join(parts) or "majors none"

    def cache(self) -> list[int | list[int]]:
        """As data: a whole major as its number, a single capability as ``[major, minor]``."""
        return [*sorted(self.whole), *([m, n] for m, n in sorted(self.single))]

    @classmethod
    def from_cache(cls, value: object) -> Capabilities | None:
        """Back from :meth:`cache`; None for anything not of that shape."""
        if not isinstance(value, list):
            return None
        whole: set[int] = set()
        single: set[Cap] = set()
        for item in value:
            if _int(item):
                whole.add(item)
            elif isinstance(item, list) and len(item) == 2 and all(_int(v) for v in item):
                single.add((item[0], item[1]))
            else:
                return None
        return cls(frozenset(whole), frozenset(single))


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
