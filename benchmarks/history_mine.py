"""Find the commits of an upstream's history that opened an arch gate to SM12x.

A candidate is any commit whose diff adds or removes a line the pickaxe regex
``PICKAXE`` matches (``git log -G``).  Each candidate's diff is then read hunk
by hunk, at the parent's line numbers, for one of these openings:

* ``jit-list``: a ``supported_major_versions=[...]`` list that gains 12;
* ``decorator``: a ``@supported_compute_capability([...])`` list that gains 120/121;
* ``skip``: a refusal (skip, skipif, raise, exit, return) on an SM12x test removed;
* ``condition``: an arch test (predicate call, capability comparison) on a removed
  line whose replacement admits 12, or an ``or``/``and`` clause naming 12 added
  to such a test;
* ``cuda-guard``: a ``__CUDA_ARCH__ < 1200`` guard dropped from device code.

What the opening commit had to do gives the expected class: device code (a
``.cu``/``.cuh``/``.h``/``.jinja`` file outside the tests, or a CuTe DSL or Triton
kernel written in Python) changed too means ``needs-kernel-work``, only host
Python and gate lines means ``gate-only``.  An
opening is identified by commit, file and the enclosing function at the parent;
it carries paths, line numbers and shas only, never upstream text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from contrib.git.repo import Git

MINER_VERSION = 5  # bump when what counts as an opening, or its class, changes
GATE_ONLY, NEEDS_KERNEL_WORK = "gate-only", "needs-kernel-work"
DEVICE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cuh.jinja", ".cu.jinja", ".jinja")
PATHS = ("*.py", *(f"*{s}" for s in DEVICE_SUFFIXES))
# A cheap superset for `git log -G`: every opening below changes a line it matches.
PICKAXE = (r"supported_major_versions|supported_compute_capability|is_sm_?12|is_blackwell|"
           r"[Ss][Mm]_?12[01x]|\b12[01]\b|[=!]= *12\b|\b1[01], *12\b|__CUDA_ARCH__.*12[0-9]0|"
           r">= *(\(|\[)? *(9|10|11)\b")
# What, on one line of Python, admits SM12x: a predicate or a number naming it.
_TWELVE = re.compile(
    r"is_(?:cuda_)?sm_?12\w*|is_blackwell\w*|\bsm_?12[01x]\w*|\b12[01]\b|[=!]=\s*12\b|"
    r"\b(?:9|10|11)\s*,\s*12\b|\(\s*12\s*,\s*[01]\s*\)|\bin\s*[(\[]\s*12\b|"
    r">=\s*[(\[]?\s*(?:[89]|1[0-2]|[89]0|1[0-2]\d)\b",
    re.I,
)
# A line about the CUDA toolkit, not the GPU: `get_cuda_version() < (12, 9)`.
_TOOLKIT = re.compile(r"cuda_version|version\.cuda|cuda_ver|nvcc|toolkit", re.I)
_NUMBERS_ONLY = re.compile(r"^[\s\d,\[\]()'\"]*$")
# What makes a line a test on the GPU's arch.
_ARCHISH = re.compile(
    r"supported_major_versions|supported_compute_capability|is_(?:cuda_)?sm_?\d|"
    r"is_(?:ampere|ada|hopper|blackwell)|\bmajor\b|capabilit|\bcc\b|\bcc\[|sm_version|"
    r"get_device_sm|_match_sm|\barch\w*\s*(?:[=!<>]=?|in\b)|\bsm\w*\s*(?:[=!<>]=?|in\b)",
    re.I,
)
_REFUSAL = re.compile(r"\bskip(?:if)?\b|pytest\.skip|\braise\b|sys\.exit|\bexit\(|\breturn\b|"
                      r"xfail", re.I)
_LIST = {
    "jit-list": re.compile(r"supported_major_versions\s*=\s*[\[(]([^\])]*)[\])]"),
    "decorator": re.compile(r"supported_compute_capability\(\s*[\[(]([^\])]*)[\])]"),
}
_LIST_WANTS = {"jit-list": {12}, "decorator": {120, 121}}
_GUARD = re.compile(r"__CUDA_ARCH__\s*<\s*12\d0\b")
# A line that tests (a condition, a skip, a returned predicate, a list of a decorator), not
# a call that passes a capability on (`_patch_env(cc=(10, 3))`).
_TEST_LINE = re.compile(
    r"^\s*(?:if|elif|while|assert|return|@|and|or|not|lambda)\b|^\s*@|skipif|xfail|"
    r"^\s*(?:_?is_|major|minor|cc\b|sm|arch|get_|torch\.cuda|[(\[]|\d)|"
    r"=\s*[^=].*(?:==|!=|>=|<=|\bin\b|\bis_\w+\(|\band\b|\bor\b)|"
    r"supported_major_versions|supported_compute_capability|\bif\b.*\belse\b",
    re.I,
)
_MAY_OPEN = re.compile(f"{PICKAXE}|{_TWELVE.pattern}", re.I)
_CLAUSE = re.compile(r"^\s*(?:or\b|and\b|\|\||&&|\)|,|\d+\s*,?\s*$)")


@dataclass
class Opening:
    """One gate an upstream commit opened to SM12x, located at the commit's parent."""

    upstream: str
    commit: str
    parent: str
    date: str
    file: str
    function: str
    mechanism: str
    expected: str
    lines: list[int]  # the gate's changed lines at the parent
    hunk: list[int]  # first and last line of the changed hunk at the parent
    new_lines: list[int] = field(default_factory=list)  # the same hunk at the commit
    device_files: list[str] = field(default_factory=list)
    mined_as: str = ""  # the miner's class, where a person relabelled it (``expected``: theirs)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.commit, self.file, self.function)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Opening:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def candidates(git: Git, branch: str, since: str | None) -> list[tuple[str, str, str]]:
    """(commit, first parent, date) of the non-merge commits the pickaxe matches, oldest first."""
    args = ["log", branch, "--no-merges", "--reverse", "-G", PICKAXE, "--format=%H %P %cs"]
    if since:
        args.append(f"--since={since}")
    out = git.run(*args, "--", *PATHS)
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return [(row[0], row[1], row[-1]) for row in rows if len(row) >= 3]


