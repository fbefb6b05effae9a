"""Where a refused gate's evidence stands, as ``file:line``, for the refusal's one line.

The audit's evidence is a guard (``#if`` that compiles the kernels out: a
:class:`~contrib.audit.model.Place`), a finding on a line, or a thing reached and
named: a CuTe DSL kernel or prebuilt cubins (``where`` is the file and the
qualified name, ``flashinfer/fused_moe/cute_dsl/blackwell/..._finalize_fusion.py
Sm100BlockScaledContiguousGroupedGemmFinalizeFusionKernel.__call__``), which the
audit keeps without a line.  The line is read from the tree: the ``def`` or
``class`` of that name in that file.
"""

from __future__ import annotations

import ast

from contrib.analysis.pyparse import parse_python
from contrib.analysis.tree import SourceTree
from contrib.audit.model import Evidence


def places(evidence: tuple[Evidence, ...], tree: SourceTree | None = None
           ) -> list[tuple[str, int, bool]]:
    """Each evidence's ``(file, line, guard)`` in order, each once: its ``#if`` guard
    (``guard`` True), its own line, or the line of the ``def`` or ``class`` it names
    in ``tree`` (0: none read); a file of the upstream below is named with it
    (``flashinfer:csrc/x.cu``), its line as the audit kept it."""
    found: list[tuple[str, int, bool]] = []
    for one in evidence:
        at = one.at
        if at is not None:
            path, line = at.path, at.line
        else:
            path, line = _named(one, tree if not one.upstream else None)
        shown = f"{one.upstream}:{path}" if one.upstream and one.guard is None else path
        where = (shown, line, one.guard is not None)
        if where not in found:
            found.append(where)
    return found


def _named(one: Evidence, tree: SourceTree | None) -> tuple[str, int]:
    """The file and line of a line-less evidence: ``path``, or ``where``'s file when
    it starts with one of ``tree``, and the line of the name that follows it."""
    path, rest = one.path, ""
    head, _, tail = one.where.partition(" ")
    if not path and tree is not None and head.endswith(".py") and tree.read_text(head):
        path, rest = head, tail.strip()
    elif path and one.where.startswith(f"{path} "):
        rest = one.where[len(path) + 1:].strip()
    if not path:
        return one.where, 0
    if not rest or tree is None:
        return path, 0
    return path, defined_at(tree, path, rest)


def defined_at(tree: SourceTree, path: str, dotted: str) -> int:
    """The line of the ``def`` or ``class`` ``dotted`` names in ``path`` (``Cls.__call__``:
    the method of the class), else of its last part alone; 0 when none."""
    module = parse_python(path, tree.read_text(path) or "")
    if not isinstance(module, ast.Module):
        return 0
    parts = dotted.split(".")
    scope: list[ast.stmt] = module.body
    line = 0
    for part in parts:
        node = next((n for n in scope if isinstance(n, ast.ClassDef | ast.FunctionDef |
                                                    ast.AsyncFunctionDef) and n.name == part),
                    None)
        if node is None:
            break
        line, scope = node.lineno, node.body
    else:
        return line
    last = next((n for n in ast.walk(module) if isinstance(
        n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.name == parts[-1]), None)
    return last.lineno if last is not None else line
