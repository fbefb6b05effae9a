"""Backends chosen by name: registries, the strings handed on, and the tests of them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Frame, Func
from contrib.analysis.hostarch import written_for
from contrib.analysis.pywalk import name_of, walk
from contrib.analysis.reach.names import MAX_REGISTERED, distinctive
from contrib.analysis.reach.objects import object_methods
from contrib.analysis.reach.tables import Tables

Key = tuple[str, frozenset[str]]  # the backend followed, and every name of its registry


_REGISTERS = re.compile(r"^[ \t]*@[\w.]+\(\s*[\"']([\w.\-]{3,})[\"']((?:\s*,\s*[\"'][\w.\-]+[\"'])*)",
                        re.MULTILINE)


_MORE = re.compile(r"[\"']([\w.\-]+)[\"']")


class Registry:
    """What the tree's decorators register under a string (``@register_attention_backend(
    "trtllm_mha")`` on ``create_trtllm_mha_backend``): the decorated function, and
    the methods of the classes it returns (``return TRTLLMHAAttnBackend(runner)``: a
    backend object is used through its methods).  Files are found by one regex over
    the tree's texts, parsed only when they register the name asked for."""

    def __init__(self, ev: TreeEval) -> None:
        self.ev = ev
        self._files: dict[str, list[str]] | None = None
        self._found: dict[str, tuple[Func, ...]] = {}
        self.tables = Tables(ev)  # the registries written as dicts

    def of(self, name: str) -> tuple[Func, ...]:
        if self._files is None:
            self._files = {}
            for path in self.ev.index.paths():
                text = self.ev.read(path) or ""
                if "@" in text:
                    names = {n for first, more in _REGISTERS.findall(text)
                             for n in _names([first, *_MORE.findall(more)])}
                    for found in names:
                        self._files.setdefault(found, []).append(path)
        if name not in self._found:
            entries: list[Func] = []
            for path in self._files.get(name, [])[:MAX_REGISTERED + 1]:
                module = self.ev.module(path)
                for node in walk(module[0]) if module is not None else ():
                    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                            name in registered_names(d) for d in node.decorator_list):
                        entries.append(Func(path, node))
            if len(entries) > MAX_REGISTERED:
                entries = []
            self._found[name] = tuple(entries) + tuple(
                m for f in entries for m in self._returned_methods(f))
        return self._found[name]

    def under(self, name: str, setting: str) -> tuple[Func, ...]:
        """What is registered under ``name`` by a decorator named for ``setting``
        (``@register_attention_backend("trtllm_mla")`` for ``attention_backend``): the
        registry a setting's value picks from, where a plain word may name entries of
        others too (``"triton"``), with the methods of the classes they return; and what
        a dict named for the setting maps it to (:class:`~.tables.Tables`: sglang's
        ``QUANTIZATION_METHODS["fp8"]``, ``Fp8Config``'s methods)."""
        entries = [f for f in self.of(name) if isinstance(f.node, ast.FunctionDef | ast.AsyncFunctionDef)
                   and any(name in registered_names(d) and setting in (name_of(d) or "")
                           for d in f.node.decorator_list)]
        return (tuple(entries) + tuple(m for f in entries for m in self._returned_methods(f))
                + self.tables.under(name, setting))

    def _returned_methods(self, func: Func) -> list[Func]:
        frame = Frame(func.path, self.ev.function_scope(func.node), None, id(func.node))
        out: list[Func] = []
        for node in walk(func.node):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
                out += object_methods(self.ev, node.value.func, frame)
        return out


def registered_names(decorator: ast.expr) -> list[str]:
    """The names a decorator call registers its function under, from its leading string
    arguments: the one (``@register_attention_backend("trtllm_mha")``), or of several
    the distinctive ones (``@register_fused_func("none", "flashinfer_trtllm")``: the
    dispatcher's ``"none"`` is a key many share, the runner's name is this one's)."""
    if not isinstance(decorator, ast.Call):
        return []
    strings: list[str] = []
    for arg in decorator.args:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            break
        strings.append(arg.value)
    return _names(strings)


def _names(strings: list[str]) -> list[str]:
    return strings if len(strings) == 1 else [s for s in strings if distinctive(s)]


