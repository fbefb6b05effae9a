"""Which edit admits the target through one audited gate, by the form of its code.

* a JIT ``supported_major_versions`` list gains the target's major;
* a capability list (``@supported_compute_capability([100, 103])``, ``cc in [90,
  100]``) gains the target's capabilities as the file spells its family;
* a list of majors in a condition gains the target's major;
* a major compared with one value (``cap[0] == 10``, ``props.major != 10``) is
  compared with it and the target's (``cap[0] in (10, 12)``);
* a predicate condition (``_is_sm90_supported or _is_sm100_supported``) gains the
  tree's own predicate for the target, with the module-level cached value and the
  import the file keeps for its siblings.

Edits of one file are collected against its original text and made at once, so
the gates of a file never see each other's shifted positions.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

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
    int_values,
    is_capability_list,
    lists_at,
    major_comparisons,
    module_value,
    predicate_name,
    predicate_terms,
    sm_digits,
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
        """Add the splices that admit the target at ``gate``; what was done, in words."""
        edit = self.file(gate.file)
        src = edit.source
        last = max(gate.end_line, gate.line)
        lists = lists_at(src, gate.line, last)
        terms = predicate_terms(src, gate.line, last)
        if gate.kind == JIT or (lists and not terms):
            return self._widen_list(edit, gate, lists)
        if terms:
            return self._add_predicate(edit, gate, terms)
        compared = major_comparisons(src, gate.line, last)
        if compared:
            return self._widen_comparison(edit, gate, compared[0])
        if re.search(rf"sm_?{self.arch.major}(?:\d|x)", gate.text, re.I):
            raise CannotEdit(f"{gate.file}:{gate.line}: `{gate.text[:80]}` names "
                             f"{self.arch.name}'s family: a refusal of the target, which a "
                             "person drops, not a gate contrib widens")
        raise CannotEdit(f"{gate.file}:{gate.line}: `{gate.text[:80]}` holds neither a list "
                         "of archs nor a predicate contrib can widen")

    def _widen_list(self, edit: FileEdit, gate: AuditGate, lists: list[ast.expr]) -> str:
        if not lists:
            raise CannotEdit(f"{gate.file}:{gate.line}: no literal list of majors at the gate")
        node = lists[0]
        values = int_values(node) or []
        if is_capability_list(values):
            add = target_capabilities(edit.source, self.arch, node)
            what = "capabilities"
        else:
            add, what = [self.arch.major], "majors"
        if set(add) <= set(values):
            raise CannotEdit(f"{gate.file}:{gate.line}: the list already admits "
                             f"{self.arch.name}")
        edit.add(widen_list(edit.source, node, add))
        new = sorted(set(values) | set(add))
        return (f"{gate.file}:{node.lineno}: {what} {_join(values)} -> {_join(new)} "
                f"({gate.function})")

    def _widen_comparison(self, edit: FileEdit, gate: AuditGate, node: ast.Compare) -> str:
        """``cap[0] == 10`` -> ``cap[0] in (10, 12)`` (``!=``: ``not in``): a major
        compared with one value gains the target's."""
        src = edit.source
        value = node.comparators[0]
        assert isinstance(value, ast.Constant) and isinstance(value.value, int)
        if value.value == self.arch.major:
            raise CannotEdit(f"{gate.file}:{gate.line}: `{src.segment(node)}` already names "
                             f"{self.arch.name}'s major")
        op = "in" if isinstance(node.ops[0], ast.Eq) else "not in"
        new = f"{src.segment(node.left)} {op} ({value.value}, {self.arch.major})"
        start, end = src.span(node)
        edit.add([Splice(start, end, new.encode())])
        return f"{gate.file}:{node.lineno}: `{src.segment(node)}` -> `{new}` ({gate.function})"

    def _add_predicate(self, edit: FileEdit, gate: AuditGate, terms: list[ast.expr]) -> str:
        src = edit.source
        target = f"{self.arch.major}{self.arch.minor}"
        if any(sm_digits(predicate_name(t) or "") == target for t in terms):
            raise CannotEdit(f"{gate.file}:{gate.line}: `{gate.text[:80]}` already names "
                             f"{self.arch.name}; it is a refusal of the target, not a gate "
                             "to widen")
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
