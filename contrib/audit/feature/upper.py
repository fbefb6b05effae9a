"""The tree a server's features are read in, and where a gate of it stands on a
feature's way.

:class:`Upper` holds the upper tree (its audited gates by file, its walker, the C++ ops
it builds, every setting's choices).  A gate met on a feature's walk is off its way
where only another value of the feature's setting, or a named value of another
setting, goes there (:func:`on_another_value`), or where a parameter its caller passes
picks the mode it refuses in (:func:`passed_by_caller`); a gate choosing among the
setting's values for the target names the one it gets (:func:`value_for_target`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from contrib.analysis.archvalues import truth_of
from contrib.analysis.reach.backends import backend_test
from contrib.analysis.reach.tree import PyTree
from contrib.arch import Arch
from contrib.audit.chains import Feature, Link
from contrib.audit.model import AuditGate, EffectKind
from contrib.audit.stack.reading import Function
from contrib.audit.stack.sglkernel import Kernels
from contrib.audit.stack.walk import Walker


@dataclass
class Upper:
    """The tree a server's features are read in: its name, commit, audited gates (by
    file) and the walker of its code; ``kernels``: the C++ ops it builds itself
    (sgl-kernel), read below the calls the walk hands out as ``torch.ops.*``."""

    name: str
    commit: str
    gates: list[AuditGate]
    walker: Walker
    kernels: Kernels | None = None
    settings: dict[str, frozenset[str]] = field(default_factory=dict)  # attr -> its choices
    opt_in: frozenset[str] = frozenset()  # the boolean settings that default to false

    def __post_init__(self) -> None:
        self._tests: dict[str, tuple[dict[int, ast.If | ast.Assert], dict[int, ast.AST]]] = {}
        self._by_file: dict[str, list[AuditGate]] = {}
        self._named: dict[str, dict[str, str]] = {}
        self._asked: dict[str, str] = {}
        self._calls: dict[str, dict[int, ast.Call]] = {}
        for gate in self.gates:
            self._by_file.setdefault(gate.file, []).append(gate)

    def named_flags(self, path: str) -> dict[str, str]:
        """The flags of ``self`` that ``path`` sets only to a setting's question of one
        value (``self.use_flashinfer = get_moe_runner_backend().is_flashinfer_mxfp4()``),
        each with that value; and those a configuration's own name ties to one value
        (:func:`named_by_name`: sglang's ``Fp8Config.get_name()`` returns ``"mxfp8" if
        self.use_mxfp8 else "fp8"``), with the flags copying them (``self.use_mxfp8 =
        getattr(self.quant_config, "use_mxfp8", False)``).  Kept per file."""
        if path not in self._named:
            module = self.walker.ev.module(path)
            tree = module[0] if module is not None else ast.Module(body=[], type_ignores=[])
            by_name = named_by_name(tree)
            found: dict[str, set[str | None]] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Attribute) and isinstance(
                                target.value, ast.Name) and target.value.id == "self":
                            copied = _copied(node.value)
                            value = by_name.get(copied) if copied else asked_value(node.value)
                            found.setdefault(target.attr, set()).add(
                                value and self.asked(value))
            named = {attr: value for attr, values in found.items()
                     if len(values) == 1 and (value := next(iter(values)))}
            self._named[path] = named | by_name
        return self._named[path]

    def asked(self, value: str) -> str:
        """The setting's value a question ``is_<value>()`` asks for: ``value`` where a
        setting has that choice, else what the tree's ``def is_<value>(self): return self
        == Enum.MEMBER`` compares with (sglang's ``is_triton_kernels()`` asks for
        ``"triton_kernel"``, its ``TRITON_KERNELS`` member); ``value`` when it cannot say."""
        if value in self._asked:
            return self._asked[value]
        found = value
        if not any(value in values for values in self.settings.values()):
            name = f"is_{value}"
            for _path, module in self.walker.reading.modules_naming(
                    name, re.compile(rf"def {name}\b"), 4):
                member = _member_compared(module, name)
                if member is not None:
                    found = member
                    break
        self._asked[value] = found
        return found

    def call_at(self, path: str, line: int) -> ast.Call | None:
        """The first call of ``path`` starting on ``line`` (None where there is none)."""
        if path not in self._calls:
            module = self.walker.ev.module(path)
            calls: dict[int, ast.Call] = {}
            for node in ast.walk(module[0]) if module is not None else ():
                if isinstance(node, ast.Call):
                    calls.setdefault(node.lineno, node)
            self._calls[path] = calls
        return self._calls[path].get(line)

    def on(self, path: str, first: int, last: int) -> list[AuditGate]:
        """The gates on lines ``first``..``last`` of ``path``."""
        return [g for g in self._by_file.get(path, ()) if first <= g.line <= last]

    def test_at(self, path: str, line: int) -> tuple[ast.If | ast.Assert | None,
                                                     dict[int, ast.AST]]:
        """The ``if`` or ``assert`` of ``path`` whose test holds ``line`` (the innermost),
        and the file's parents (kept per file)."""
        if path not in self._tests:
            module = self.walker.ev.module(path)
            tests: dict[int, ast.If | ast.Assert] = {}
            parents: dict[int, ast.AST] = {}
            if module is not None:
                parents = self.walker.parents(path)  # the walk's, kept per file
                for node in ast.walk(module[0]):
                    if isinstance(node, ast.If | ast.Assert):
                        for n in range(node.test.lineno, (node.test.end_lineno or 0) + 1):
                            tests[n] = node  # walked outside in: the innermost stays
            self._tests[path] = (tests, parents)
        tests, parents = self._tests[path]
        return tests.get(line), parents


