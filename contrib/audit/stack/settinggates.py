"""Gates a setting's value meets that no ``if`` on the GPU spells out.

Two shapes, both read for a server flag's value (``--quantization=modelopt_fp4``):

* **the minimum capability of what the value picks**: the value keys a dict registry
  (:class:`~contrib.analysis.reach.tables.Tables`: ``QUANTIZATION_METHODS["fp8"]`` is
  ``Fp8Config``), and a caller compares the device's capability with a method of the
  class picked (sglang's loader: ``if capability < quant_config.get_min_capability():
  raise ValueError(...)``; ``ModelOptFp4Config.get_min_capability()`` returns 80).  The
  gate stands at the caller's ``if``; what it admits is the method's return on the
  class the value picks, compared as the caller does (``major * 10 + minor``).
* **an allow-list of the setting's values under a condition**: ``if
  view.moe_runner_backend == "flashinfer_cutlass": assert view.quantization in
  ["modelopt_fp4", ...]`` (or ``if ... not in [...]: raise``).  A value left out is
  refused there when the condition holds: under a test of the GPU the target takes
  (the upper audit's gate at the test says so), that is the target turned away; under
  another setting's value (a backend), it is refused only with that backend, which
  the link says and does not count as the target's.

Each is a :class:`~contrib.audit.model.Link` of the feature's chain
(:func:`setting_links`).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterable, Iterator

from contrib.analysis.archvalues import Frame
from contrib.analysis.pywalk import parents, walk
from contrib.analysis.reach.objects import classes_named, lineage
from contrib.analysis.reach.tables import Entry, other_platform
from contrib.analysis.reach.tree import PyTree
from contrib.arch import Arch
from contrib.audit.chains import Link, Role
from contrib.audit.model import AuditGate

_MAX_FILES = 12  # files comparing with one method, or allow-listing one setting
_OPS: dict[type[ast.cmpop], Callable[[int, int], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}

GateAt = Callable[[str, int, int], list[AuditGate]]  # the upper gates on lines of a file


def setting_links(ev: PyTree, upstream: str, commit: str, gates_on: GateAt,
                  attr: str, value: object, arch: Arch) -> list[Link]:
    """The gates setting ``attr`` to ``value`` meets beyond the walk's: the minimum
    capability of the class it picks, and the allow-lists of its values."""
    if not isinstance(value, str) or not value:
        return []
    links = [*minimum_links(ev, upstream, commit, attr, value, arch),
             *allow_list_links(ev, upstream, commit, gates_on, attr, value)]
    return list(dict.fromkeys(links))


# -- the minimum capability of the class a value picks ------------------------------------


def minimum_links(ev: PyTree, upstream: str, commit: str, attr: str, value: str,
                  arch: Arch) -> Iterator[Link]:
    for entry in ev.registry.tables.entries(value, attr):
        if entry.cls is None:
            continue
        for method, returns in _int_methods(ev, entry):
            for path, holder, test, op, own in _compared(ev, method):
                cc = arch.major * 10 + arch.minor
                refused = {_OPS[op](cc, n) if own == "right" else _OPS[_FLIP[op]](cc, n)
                           for n in returns}
                name = f"{entry.cls[1].name}.{method}()"
                shown = " / ".join(map(str, sorted(set(returns))))
                sure = len(refused) == 1
                excludes = sure and True in refused
                verdict = ("refuses" if excludes else "admits" if sure
                           else "refuses or admits, as the checkpoint decides,")
                yield Link(Role.GATE, upstream, commit, path, test.lineno, holder,
                           f"capability >= {shown}", excludes, excludes, None,
                           f"{attr}={value} picks {entry.cls[1].name}; the caller compares "
                           f"the GPU's capability with {name} ({shown}): {verdict} "
                           f"{arch.name} ({cc})")


def _int_methods(ev: PyTree, entry: Entry) -> Iterator[tuple[str, list[int]]]:
    """The methods of the entry's class (own or inherited) whose every return is an int
    literal, or the same method of another tree class (``return
    ModelOptFp4Config.get_min_capability()``), with those ints."""
    assert entry.cls is not None
    path, cls = entry.cls
    seen: set[str] = set()
    for owner_path, owner in lineage(ev, path, cls):
        for item in owner.body:
            if isinstance(item, ast.FunctionDef) and item.name not in seen:
                seen.add(item.name)
                found = _returned_ints(ev, owner_path, item, 0)
                if found:
                    yield item.name, found


def _returned_ints(ev: PyTree, path: str, func: ast.FunctionDef, depth: int) -> list[int]:
    """The ints ``func`` returns on an NVIDIA GPU (a return under a test of another
    platform, ``if is_npu(): return 0``, is not), or [] when one return is no int."""
    found: list[int] = []
    for ret in _returns(func.body):
        value = ret.value
        if isinstance(value, ast.IfExp):  # `return 100 if self.use_mxfp8 else 80`
            sides = [_int(value.body), _int(value.orelse)]
            if None in sides:
                return []
            found += [n for n in sides if n is not None]
            continue
        number = _int(value)
        if number is not None:
            found.append(number)
        elif (isinstance(value, ast.Call) and not value.args and depth < 2
              and isinstance(value.func, ast.Attribute) and value.func.attr == func.name):
            more = [n for p, c in classes_named(ev, value.func.value, Frame(path))
                    for item in c.body if isinstance(item, ast.FunctionDef)
                    and item.name == func.name for n in _returned_ints(ev, p, item, depth + 1)]
            if not more:
                return []
            found += more
        else:
            return []
    return found


def _int(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    return None


def _returns(body: list[ast.stmt]) -> Iterator[ast.Return]:
    """The returns of ``body``, not those under a test of another platform."""
    for node in body:
        if isinstance(node, ast.Return):
            yield node
        elif isinstance(node, ast.If):
            parts = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(
                node.test.op, ast.And) else [node.test]
            if not any(other_platform(p) for p in parts):
                yield from _returns(node.body)
            yield from _returns(node.orelse)
        elif isinstance(node, ast.With | ast.For | ast.While | ast.Try):
            for field in ("body", "orelse", "finalbody"):
                yield from _returns(getattr(node, field, []))


def _compared(ev: PyTree, method: str) -> Iterator[tuple[str, str, ast.If, type[ast.cmpop], str]]:
    """The ``if`` tests of the tree comparing ``x.method()`` with a value read from the
    GPU (``capability < quant_config.get_min_capability()``) whose body raises: each
    with its file, function, operator, and the side the method stands on."""
    pattern = re.compile(rf"(?:[<>]=?\s*[\w.]+\.{method}\(\)|\.{method}\(\)\s*[<>])")
    for path, module, up in _modules(ev, ev.files_calling(method), pattern):
        for node in walk(module):
            if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                    and len(node.test.ops) == 1 and type(node.test.ops[0]) in _OPS
                    and node.body and isinstance(node.body[-1], ast.Raise)):
                continue
            left, right = node.test.left, node.test.comparators[0]
            for own, mine, other in (("right", right, left), ("left", left, right)):
                if (isinstance(mine, ast.Call) and not mine.args
                        and isinstance(mine.func, ast.Attribute) and mine.func.attr == method):
                    holder = _holder(up, node)
                    frame = (Frame(path, ev.function_scope(holder), None, id(holder))
                             if holder is not None else Frame(path))
                    if ev.may_read_gpu(other, frame):
                        yield (path, getattr(holder, "name", "<module>"), node,
                               type(node.test.ops[0]), own)


def _modules(ev: PyTree, candidates: Iterable[str], pattern: re.Pattern[str]
             ) -> Iterator[tuple[str, ast.Module, dict[int, ast.AST]]]:
    """The parsed modules among ``candidates`` whose text ``pattern`` finds, each with its
    parents; none when more than :data:`_MAX_FILES` do (a name too common to read)."""
    files = [p for p in candidates if pattern.search(ev.read(p) or "")]
    if len(files) > _MAX_FILES:
        return
    for path in files:
        module = ev.module(path)
        if module is not None:
            yield path, module[0], parents(module[0])


def _holder(up: dict[int, ast.AST], node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    while (node := up.get(id(node))) is not None:  # type: ignore[assignment]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node
    return None


# -- allow-lists of a setting's values ---------------------------------------------------


def allow_list_links(ev: PyTree, upstream: str, commit: str, gates_on: GateAt,
                     attr: str, value: str) -> Iterator[Link]:
    pattern = re.compile(rf"\.{re.escape(attr)}\s+(?:not\s+)?in\s*[\[(]")
    candidates = [p for p in ev.index.paths() if p.endswith(".py") and attr in (ev.read(p) or "")]
    for path, module, up in _modules(ev, candidates, pattern):
        for node in walk(module):
            listed = _allow_list(node, attr)
            line = getattr(node, "lineno", 0)
            if listed is None or value in listed:
                continue
            conditions = _conditions(up, node)
            if not conditions:
                continue  # refused on every GPU and with every backend: not a gate
            holder = getattr(_holder(up, node), "name", "<module>")
            allowed = ", ".join(sorted(listed))
            for test in conditions:
                gates = [g for g in gates_on(path, test.lineno, test.end_lineno or test.lineno)]
                if gates:  # a test of the GPU
                    takes = all(not g.effect.kind.not_taken and not g.excludes_target
                                for g in gates)
                    yield Link(Role.GATE, upstream, commit, path, line, holder,
                               f"{attr} in {allowed}", takes, takes, None,
                               f"{attr}={value} is not among the values allowed where "
                               f"{ast.unparse(test)} ({allowed})"
                               + ("" if takes else ": the target does not take that branch"))
                    break
            else:
                where = " and ".join(ast.unparse(t) for t in conditions)
                yield Link(Role.GATE, upstream, commit, path, line, holder,
                           f"{attr} in {allowed}", False, False, None,
                           f"refuses {attr}={value} only where {where} (it allows {allowed})")


def _allow_list(node: ast.AST, attr: str) -> set[str] | None:
    """The values an ``assert x.attr in [...]`` (or ``if x.attr not in [...]: raise``)
    allows, or None when ``node`` is neither."""
    if isinstance(node, ast.Assert):
        test, negated = node.test, False
    elif isinstance(node, ast.If) and node.body and isinstance(node.body[-1], ast.Raise):
        test, negated = node.test, True
    else:
        return None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.NotIn if negated else ast.In)
            and isinstance(test.left, ast.Attribute) and test.left.attr == attr
            and isinstance(test.comparators[0], ast.List | ast.Tuple | ast.Set)):
        return None
    items = test.comparators[0].elts
    if not all(isinstance(i, ast.Constant) and (isinstance(i.value, str) or i.value is None)
               for i in items):
        return None
    return {str(i.value) for i in items if isinstance(i, ast.Constant)}


def _conditions(up: dict[int, ast.AST], node: ast.AST) -> list[ast.expr]:
    """The tests of the ``if`` statements ``node`` sits in the body of, innermost first,
    within its function."""
    tests: list[ast.expr] = []
    child, parent = node, up.get(id(node))
    while parent is not None and not isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
        if isinstance(parent, ast.If) and child in parent.body:
            tests.append(parent.test)
        child, parent = parent, up.get(id(parent))
    return tests
