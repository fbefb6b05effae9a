"""The backend a call of a library's API runs through a requirement decorator.

flashinfer's ``@backend_requirement({"cudnn": _cudnn_req, "b12x": _b12x_req, ...},
common_check=_check_size, heuristic_func=_heuristic)`` wraps an API: called with
``backend="b12x"`` it runs ``_b12x_req`` (whose ``@supported_compute_capability([120,
121])`` is the arch gate) and the common check before the API's body; called with
``backend="auto"`` it keeps the backends whose requirement admits the GPU, and the
heuristic orders them for it (``if is_sm120 and cuda_major >= 13: return [c for c in
("b12x", "cutlass", "cudnn") if c in suitable_backends]``): the API then makes a runner
for each backend the heuristic returned.

:func:`ways` reads that: the backends a call takes, each with the functions the
wrapper runs for it.  What the heuristic returns on the target is read on the
target's own way through it (:meth:`~contrib.audit.stack.skips.Skips.walk`: the
branches the lower audit's gates say the target takes); whether a requirement admits
the target, from the lower audit's gate on its decorator.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from contrib.analysis.archvalues import ANY, Frame, Func, Values, ordered
from contrib.analysis.reach.backends import Key, of_registry, string_keys
from contrib.analysis.reach.tree import PyTree
from contrib.arch import Arch
from contrib.audit.model import AuditGate
from contrib.audit.stack.skips import Skips

# the decorator's parameters, as flashinfer's ``backend_requirement`` names them
_COMMON = "common_check"
_HEURISTIC = "heuristic_func"
_CHECKS = "backend_checks"


@dataclass(frozen=True)
class Requirement:
    """A requirement decorator's table: each backend's requirement function (by name,
    in the decorated function's module), the common check and the heuristic."""

    checks: tuple[tuple[str, str], ...]
    common: str | None = None
    heuristic: str | None = None

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.checks)


@dataclass(frozen=True)
class Way:
    """One backend a call takes (None: no backend chosen by name), the functions the
    wrapper runs for it before the API's body: its requirement (whose capability
    decorator the wrapper checks) and the common check (run, its decorator not checked
    where the table has backends: flashinfer's ``_check_bmm_fp8_problem_size`` is marked
    ``[100, 103, 107]`` and runs on SM120 too), and whether the body runs (not where
    every requirement refuses the target)."""

    key: Key | None
    checks: tuple[Func, ...]
    runs: tuple[Func, ...] = ()
    body: bool = True


def requirement_of(node: ast.AST) -> Requirement | None:
    """The table of a requirement decorator on ``node``: a decorator call handed a dict
    keyed by string literals whose values are names (the backends' checks), and
    heuristic or common check by keyword."""
    for mark in getattr(node, "decorator_list", []):
        if not isinstance(mark, ast.Call):
            continue
        given = {k.arg: k.value for k in mark.keywords if k.arg}
        table = mark.args[0] if mark.args else given.get(_CHECKS)
        if not isinstance(table, ast.Dict) or not string_keys(table):
            continue
        checks = tuple((k.value, v.id) for k, v in zip(table.keys, table.values, strict=True)
                       if isinstance(k, ast.Constant) and isinstance(k.value, str)
                       and isinstance(v, ast.Name))
        if not checks:
            continue
        return Requirement(checks, _named(given.get(_COMMON)), _named(given.get(_HEURISTIC)))
    return None


def _named(value: ast.expr | None) -> str | None:
    return value.id if isinstance(value, ast.Name) else None


def ways(ev: PyTree, skips: Skips, gate_at: Callable[[str, int], AuditGate | None],
         func: Func, keys: tuple[tuple[str, str], ...]) -> list[Way] | None:
    """The backends a call of ``func`` passing ``keys`` takes through its requirement
    decorator, each with the checks run for it; None when ``func`` has none, or the
    call passes no string for it.  A name of the table: that backend.  Another string
    where the decorator has a heuristic (``"auto"``): the backends it returns on the
    target (every backend, when what it returns cannot be read) among those whose
    requirement admits it; none admitting: the wrapper refuses the call, at the gates
    of the requirements of what the heuristic returns."""
    table = requirement_of(func.node)
    if table is None or not keys:
        return None
    names = table.names
    checks = {name: _function(ev, func.path, fn) for name, fn in table.checks}
    common = _function(ev, func.path, table.common) if table.common else ()
    chosen = next((v for _, v in keys if v in names), None)
    if chosen is not None:
        return [Way((chosen, names), checks[chosen], common)]
    if table.heuristic is None:
        return None
    admitted = [n for n, _ in table.checks if not any(
        _refused(gate_at, f) for f in checks[n])]
    heuristic = _function(ev, func.path, table.heuristic)
    returned = picks(skips, heuristic, names) or [n for n, _ in table.checks]
    picked = [n for n in returned if n in admitted]
    if not picked:  # nothing it returns admits the target: the wrapper refuses the call
        return [Way(None, tuple(f for n in returned for f in checks[n]), body=False)]
    return [Way((name, names), checks[name], common) for name in picked]


def _function(ev: PyTree, path: str, name: str) -> tuple[Func, ...]:
    return tuple(v for v in ordered(ev.global_(name, path)) if isinstance(v, Func))


