"""Splice the smallest source change that lets the target through one gate (which
form the gate's test has, and so which edit, :mod:`contrib.analysis.opening` says).

Every edit is found with :mod:`ast` positions and applied to the file's own
bytes: a list gains an element after its neighbour, a condition gains an
``or`` term, an import or a module-level value gains a sibling line copied
from the one next to it.  Nothing else of the file moves, so the diff is the
few characters upstream would have typed.  ``ast`` columns count UTF-8 bytes,
hence the byte offsets throughout.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from contrib.analysis.opening import SM_DIGITS, Spans, int_values, is_capability_list
from contrib.analysis.pyparse import parse
from contrib.arch import Arch


class CannotEdit(Exception):
    """The gate's code has no shape contrib knows how to widen (the message says which)."""


@dataclass(frozen=True)
class Splice:
    """Replace bytes ``start:end`` of a file with ``new``."""

    start: int
    end: int
    new: bytes


class Source:
    """One Python file: its bytes, its tree, and byte offsets of ``ast`` positions."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.data = text.encode("utf-8")
        self.module = parse(text, path)
        self._starts = [0]
        for line in self.data.splitlines(keepends=True):
            self._starts.append(self._starts[-1] + len(line))
        self.spans = Spans(self.module)
        self.parents = self.spans.parents

    def offset(self, line: int, col: int) -> int:
        return self._starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode("utf-8")

    def line_text(self, line: int) -> bytes:
        return self.data[self._starts[line - 1]:self._starts[line]]


def apply(data: bytes, splices: list[Splice]) -> bytes:
    """``data`` with every splice made (they must not overlap)."""
    out = data
    for splice in sorted(splices, key=lambda s: (s.start, s.end), reverse=True):
        out = out[:splice.start] + splice.new + out[splice.end:]
    return out


# -- int lists: supported_major_versions=[9, 10], @supported_compute_capability([100, 103])

def widen_list(src: Source, node: ast.expr, add: list[int]) -> list[Splice]:
    """Insert each value of ``add`` missing from the literal ``node``, in sorted place."""
    values = int_values(node)
    assert values is not None
    elements = list(node.elts)  # type: ignore[attr-defined]
    missing = sorted(set(add) - set(values))
    if not elements:
        start, end = src.span(node)
        return [Splice(start + 1, end - 1, ", ".join(map(str, missing)).encode())]
    after: dict[int, list[int]] = {}
    for value in missing:
        before = [i for i, v in enumerate(values) if v < value]
        after.setdefault(before[-1] if before else -1, []).append(value)
    splices = []
    for index, new in after.items():
        text = ", ".join(map(str, new))
        if index < 0:
            start = src.span(elements[0])[0]
            splices.append(Splice(start, start, f"{text}, ".encode()))
        else:
            end = src.span(elements[index])[1]
            splices.append(Splice(end, end, f", {text}".encode()))
    return splices


def target_capabilities(src: Source, arch: Arch, node: ast.expr) -> list[int]:
    """How the file spells the target's family where it writes lists like ``node`` (the
    arguments of calls of the same function, e.g. every ``supported_compute_capability``):
    each value of the target's major found there (``120, 121``), and the target's own."""
    callee = _callee(src, node)
    spelled = {v for other in ast.walk(src.module) if isinstance(other, ast.expr)
               and callee is not None and _callee(src, other) == callee
               and (values := int_values(other)) and is_capability_list(values)
               for v in values if v // 10 == arch.major}
    return sorted(spelled | {arch.major * 10 + arch.minor})


def _callee(src: Source, node: ast.expr) -> str | None:
    """The name of the call ``node`` is a positional argument of, if it is one."""
    parent = src.parents.get(id(node))
    if not isinstance(parent, ast.Call) or node not in parent.args:
        return None
    func = parent.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


# -- predicates: (_is_sm90_supported or _is_sm100_supported) gains _is_sm120_supported

def for_target(text: str, arch: Arch) -> str:
    """``text`` with its SM number spelled for the target (``is_sm100_supported()`` ->
    ``is_sm120_supported()``)."""
    return SM_DIGITS.sub(f"{arch.major}{arch.minor}", text, count=1)


def add_term(src: Source, terms: list[ast.expr], arch: Arch) -> tuple[list[Splice], str]:
    """One more ``or`` term after the last predicate of the condition; (splices, the term)."""
    last = terms[-1]
    new = for_target(src.segment(last), arch)
    parent = src.parents.get(id(last))
    start, end = src.span(last)
    if isinstance(parent, ast.stmt) or (isinstance(parent, ast.BoolOp)
                                        and isinstance(parent.op, ast.Or)):
        return [Splice(end, end, f" or {new}".encode())], new
    return [Splice(start, start, b"("), Splice(end, end, f" or {new})".encode())], new


def module_value(src: Source, name: str) -> ast.Assign | None:
    """The module-level ``name = ...`` assignment, if the file keeps one."""
    for statement in src.module.body:
        if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in statement.targets):
            return statement
    return None


def add_sibling_line(src: Source, statement: ast.stmt, arch: Arch) -> Splice:
    """A copy of ``statement``'s lines spelled for the target, inserted after it."""
    first = src.offset(statement.lineno, 0)
    end = src.offset((statement.end_lineno or statement.lineno) + 1, 0)
    text = src.data[first:end].decode("utf-8")
    copied = SM_DIGITS.sub(f"{arch.major}{arch.minor}", text)
    return Splice(end, end, copied.encode())


def imported_from(src: Source, name: str) -> ast.ImportFrom | None:
    """The ``from M import ..., name, ...`` that brings ``name`` in, at any depth."""
    for node in ast.walk(src.module):
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            return node
    return None


def add_import(src: Source, statement: ast.ImportFrom, after: str, new: str) -> Splice:
    """``new`` joins ``from M import (...)`` right after ``after``, one per line when the
    import is written one per line."""
    alias = next(a for a in statement.names if a.name == after)
    start, end = src.span(alias)
    multi = (statement.end_lineno or statement.lineno) > statement.lineno and len(
        {a.lineno for a in statement.names}) == len(statement.names)
    if multi:
        line = src.line_text(alias.lineno)
        indent = line[:len(line) - len(line.lstrip())].decode()
        trailing = src.data[end:end + 1] == b","
        if trailing:
            return Splice(end + 1, end + 1, f"\n{indent}{new},".encode())
        return Splice(end, end, f",\n{indent}{new}".encode())
    return Splice(end, end, f", {new}".encode())
