"""The syntax stage: touched Python compiles, touched C/C++/CUDA balances its #if/#endif."""

from __future__ import annotations

from collections.abc import Iterable

from contrib.analysis.cscan import scan
from contrib.analysis.includes import is_cuda_source
from contrib.analysis.pyparse import compile_python
from contrib.analysis.tree import SourceTree
from contrib.record.finding import ERROR, Finding


def check_python(path: str, text: str) -> list[Finding]:
    """A finding at the error's line if ``text`` does not compile (or is too deeply
    nested for Python to read: hostile input is a finding, never a crash)."""
    problem = compile_python(path, text)
    if problem is None:
        return []
    return [Finding("python-syntax", ERROR, path, problem.line, problem.why)]


def check_conditionals(path: str, text: str) -> list[Finding]:
    """Findings for unbalanced ``#if``/``#elif``/``#else``/``#endif``."""
    return [Finding("unbalanced-conditional", ERROR, path, line, message)
            for line, message in scan(path, text).problems]


def check_files(tree: SourceTree, paths: Iterable[str]) -> tuple[list[Finding], list[str]]:
    """Check each touched file that still exists; returns findings and the files checked."""
    findings: list[Finding] = []
    checked: list[str] = []
    for path in paths:
        text = tree.read_text(path)
        if text is None:
            continue  # deleted by the patch
        if path.endswith(".py"):
            findings.extend(check_python(path, text))
        elif is_cuda_source(path):
            findings.extend(check_conditionals(path, text))
        else:
            continue
        checked.append(path)
    return findings, checked
