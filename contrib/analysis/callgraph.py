"""Which ``__global__`` kernels call a ``__device__`` helper, directly or through other helpers.

A patch that changes a helper in a header changes every kernel that calls it, in
whichever file includes that header.  The graph is name-based: overloads,
template specializations and same-named members are one node, so a kernel that
calls any ``reduce`` reaches every changed ``reduce``: merging names only adds
kernels to a helper's list.  Not seen: calls made inside macros, through function
pointers or through a functor's ``operator()``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from contrib.analysis.cscan import match_close, scan
from contrib.analysis.diffs import FileChange
from contrib.analysis.includes import IncludeGraph, is_cuda_source
from contrib.analysis.tree import SourceTree

GLOBAL, DEVICE = "__global__", "__device__"
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]*)$", re.M)
_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')
_TOKEN = re.compile(r"[A-Za-z_]\w*|[(;{<]")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
# Possessive: a long run of '<' comparisons costs one pass, not a backtracking search.
_TEMPLATE_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*<(?:[^<>;{}]|<(?:[^<>;{}]|<[^<>;{}]*+>)*+>)*+>\s*\(")
# Words before a '(' in a declaration that do not name the function (operators are skipped).
_NOT_NAMES = {"__launch_bounds__", "__attribute__", "__declspec", "alignas", "__cluster_dims__",
              "__maxnreg__", "decltype", "operator", "__host__", "__device__", "__global__",
              "__noinline__", "__forceinline__", "__inline__", "static", "inline", "extern",
              "constexpr", "mutable", "void", "template", "typename"}
_UP_TO_BODY = re.compile(r"[^;{}]*")


@dataclass(frozen=True)
class Function:
    """A ``__global__`` or ``__device__`` definition and the names its body calls."""

    name: str
    file: str
    line: int  # the line holding __global__ / __device__ (or the macro for it)
    last: int  # the line of its closing brace
    kernel: bool
    calls: frozenset[str] = field(default_factory=frozenset)


def device_markers(texts: Iterable[str]) -> frozenset[str]:
    """``__device__`` and every object-like macro that expands to it (``DINLINE``, ``CUTLASS_DEVICE``)."""
    defines: dict[str, set[str]] = {}
    for text in texts:
        if DEVICE in text:
            for name, body in _DEFINE.findall(text):
                defines.setdefault(name, set()).update(re.findall(r"\w+", body))
    markers, grew = {DEVICE}, True
    while grew:  # a macro of a macro: #define FOO CUTLASS_DEVICE
        grew = False
        for name, words in defines.items():
            if name not in markers and words & markers:
                markers.add(name)
                grew = True
    return frozenset(markers)


def find_functions(path: str, text: str, markers: frozenset[str] = frozenset({DEVICE})) -> list[Function]:
    """Every kernel and device function ``text`` defines (declarations and lambdas are skipped).

    Comments, directive lines and the insides of string literals are blanked first,
    so neither a comment naming a helper nor ``printf("helper(")`` is a call.
    """
    code = _LITERAL.sub(lambda m: m.group()[0] + " " * (len(m.group()) - 2) + m.group()[0],
                        "\n".join(scan(path, text).code))
    starts = [0] + [m.end() for m in re.finditer("\n", code)]
    markers_re = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, {GLOBAL, *markers}))) + r")\b")
    found: list[Function] = []
    resume = 0  # markers inside a declaration already read, or inside a body (lambdas), start nothing
    for match in markers_re.finditer(code):
        if match.start() < resume:
            continue
        parsed, resume = _definition_at(code, match.end(), markers)
        if parsed is not None:
            name, open_brace, close_brace = parsed
            found.append(Function(name, path, bisect.bisect_right(starts, match.start()),
                                  bisect.bisect_right(starts, close_brace), match.group() == GLOBAL,
                                  _calls(code[open_brace + 1 : close_brace])))
    return found


def _definition_at(code: str, pos: int, markers: frozenset[str]) -> tuple[tuple[str, int, int] | None, int]:
    """From just after a marker: (name, '{' offset, matching '}' offset) or None, and where reading stopped."""
    name: str | None = None
    while True:
        token = _TOKEN.search(code, pos)
        if token is None:
            return None, len(code)
        if token.group() in (";", "{"):
            return None, token.end()
        pos = token.end()
        if token.group() == "<":  # template arguments: vec_t<T, N> f(...), f<float>(...)
            pos = _after_angles(code, token.start())
        elif token.group() == "(":
            close = match_close(code, token.start(), "(", ")")
            if name is not None and name not in _NOT_NAMES and name not in markers:
                follow = _UP_TO_BODY.match(code, close + 1)
                end = follow.end() if follow else len(code)
                if end < len(code) and code[end] == "{":
                    close_brace = match_close(code, end, "{", "}")
                    return (name, end, close_brace), close_brace + 1
                return None, end + 1
            name, pos = None, close + 1  # __launch_bounds__(...), a lambda's parameters
        else:
            name = token.group()


def _after_angles(code: str, at: int) -> int:
    """The offset just past the ``>`` that closes the ``<`` at ``at`` (stops at ; { })."""
    depth = 0
    for pos in range(at, len(code)):
        char = code[pos]
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
            if depth == 0:
                return pos + 1
        elif char in ";{}":
            return pos
    return len(code)


def _calls(body: str) -> frozenset[str]:
    """Names in ``body`` followed by ``(``, or by template arguments (two levels deep) and ``(``."""
    return frozenset(_CALL.findall(body)) | frozenset(_TEMPLATE_CALL.findall(body))


def _changes(change: FileChange, function: Function) -> bool:
    """Whether the patch adds a line to ``function``, or deletes one inside its braces.

    A deletion touches the lines on both sides of it, so one just before or after
    the definition touches its first or last line without changing it.
    """
    span = range(function.line, function.last + 1)
    return any(line in span for line in change.added) or any(
        function.line < line < function.last for line in change.touched - change.added)


class CallGraph:
    """The functions of ``files``, each file read and scanned once, only when a wanted name is in it."""

    def __init__(self, tree: SourceTree, files: Iterable[str], markers: frozenset[str]) -> None:
        self.tree = tree
        self.files = sorted(files)
        self.markers = markers
        self._functions: dict[str, list[Function]] = {}
        self._called_by: dict[str, list[Function]] = {}

    def functions(self, path: str) -> list[Function]:
        """The kernels and device functions ``path`` defines."""
        if path not in self._functions:
            text = self.tree.read_text(path) or ""
            wanted = any(marker in text for marker in (GLOBAL, *self.markers))
            self._functions[path] = find_functions(path, text, self.markers) if wanted else []
        return self._functions[path]

    def kernels_calling(self, helper: str) -> list[Function]:
        """Every kernel that calls ``helper``, directly or through other device functions (cycles are safe)."""
        seen, queue = {helper}, [helper]
        kernels: dict[tuple[str, int], Function] = {}
        while queue:
            for function in self._callers(queue.pop()):
                if function.kernel:
                    kernels.setdefault((function.file, function.line), function)
                elif function.name not in seen:
                    seen.add(function.name)
                    queue.append(function.name)
        return sorted(kernels.values(), key=lambda f: (f.file, f.line))

    def _callers(self, name: str) -> list[Function]:
        """The functions whose bodies call ``name`` (kept: helpers share callers)."""
        if name not in self._called_by:
            self._called_by[name] = [function for path in self.files
                                     if name in (self.tree.read_text(path) or "")
                                     for function in self.functions(path) if name in function.calls]
        return self._called_by[name]


@dataclass(frozen=True)
class HelperReach:
    """A device function the patch changes, and the kernels that call it."""

    helper: Function
    kernels: list[Function]


def changed_helpers(tree: SourceTree, changes: Iterable[FileChange]) -> list[HelperReach]:
    """Each device function whose definition holds a touched line, with the kernels reaching it.

    Callers are looked for in the changed files, every file of the tree that includes
    them (directly or not), and everything those files include: a unit often pulls
    the helper's header and the kernels' header in side by side.
    """
    touched = [c for c in changes if not c.deleted and c.touched and is_cuda_source(c.path)]
    if not touched:
        return []
    graph = IncludeGraph(tree)
    paths = [c.path for c in touched]
    files = graph.reach({*paths, *graph.includers(paths)})
    markers = device_markers(tree.read_text(path) or "" for path in sorted(files))
    calls = CallGraph(tree, files, markers)
    found: dict[str, HelperReach] = {}
    for change in touched:
        for function in calls.functions(change.path):
            if not function.kernel and function.name not in found and _changes(change, function):
                found[function.name] = HelperReach(function, calls.kernels_calling(function.name))
    return list(found.values())
