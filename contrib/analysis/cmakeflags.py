"""The nvcc flags a ``CMakeLists.txt`` compiles a unit with (sglang's sgl-kernel).

sgl-kernel sets ``SGL_KERNEL_CUDA_FLAGS`` (``-DNDEBUG``, ``-std=c++17``,
``--expt-relaxed-constexpr``...), appends to it under ``option()``s
(``if (SGL_KERNEL_ENABLE_BF16)``), and hands it to each library's
``target_compile_options``.  This reads the commands in order: ``set`` and
``list(APPEND)`` of a flags variable (a name that says CUDA or nvcc flags),
``option`` defaults, ``if`` blocks whose condition is an option or variable
known ON or OFF (another condition: its blocks are left out), the targets'
sources and compile options.  A unit's flags are those of the targets that
compile it (every one of them passes the flag), else of the first flags
variable; ``CMAKE_CUDA_FLAGS`` applies to every target.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from contrib.analysis.buildflags import FLAG_NAME, PTX_FLAG, per_blob

_COMMAND = re.compile(r"^[ \t]*(\w+)[ \t]*\(", re.M)
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s"]+)')
_VAR = re.compile(r"\$\{(\w+)\}")
_TARGET_MAKERS = ("add_library", "python_add_library", "cuda_add_library", "add_executable",
                  "cuda_add_executable", "pybind11_add_module")
_KEYWORDS = {"PRIVATE", "PUBLIC", "INTERFACE", "BEFORE", "MODULE", "SHARED", "STATIC",
             "OBJECT", "USE_SABI", "WITH_SOABI", "EXCLUDE_FROM_ALL"}
_TRUE = {"ON", "TRUE", "YES", "Y", "1"}
_FALSE = {"OFF", "FALSE", "NO", "N", "0", ""}


@dataclass
class CMakeFlags:
    """What one CMakeLists.txt says: each flags variable's (flag, line), each target's
    sources and flags, the global CUDA flags."""

    variables: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    targets: dict[str, tuple[list[str], list[tuple[str, int]]]] = field(default_factory=dict)
    common: list[tuple[str, int]] = field(default_factory=list)  # CMAKE_CUDA_FLAGS

    def for_unit(self, relative: str) -> list[tuple[str, int]]:
        """(flag, line) a unit (path relative to the file's folder) compiles with."""
        clean = posixpath.normpath(relative)
        building = [flags for sources, flags in self.targets.values()
                    if clean in {posixpath.normpath(s) for s in sources}]
        if building:
            shared = set.intersection(*({f for f, _ in flags} for flags in building))
            chosen = [(f, line) for f, line in building[0] if f in shared]
        else:
            chosen = next(iter(self.variables.values()), [])
        return _unique(self.common + chosen)


def _unique(pairs: list[tuple[str, int]]) -> list[tuple[str, int]]:
    seen: set[str] = set()
    out = []
    for flag, line in pairs:
        if flag not in seen:
            seen.add(flag)
            out.append((flag, line))
    return out


def commands(text: str) -> list[tuple[str, list[str], int]]:
    """(lower-case command, its arguments, line) of a CMake file, comments removed."""
    clean = "\n".join(_uncomment(line) for line in text.splitlines())
    found = []
    for match in _COMMAND.finditer(clean):
        depth, index, end = 1, match.end(), len(clean)
        quoted = False
        while index < end:
            char = clean[index]
            if char == '"' and clean[index - 1] != "\\":
                quoted = not quoted
            elif not quoted and char == "(":
                depth += 1
            elif not quoted and char == ")":
                depth -= 1
                if depth == 0:
                    break
            index += 1
        body = clean[match.end():index]
        args = [m.group(1) if m.group(1) is not None else m.group(2) for m in _ARG.finditer(body)]
        found.append((match.group(1).lower(), args, clean.count("\n", 0, match.start()) + 1))
    return found


def _uncomment(line: str) -> str:
    quoted = False
    for index, char in enumerate(line):
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            quoted = not quoted
        elif char == "#" and not quoted:
            return line[:index]
    return line


def read_cmake(text: str) -> CMakeFlags:
    """The flags variables, targets and global CUDA flags of a CMakeLists.txt."""
    out = CMakeFlags()
    values: dict[str, list[str]] = {}
    lines: dict[str, list[tuple[str, int]]] = {}
    stack: list[tuple[bool, bool]] = []  # (this branch live, some branch of the if taken)
    for name, args, line in commands(text):
        if name in ("if", "elseif", "else", "endif"):
            _branch(stack, name, args, values)
            continue
        if not all(live for live, _ in stack):
            continue
        if name == "option" and len(args) >= 3:
            values.setdefault(args[0], [_expand(args[2], values)])
        elif name == "set" and args:
            items = [a for a in args[1:] if a not in ("CACHE", "PARENT_SCOPE")]
            expanded = [x for a in items for x in _expand_list(a, values)]
            values[args[0]] = expanded
            if _flags_name(args[0]):
                own = [(f, line) for f in expanded if PTX_FLAG.match(f)]
                kept = [p for p in lines.get(args[0], []) if p[0] in expanded]
                lines[args[0]] = _unique(kept + own)
        elif name == "list" and len(args) >= 2 and args[0].upper() == "APPEND":
            added = [x for a in args[2:] for x in _expand_list(a, values)]
            values[args[1]] = values.get(args[1], []) + added
            if _flags_name(args[1]):
                lines[args[1]] = _unique(lines.get(args[1], []) + [(f, line) for f in added
                                                                   if PTX_FLAG.match(f)])
        elif name in _TARGET_MAKERS and args:
            sources = [x for a in args[1:] if a.upper() not in _KEYWORDS
                       for x in _expand_list(a, values)]
            out.targets[args[0]] = (sources, [])
        elif name == "target_sources" and args and args[0] in out.targets:
            out.targets[args[0]][0].extend(x for a in args[1:] if a.upper() not in _KEYWORDS
                                           for x in _expand_list(a, values))
        elif name == "target_compile_options" and args and args[0] in out.targets:
            out.targets[args[0]][1].extend(_options(args[1:], lines, line))
    out.variables = {k: v for k, v in lines.items() if k.upper() != "CMAKE_CUDA_FLAGS" and v}
    out.common = lines.get("CMAKE_CUDA_FLAGS", [])
    return out


def _flags_name(name: str) -> bool:
    return bool(FLAG_NAME.search(name))


def _options(args: list[str], lines: dict[str, list[tuple[str, int]]],
             line: int) -> list[tuple[str, int]]:
    """A target's CUDA compile options: ``${VAR}`` of a flags variable (its flags, at the
    lines that set them) and literal flags, a generator expression for another language
    left out."""
    found: list[tuple[str, int]] = []
    for arg in args:
        if arg.startswith("$<") and "COMPILE_LANGUAGE:CUDA" not in arg and "$<$<" in arg:
            continue
        for word in arg.replace("$<$<COMPILE_LANGUAGE:CUDA>:", " ").rstrip(">").split():
            var = _VAR.fullmatch(word.rstrip(">"))
            if var:
                found += lines.get(var.group(1), [])
            elif PTX_FLAG.match(word):
                found.append((word, line))
    return found


def _expand(text: str, values: dict[str, list[str]]) -> str:
    return _VAR.sub(lambda m: ";".join(values.get(m.group(1), [])), text)


def _expand_list(text: str, values: dict[str, list[str]]) -> list[str]:
    """An argument with ``${VAR}`` expanded, split as CMake splits lists (``;``) and, for a
    flag string (``"${CMAKE_CUDA_FLAGS} -DX"``), at spaces."""
    expanded = _expand(text, values)
    parts = [p for p in expanded.split(";") if p]
    return [w for p in parts for w in (p.split() if p.lstrip().startswith("-") else [p.strip()])]


def _branch(stack: list[tuple[bool, bool]], name: str, args: list[str],
            values: dict[str, list[str]]) -> None:
    if name == "endif":
        if stack:
            stack.pop()
        return
    if name == "if":
        known = _condition(args, values)
        stack.append((known is True, known is not False))  # unknown: no branch is live
        return
    if not stack:
        return
    _, taken = stack[-1]
    if name == "else":
        stack[-1] = (not taken, True)
    else:
        known = _condition(args, values)
        stack[-1] = (not taken and known is True, taken or known is not False)


def _condition(args: list[str], values: dict[str, list[str]]) -> bool | None:
    """``NAME`` or ``NOT NAME`` of an option/variable known ON or OFF; None for the rest."""
    negate = len(args) == 2 and args[0].upper() == "NOT"
    if len(args) != 1 + negate:
        return None
    word = args[-1]
    value = ";".join(values[word]) if word in values else word if word.upper() in _TRUE | _FALSE \
        else None
    if value is None or value.upper() not in _TRUE | _FALSE:
        return None
    return (value.upper() in _TRUE) != negate


def cmake_flags(text: str) -> CMakeFlags:
    """:func:`read_cmake`, once per blob."""
    return per_blob("cmake", text, read_cmake)
