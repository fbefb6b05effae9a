"""Which edit admits the target through one audited gate, by the form of its code
(:func:`contrib.analysis.opening.opening` says which form; the audit keeps the same
answer on the gate, so a gate it calls gate-only is one of these):

* a JIT ``supported_major_versions`` list gains the target's major;
* a capability list (``@supported_compute_capability([100, 103])``, ``cc in [90,
  100]``) gains the target's capabilities as the file spells its family;
* a list of majors in a condition gains the target's major;
* a major or a capability compared with one value (``cap[0] == 10``, ``props.major
  != 10``, ``device_arch != 80``) is compared with it and the target's (``cap[0] in
  (10, 12)``);
* a predicate condition (``_is_sm90_supported or _is_sm100_supported``) gains the
  tree's own predicate for the target, with the module-level cached value and the
  import the file keeps for its siblings;
* a test naming the target's family that turns it away all the same
  (``uses_chunked and is_sm12x_supported(dev)``) is refused: upstream's refusal of the
  target, which a person drops.

Edits of one file are collected against its original text and made at once, so
the gates of a file never see each other's shifted positions.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from contrib.analysis.opening import (
    Opens,
    int_values,
    is_capability_list,
    opening,
    predicate_name,
    sm_digits,
)
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch
from contrib.audit.model import JIT, AuditGate
from contrib.enable.edits import (
    CannotEdit,
    Source,
    Splice,
    add_import,
    add_sibling_line,
    add_term,
    apply,
    for_target,
    imported_from,
    module_value,
    target_capabilities,
    widen_list,
)


@dataclass
class FileEdit:
    """The splices one file gets, and what each gate's edit was."""

    source: Source
    splices: list[Splice] = field(default_factory=list)

    def add(self, splices: list[Splice]) -> None:
        self.splices += [s for s in splices if s not in self.splices]

    def result(self) -> bytes:
        return apply(self.source.data, self.splices)