def mine(git: Git, upstream: str, branch: str, since: str | None = None) -> list[Opening]:
    """Every opening on ``branch`` (since ``since``), oldest first."""
    found: list[Opening] = []
    for commit, parent, date in candidates(git, branch, since):
        raw = git.run_bytes("diff", "--no-color", "--no-ext-diff", "-U3", "--no-renames",
                            parent, commit, "--", *PATHS)
        found += openings_of(git, upstream, commit, parent, date, raw.decode("utf-8", "replace"))
    return found


def openings_of(git: Git, upstream: str, commit: str, parent: str, date: str,
                diff: str) -> list[Opening]:
    """The openings one commit's diff (parent to commit) makes."""
    try:
        patch = PatchSet(diff)
    except UnidiffParseError:
        return []
    device = sorted(_path(f.path) for f in patch if _is_device(_path(f.path)) and _real_change(f)
                    or _python_kernel_change(git, commit, f))
    expected = NEEDS_KERNEL_WORK if device else GATE_ONLY
    out: dict[tuple[str, str, str], Opening] = {}
    for patched in patch:
        path = _path(patched.path)
        if patched.is_added_file or patched.is_removed_file:
            continue
        is_py = path.endswith(".py")
        if not is_py and not _is_device(path):
            continue
        if not any(_MAY_OPEN.search(ln.value) for hunk in patched for ln in hunk
                   if ln.is_added or ln.is_removed):
            continue
        module = parse(_blob(git, parent, path)) if is_py else None
        new = parse(_blob(git, commit, path)) if is_py else None
        prose = (prose_lines(module), prose_lines(new)) if is_py else None
        kept = scope_names(new) if is_py else {"<device>"}
        for hunk in patched:
            for mechanism, lines in _hunk_openings(hunk, prose):
                function = enclosing(module, lines[0]) if is_py else "<device>"
                if function not in kept:
                    continue  # the code was deleted or moved, not opened
                opening = Opening(upstream, commit, parent, date, path, function, mechanism,
                                  expected, lines, _old_span(hunk), _new_span(hunk), device)
                out.setdefault(opening.key, opening)
    return list(out.values())


