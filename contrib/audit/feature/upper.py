"""The tree a server's features are read in, and where a gate of it stands on a
feature's way.

:class:`Upper` holds the upper tree (its audited gates by file, its walker, the C++ ops
it builds, every setting's choices).  A gate met on a feature's walk is off its way
where only another value of the feature's setting, or a named value of another
setting, goes there (:func:`on_another_value`), or where a parameter its caller passes
picks the mode it refuses in (:func:`~contrib.audit.feature.questions.passed_by_caller`); a gate choosing among the
setting's values for the target names the one it gets (:func:`value_for_target`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from contrib.analysis.archvalues import truth_of
from contrib.analysis.reach.backends import backend_test
from contrib.arch import Arch
from contrib.audit.chains import Feature, Link
from contrib.audit.feature.questions import (
    asked_value,
    asks_another,
    copied_attr,
    member_compared,
    named_by_name,
    named_value_of,
    single_bindings,
)
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
                            copied = copied_attr(node.value)
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
                member = member_compared(module, name)
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
            upper.opt_in, upper.asked,
            single_bindings(upper.walker.ev.function_scope(holder)) if holder else {}):
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
    names = single_bindings(upper.walker.ev.function_scope(holder)) \
        if holder is not None else {}
    child: ast.AST = node
    parent = parents.get(id(node))
    while parent is not None and not isinstance(parent, Function):
        if isinstance(parent, ast.If) and child is not parent.test:
            holds = backend_test(parent.test, *key) if key is not None else None
            if holds is not None and holds != (child in parent.body):
                return True, None
            if key is not None and child in parent.body and asks_another(
                    parent.test, feature.value, values, flags, upper.asked):
                return True, None
            if child in parent.body and named_value_of(
                    parent.test, upper.settings, feature.attr, flags, upper.opt_in,
                    upper.asked, names):
                return True, None
        child, parent = parent, parents.get(id(parent))
    return False, parent if isinstance(parent, Function) else None
