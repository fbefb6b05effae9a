"""A torch op built in C++ (``torch.ops.sgl_kernel.fp8_blockwise_scaled_mm``), read
down to the host checks that refuse a GPU.

The op is registered in a ``TORCH_LIBRARY_FRAGMENT(NS, m)`` block (``m.def("name(...)
-> Tensor"); m.impl("name", torch::kCUDA, &function);``, or ``m.def("name",
&function)``); files named for another platform (``common_extension_rocm.cc``,
``csrc/cpu/``) are not the CUDA build's.  The function is defined in a C++ file of
the same kernel folder (the one holding the registration's ``csrc/``, with its
``include/``); its body and what it calls there, a few calls deep, are read by
:mod:`contrib.analysis.hostpaths` for the ways that raise, each with the
capabilities it is taken on (the capability read as :mod:`contrib.analysis.hostarch`
reads it: ``auto sm_version = getSMVersion();``).

:meth:`TorchOps.host` answers for one op and one target: where it is registered and
defined, and each raise the target surely meets that some other GPU does not (a
refusal), with the capabilities that pass it; none: the op admits the target.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from contrib.analysis.cscan import strip_comments
from contrib.analysis.hostarch import capability_names, constant_values
from contrib.analysis.hostpaths import Condition, Way, definitions, prepared, raises, reached
from contrib.analysis.tree import SourceTree
from contrib.arch import KNOWN, Arch

_CXX = (".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp", ".hh")
_UNITS = (".cc", ".cpp", ".cu")
_LIBRARY = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT|_EXPAND)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
_IMPL = re.compile(r'\.impl\(\s*"(\w+)"\s*,\s*(?:(?:torch::|c10::|at::)?(?:DispatchKey::)?'
                   r'(k?\w+)\s*,\s*)?&?\s*([\w:]+)\s*\)')
_DEF_FN = re.compile(r'\.def\(\s*"(\w+)(?:\([^"]*)?"\s*,\s*&?\s*([\w:]+)\s*[,)]')
_OTHER_PLATFORM = re.compile(r"(?:^|[/_.-])(?:rocm|hip|musa|xpu|npu|cpu|mps|metal|ascend)"
                             r"(?:[/_.-]|$)", re.IGNORECASE)
MAX_DEPTH = 4  # calls followed below the registered function


@dataclass(frozen=True)
class Refusal:
    """A raise the target meets in an op's host code: where, the function holding it,
    the statement, and the capabilities (``"10.0"``) that pass it."""

    file: str
    line: int
    function: str
    what: str
    admits: tuple[str, ...]


@dataclass(frozen=True)
class HostOp:
    """An op of the tree: its registration (file, line), the function registered and
    where it is defined, and the refusals of the target read in it (none: admitted)."""

    op: str
    registered: str
    registered_line: int
    function: str
    file: str
    line: int
    refusals: tuple[Refusal, ...]

    @property
    def admits(self) -> bool:
        """Whether no host check of it refuses the target."""
        return not self.refusals


def op_name(dotted: str, namespace: str) -> str | None:
    """The op a call names (``torch.ops.NS.name``, ``.default`` or an overload after it),
    when it is of ``namespace``."""
    parts = dotted.split(".")
    if len(parts) < 4 or parts[:3] != ["torch", "ops", namespace]:
        return None
    return parts[3]


@dataclass(frozen=True)
class _Def:
    path: str
    name: str
    body: tuple[int, int]


class TorchOps:
    """The C++ ops of one namespace of a tree, their registrations read once."""

    def __init__(self, tree: SourceTree, namespace: str) -> None:
        self.tree, self.namespace = tree, namespace
        self._registered: dict[str, tuple[str, int, str]] | None = None
        self._files: dict[str, tuple[str, str]] = {}
        self._defs: dict[str, dict[str, list[_Def]]] = {}  # kernel folder -> name -> defs

    def host(self, op: str, arch: Arch) -> HostOp | None:
        """The op ``op`` read for ``arch``; None when it is registered nowhere in the
        tree's CUDA C++ or its function is defined nowhere there."""
        if self._registered is None:
            self._registered = self._read_registrations()
        found = self._registered.get(op)
        if found is None:
            return None
        path, line, function = found
        root = _kernel_root(path)
        short = function.rsplit("::", 1)[-1]
        starts = self._definitions(root).get(short, [])
        if not starts:
            return None
        refusals: list[Refusal] = []
        for start in starts:
            refusals += self._refusals(root, start, arch)
        first = starts[0]
        code, _ = self._file(first.path)
        return HostOp(op, path, line, short, first.path, code.count("\n", 0, first.body[0]) + 1,
                      tuple(dict.fromkeys(refusals)))

    def _read_registrations(self) -> dict[str, tuple[str, int, str]]:
        found: dict[str, tuple[str, int, str]] = {}
        for path in self.tree.paths():
            if not path.endswith(_UNITS) or _OTHER_PLATFORM.search(path):
                continue
            text = self.tree.read_text(path) or ""
            if "TORCH_LIBRARY" not in text:
                continue
            code = strip_comments(text)
            for block in _LIBRARY.finditer(code):
                if block[1] != self.namespace:
                    continue
                end = _close_brace(code, block.end() - 1)
                for match in _IMPL.finditer(code, block.end(), end):
                    key = match[2] or "kCUDA"
                    if key in ("kCUDA", "CUDA", "CompositeExplicitAutograd"):
                        found.setdefault(match[1], (path, code.count("\n", 0, match.start()) + 1,
                                                    match[3]))
                for match in _DEF_FN.finditer(code, block.end(), end):
                    found.setdefault(match[1], (path, code.count("\n", 0, match.start()) + 1,
                                                match[2]))
        return found

    def _file(self, path: str) -> tuple[str, str]:
        if path not in self._files:
            self._files[path] = prepared(self.tree.read_text(path) or "")
        return self._files[path]

    def _definitions(self, root: str) -> dict[str, list[_Def]]:
        """The functions defined in the kernel folder's C++ (its ``csrc/`` and
        ``include/``), by name."""
        if root not in self._defs:
            defs: dict[str, list[_Def]] = {}
            for path in self.tree.paths():
                if (path.startswith((root + "csrc/", root + "include/")) and path.endswith(_CXX)
                        and not _OTHER_PLATFORM.search(path[len(root):])):
                    code, _ = self._file(path)
                    for name, bodies in definitions(code).items():
                        defs.setdefault(name, []).extend(_Def(path, name, b) for b in bodies)
            self._defs[root] = defs
        return self._defs[root]

    def _refusals(self, root: str, start: _Def, arch: Arch) -> list[Refusal]:
        """The refusals of ``arch`` on the ways through ``start`` and what it calls."""
        found: list[Refusal] = []
        queue: list[tuple[_Def, tuple[Condition, ...], int]] = [(start, (), 0)]
        seen: set[tuple[str, int]] = set()
        defs = self._definitions(root)
        while queue:
            item, before, depth = queue.pop(0)
            if (item.path, item.body[0]) in seen:
                continue
            seen.add((item.path, item.body[0]))
            code, shown = self._file(item.path)
            names = capability_names(code)
            known = constant_values([code])
            for way in raises(code, shown, item.body):
                conditions = before + way.conditions
                if way.called:
                    if depth < MAX_DEPTH:
                        queue += [(d, conditions, depth + 1) for d in _callees(way, defs, item.path)]
                    continue
                refusal = _refusal(item, way, conditions, names, known, arch)
                if refusal is not None:
                    found.append(refusal)
        return found