def value_for_target(upper: Upper, link: Link, arch: Arch,
                      others: frozenset[str]) -> str | None:
    """The one choice of ``others`` that the branch the target takes of the ``if``
    chain holding ``link`` sets a name to, or None (no branch decided by the GPU, none
    set, or several)."""
    node, parents = upper.test_at(link.file, link.line)
    if not isinstance(node, ast.If) or not others:
        return None
    while isinstance(parent := parents.get(id(node)), ast.If) and parent.orelse == [node]:
        node = parent  # the head of an if/elif chain
    ev = upper.walker.ev
    frame = upper.walker.reading.frame(link.file, upper.walker.holder(link.file, node))
    branch: list[ast.stmt] | None = None
    cap = ev.cap
    try:
        while branch is None:
            ev.cap = (arch.major, arch.minor)
            truth = truth_of(ev.eval(node.test, frame))
            if truth == {True}:
                branch = node.body
            elif truth != {False}:
                return None
            elif len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                node = node.orelse[0]
            else:
                branch = node.orelse
    finally:
        ev.cap = cap
    found = {s.value.value for s in branch if isinstance(s, ast.Assign)
             and isinstance(s.value, ast.Constant) and s.value.value in others}
    return found.pop() if len(found) == 1 else None


def on_another_value(upper: Upper, gate: AuditGate, feature: Feature,
                      values: frozenset[str]) -> bool:
    """Whether ``gate`` stands where only another value of the feature's setting goes:
    an ``if`` around it (or its own) tests the setting's values and fails for the
    feature's (sglang's ``if prefill_backend == "trtllm_mha" and not
    is_sm100_supported(): raise`` is no refusal of ``--attention-backend=flashinfer``);
    or where only a named value of another setting goes (``if view.quantization ==
    "nvfp4_online": if not is_sm100_supported(): raise`` is that quantization's
    refusal, not one of ``--moe-runner-backend=auto``'s, asked with the others at
    their defaults)."""
    node, parents = upper.test_at(gate.file, gate.line)
    if node is None:
        return False
    key = (feature.value, values) if feature.value and len(values) >= 2 else None
    if key is not None and backend_test(node.test, *key) is False:
        return True
    holder = upper.walker.holder(gate.file, node)
    if isinstance(node, ast.If) and gate.effect.kind == EffectKind.REFUSED and named_value_of(
            node.test, upper.settings, feature.attr, upper.named_flags(gate.file),
            upper.opt_in, upper.asked, single_bindings(holder) if holder else {}):
        return True  # `if prefill_backend == "trtllm_mha" and not is_sm100(): raise`
    off, function = _off_way(upper, gate.file, node, parents, feature, values)
    if off or function is None or function.name.startswith("__"):
        return off
    # no test in its own function: the function runs where its callers call it, so it
    # is off the way where every call of it is (sglang's `_swizzle_mxfp4`, called only
    # under `if self.use_triton_kernels:`, another backend's path).  One step up.
    calls = [(path, call) for path, module in upper.walker.reading.modules_naming(
                 function.name, re.compile(rf"\b{re.escape(function.name)}\s*\("), _MAX_CALLERS)
             for call in upper.walker.reading.named(path, module).get(function.name, ())
             if isinstance(call, ast.Call)]
    return bool(calls) and all(
        _off_way(upper, path, call, upper.walker.parents(path), feature, values)[0]
        for path, call in calls)