def _refused(gate_at: Callable[[str, int], AuditGate | None], func: Func) -> bool:
    """Whether a gate of the lower audit on ``func``'s decorators turns the target away
    (``@supported_compute_capability([100, 103])`` on SM120)."""
    for mark in getattr(func.node, "decorator_list", []):
        for line in range(mark.lineno, (mark.end_lineno or mark.lineno) + 1):
            gate = gate_at(func.path, line)
            if gate is not None and gate.excludes_target:
                return True
    return False


def decorator_lines(func: Func) -> tuple[int, int] | None:
    """The first and last line of ``func``'s decorators (None: it has none)."""
    marks = getattr(func.node, "decorator_list", [])
    if not marks:
        return None
    return min(m.lineno for m in marks), max(m.end_lineno or m.lineno for m in marks)


def picks(skips: Skips, heuristic: Iterable[Func], names: frozenset[str]) -> list[str]:
    """The backends of ``names`` a heuristic returns on the target, in its order: the
    strings of what it returns on the target's way through it (a list or tuple of
    literals, a comprehension over one, a name bound to one or appended to on the way),
    each a name of the table or a variant of one (``"cutlass_sm12x"``: ``"cutlass"``)."""
    found: list[str] = []
    for func in heuristic:
        bound: dict[str, list[str]] = {}
        for node in skips.walk(func.path, func.node.body, target=True):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                bound.setdefault(node.targets[0].id, []).extend(_strings(node.value, {}))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "append" and isinstance(node.func.value, ast.Name)
                  and len(node.args) == 1):  # `heuristic_backends.append("cutlass_sm12x")`
                bound.setdefault(node.func.value.id, []).extend(_strings(node.args[0], {}))
            elif isinstance(node, ast.Return) and node.value is not None:
                found += [n for s in _strings(node.value, bound) for n in sorted(names)
                          if of_registry(s, (n, frozenset({n})))]
    return list(dict.fromkeys(found))


def _strings(value: ast.expr, bound: dict[str, list[str]]) -> list[str]:
    """The strings a returned value lists: literals, a list or tuple of them, a
    comprehension over one (``[c for c in ("b12x", "cutlass") if c in ok]``), a name
    bound to one."""
    if isinstance(value, ast.Constant):
        return [value.value] if isinstance(value.value, str) else []
    if isinstance(value, ast.List | ast.Tuple):
        return [s for item in value.elts for s in _strings(item, bound)]
    if isinstance(value, ast.ListComp | ast.GeneratorExp) and len(value.generators) == 1:
        return _strings(value.generators[0].iter, bound)
    if isinstance(value, ast.Name):
        return bound.get(value.id, [])
    return []


@dataclass(frozen=True)
class Dispatch:
    """A function run with its parameters bound to what a call passes on the target:
    its frame, and the parameters the call passed a value read from the GPU in."""

    frame: Frame
    params: frozenset[str]

    def decides(self, test: ast.expr) -> bool:
        """Whether ``test`` reads one of those parameters (the caller's GPU)."""
        return any(isinstance(n, ast.Name) and n.id in self.params for n in ast.walk(test))


def dispatch_frame(ev: PyTree, arch: Arch | None, call: ast.Call, frame: Frame,
                   callee: Func) -> Dispatch | None:
    """``callee`` run by ``call`` on the target, its parameters bound to what the call
    passes there, when an argument reads the GPU (flashinfer's
    ``get_cutlass_fp4_gemm_module(major, minor)``, ``major`` from the device, whose
    ``if sm_major in [10, 11]:`` picks the module): its tests of those parameters are
    the target's to decide.  None when no argument reads the GPU, or without a target."""
    if arch is None or not isinstance(callee.node, ast.FunctionDef | ast.AsyncFunctionDef) \
            or any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None for k in call.keywords):
        return None
    spec = callee.node.args
    positional = [a.arg for a in (*spec.posonlyargs, *spec.args)]
    if positional[:1] in (["self"], ["cls"]) and isinstance(call.func, ast.Attribute):
        positional = positional[1:]  # a method called on its object or class
    given = [*zip(positional, call.args, strict=False),
             *((k.arg, k.value) for k in call.keywords if k.arg)]
    gpu = frozenset(name for name, value in given if ev.may_read_gpu(value, frame))
    if not gpu:
        return None
    cap = ev.cap
    ev.cap = (arch.major, arch.minor)
    try:
        bound = tuple((name, ev.eval(value, frame)) for name, value in given)
    finally:
        ev.cap = cap
    env = _bind(spec, bound)
    if env is None:
        return None
    return Dispatch(Frame(callee.path, ev.function_scope(callee.node), env, id(callee.node)),
                    gpu)


def _bind(spec: ast.arguments, bound: tuple[tuple[str, Values], ...]
          ) -> dict[str, Values] | None:
    """Every parameter of ``spec``, those a call passes bound to their values (any value
    for the others); None when it names one the function does not take."""
    env: dict[str, Values] = {a.arg: ANY for a in (*spec.posonlyargs, *spec.args,
                                                    *spec.kwonlyargs)}
    for extra in (spec.vararg, spec.kwarg):
        if extra is not None:
            env[extra.arg] = ANY
    for name, value in bound:
        if name not in env:
            return None
        env[name] = value
    return env
