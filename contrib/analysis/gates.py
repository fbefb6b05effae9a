"""Architecture gates in Python: where a value the GPU decides chooses what runs.

One pass of :mod:`ast` over a module (no import, no execution) asks the arch
evaluator (:mod:`contrib.analysis.archeval`) about each outermost expression: a
gate is one whose truth differs between GPU capabilities (``cc[0] == 12``,
``cc == (12, 0)``,
``is_sm100_supported()`` read from its definition, ``f"{major}{minor}" in
["100", "103"]``, a module-level ``_is_sm90_supported``, an import from another
file of the tree).  Two literal shapes are gates too: a JIT build's
``supported_major_versions=[9, 10]`` and a decorator handing a tree function the
capabilities it runs on (``@supported_compute_capability([100, 103])``).  What a
gate admits is a :class:`~contrib.analysis.archvalues.Capabilities`: whole majors, and
single capabilities where the code tells minors apart (``[120]`` admits 12.0, not 12.1).
Terms the GPU does not decide (the toolkit's version, a server flag) stay
satisfiable either way.  A patch's gates are paired with their old form
(:func:`touched_gates`) and told against the target; what a gate's function
builds is :mod:`contrib.analysis.jitsources`'s to say.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Cap, Capabilities, Frame, Func, truth_of, vague
from contrib.analysis.jitsources import builders, built_sources, module_strings
from contrib.analysis.pyparse import parse
from contrib.analysis.pywalk import callee_name, walk
from contrib.analysis.refusal import gives_up
from contrib.analysis.tree import SourceTree
from contrib.arch import KNOWN, Arch, all_majors
from contrib.record.finding import ERROR, INFO, Finding


class Form(StrEnum):
    """How a gate is written: what the parser found."""

    KEYWORD = "supported_major_versions"  # a JIT build list
    DECORATOR = "decorator"  # @supported_compute_capability([...])
    CONDITION = "condition"  # a test the GPU decides
    SKIP = "skip-condition"  # a test whose branch skips or refuses


KEYWORD, DECORATOR, CONDITION, SKIP = Form.KEYWORD, Form.DECORATOR, Form.CONDITION, Form.SKIP


@dataclass(frozen=True)
class Gate:
    """One gate in one version of a file."""

    file: str
    line: int
    end_line: int
    function: str  # qualified name of the enclosing function, "<module>" at top level
    kind: Form
    text: str
    admits: Capabilities | None  # None: present but not a literal we can evaluate
    index: int = 0  # ordinal among gates of the same function and kind
    node: ast.expr | None = field(default=None, compare=False, repr=False, hash=False)
    clear: frozenset[Cap] | None = field(default=None, compare=False)  # a skip never fires

    @property
    def key(self) -> tuple[str, str, int]:
        """How a gate is paired across the patch: function, kind, ordinal."""
        return (self.function, self.kind, self.index)


@dataclass
class TouchedGate:
    """A gate the patch changed (or added), before and after."""

    after: Gate
    before: Gate | None
    sources: list[str] = field(default_factory=list)  # file names listed in its function
    builders: list[str] = field(default_factory=list)  # its function and the ones it builds through

    @property
    def admits_before(self) -> Capabilities:
        """What the gate admitted before the patch (nothing for a new gate)."""
        return self.before.admits or Capabilities() if self.before else Capabilities()

    @property
    def majors_before(self) -> frozenset[int]:
        """Majors it admitted anything of before the patch (empty for a new gate)."""
        return self.admits_before.majors

    def admits(self, arch: Arch) -> bool | None:
        """Whether the patched gate admits ``arch``, by major and minor (None: cannot tell)."""
        return None if self.after.admits is None else self.after.admits.admits_arch(arch)

    def to_dict(self, arch: Arch) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "location": f"{self.after.file}:{self.after.line}",
            "file": self.after.file,
            "line": self.after.line,
            "function": self.after.function,
            "kind": self.after.kind,
            "text": self.after.text,
            "majors_before": sorted(self.majors_before) if self.before else None,
            "majors_after": None if self.after.admits is None else sorted(self.after.admits),
            "admits_before": self.admits_before.text() if self.before else None,
            "admits_after": None if self.after.admits is None else self.after.admits.text(),
            "admits_target": self.admits(arch),
            "sources": self.sources,
        }


def caps_for(arch: Arch | None = None) -> list[Cap]:
    """The capabilities a gate is read on: the target's own first, each major contrib
    knows at minor 0, and the minors code tells apart (``(7, 5)`` Turing, ``(8, 9)``
    Ada, ``(10, 3)``, ``(12, 1)``)."""
    first = [(arch.major, arch.minor)] if arch is not None else []
    every = [(m, 0) for m in all_majors()] + [c for c in _MINORS if c in KNOWN]
    return first + [cap for cap in every if cap not in first]


_MINORS = ((7, 5), (8, 9), (10, 3), (12, 1))


@dataclass
class Scan:
    """What one pass over a module found: its gates, its functions by qualified name,
    what each arch-dependent test admits (by node id), and where each was read."""

    gates: list[Gate]
    functions: dict[str, ast.AST]
    admits: dict[int, Capabilities]
    frames: dict[str, Frame]
    module: ast.Module
    ev: TreeEval
    sure: dict[int, frozenset[Cap]] = field(default_factory=dict)  # where always true

    @cached_property
    def strings(self) -> dict[str, list[str]]:
        """The module's tables of string literals (:func:`module_strings`)."""
        return module_strings(self.module)