def off_the_way(upper: Upper, sites: list[tuple[str, int]], feature: Feature,
                values: frozenset[str]) -> bool:
    """Whether a way the walk went calls, at one of ``sites`` (path, line), under an
    ``if`` of its function that holds only for another value (:func:`on_another_value`,
    without the step up to callers: the way's own calls are the sites)."""
    for path, line in sites:
        call = upper.call_at(path, line) if path else None
        if call is not None and _off_way(upper, path, call, upper.walker.parents(path),
                                         feature, values)[0]:
            return True
    return False


_MAX_CALLERS = 6  # files calling a gate's function, read for the tests around each call


def _off_way(upper: Upper, path: str, node: ast.AST, parents: dict[int, ast.AST],
             feature: Feature, values: frozenset[str]) -> tuple[bool, Function | None]:
    """Whether an ``if`` around ``node`` in its function holds only for another value
    (:func:`on_another_value`), and that function (None at module level)."""
    key = (feature.value, values) if feature.value and len(values) >= 2 else None
    flags = upper.named_flags(path)
    holder = upper.walker.holder(path, node)
    names = single_bindings(holder) if holder is not None else {}
    child: ast.AST = node
    parent = parents.get(id(node))
    while parent is not None and not isinstance(parent, Function):
        if isinstance(parent, ast.If) and child is not parent.test:
            holds = backend_test(parent.test, *key) if key is not None else None
            if holds is not None and holds != (child in parent.body):
                return True, None
            if key is not None and child in parent.body and _asks_another(
                    parent.test, feature.value, values, flags, upper.asked):
                return True, None
            if child in parent.body and named_value_of(
                    parent.test, upper.settings, feature.attr, flags, upper.opt_in,
                    upper.asked, names):
                return True, None
        child, parent = parent, parents.get(id(parent))
    return False, parent if isinstance(parent, Function) else None


def named_value_of(test: ast.expr, settings: dict[str, frozenset[str]], own: str,
                    flags: dict[str, str] | None = None,
                    opt_in: frozenset[str] = frozenset(),
                    resolve: Callable[[str], str] = str,
                    names: dict[str, ast.expr] | None = None) -> bool:
    """Whether ``test`` holds only for named values of a setting other than ``own``: it
    is (or ``and``-s) ``X.attr == "v"`` / ``X.attr in ("v", "w")`` with each string a
    choice of ``attr``; or the setting's own question of one value, ``X.is_v()``
    (sglang's ``get_moe_runner_backend().is_flashinfer_mxfp4()``), directly or through a
    flag of ``self`` set to it alone (``flags``: :meth:`Upper.named_flags`); or a
    boolean setting that is off unless the user turns it on (``opt_in``: sglang's ``if
    self.enable_mamba_cache_stochastic_rounding:``).  ``resolve``: the value a question
    asks for (:meth:`Upper.asked`); ``names``: the function's names bound once, a name
    compared read as the settings its binding picks from (sglang's ``prefill_backend =
    self.prefill_attention_backend if ... else self.attention_backend``)."""
    for part in _conjuncts(test):
        if isinstance(part, ast.Attribute) and part.attr in opt_in and part.attr != own:
            return True
        asked = _flag_or_question(part, flags, resolve)
        if asked is not None and asked not in settings.get(own, ()) and any(
                asked in values for attr, values in settings.items() if attr != own):
            return True
        if not (isinstance(part, ast.Compare) and len(part.ops) == 1
                and isinstance(part.ops[0], ast.Eq | ast.In)):
            continue
        attrs = _settings_read(part.left, settings, names or {})
        other = part.comparators[0]
        items = other.elts if isinstance(other, ast.Tuple | ast.List | ast.Set) else [other]
        strings = {i.value for i in items if isinstance(i, ast.Constant)}
        if attrs and own not in attrs and strings and len(strings) == len(items) \
                and all(strings <= settings[attr] for attr in attrs):
            return True
    return False


def _settings_read(node: ast.expr, settings: dict[str, frozenset[str]],
                   names: dict[str, ast.expr]) -> set[str]:
    """The settings whose value ``node`` is: ``X.attr``, or a name bound to one of
    several (``a if a is not None else b``, ``a or b``); empty where it may be anything
    else."""
    if isinstance(node, ast.Attribute):
        return {node.attr} if node.attr in settings else set()
    if isinstance(node, ast.Name) and node.id in names:
        bound = names[node.id]
        arms = [bound.body, bound.orelse] if isinstance(bound, ast.IfExp) else \
            list(bound.values) if isinstance(bound, ast.BoolOp) else [bound]
        read = [_settings_read(arm, settings, {}) for arm in arms]
        return set().union(*read) if all(read) else set()
    return set()


