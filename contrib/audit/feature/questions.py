"""What a test of the upper tree asks of the server's settings, read from its code: a
named value of a setting (``view.quantization == "nvfp4"``, through a name bound to
settings), the setting's own question of one value (``X.is_v()``, resolved through the
enum member it compares), a flag tied to one (set to such a question, or named by a
configuration's ``get_name()``), and what only a function's caller passes
(:func:`passed_by_caller`).  :mod:`contrib.audit.feature.upper` decides with them where a
gate stands off a feature's way.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from contrib.analysis.pymodules import Scope
from contrib.analysis.reach.tree import PyTree
from contrib.audit.model import AuditGate
from contrib.audit.stack.reading import Function


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


def single_bindings(scope: Scope) -> dict[str, ast.expr]:
    """The names a function's ``scope`` (:meth:`~contrib.analysis.archeval.TreeEval.
    function_scope`) binds exactly once, by a plain assignment, with the value."""
    return {name: only.node for name, (only,) in
            ((n, b) for n, b in scope.names.items() if len(b) == 1)
            if only.kind == "expr" and not only.index and isinstance(only.node, ast.expr)}


def asks_another(test: ast.expr, value: str, values: frozenset[str],
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


def copied_attr(value: ast.expr) -> str | None:
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


def member_compared(module: ast.Module, name: str) -> str | None:
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
    scope = ev.function_scope(function)
    params = {name for name, bindings in scope.names.items()
              if [b.kind for b in bindings] == ["param"]} - {"self"}
    # each other name's values: the value of a plain or unpacking assignment (`a, b =
    # x[0], x[1]`: each reads the whole value), None for any other binding
    bound = {name: [b.node if b.kind == "expr" and isinstance(b.node, ast.expr) else None
                    for b in bindings if b.kind != "param"]
             for name, bindings in scope.names.items() if name not in params}
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