class _Finder(ast.NodeVisitor):
    """One pass of a module: each outermost expression whose truth the GPU decides."""

    def __init__(self, path: str, ev: TreeEval, caps: list[Cap]) -> None:
        self.path, self.ev, self.caps = path, ev, caps
        self.scope: list[str] = []
        self.frame = Frame(path)
        self.frames: dict[str, Frame] = {"<module>": self.frame}
        self.gates: list[Gate] = []
        self.functions: dict[str, ast.AST] = {}
        self.admits: dict[int, Capabilities] = {}
        self.sure: dict[int, frozenset[Cap]] = {}
        self.skips: set[int] = set()  # ids of conditions under which code is *skipped*
        self._count: dict[tuple[str, str], int] = {}

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        outer = self.frame
        self.scope.append(node.name)
        if not isinstance(node, ast.ClassDef):
            name = ".".join(self.scope)
            self.functions[name] = node
            self.frame = Frame(self.path, self.ev.function_scope(node), None, id(node))
            self.frames[name] = self.frame
            for decorator in node.decorator_list:
                self._decorator(decorator)
            for statement in node.body:
                self.visit(statement)
        else:
            self.generic_visit(node)
        self.scope.pop()
        self.frame = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _add(self, node: ast.expr, kind: Form, text: str, admits: Capabilities | None,
             clear: frozenset[Cap] | None = None) -> None:
        function = ".".join(self.scope) or "<module>"
        index = self._count.get((function, kind), 0)
        self._count[(function, kind)] = index + 1
        self.gates.append(Gate(self.path, node.lineno, node.end_lineno or node.lineno, function,
                               kind, text[:200], admits, index, node, clear))

    def visit_If(self, node: ast.If) -> None:
        if node.body and gives_up(node.body):
            self.skips.add(id(node.test))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if callee_name(node) == "skipif" and node.args:
            self.skips.add(id(node.args[0]))
        for keyword in node.keywords:
            if keyword.arg == KEYWORD:
                value = _literal(keyword.value)
                majors = None
                if isinstance(value, list | tuple | set) and all(isinstance(v, int) for v in value):
                    majors = Capabilities.of_majors(int(v) for v in value)
                self._add(node, KEYWORD, ast.unparse(node), majors)
        if not self._expression(node):
            super().generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self._statement(node)
            return
        if isinstance(node, _CANDIDATES) and self._expression(node):
            return
        if isinstance(node, ast.IfExp) and id(node) in self.skips and self._expression(node):
            return  # `skipif(not is_sm100a() if torch.cuda.is_available() else True)`
        super().generic_visit(node)

    def _statement(self, node: ast.stmt) -> None:
        """Visit a statement's parts; an expression whose identifiers cannot lead to the
        GPU (nor hold a JIT list) is not looked into."""
        for _, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if not isinstance(child, ast.AST):
                    continue
                if not isinstance(child, ast.expr) or self._may_gate(child):
                    self.visit(child)

    def _may_gate(self, node: ast.expr) -> bool:
        nodes = walk(node)  # one walk for both questions
        if any(isinstance(n, ast.keyword) and n.arg == KEYWORD for n in nodes):
            return True
        if isinstance(node, ast.Call) and node.args and callee_name(node) == "skipif":
            return self.ev.may_read_gpu(node.args[0], self.frame)
        return self.ev.may_read_gpu(node, self.frame, nodes)

    def _decorator(self, node: ast.expr) -> None:
        """``@supported_compute_capability([100, 103])``: a tree function handed the
        capabilities (major * 10 + minor) the decorated function runs on: ``[120]``
        admits 12.0 alone."""
        if not (isinstance(node, ast.Call) and node.args):
            self.visit(node)
            return
        ccs = _literal(node.args[0])
        callee = self.ev.eval(node.func, self.frames["<module>"]) if self.scope else frozenset()
        if (isinstance(ccs, list | tuple | set) and ccs and all(isinstance(c, int)
                and 70 <= c < 200 for c in ccs) and any(isinstance(v, Func) for v in callee)):
            listed = Capabilities.listed((c // 10, c % 10) for c in ccs)
            self.admits[id(node)] = listed
            self._add(node, DECORATOR, ast.unparse(node), listed)
            return
        self.visit(node)

    def _expression(self, node: ast.expr) -> bool:
        if isinstance(getattr(node, "ctx", None), ast.Store | ast.Del):
            return False
        truths = self.ev.on_caps(node, self.frame, self.caps)
        if truths is None:
            return False
        if not isinstance(node, ast.BoolOp | ast.Compare | ast.UnaryOp) and not all(
                isinstance(v, bool) or v is None or vague(v)
                for values in truths.values() for v in values):
            return False  # a number or a string the GPU decides: its comparisons are gates
        per_cap = [truth_of(v) for v in truths.values()]
        if all(t == per_cap[0] for t in per_cap):
            return False  # the GPU is read, but does not change the outcome
        # Each capability is read on its own: `not (is_sm90a() or is_sm120a())` skips
        # 12.1, not 12.0, and a gate admitting 12.0 alone says so.
        read = list(zip(truths, per_cap, strict=True))
        admits = Capabilities.read((cap, True in t) for cap, t in read)
        self.admits[id(node)] = admits
        self.sure[id(node)] = frozenset(cap for cap, t in read if t == {True})
        if id(node) in self.skips:
            # `skipif(cond)` / `if cond: raise|skip|return`: the code runs where cond is false.
            # It runs where the skip may not fire; `clear`: where it never fires (then
            # `fp8 and is_sm12x()` refuses SM12x, which SM100 never is, for FP8).
            runs = Capabilities.read((cap, False in t) for cap, t in read)
            clear = frozenset(cap for cap, t in read if True not in t)
            self._add(node, SKIP, "skipped when " + ast.unparse(node), runs, clear)
        else:
            self._add(node, CONDITION, ast.unparse(node), admits)
        return True


_CANDIDATES = (ast.BoolOp, ast.Compare, ast.UnaryOp, ast.Name, ast.Attribute, ast.Subscript)


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def scan(path: str, text: str, ev: TreeEval | None = None, arch: Arch | None = None) -> Scan:
    """One pass over a Python file (SyntaxError propagates).  ``ev``: the tree's
    evaluator, so names imported from the tree's other modules mean what they mean
    there; without one the file is read alone."""
    if ev is None:
        ev = TreeEval({path: text}.get, [path])
    module = ev.parsed(path)
    if module is None:
        module = parse(text, path)
        ev.add_module(path, module)
    finder = _Finder(path, ev, caps_for(arch))
    finder.visit(module)
    return Scan(finder.gates, finder.functions, finder.admits, finder.frames, module, ev,
                finder.sure)


def find_gates(path: str, text: str, ev: TreeEval | None = None,
               arch: Arch | None = None) -> tuple[list[Gate], dict[str, ast.AST]]:
    """All gates in a Python file and its functions by qualified name (SyntaxError propagates)."""
    found = scan(path, text, ev, arch)
    return found.gates, found.functions


def touched_gates(path: str, before: str | None, after: str, changed: Iterable[int],
                  trees: tuple[TreeEval | None, TreeEval | None] = (None, None),
                  ) -> list[TouchedGate]:
    """Gates in ``after`` whose lines intersect ``changed``, paired with their old form.
    ``trees``: the evaluators of the trees before and after the patch, so names the
    file imports mean what they mean there (without them the file is read alone)."""
    changed = set(changed)
    found = scan(path, after, trees[1])
    old = {g.key: g for g in find_gates(path, before, trees[0])[0]} if before is not None else {}
    touched = []
    for gate in found.gates:
        if not changed & set(range(gate.line, gate.end_line + 1)):
            continue
        touched.append(TouchedGate(gate, old.get(gate.key),
                                   built_sources(found.functions, gate.function, None, found.strings),
                                   builders(found.functions, gate.function, found.strings)))
    return touched


def tree_eval(tree: SourceTree) -> TreeEval:
    """The arch evaluator over a tree (modules parsed on first use)."""
    return TreeEval(tree.read_text, [p for p in tree.paths() if p.endswith(".py")])


def gate_findings(touched: Iterable[TouchedGate], arch: Arch) -> list[Finding]:
    """Error for each touched gate that still rejects ``arch``; info for what each admits."""
    findings = []
    for gate in touched:
        after = gate.after
        before = gate.admits_before.numbers() if gate.before else "new gate"
        now = "unknown" if after.admits is None else after.admits.numbers()
        where = f"in {after.function}: `{after.text}` admits [{before}] -> [{now}]"
        admits = gate.admits(arch)
        if admits is False:
            findings.append(
                Finding(
                    "gate-rejects-target",
                    ERROR,
                    after.file,
                    after.line,
                    f"{where}; still rejects {arch.name} ({arch.capability})",
                )
            )
        elif admits is None:
            findings.append(
                Finding(
                    "gate-unknown",
                    INFO,
                    after.file,
                    after.line,
                    f"{where}; not a literal, cannot tell if it admits {arch.name}",
                )
            )
        else:
            findings.append(
                Finding("gate", INFO, after.file, after.line, f"{where}; admits {arch.name}")
            )
    return findings
