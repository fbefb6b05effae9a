"""Which statements of a tree the target does not run, read from the tree's audited gates.

A gate's kind says it (:class:`~contrib.audit.model.EffectKind`), never its words: the
body of an ``if`` on an arch the target does not take (flashinfer's ``if is_sm12x():
sm120() elif is_sm100(): sm100()``), the else of one it takes, a flag its class sets
from the GPU, and the statements that refuse it (``if not is_sm90(): raise``, an
assert it fails).  :class:`Trail` keeps where a walk of the target's way was turned
away, for a feature's chain to name the gates there.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator

from contrib.analysis.gates import DECORATOR, KEYWORD
from contrib.analysis.reach.backends import Key, backend_test, keyed_entries, keyed_operands
from contrib.audit.model import AuditGate, EffectKind

# defined where the walk meets them, run where they are called or made
_DEFINED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Trail:
    """What a walk of the target's way met: the statements of the tree where it was
    turned away (an ``if`` on the arch it does not take, a refusal, a read of a flag
    under an excluding gate), each as (file, first line, last line).  A feature's chain
    (:mod:`contrib.audit.feature.chain`) names the gates on those lines."""

    def __init__(self) -> None:
        self.met: list[tuple[str, int, int]] = []

    def stopped(self, path: str, node: ast.AST) -> None:
        test = getattr(node, "test", node)
        first = getattr(test, "lineno", 0)
        self.met.append((path, first, getattr(test, "end_lineno", None) or first))


class Skips:
    """The ``if`` tests of a tree whose body the target does not run, read from the
    tree's audited gates: a walk for the target does not enter those bodies
    (flashinfer's ``if is_sm12x(): sm120() elif is_sm100(): sm100()``), and a walk of
    the target's own way does not enter the else of an ``if`` it takes.  And the
    statements that refuse the target (``if not is_sm90(): raise``, an assert it
    fails): a walk of what the target runs ends at them."""

    def __init__(self, gates: Iterable[AuditGate]) -> None:
        self._lines: dict[str, list[int]] = {}
        self._taken: dict[str, list[int]] = {}
        self._flags: dict[str, dict[str, bool]] = {}  # `self.flag` set from the GPU, per file
        self._refusals: dict[str, list[int]] = {}
        self._values: dict[str, dict[int, bool]] = {}  # a value's test: true on the target?
        for gate in gates:
            if gate.parser_kind in (KEYWORD, DECORATOR):
                continue
            kind = gate.effect.kind
            if kind.not_taken:
                self._lines.setdefault(gate.file, []).append(gate.line)
            if kind == EffectKind.TAKES_BRANCH:
                self._taken.setdefault(gate.file, []).append(gate.line)
            flag = gate.effect.self_flag()
            if flag is not None and kind in (EffectKind.VALUE_TRUE, EffectKind.VALUE_FALLS_BACK):
                self._flags.setdefault(gate.file, {})[flag] = kind == EffectKind.VALUE_TRUE
            if kind.stops:
                self._refusals.setdefault(gate.file, []).append(gate.line)
            if kind in (EffectKind.VALUE_TRUE, EffectKind.VALUE_FALLS_BACK):
                self._values.setdefault(gate.file, {})[gate.line] = kind == EffectKind.VALUE_TRUE

    def __call__(self, path: str, node: ast.If | ast.While) -> bool:
        last = node.test.end_lineno or node.test.lineno
        return any(node.test.lineno <= line <= last for line in self._lines.get(path, ()))

    def taken(self, path: str, node: ast.If) -> bool | None:
        """Whether the target takes ``node``'s body (True: its else is other archs' way;
        False: its body is), by the tree's gates: a test the target passes, or a test
        of a flag its class sets from the GPU (``if self._use_mxfp8_act_scaling:``)."""
        last = node.test.end_lineno or node.test.lineno
        if any(node.test.lineno <= line <= last for line in self._taken.get(path, ())):
            return True
        test, negated = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if (isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name)
                and test.value.id == "self"):
            value = self._flags.get(path, {}).get(test.attr)
            return None if value is None else value != negated
        return None

    def arm(self, path: str, node: ast.IfExp) -> bool | None:
        """Which value of ``a if test else b`` the target gets, by the tree's gate on the
        test (True: ``a``); None where no gate decides it (sglang's ``"trtllm" if major
        >= 10 else "fa3"`` hands SM12x ``"trtllm"``)."""
        last = node.test.end_lineno or node.test.lineno
        found = {truth for line, truth in self._values.get(path, {}).items()
                 if node.test.lineno <= line <= last}
        return found.pop() if len(found) == 1 else None

    def refuses(self, path: str, node: ast.stmt) -> bool:
        """Whether the target is refused at ``node``: its test, or the assert, is a
        refusing gate's."""
        if isinstance(node, ast.If | ast.While):
            first, last = node.test.lineno, node.test.end_lineno or node.test.lineno
        elif isinstance(node, ast.Assert):
            first, last = node.lineno, node.end_lineno or node.lineno
        else:
            return False
        return any(first <= line <= last for line in self._refusals.get(path, ()))

    def walk(self, path: str, code: Iterable[ast.AST], target: bool = False,
             key: Key | None = None, trail: Trail | None = None,
             aside: list[tuple[int, int]] | None = None,
             decide: Callable[[ast.If], bool | None] | None = None) -> Iterator[ast.AST]:
        """Every node of ``code`` the target may run (depth first).  ``target``: the
        walk is of what the target itself runs (an admitting gate's code), so a
        statement that refuses it ends its block, and a function or class defined there
        is not entered (it runs where it is called, on that caller's way); a walk of
        what admitted archs run goes on past both.  ``key``: the backend the caller chose by name (``bmm_fp8(...,
        backend="cublas")``): tests of the registry's names, and tables keyed by them,
        go its way, as do tests of another literal against what ``code`` compares with
        one of those names (``"cublaslt" in runner_names`` beside ``"cudnn" in
        runner_names``: :func:`~contrib.analysis.reach.backends.keyed_operands`);
        ``aside``: where given, the lines of each branch the chosen backend
        (or ``decide``) does not take are added to it (first, last); ``decide``: where
        given, whether the target takes an ``if``'s body (None: it cannot say), for
        tests the audit's gates do not decide (a parameter the caller passed the GPU's
        major in, a runner named for other archs), over the chosen backend's."""

        def runs(nodes: Iterable[ast.AST]) -> list[ast.AST]:
            kept: list[ast.AST] = []
            for node in nodes:
                kept.append(node)
                if target and isinstance(node, ast.stmt) and self.refuses(path, node):
                    if trail is not None:
                        trail.stopped(path, node)
                    break
                if (target and isinstance(node, ast.If) and node.body
                        and isinstance(node.body[-1], ast.Return | ast.Raise)
                        and self.taken(path, node)):
                    break  # the target returns in the branch it takes: the rest is not its
            return kept

        code = list(code)
        operands = keyed_operands(code, key[1]) if key else frozenset()
        todo = runs(code)[::-1]
        while todo:
            node = todo.pop()
            yield node
            if target and isinstance(node, _DEFINED):
                continue  # defined, not run: whoever calls it runs it, on its own way
            chosen = (backend_test(node.test, *key, operands) if key and isinstance(node, ast.If)
                      else None)
            decided = decide(node) if decide is not None and isinstance(node, ast.If) else None
            chosen = chosen if decided is None else decided
            entries = keyed_entries(node, *key) if key and isinstance(node, ast.Dict) else None
            taken = self.taken(path, node) if target and isinstance(node, ast.If) else None
            if chosen is not None and isinstance(node, ast.If):
                children: list[ast.AST] = [node.test, *runs(node.body if chosen else node.orelse)]
                if aside is not None:
                    aside += [(n.lineno, n.end_lineno or n.lineno)
                              for n in (node.orelse if chosen else node.body)]
            elif entries is not None:
                children = list(entries)
            elif isinstance(node, ast.If | ast.While) and self(path, node):
                if trail is not None and target:
                    trail.stopped(path, node)
                children = [node.test, *runs(node.orelse)]
            elif taken is not None and isinstance(node, ast.If):  # the target's own branch
                children = [node.test, *runs(node.body if taken else node.orelse)]
            else:
                children = []
                for name in node._fields:
                    value = getattr(node, name, None)
                    if isinstance(value, list):
                        children += runs(v for v in value if isinstance(v, ast.AST))
                    elif isinstance(value, ast.AST):
                        children.append(value)
            todo += children[::-1]