def _callees(way: Way, defs: dict[str, list[_Def]], path: str) -> list[_Def]:
    """The definitions a call names: those of its own file, else those of the folder
    when they are few (a common name defined in many files says nothing)."""
    found: list[_Def] = []
    for name in way.called:
        candidates = defs.get(name, [])
        own = [d for d in candidates if d.path == path]
        found += own or (candidates if len(candidates) <= 2 else [])
    return found


def _refusal(item: _Def, way: Way, conditions: tuple[Condition, ...], names: dict[str, str],
             known: dict[str, int], arch: Arch) -> Refusal | None:
    """A raise ``arch`` surely meets and some other GPU surely does not."""
    if reached(conditions, names, arch.major, arch.minor, known) is not True:
        return None
    passing = tuple(f"{major}.{minor}" for major, minor in KNOWN
                    if (major, minor) != (arch.major, arch.minor)
                    and reached(conditions, names, major, minor, known) is False)
    if not passing:
        return None
    return Refusal(item.path, way.line, item.name, way.text, passing)


def _kernel_root(path: str) -> str:
    """The kernel folder of a registration (``sgl-kernel/`` of
    ``sgl-kernel/csrc/common_extension.cc``), with a trailing slash ("" at the top)."""
    parts = path.split("/")
    if "csrc" in parts:
        index = len(parts) - 1 - parts[::-1].index("csrc")
        return "/".join(parts[:index]) + "/" if index else ""
    folder = posixpath.dirname(path)
    return folder + "/" if folder else ""


def _close_brace(code: str, at: int) -> int:
    depth = 0
    for index in range(at, len(code)):
        if code[index] == "{":
            depth += 1
        elif code[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return len(code)
