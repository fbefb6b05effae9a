"""Parse upstream Python that may be hostile: a reason, never a crash.

CPython's parser and compiler recurse on nesting: 100,000 unary minus signs
raise MemoryError, a long ``+`` chain RecursionError, and NUL bytes ValueError.
Every reader of upstream Python (validate's syntax stage, the audit) goes
through here, so such a file becomes a finding at its line instead of exit 3.

CPython 3.11 and 3.12 keep the recursion depth of the AST they build in state
that all threads share: two threads parsing at once fail with "AST constructor
recursion depth mismatch" (python/cpython#106905).  The audit's stack walks one
tree in a thread while it audits another, so every parse here takes one lock.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass
from typing import Literal, overload

_LOCK = threading.Lock()  # one parse at a time per process (see the module's text)


@dataclass(frozen=True)
class Unparsable:
    """Why a Python file could not be read, and the line to point at."""

    path: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}"


def _unparsable(path: str, exc: BaseException) -> Unparsable:
    if isinstance(exc, SyntaxError):
        return Unparsable(path, exc.lineno or 1, f"does not compile: {exc.msg}")
    if isinstance(exc, MemoryError | RecursionError):
        return Unparsable(path, 1, "nested too deeply for Python's parser "
                                   f"({type(exc).__name__}); not analysed")
    return Unparsable(path, 1, f"does not compile: {exc}")  # ValueError: NUL bytes


@overload
def parse(text: str, path: str = "<unknown>", mode: Literal["exec"] = "exec") -> ast.Module: ...
@overload
def parse(text: str, path: str = "<unknown>", *, mode: Literal["eval"]) -> ast.Expression: ...
def parse(text: str, path: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse``, one thread at a time; it raises what ``ast.parse`` raises
    (:data:`PARSE_ERRORS`)."""
    with _LOCK:
        return ast.parse(text, filename=path, mode=mode)


def parse_python(path: str, text: str) -> ast.Module | Unparsable:
    """``ast.parse`` of ``text``, or why it cannot be parsed."""
    try:
        return parse(text, path)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return _unparsable(path, exc)


def compile_python(path: str, text: str) -> Unparsable | None:
    """None when ``text`` compiles (which checks more than parsing: ``return`` outside
    a function, ``nonlocal`` at module level), else why not."""
    try:
        with _LOCK:
            compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return _unparsable(path, exc)
    return None


def unparsable(path: str, exc: BaseException) -> Unparsable:
    """The reason for an error a parse inside another analysis raised (MemoryError,
    RecursionError, SyntaxError, ValueError)."""
    return _unparsable(path, exc)


PARSE_ERRORS = (SyntaxError, ValueError, MemoryError, RecursionError)