class Editor:
    """The edits of one draft, file by file, read from one tree."""

    def __init__(self, tree: SourceTree, arch: Arch) -> None:
        self.tree = tree
        self.arch = arch
        self.files: dict[str, FileEdit] = {}

    def file(self, path: str) -> FileEdit:
        if path not in self.files:
            text = self.tree.read_text(path)
            if text is None:
                raise CannotEdit(f"{path}: not in the tree")
            try:
                self.files[path] = FileEdit(Source(path, text))
            except (SyntaxError, ValueError) as exc:
                raise CannotEdit(f"{path}: does not parse ({exc})") from None
        return self.files[path]

    def widen(self, gate: AuditGate) -> str:
        """Add the splices that admit the target at ``gate``; what was done, in words.
        Which edit, the form of the gate's test says (:func:`~contrib.analysis.opening.
        opening`, the rule the audit's class takes too)."""
        edit = self.file(gate.file)
        src = edit.source
        found = opening(src.spans, gate.line, max(gate.end_line, gate.line), self.arch,
                        jit=gate.kind == JIT)
        if found.opens is Opens.LIST and found.node is not None:
            return self._widen_list(edit, gate, found.node)
        if found.opens is Opens.PREDICATE:
            return self._add_predicate(edit, gate, list(found.terms))
        if found.opens is Opens.COMPARISON and isinstance(found.node, ast.Compare):
            return self._widen_comparison(edit, gate, found.node)
        if found.opens is Opens.NAMES_TARGET and found.node is not None:
            raise CannotEdit(f"{gate.file}:{gate.line}: `{gate.text[:80]}` names "
                             f"{self.arch.name}'s family (`{src.segment(found.node)}`) and "
                             "turns it away: a refusal of the target, which a person drops, "
                             "not a gate contrib widens")
        raise CannotEdit(f"{gate.file}:{gate.line}: `{gate.text[:80]}` holds neither a list "
                         "of archs, a predicate nor a comparison contrib can widen")

    def _widen_list(self, edit: FileEdit, gate: AuditGate, node: ast.expr) -> str:
        values = int_values(node) or []
        if is_capability_list(values):
            add = target_capabilities(edit.source, self.arch, node)
            what = "capabilities"
        else:
            add, what = [self.arch.major], "majors"
        edit.add(widen_list(edit.source, node, add))
        new = sorted(set(values) | set(add))
        return (f"{gate.file}:{node.lineno}: {what} {_join(values)} -> {_join(new)} "
                f"({gate.function})")

    def _widen_comparison(self, edit: FileEdit, gate: AuditGate, node: ast.Compare) -> str:
        """``cap[0] == 10`` -> ``cap[0] in (10, 12)`` (``!=``: ``not in``): an arch value
        compared with one major or capability gains the target's, spelled alike
        (``device_arch != 80`` -> ``device_arch not in (80, 120)``, ``cap == (10, 0)`` ->
        ``cap in ((10, 0), (12, 0))``)."""
        src = edit.source
        value = node.comparators[0]
        if isinstance(value, ast.Tuple):
            target = f"({self.arch.major}, {self.arch.minor})"
        elif isinstance(value, ast.Constant) and isinstance(value.value, int) \
                and value.value >= 20:
            target = str(self.arch.major * 10 + self.arch.minor)
        else:
            target = str(self.arch.major)
        op = "in" if isinstance(node.ops[0], ast.Eq) else "not in"
        new = f"{src.segment(node.left)} {op} ({src.segment(value)}, {target})"
        start, end = src.span(node)
        edit.add([Splice(start, end, new.encode())])
        return f"{gate.file}:{node.lineno}: `{src.segment(node)}` -> `{new}` ({gate.function})"

    def _add_predicate(self, edit: FileEdit, gate: AuditGate, terms: list[ast.expr]) -> str:
        src = edit.source
        splices, term = add_term(src, terms, self.arch)
        notes = self._provide(edit, terms[-1])
        edit.add(splices)
        return (f"{gate.file}:{terms[-1].lineno}: the condition gains `{term}` "
                f"({gate.function})" + "".join(f"; {n}" for n in notes))

    def _provide(self, edit: FileEdit, term: ast.expr) -> list[str]:
        """Make the new term's name exist in the file: its cached value, its import."""
        src = edit.source
        old = predicate_name(term) or ""
        new = for_target(old, self.arch)
        if isinstance(term, ast.Attribute) or (isinstance(term, ast.Call)
                                               and isinstance(term.func, ast.Attribute)):
            return []  # `mod.is_sm100_supported()`: the module is imported already
        if _defined_here(src, new) or imported_from(src, new) is not None:
            return []
        cached = module_value(src, old)
        if cached is not None:
            edit.add([add_sibling_line(src, cached, self.arch)])
            notes = [f"`{new}` kept at module level as `{old}` is (line {cached.lineno})"]
            for call in _sm_calls(cached):
                notes += self._import(edit, call)
            return notes
        return self._import(edit, old)

    def _import(self, edit: FileEdit, old: str) -> list[str]:
        """``for_target(old)`` imported from where the file imports ``old``."""
        src = edit.source
        new = for_target(old, self.arch)
        if _defined_here(src, new) or imported_from(src, new) is not None:
            return []
        statement = imported_from(src, old)
        if statement is None:
            if _defined_here(src, old):
                raise CannotEdit(f"{src.path}: defines {old} but no {new}; the target needs "
                                 "its own predicate written first")
            raise CannotEdit(f"{src.path}: cannot tell where {old} comes from")
        module = self._module_file(src.path, statement)
        if module is not None and not self._defines(module, new):
            raise CannotEdit(f"{module}: the tree has {old} but no {new}")
        edit.add([add_import(src, statement, old, new)])
        origin = "." * statement.level + (statement.module or "")
        return [f"`{new}` imported from {origin} next to `{old}`"]

    def _module_file(self, path: str, statement: ast.ImportFrom) -> str | None:
        """The tree file ``from M import`` names (a package's ``__init__.py``), if found."""
        parts = (statement.module or "").split(".") if statement.module else []
        if statement.level:
            base = PurePosixPath(path).parents[statement.level - 1]
            stem = str(base.joinpath(*parts)) if parts else str(base)
            candidates = [f"{stem}.py", f"{stem}/__init__.py"]
        else:
            stem = "/".join(parts)
            candidates = [f"{stem}.py", f"{stem}/__init__.py"]
        for known in self.tree.paths():
            if any(known == c or known.endswith("/" + c) for c in candidates):
                return known
        return None

    def _defines(self, module: str, name: str) -> bool:
        """Whether ``module`` (or, for a package, a file of it) defines or imports ``name``."""
        folder = str(PurePosixPath(module).parent)
        files = [module] + ([p for p in self.tree.paths() if p.endswith(".py")
                             and str(PurePosixPath(p).parent) == folder]
                            if module.endswith("__init__.py") else [])
        pattern = re.compile(rf"\b(?:def\s+{re.escape(name)}\b|{re.escape(name)}\s*=|"
                             rf"import\b[^\n]*\b{re.escape(name)}\b|^\s+{re.escape(name)},?$)",
                             re.M)
        return any(pattern.search(self.tree.read_text(p) or "") for p in files)


def _defined_here(src: Source, name: str) -> bool:
    return any(isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == name
               for s in src.module.body) or module_value(src, name) is not None


def _sm_calls(statement: ast.stmt) -> list[str]:
    return [name for node in ast.walk(statement) if isinstance(node, ast.Call)
            and (name := predicate_name(node)) and sm_digits(name)]


def _join(values: list[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"