def single_bindings(function: Function) -> dict[str, ast.expr]:
    """The names ``function`` binds exactly once, by a plain assignment, with the value."""
    found: dict[str, list[ast.expr | None]] = {}
    for n in ast.walk(function):
        if isinstance(n, ast.Assign):
            for target in n.targets:
                for store in _stored(target):
                    found.setdefault(store, []).append(
                        n.value if isinstance(target, ast.Name) else None)
        elif isinstance(n, ast.AugAssign | ast.AnnAssign | ast.For | ast.NamedExpr
                        | ast.comprehension):
            for store in _stored(n.target):
                found.setdefault(store, []).append(None)
    return {name: values[0] for name, values in found.items()
            if len(values) == 1 and values[0] is not None}


def _asks_another(test: ast.expr, value: str, values: frozenset[str],
                  flags: dict[str, str] | None = None,
                  resolve: Callable[[str], str] = str) -> bool:
    """Whether ``test`` (or an operand of its ``and``) asks the feature's own setting
    whether it is another of its values (``if backend.is_cutedsl():`` for
    ``--bf16-gemm-backend=auto``), directly or through a flag of ``self`` tied to one
    (``flags``: ``if self.use_mxfp8:`` for ``--quantization=fp8``)."""
    return any((asked := _flag_or_question(part, flags, resolve)) is not None
               and asked != value and asked in values for part in _conjuncts(test))


def _flag_or_question(part: ast.expr, flags: dict[str, str] | None,
                      resolve: Callable[[str], str]) -> str | None:
    """The value ``part`` asks for: a question ``X.is_v()`` (resolved), or a flag of
    ``self`` tied to one (:meth:`Upper.named_flags`)."""
    asked = asked_value(part)
    if asked is not None:
        return resolve(asked)
    if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) \
            and part.value.id == "self":
        return (flags or {}).get(part.attr)
    return None


def named_by_name(module: ast.Module) -> dict[str, str]:
    """The flags a configuration's own name ties to one value: a ``get_name`` that
    returns ``"a" if self.flag else "b"`` (sglang's, vLLM's quantization configs: the
    name is the registry's key the config answers to), each flag with the name it
    gives when true."""
    found: dict[str, str] = {}
    for node in ast.walk(module):
        if not (isinstance(node, Function) and node.name == "get_name"):
            continue
        for ret in ast.walk(node):
            value = ret.value if isinstance(ret, ast.Return) else None
            if isinstance(value, ast.IfExp) and isinstance(value.test, ast.Attribute) \
                    and isinstance(value.test.value, ast.Name) and value.test.value.id == "self" \
                    and all(isinstance(v, ast.Constant) and isinstance(v.value, str)
                            for v in (value.body, value.orelse)):
                found[value.test.attr] = value.body.value  # type: ignore[attr-defined]
    return found


def _copied(value: ast.expr) -> str | None:
    """The attribute ``value`` copies from another object: ``getattr(cfg, "flag",
    default)`` or ``cfg.flag`` -> ``flag``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id == "getattr" and len(value.args) >= 2 \
            and isinstance(value.args[1], ast.Constant) and isinstance(value.args[1].value, str):
        return value.args[1].value
    if isinstance(value, ast.Attribute) and not (
            isinstance(value.value, ast.Name) and value.value.id == "self"):
        return value.attr
    return None


def _member_compared(module: ast.Module, name: str) -> str | None:
    """The string a method ``name`` of a class of ``module`` compares ``self`` with:
    ``def is_x(self): return self == Cls.MEMBER`` where ``MEMBER = "x_value"`` in
    ``Cls``'s body."""
    for cls in (n for n in ast.walk(module) if isinstance(n, ast.ClassDef)):
        members = {t.id: s.value.value for s in cls.body if isinstance(s, ast.Assign)
                   and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
                   for t in s.targets if isinstance(t, ast.Name)}
        for method in cls.body:
            if not (isinstance(method, Function) and method.name == name):
                continue
            body = [s for s in method.body if not (isinstance(s, ast.Expr)
                                                   and isinstance(s.value, ast.Constant))]
            test = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
                    test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Attribute):
                member = members.get(test.comparators[0].attr)
                if member is not None:
                    return member
    return None


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    """The operands of an ``and``, or the test alone."""
    return test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]


