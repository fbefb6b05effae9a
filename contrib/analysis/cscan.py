"""Static structure of a C/C++/CUDA file: comments, directives, #if groups, kernels.

Nothing here depends on macro values: :func:`scan` strips comments, joins
backslash continuations, and records every directive and the ``#if`` group each
line sits in.  :mod:`contrib.analysis.cuda_arch` then decides per architecture
which branches are taken.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

_DIRECTIVE = re.compile(r"^\s*#\s*([A-Za-z_]\w*)?(.*)$", re.S)
_CONDITIONALS = ("if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif")


@dataclass(frozen=True)
class Directive:
    """One preprocessor directive on (logical) line ``line`` (1-based)."""

    line: int
    kind: str  # "if", "ifdef", "elif", "else", "endif", "define", "include", ...
    rest: str  # the text after the keyword, comments removed, continuations joined
    last_line: int  # last physical line (continuations)


@dataclass
class Branch:
    """One branch of an #if group: the #if/#elif/#else line that opens it."""

    line: int
    directive: Directive
    head: int  # line of the group's #if
    parent: int | None  # line of the enclosing branch, None at top level


@dataclass
class Scan:
    """Comment-free code per line, directives, branches, and unbalanced spots."""

    path: str
    code: list[str]  # per physical line (index 0 = line 1); "" for directive lines
    directives: dict[int, Directive] = field(default_factory=dict)
    branches: dict[int, Branch] = field(default_factory=dict)
    chain: list[tuple[int, ...]] = field(default_factory=list)  # branch lines around each line
    problems: list[tuple[int, str]] = field(default_factory=list)

    def statement_lines(self) -> list[int]:
        """Lines (1-based) holding code, not directives or blank/comment-only text."""
        return [i + 1 for i, text in enumerate(self.code) if text.strip()]


# What a C scanner steps over as one unit, leftmost first: a ``//`` comment (ended by a
# newline, or by a backslash-newline whose backslash it takes), a ``/* */`` comment
# (to the end when unclosed), a string or character literal (to its quote, or to the
# newline that ends it unclosed; a backslash escapes the next character, a newline too).
_UNITS = re.compile(r"""//(?:[^\n\\]|\\(?!\n))*\\?|/\*.*?(?:\*/|\Z)"""
                    r"""|"(?:[^"\\\n]|\\.|\\\Z)*["\n]?|'(?:[^'\\\n]|\\.|\\\Z)*['\n]?""",
                    re.DOTALL)
_NOT_NEWLINE = re.compile(r"[^\n]")


def _blank(match: re.Match[str]) -> str:
    unit = match.group()
    if unit[0] in "\"'":
        return unit  # a literal is kept
    return _NOT_NEWLINE.sub(" ", unit) if unit[1] == "*" else " " * len(unit)


@functools.lru_cache(maxsize=256)
def strip_comments(text: str) -> str:
    """Replace comments by spaces, keeping newlines and string literals intact."""
    return _UNITS.sub(_blank, text)


@functools.lru_cache(maxsize=256)
def scan(path: str, text: str) -> Scan:
    """Scan ``text`` into code lines, directives and #if branch structure (kept: the
    audit's JIT gates share headers, 593 scans of 258 files at flashinfer main; a
    :class:`Scan` is never changed after it is made)."""
    physical = strip_comments(text).split("\n")
    result = Scan(path, [""] * len(physical))
    stack: list[Branch] = []
    index = 0
    while index < len(physical):
        start = index
        logical = physical[index]
        while logical.endswith("\\") and index + 1 < len(physical):
            index += 1
            logical = logical[:-1] + " " + physical[index]
        chain = tuple(b.line for b in stack)
        match = _DIRECTIVE.match(logical)
        if match is None:
            for line in range(start, index + 1):
                result.code[line] = physical[line]
                result.chain.append(chain)
        else:
            directive = Directive(start + 1, match[1] or "", match[2].strip(), index + 1)
            result.directives[directive.line] = directive
            result.chain.extend([chain] * (index - start + 1))
            _track(result, stack, directive)
        index += 1
    for branch in stack:
        result.problems.append(
            (branch.head, f"#{result.directives[branch.head].kind} without #endif")
        )
    return result