Arm = Callable[[ast.IfExp], "bool | None"]  # which value of `a if c else b` is taken


def value_literals(node: ast.AST, arm: Arm | None = None) -> list[str]:
    """The strings ``node`` hands on as values: what it assigns, returns or passes as a
    keyword (through dicts, lists, ``a if c else b``, ``x or "y"``), not what it
    compares, formats or indexes with; ``arm``: see :func:`spread_literals`."""
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.Return | ast.keyword):
        return spread_literals(node.value, arm) if node.value is not None else []
    return []


def spread_literals(value: ast.expr, arm: Arm | None = None) -> list[str]:
    """The strings of a value: a literal, or those of a dict's values, a list or
    tuple, both sides of ``a if c else b`` (the one ``arm`` says is taken, where it
    says) and the operands of ``or``/``and``."""
    if isinstance(value, ast.Constant):
        return [value.value] if isinstance(value.value, str) else []
    parts: list[ast.expr] = []
    if isinstance(value, ast.Dict):
        parts = [v for v in value.values if v is not None]
    elif isinstance(value, ast.List | ast.Tuple):
        parts = list(value.elts)
    elif isinstance(value, ast.IfExp):
        taken = arm(value) if arm is not None else None
        parts = [value.body, value.orelse] if taken is None else [
            value.body if taken else value.orelse]
    elif isinstance(value, ast.BoolOp):
        parts = list(value.values)
    return [s for part in parts for s in spread_literals(part, arm)]