def asked_value(node: ast.AST) -> str | None:
    """The value ``node`` asks a setting whether it is: ``X.is_v()`` -> ``v``."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords and isinstance(
            node.func, ast.Attribute) and node.func.attr.startswith("is_"):
        return node.func.attr.removeprefix("is_")
    return None


def passed_by_caller(ev: PyTree, gate: AuditGate, around: bool = False) -> str | None:
    """The parameter a refusal also needs the caller to pass, or None: a test holding
    the gate, or one around it in its function, reads a parameter the function never
    sets itself (``if backend != "trtllm-gen" and bmm1_scale_log2 is not None: raise``;
    ``backend`` the function sets from the GPU, ``bmm1_scale_log2`` only the caller
    does).  Below, such a refusal is a misuse of the API, not the GPU turned away.
    ``around``: only an ``if`` around the gate's own test counts (a tree's own function
    run in a mode its caller picks: sglang's ``if use_mxfp8: assert
    is_sm100_supported()``), never the gate's test itself, which may take the GPU's
    answer as a parameter.  A name the function binds once from such parameters alone
    is read as them (flashinfer's ``uses_chunked = chunked_attention_size is not None
    and chunked_attention_size > 0``, ``is_e4m3 = query.dtype == torch.float8_e4m3fn``:
    ``if uses_chunked and is_sm12x_supported(query.device): raise`` refuses a mode the
    caller asks for, not the GPU)."""
    module = ev.module(gate.file)
    if module is None:
        return None
    function = next((n for n in ast.walk(module[0]) if isinstance(n, Function)
                     and n.name == gate.name and n.lineno <= gate.line <= (n.end_lineno or 0)),
                    None)
    if function is None:
        return None
    params = {a.arg for a in [*function.args.args, *function.args.kwonlyargs]} - {"self"}
    bound: dict[str, list[ast.expr | None]] = {}  # each local name's values (None: unread)
    for n in ast.walk(function):
        if isinstance(n, ast.Assign):
            for target in n.targets:  # `a, b = x[0], x[1]`: each reads the whole value
                for store in _stored(target):
                    bound.setdefault(store, []).append(n.value)
        elif isinstance(n, ast.AugAssign | ast.AnnAssign | ast.For | ast.NamedExpr
                        | ast.comprehension):
            for store in _stored(n.target):
                bound.setdefault(store, []).append(None)
        elif isinstance(n, ast.With):
            for item in n.items:
                for store in _stored(item.optional_vars) if item.optional_vars else ():
                    bound.setdefault(store, []).append(None)
    params -= set(bound)
    derived = _derived(bound, params)
    for node in ast.walk(function):
        if (isinstance(node, ast.If) and node.lineno <= gate.line <= (node.end_lineno or 0)
                and not (around and node.test.lineno <= gate.line
                         <= (node.test.end_lineno or node.test.lineno))):
            operands = _operands(node.test)
            read = sorted(operands & params) or sorted(derived[n] for n in operands & set(derived))
            if read:
                return read[0]
    return None


def _stored(target: ast.AST) -> list[str]:
    """The names an assignment's target binds (not those a subscript or attribute
    target reads)."""
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)]


def _derived(bound: dict[str, list[ast.expr | None]], params: set[str]) -> dict[str, str]:
    """The local names every binding of which reads parameters (and names so bound)
    alone, each with a parameter it comes from (``query, kv = qkv[0], qkv[1]``;
    ``is_e4m3 = query.dtype == torch.float8_e4m3fn``): what the caller passes."""
    derived: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name, values in bound.items():
            if name in derived or any(v is None for v in values):
                continue
            reads = [_operands(v) for v in values if v is not None]
            if all(not (names & set(bound)) - set(derived) for names in reads):
                origin = sorted({p for names in reads for p in names & params}
                                | {derived[n] for names in reads for n in names & set(derived)})
                if origin:
                    derived[name] = origin[0]
                    changed = True
    return derived


def _operands(test: ast.expr) -> set[str]:
    """The names a test reads as values of its own, not as arguments handed to a call
    (``is_sm100a_supported(device)``: ``device`` is the GPU asked about, not a choice
    of the caller's)."""
    handed = {id(n) for call in ast.walk(test) if isinstance(call, ast.Call)
              for arg in (*call.args, *(k.value for k in call.keywords)) for n in ast.walk(arg)}
    return {n.id for n in ast.walk(test) if isinstance(n, ast.Name) and id(n) not in handed}