def _track(result: Scan, stack: list[Branch], directive: Directive) -> None:
    """Maintain the stack of open branches for one conditional directive."""
    kind = directive.kind
    if kind not in _CONDITIONALS:
        return
    if kind in ("if", "ifdef", "ifndef"):
        parent = stack[-1].line if stack else None
        branch = Branch(directive.line, directive, directive.line, parent)
        stack.append(branch)
        result.branches[branch.line] = branch
        return
    if not stack:
        result.problems.append((directive.line, f"#{kind} without #if"))
        return
    current = stack.pop()
    if kind == "endif":
        return
    if current.directive.kind == "else":
        result.problems.append(
            (directive.line, f"#{kind} after #else (#if at line {current.head})")
        )
    branch = Branch(directive.line, directive, current.head, current.parent)
    stack.append(branch)
    result.branches[branch.line] = branch


@dataclass(frozen=True)
class Kernel:
    """A ``__global__`` function definition."""

    name: str
    line: int  # the line holding __global__
    body_lines: tuple[int, ...]  # lines between its braces that hold code


_NOT_NAMES = {"__launch_bounds__", "__attribute__", "__declspec", "alignas", "__cluster_dims__",
              "__maxnreg__", "__global__", "__noinline__", "__forceinline__", "static", "inline",
              "extern", "void", "template", "typename"}


def find_kernels(result: Scan) -> list[Kernel]:
    """Find every ``__global__`` definition (declarations without a body are skipped)."""
    text = "\n".join(result.code)
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)

    def line_of(pos: int) -> int:
        lo, hi = 0, len(starts) - 1
        while lo < hi:  # last start <= pos
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if starts[mid] <= pos else (lo, mid - 1)
        return lo + 1

    kernels = []
    for match in re.finditer(r"\b__global__\b", text):
        found = _kernel_at(text, match.end())
        if found is None:
            continue
        name, open_brace, close_brace = found
        first, last = line_of(open_brace), line_of(close_brace)
        body = _body_lines(text[open_brace + 1 : close_brace], first)
        kernels.append(Kernel(name, line_of(match.start()), tuple(b for b in body if b <= last)))
    return kernels


def _kernel_at(text: str, pos: int) -> tuple[str, int, int] | None:
    """From just after __global__: (name, '{' offset, matching '}' offset)."""
    name = None
    for ident in re.finditer(r"[A-Za-z_]\w*|\(|;|\{", text[pos:]):
        token = ident.group()
        if token in (";", "{"):
            return None
        if token == "(":
            at = pos + ident.start()
            close = match_close(text, at, "(", ")")
            if name is not None and name not in _NOT_NAMES:
                return _after_params(text, close, name)
            return _kernel_at(text, close + 1) if close > 0 else None
        name = token
    return None


def _after_params(text: str, close: int, name: str) -> tuple[str, int, int] | None:
    follow = re.compile(r"[^;{]*").match(text, close + 1)
    end = follow.end() if follow else close + 1
    if end >= len(text) or text[end] != "{":
        return None
    return name, end, match_close(text, end, "{", "}")


def match_close(text: str, at: int, open_ch: str, close_ch: str) -> int:
    """Offset of the bracket closing the one at ``at`` (the last offset if it never closes)."""
    depth = 0
    for pos in range(at, len(text)):
        if text[pos] == open_ch:
            depth += 1
        elif text[pos] == close_ch:
            depth -= 1
            if depth == 0:
                return pos
    return len(text) - 1


def _body_lines(body: str, first_line: int) -> list[int]:
    return [first_line + i for i, part in enumerate(body.split("\n")) if part.strip()]
