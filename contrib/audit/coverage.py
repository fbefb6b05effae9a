"""Gates tied to the workspace's patchsets and to the upstream's history.

``covered_by``: a patchset's current version covers a gate when one of its
patches changes a line of the gate's function (file and enclosing function,
read at the patchset's base), or changes a CUDA file the gate's evidence or
units name.  ``opened_by`` / ``closed_by``: for a gate paired across two
commits (file, function, kind, ordinal) whose verdict flipped, the commit
``git blame`` gives for the gate's lines at the newer one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from contrib.analysis.gates import find_gates
from contrib.audit.model import AuditGate, Blame
from contrib.git.repo import Git

_PR = re.compile(r"\(#(\d+)\)\s*$|Merge pull request #(\d+)")


@dataclass
class Coverage:
    """What one patchset changes: (file, function) pairs and whole files."""

    target: str
    functions: set[tuple[str, str]] = field(default_factory=set)
    files: set[str] = field(default_factory=set)


def patch_coverage(target: str, git: Git, base: str, patches: Iterable[bytes]) -> Coverage:
    """The functions and files a patchset's patches change, located at ``base``."""
    cover = Coverage(target)
    for raw in patches:
        try:
            parsed = PatchSet(raw.decode("utf-8", errors="replace"))
        except UnidiffParseError:
            continue
        for patched in parsed:
            path = _strip(patched.source_file if patched.source_file != "/dev/null"
                          else patched.target_file)
            cover.files.add(_strip(patched.target_file))
            if not path.endswith(".py"):
                continue
            lines = {line for hunk in patched for line in _old_lines(hunk)}
            text = _blob(git, base, path)
            cover.functions |= {(path, f) for f in _enclosing(path, text, lines)}
    return cover


def _strip(name: str) -> str:
    return name[2:] if name.startswith(("a/", "b/")) else name


def _old_lines(hunk: Any) -> Iterable[int]:
    """Old-side line numbers a hunk removes, or inserts after."""
    last = hunk.source_start
    for line in hunk:
        if line.source_line_no is not None:
            last = line.source_line_no
        if line.is_removed or line.is_added:
            yield last


def _blob(git: Git, base: str, path: str) -> str | None:
    try:
        data = git.read_blob(base, path)
    except Exception:
        return None
    return None if data is None else data.decode("utf-8", errors="replace")


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's first line, its decorators included (``@supported_compute_capability``
    is a gate of the function it decorates)."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _enclosing(path: str, text: str | None, lines: set[int]) -> set[str]:
    """Qualified names of the innermost functions holding ``lines`` in ``text``."""
    if not text or not lines:
        return set()
    try:
        _, functions = find_gates(path, text)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    found = set()
    for line in lines:
        holders = [(node.lineno, name) for name, node in functions.items()
                   if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                   and _first_line(node) <= line <= (node.end_lineno or node.lineno)]
        found.add(max(holders)[1] if holders else "<module>")
    return found


def mark_covered(gates: Iterable[AuditGate], coverages: Iterable[Coverage]) -> list[AuditGate]:
    """The gates, each excluding one a patchset changes with ``covered_by`` set: a line of
    its function, or a CUDA file its units or this tree's evidence name."""
    coverages = list(coverages)
    out = []
    for gate in gates:
        cuda = set(gate.units) | {e.path for e in gate.evidence if e.path and not e.upstream}
        cover = next((c for c in coverages if (gate.file, gate.function) in c.functions
                      or cuda & c.files), None) if gate.excludes_target else None
        out.append(gate if cover is None else replace(gate, covered_by=cover.target))
    return out


def mark_history(git: Git, since: str, tip: str, old: list[AuditGate],
                 new: list[AuditGate]) -> list[AuditGate]:
    """``new`` with ``opened_by`` / ``closed_by`` set on gates whose verdict flipped
    since ``old``."""
    before = {g.key: g for g in old}
    out = []
    for gate in new:
        was = before.get(gate.key)
        if was is not None and was.excludes_target and not gate.excludes_target:
            gate = replace(gate, opened_by=blame(git, since, tip, gate))
        elif gate.excludes_target and (was is None or not was.excludes_target):
            gate = replace(gate, closed_by=blame(git, since, tip, gate))
        out.append(gate)
    return out


def blame(git: Git, since: str, tip: str, gate: AuditGate) -> Blame | None:
    """The newest commit after ``since`` that changed the gate's lines at ``tip``."""
    last = max(gate.end_line, gate.line)
    status, out, _ = git.try_run("blame", "--porcelain", "-L", f"{gate.line},{last}",
                                 tip, "--", gate.file)
    if status != 0:
        return None
    shas = [line.split()[0] for line in out.splitlines() if re.match(r"^[0-9a-f]{40} ", line)]
    newer = [git.commit_info(sha) for sha in dict.fromkeys(shas)
             if not git.is_ancestor(sha, since)]
    if not newer:
        return None
    info = max(newer, key=lambda i: i.committer_date)
    match = _PR.search(info.subject)
    number = int(match[1] or match[2]) if match else None
    return Blame(str(info.sha), info.subject, number)