def _hunk_openings(hunk: Any, prose: tuple[set[int], set[int]] | None
                   ) -> Iterator[tuple[str, list[int]]]:
    """(mechanism, lines at the parent) for each opening one hunk makes; ``prose``: the
    lines of a Python file's parent and commit inside multi-line strings (None: device code)."""
    old_prose, new_prose = prose or (set(), set())
    comment = "#" if prose is not None else "//"
    removed = [(ln.source_line_no, _code(ln.value, comment)) for ln in hunk
               if ln.is_removed and ln.source_line_no not in old_prose]
    added = [_code(ln.value, comment) for ln in hunk
             if ln.is_added and ln.target_line_no not in new_prose]
    if prose is None:
        dropped = [n for n, text in removed if _GUARD.search(text)]
        if dropped and not any(_GUARD.search(text) for text in added):
            yield "cuda-guard", dropped
        return
    yield from _list_openings(hunk)
    new_tokens = _tokens(added)
    old_tokens = _tokens(text for _, text in removed)
    gained = new_tokens - old_tokens
    arch_removed = [n for n, text in removed if _ARCHISH.search(text) and _TEST_LINE.search(text)]
    if gained and arch_removed and not old_tokens:  # the old test named no SM12x at all
        yield "condition", arch_removed
    elif gained and not removed:
        yield from _added_clause(hunk, new_prose)
    refusals = [n for n, text in removed if _refuses_twelve(text) and _refuses(removed, n)]
    if old_tokens - new_tokens and refusals and not _still_refused(added):
        yield "skip", refusals


def _list_openings(hunk: Any) -> Iterator[tuple[str, list[int]]]:
    """A gate list (JIT majors, decorator capabilities) that gained the target's number."""
    old_side = [(ln.source_line_no, ln.value) for ln in hunk if not ln.is_added]
    new_text = "".join(ln.value for ln in hunk if not ln.is_removed)
    removed_nos = {ln.source_line_no for ln in hunk if ln.is_removed}
    for mechanism, pattern in _LIST.items():
        wants = _LIST_WANTS[mechanism]
        new_lists = [_numbers(m.group(1)) for m in pattern.finditer(new_text)]
        if not any(wants & nums for nums in new_lists):
            continue
        old_text = "".join(text for _, text in old_side)
        starts = _line_starts(old_side)
        for match in pattern.finditer(old_text):
            nums = _numbers(match.group(1))
            first = _line_at(starts, match.start())
            last = _line_at(starts, match.end() - 1)
            touched = [n for n in range(first, last + 1) if n in removed_nos]
            if not wants & nums and touched:
                yield mechanism, touched


def _added_clause(hunk: Any, prose: set[int]) -> Iterator[tuple[str, list[int]]]:
    """``or is_sm120a_supported()`` (or a list element 12) added to an arch test kept as
    context: the opening sits at the context line above it."""
    lines = list(hunk)
    for i, line in enumerate(lines):
        if not (line.is_added and line.target_line_no not in prose
                and _tokens([_code(line.value)])
                and _CLAUSE.search(line.value)):
            continue
        above = next((ln for ln in reversed(lines[:i]) if ln.is_context), None)
        if above is not None and _ARCHISH.search(_code(above.value)):
            yield "condition", [above.source_line_no]
            return


def _refuses_twelve(text: str) -> bool:
    """A test that is true on SM12x (``is_sm120()``, ``major == 12``), not one that admits
    it by its negation (``not is_sm120a_supported()``, ``major != 12``)."""
    return (bool(_tokens([text])) and bool(_TEST_LINE.search(text))
            and not re.search(r"\bnot\b|!=", text))


def _refuses(removed: list[tuple[int, str]], line: int) -> bool:
    """Whether the test on the removed line ``line`` refuses: on its own line
    (``skipif(...)``, ``if x: pytest.skip()``), or by a statement of the block under it
    once its condition ends (a line ending in ``:``), at that block's own level.
    ``if major == 12:`` over an import and an SM120 kernel is a dispatch, even when a
    ``raise`` for the toolkit sits in an ``if`` inside it."""
    return _refusal_under([(n, text) for n, text in removed if n >= line])


_BLOCK_REFUSAL = re.compile(r"(?:raise\b|pytest\.(?:skip|xfail)\b|self\.skipTest\b|"
                            r"sys\.exit\b|exit\(|os\._exit\b|"
                            r"return\s*(?:None|False|\"\"|'')?\s*$)")