def backend_test(test: ast.expr, chosen: str, names: frozenset[str],
                 operands: frozenset[str] = frozenset()) -> bool | None:
    """Whether ``test`` holds when the backend is ``chosen``: a comparison with string
    literals of which one is a name of the registry or a variant of one
    (``"cutlass_sm12x"``) (``backend == "cudnn"``,
    ``backend in ("cutlass", "tgv")``, ``"cudnn" in runner_names``), and ``not``,
    ``and``, ``or`` of such.  ``operands``: the expressions (``ast.dump``) the function
    compares with the registry's names: under the backend followed they hold its
    names only, so another literal tested against one (``"tgv" in runner_names``
    beside ``"cudnn" in runner_names``) is not chosen either.  None when the test is
    not about the registry's names."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = backend_test(test.operand, chosen, names, operands)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [backend_test(v, chosen, names, operands) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # True decides an `or`, False an `and`
        if decisive in parts:
            return decisive
        return None if None in parts else not decisive
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, sides = test.ops[0], (test.left, test.comparators[0])
    for side, other in (sides, sides[::-1]):
        literals = _literals(side)
        if literals and (any(_variant(lit, name) for lit in literals for name in names)
                         or ast.dump(other) in operands):
            hit = any(_variant(lit, chosen) for lit in literals)
            if isinstance(op, ast.Eq | ast.In):
                return hit
            if isinstance(op, ast.NotEq | ast.NotIn):
                return not hit
    return None


def keyed_operands(code: Iterable[ast.AST], names: frozenset[str]) -> frozenset[str]:
    """The expressions ``code`` compares with a name of the registry (``runner_names`` in
    ``"cudnn" in runner_names``), as :func:`ast.dump` strings."""
    found: set[str] = set()
    for node in (n for c in code for n in walk(c)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            sides = (node.left, node.comparators[0])
            for side, other in (sides, sides[::-1]):
                if any(_variant(lit, name) for lit in _literals(side) for name in names) \
                        and not _literals(other):
                    found.add(ast.dump(other))
    return frozenset(found)


def named_choice(test: ast.expr, major: int) -> bool | None:
    """Whether a GPU of ``major`` takes a test of a name written for other archs:
    ``"cutlass_sm10x" in runner_names``, ``backend == "vsa_sm100_blk64"`` (a runner,
    backend or kernel its code names for SM 10.x).  Such a name is chosen where its
    arch is, so the test is false elsewhere (``!=``, ``not in``: true).  Only names of
    SM 9.0 or newer say so: those are arch-specific (the ``a`` features); ``"sm80"``
    code runs on every newer GPU, and a name of the target's own major says nothing
    (None: not the names' to say)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, right, op = test.left, test.comparators[0], test.ops[0]
    literal = next((side.value for side in (left, right) if isinstance(side, ast.Constant)
                    and isinstance(side.value, str)), None)
    if literal is None or all(isinstance(side, ast.Constant) for side in (left, right)):
        return None
    if isinstance(op, ast.In | ast.NotIn) and literal is not getattr(left, "value", None):
        return None  # `x in "text"`: a substring test, not a name chosen
    majors = written_for([literal])
    if not majors or major in majors or min(majors) < 9:
        return None
    if isinstance(op, ast.Eq | ast.In):
        return False
    if isinstance(op, ast.NotEq | ast.NotIn):
        return True
    return None


def of_registry(literal: str, key: Key) -> bool:
    """Whether ``literal`` is a name (or a variant of one) of the registry ``key``
    follows: inside ``mm_bf16``'s cudnn path, ``backends = ["cudnn"]`` is that
    registry's own name, not a lead into another registry that also says "cudnn"."""
    return any(_variant(literal, name) for name in key[1])


def _variant(literal: str, name: str) -> bool:
    """Whether ``literal`` names backend ``name`` or a variant of it (flashinfer's
    ``"cutlass_sm10x"`` runner of the ``"cutlass"`` backend)."""
    return literal == name or literal.startswith(name + "_")


def decorator_arguments(node: ast.AST) -> Iterator[ast.expr]:
    """The arguments of a function's decorator calls, keywords' values included."""
    for mark in getattr(node, "decorator_list", []):
        if isinstance(mark, ast.Call):
            yield from mark.args
            yield from (k.value for k in mark.keywords)


def handed(value: ast.expr) -> Iterator[tuple[str, Key | None]]:
    """The function names a decorator argument hands over: a name, or the values of a
    dict keyed by string literals, each with its key and the dict's keys (the
    registry ``@backend_requirement({"cudnn": _cudnn_requirement, ...})`` builds)."""
    if isinstance(value, ast.Name):
        yield value.id, None
    elif isinstance(value, ast.Dict):
        names = string_keys(value)
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(v, ast.Name):
                keyed = isinstance(k, ast.Constant) and isinstance(k.value, str)
                yield v.id, (str(k.value), names) if keyed and isinstance(k, ast.Constant) \
                    else None


def decorator_keys(node: ast.AST) -> frozenset[str]:
    """The names of the registries a function's decorators are handed: the string keys
    of dict literals among their arguments."""
    return frozenset().union(*(string_keys(v) for v in decorator_arguments(node)
                               if isinstance(v, ast.Dict)))


def parameter_key(owner: ast.ClassDef | None, func: ast.FunctionDef | ast.AsyncFunctionDef,
                  passed: Iterable[tuple[str, str]]) -> Key | None:
    """The backend a call chooses by a string it passes for a parameter of the callee:
    flashinfer's ``BatchPrefillWithRaggedKVCacheWrapper(..., backend="cutlass")``, whose
    ``__init__`` stores ``self._backend = backend`` and whose ``plan`` runs the CUTLASS
    module under ``if self._backend == "cutlass":``.  The parameter is ``func``'s own, or
    its class's ``__init__``'s when ``func`` is a method (``owner``: the class whose
    body defines it, :func:`classes_of`); its operands are the parameter and the attributes ``__init__`` stores it in;
    the registry's names are the string literals the function (or the class) compares
    them with.  A value the code replaces when it holds it (``if self._backend ==
    "auto": self._backend = determine_attention_backend(...)``) chooses nothing: what
    runs is picked later.  None when no string passed is one the code tests for."""
    scope = [f for f in owner.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
             ] if owner is not None else [func]
    init = next((f for f in scope if f.name == "__init__"), None) if owner is not None else func
    if init is None:
        return None
    arguments = init.args
    params = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    for name, value in passed:
        if name not in params or name == "self":
            continue
        operands = {name} | {ast.unparse(t) for node in walk(init)
                             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
                             and node.value.id == name for t in node.targets
                             if isinstance(t, ast.Attribute)}
        names: set[str] = set()
        replaced: set[str] = set()
        for node in (n for f in scope for n in walk(f)):
            names |= _tested_literals(node, operands)
            if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                    and isinstance(node.test.ops[0], ast.Eq)
                    and _assigns(node.body, operands)):
                replaced |= _tested_literals(node.test, operands)
        if any(_variant(value, n) for n in names) and value not in replaced:
            return value, frozenset(names)
    return None


