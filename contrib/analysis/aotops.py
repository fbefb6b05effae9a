"""Where an ahead-of-time built op comes from: its registration, its unit, its build's archs.

sglang's gated code calls ``torch.ops.sgl_kernel.fp8_scaled_mm`` (through the
``sgl_kernel`` Python package when it is in the tree).  The op is registered in
C++ (``m.impl("fp8_scaled_mm", torch::kCUDA, &fp8_scaled_mm);``); the function
it names is defined in one ``.cu`` unit, whose guards the judge reads as a JIT
module's.  The archs the build compiles for are the ``compute_NN`` of the
nearest ``CMakeLists.txt`` above the unit (every one it names, whatever the
toolkit condition around it: an over-approximation, said so in the reason).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from contrib.analysis.tree import SourceTree

_IMPL = re.compile(r'\.impl\(\s*"(\w+)"\s*,[^;]*?&\s*([\w:]+)\s*\)')
_DEF = re.compile(r'\.def\(\s*"(\w+)[^"]*"\s*,\s*&\s*([\w:]+)\s*\)')
_COMPUTE = re.compile(r"\bcompute_(\d{2,3})[af]?\b")
_CXX = (".cc", ".cpp", ".cu")


@dataclass(frozen=True)
class Op:
    """An op's C++ function, the unit defining it, and the majors its build lists."""

    function: str
    unit: str
    majors: tuple[int, ...]


class OpIndex:
    """The ops registered in a tree's C++, read once on the first op asked."""

    def __init__(self, tree: SourceTree) -> None:
        self.tree = tree
        self._registered: dict[str, str] | None = None
        self._sources: dict[str, str] = {}

    def registered(self, dotted: str) -> str | None:
        """The C++ function the op ``torch.ops.NS.name`` is registered as (None: nowhere)."""
        if self._registered is None:
            self._registered = self._read()
        return self._registered.get(dotted.rsplit(".", 1)[-1])

    def find(self, dotted: str) -> Op | None:
        """The op ``torch.ops.NS.name`` (or ``NS.name``) of the tree; None when not found."""
        if self._registered is None:
            self._registered = self._read()
        name = dotted.rsplit(".", 1)[-1]
        function = self._registered.get(name)
        if function is None:
            return None
        short = function.rsplit("::", 1)[-1]
        unit = self._defining(short)
        if unit is None:
            return None
        return Op(short, unit, self._build_majors(unit))

    def _read(self) -> dict[str, str]:
        registered: dict[str, str] = {}
        for path in self.tree.paths():
            if not path.endswith(_CXX):
                continue
            text = self.tree.read_text(path) or ""
            self._sources[path] = text
            if "impl(" in text or "def(" in text:
                for pattern in (_IMPL, _DEF):
                    for match in pattern.finditer(text):
                        registered.setdefault(match[1], match[2])
        return registered

    def _defining(self, function: str) -> str | None:
        """The ``.cu`` unit (else C++ file) that defines ``function`` (a body, not a
        declaration)."""
        pattern = re.compile(rf"\b{re.escape(function)}\s*\(")
        for suffixes in ((".cu",), (".cc", ".cpp")):
            for path, text in sorted(self._sources.items()):
                if not path.endswith(suffixes):
                    continue
                for match in pattern.finditer(text):
                    rest = text[match.end():match.end() + 4000]
                    brace, semi = rest.find("{"), rest.find(";")
                    if brace >= 0 and (semi < 0 or brace < semi) and ")" in rest[:brace]:
                        return path
        return None

    def _build_majors(self, unit: str) -> tuple[int, ...]:
        found = cmake_majors(self.tree, unit)
        return found[1] if found is not None else ()


def cmake_majors(tree: SourceTree, unit: str) -> tuple[str, tuple[int, ...]] | None:
    """The nearest ``CMakeLists.txt`` above ``unit`` and the majors of every
    ``compute_NN`` it names (sgl-kernel's arch list); None where no such file is."""
    folder = posixpath.dirname(unit)
    while True:
        cmake = posixpath.join(folder, "CMakeLists.txt") if folder else "CMakeLists.txt"
        if tree.exists(cmake):
            text = tree.read_text(cmake) or ""
            return cmake, tuple(sorted({int(m) // 10 for m in _COMPUTE.findall(text)}))
        if not folder:
            return None
        folder = posixpath.dirname(folder)