def _refusal_under(side: list[tuple[int, str]]) -> bool:
    """Whether the test that starts ``side`` (numbered lines of one side of a hunk, the
    test first) refuses, on its own line or in the block under it."""
    if not side:
        return False
    first = side[0][1]
    if not first.lstrip().startswith("return") and _REFUSAL.search(first):
        return True
    indent = _indent(first)
    last, body = side[0][0], None
    for number, text in side:
        if number - last > 3:
            return False  # the rest of the test or its block is not on this side
        last = number  # (a line or two of message prose is skipped, not the block)
        if body is None:
            if text.rstrip().endswith(":"):
                body = []
            continue
        if text.strip() and _indent(text) <= indent:
            break
        if text.strip():
            body.append(text)
    if not body:
        return False
    level = _indent(body[0])
    return any(_indent(t) == level and _BLOCK_REFUSAL.match(t.strip()) for t in body)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


_EXCLUSIVE = re.compile(r"!=|\bnot\s+in\b|\bnot\s+_*is_")  # true on what it does not name


def _still_refused(added: list[str]) -> bool:
    """Whether the new side of a hunk refuses SM12x again: a test naming SM12x
    (``is_sm12x``, ``major == 12``) or one that excludes by what it names
    (``major != 10``, ``not is_sm100a_supported()``), with a refusal under it.  A skip
    rewritten, not removed, opened nothing."""
    numbered = list(enumerate(added))
    for i, text in numbered:
        if not (_ARCHISH.search(text) or _tokens([text])) or not _TEST_LINE.search(text):
            continue
        names_twelve = bool(_tokens([text])) and not re.search(r"\bnot\b|!=", text)
        # `major != 10` alone still refuses SM12x; `backend == "cudnn" and major != 10`
        # refuses it for one backend only, and the others may now serve it
        exclusive = (not _tokens([text]) and bool(_EXCLUSIVE.search(text))
                     and not re.search(r"\band\b|\bor\b", text))
        if (names_twelve or exclusive) and _refusal_under(numbered[i:]):
            return True
    return False


def _tokens(lines: Iterable[str]) -> set[str]:
    """What on these lines admits SM12x; a bare 120 or 121 only where the line tests the
    arch or is a list of numbers (not ``cmdline[:120]``), nothing on a toolkit line."""
    out: set[str] = set()
    for text in lines:
        if _TOOLKIT.search(text):
            continue
        found = {m.group(0).lower().replace(" ", "") for m in _TWELVE.finditer(text)}
        bare = all(token.isdigit() for token in found)
        if found and bare and not (_ARCHISH.search(text) or _NUMBERS_ONLY.match(text)):
            continue
        out |= found
    return out


def _numbers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\d+", text)}


def _line_starts(side: list[tuple[int, str]]) -> list[tuple[int, int]]:
    starts, offset = [], 0
    for number, text in side:
        starts.append((offset, number))
        offset += len(text)
    return starts


def _line_at(starts: list[tuple[int, int]], offset: int) -> int:
    number = starts[0][1]
    for start, line in starts:
        if start > offset:
            break
        number = line
    return number


def _code(line: str, comment: str = "#") -> str:
    """A line without its comment (``comment`` outside quotes ends the code) and without
    the prose of its strings (a quoted text with a space: a message, not ``"120"``); an
    unclosed string (a docstring's first line) is dropped."""
    quote, start, out = "", 0, []
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
                text = line[start:i]
                out.append(("" if " " in text else text) + char)
        elif char in "'\"":
            quote, start = char, i + 1
            out.append(char)
        elif line.startswith(comment, i):
            break
        else:
            out.append(char)
    return "".join(out)


def _old_span(hunk: Any) -> list[int]:
    return [hunk.source_start, hunk.source_start + max(hunk.source_length, 1) - 1]


def _new_span(hunk: Any) -> list[int]:
    return [hunk.target_start, hunk.target_start + max(hunk.target_length, 1) - 1]


def _path(name: str) -> str:
    return name[2:] if name.startswith(("a/", "b/")) else name


def _is_device(path: str) -> bool:
    parts = path.lower().split("/")
    in_tests = any(p in ("tests", "test", "benchmarks") for p in parts[:-1])
    return path.lower().endswith(DEVICE_SUFFIXES) and not in_tests


_KERNEL_DECORATOR = re.compile(r"^\s*@\s*(?:cute\.kernel|cute\.jit|triton\.jit|triton\.autotune)\b")