def configuration_key(function: ast.AST, around: ast.If) -> Key | None:
    """The backend ``around`` configures (found by :func:`configuring_if`): sglang's ``if
    self.attention_backend == "trtllm_mla" or self.decode_attention_backend ==
    "trtllm_mla": if not is_sm100_supported(): raise ...``.  What the function runs past
    that refusal runs with that backend chosen, so its tests of the same operands go
    that backend's way (the registry's names: every string ``function`` compares
    those operands with)."""
    chosen = _configured(around.test)
    if chosen is None:
        return None
    literal, operands = chosen
    names = set().union(*(_tested_literals(n, operands) for n in walk(function)))
    return literal, frozenset(names)


def configuring_if(function: ast.AST, node: ast.AST, parents: dict[int, ast.AST]) -> ast.If | None:
    """The innermost ``if`` of ``function`` holding ``node`` in its body whose test
    chooses one backend by name: one literal, compared with ``==`` or ``in``, or an
    ``or`` of such comparisons with the same literal; None when there is none."""
    child, up = node, parents.get(id(node))
    while up is not None and up is not function:
        if isinstance(up, ast.If) and child in up.body and _configured(up.test) is not None:
            return up
        child, up = up, parents.get(id(up))
    return None


def _configured(test: ast.expr) -> tuple[str, set[str]] | None:
    """``x == "lit"`` (or ``x in ("lit",)``), or an ``or`` of such with one literal:
    the literal and the operands compared with it."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    literal: str | None = None
    operands: set[str] = set()
    for part in parts:
        if not (isinstance(part, ast.Compare) and len(part.ops) == 1
                and isinstance(part.ops[0], ast.Eq | ast.In)):
            return None
        sides = (part.left, part.comparators[0])
        found = next(((lits, other) for side, other in (sides, sides[::-1])
                      if len(lits := _literals(side)) == 1
                      and isinstance(other, ast.Name | ast.Attribute)), None)
        if found is None or (literal is not None and found[0] != {literal}):
            return None
        literal = next(iter(found[0]))
        operands.add(ast.unparse(found[1]))
    return (literal, operands) if literal is not None else None


def _tested_literals(node: ast.AST, operands: set[str]) -> set[str]:
    """The strings ``node`` compares one of ``operands`` with (``==``, ``!=``, ``in``)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq | ast.NotEq | ast.In | ast.NotIn)):
        return set()
    sides = (node.left, node.comparators[0])
    for side, other in (sides, sides[::-1]):
        if ast.unparse(other) in operands and _literals(side):
            return _literals(side)
    return set()


def _assigns(body: list[ast.stmt], operands: set[str]) -> bool:
    """Whether ``body`` assigns one of ``operands`` (``self._backend = pick(...)``)."""
    return any(isinstance(a, ast.Assign) and any(ast.unparse(t) in operands for t in a.targets)
               for s in body for a in walk(s))


def string_keys(table: ast.Dict) -> frozenset[str]:
    """The string literals keying a dict literal."""
    return frozenset(k.value for k in table.keys
                     if isinstance(k, ast.Constant) and isinstance(k.value, str))


def keyed_entries(table: ast.Dict, chosen: str, names: frozenset[str]) -> list[ast.expr] | None:
    """The values of a dict literal keyed by the registry's names (or their variants)
    that the backend ``chosen`` uses: its own entries, and those not keyed by a
    string; None when the dict is not keyed by those names."""
    if not any(_variant(k, name) for k in string_keys(table) for name in names):
        return None
    return [v for k, v in zip(table.keys, table.values, strict=True)
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str))
            or _variant(k.value, chosen)]


def _literals(node: ast.expr) -> set[str]:
    """The strings of a string literal, or of a tuple, list or set of them."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    found = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
    return found if len(found) == len(items) else set()