def _python_kernel_change(git: Git, commit: str, patched: Any) -> bool:
    """Whether a Python file's diff (outside the tests) changes device code written in
    Python: a line added inside a ``@cute.kernel``/``@cute.jit`` (CuTe DSL) or
    ``@triton.jit`` function, or a new file defining one.  Such kernels are compiled
    for the GPU as a ``.cu`` file is: an opening that had to write them needed kernel
    work (flashinfer's SM120 CuTe DSL MoE and delta-rule kernels are Python files)."""
    path = _path(patched.path)
    parts = path.lower().split("/")
    if not path.endswith(".py") or any(p in ("tests", "test", "benchmarks") for p in parts[:-1]):
        return False
    added = [ln for hunk in patched for ln in hunk if ln.is_added]
    if patched.is_added_file:
        return any(_KERNEL_DECORATOR.match(ln.value) for ln in added)
    module = parse(_blob(git, commit, path))
    if module is None:
        return False
    spans = [(min([n.lineno, *(d.lineno for d in n.decorator_list)]), n.end_lineno or n.lineno)
             for n in ast.walk(module) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
             and any(_KERNEL_DECORATOR.match("@" + ast.unparse(d)) for d in n.decorator_list)]
    return any(first <= ln.target_line_no <= last for ln in added
               if ln.value.strip() and not ln.value.strip().startswith("#")
               for first, last in spans)


def _real_change(patched: Any) -> bool:
    """Whether a device file's diff changes a line of code (not only comments or blanks)."""
    for hunk in patched:
        for line in hunk:
            if line.is_added or line.is_removed:
                code = line.value.strip()
                if code and not code.startswith(("//", "/*", "*")):
                    return True
    return False


def _blob(git: Git, commit: str, path: str) -> str:
    status, out, _ = git.try_run("show", f"{commit}:{path}")
    return out if status == 0 else ""


def parse(text: str) -> ast.Module | None:
    """The module of a Python text (None when it does not parse)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None


def prose_lines(module: ast.Module | None) -> set[int]:
    """The lines of a module that cannot test the arch: inside a string that spans lines
    (docstrings, messages), and every line of an import (``is_sm100_supported,`` in an
    import list names a predicate, it tests nothing)."""
    if module is None:
        return set()
    lines: set[int] = set()
    for node in ast.walk(module):
        end = getattr(node, "end_lineno", None) or getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            lines |= set(range(node.lineno + 1, end + 1))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            lines |= set(range(node.lineno, end + 1))
    return lines


def scope_names(module: ast.Module | None) -> set[str]:
    """The qualified names of a module's functions and classes, and ``<module>``."""
    names = {"<module>"}
    if module is None:
        return names

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                name = f"{prefix}{child.name}"
                names.add(name)
                walk(child, f"{name}.")
            else:
                walk(child, prefix)

    walk(module, "")
    return names


def defined_names(module: ast.Module | None, function: str, lines: list[int]) -> list[str]:
    """The names through which a change at ``lines`` reaches other code: the enclosing
    function's name (a predicate helper), or at module level the names the statements on
    those lines assign (``_is_sm100 = is_sm100_supported()``)."""
    if function != "<module>":
        return [function.rsplit(".", 1)[-1]]
    if module is None:
        return []
    names: list[str] = []
    for node in module.body:
        end = node.end_lineno or node.lineno
        if not any(node.lineno <= n <= end for n in lines):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else [])
        for target in targets:
            names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return names


def enclosing(module: ast.Module | None, line: int) -> str:
    """The qualified name of the innermost function or class holding ``line`` (its
    decorators count as inside it), ``<module>`` at top level: the audit's naming."""
    if module is None:
        return "<module>"
    names: list[str] = []
    node: ast.AST = module
    while (inner := _inner_scope(node, line)) is not None:
        names.append(inner.name)
        node = inner
    return ".".join(names) or "<module>"


def _inner_scope(node: ast.AST, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None:
    """The first function or class below ``node`` (not inside another) that holds ``line``."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        if isinstance(child, _SCOPES):
            if _holds(child, line):
                return child
            continue
        stack.extend(ast.iter_child_nodes(child))
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _holds(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, line: int) -> bool:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first <= line <= (node.end_lineno or node.lineno)
