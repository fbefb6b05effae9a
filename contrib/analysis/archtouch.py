"""Whether a function or a name can reach the GPU's capability at all.

The evaluator runs a tree function's body only when something in it can lead to
``torch.cuda.get_device_capability`` or ``get_device_properties``: a call to
anything else returns an unknown at once.  This is a walk over identifiers (the
function's own, then the bindings they resolve to across modules), once per
function and per module-level name, without evaluating anything: most calls in
an upstream (``torch.empty``, ``logger.info``, the model's layers) never ask.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from contrib.analysis.pymodules import Binding, ModuleIndex, Scope
from contrib.analysis.pywalk import walk

SOURCES = frozenset({"get_device_capability", "get_device_properties"})
# `torch.version.cuda`: the toolkit's version, which decides with the GPU (a predicate
# `major == 12 and torch.version.cuda >= "12.8"`, a `_cuda_ok()` beside it)
TOOLKIT_ATTRS = frozenset({"version", "cuda"})
# `torch.version.hip`: None on an NVIDIA GPU, so `is_hip()` is false there and a ROCm
# operand (`_use_aiter and ...`) no longer leaves an `or` beside a GPU test undecided
PLATFORM_ATTRS = frozenset({"version", "hip"})
# `torch.cuda.is_available()` (true on the machine the audit asks about) is read as
# such only where a function or name also reaches the GPU or the toolkit
Modules = Callable[[str], "tuple[ast.Module, Scope] | None"]


class Touch:
    """Memoised answers to "can this reach the GPU?" over one tree."""

    def __init__(self, modules: Modules, index: ModuleIndex) -> None:
        self.modules, self.index = modules, index
        self._nodes: dict[int, bool] = {}
        self._names: dict[tuple[str, str], bool] = {}
        self._idents: dict[int, tuple[frozenset[str], frozenset[str]]] = {}

    def node(self, path: str, node: ast.AST) -> bool:
        """Whether the function (or expression) ``node`` of ``path`` may read the GPU."""
        key = id(node)
        if key not in self._nodes:
            self._nodes[key] = False  # a cycle reads nothing new
            names, attrs = self._identifiers(node)
            self._nodes[key] = (bool((names | attrs) & SOURCES) or attrs >= TOOLKIT_ATTRS
                                or attrs >= PLATFORM_ATTRS
                                or any(self.name(n, path) for n in names))
        return self._nodes[key]

    def name(self, name: str, path: str, depth: int = 0) -> bool:
        """Whether the module-level ``name`` of ``path`` may read the GPU."""
        key = (path, name)
        if key in self._names:
            return self._names[key]
        self._names[key] = False
        module = self.modules(path)
        found = False
        if module is not None and depth < 8:
            scope = module[1]
            if name in scope.names:
                found = any(self.binding(b, path) for b in scope.names[name])
            else:
                for star, level in scope.stars:
                    target = self.index.find(star, path, level)
                    if target is not None and self.name(name, target, depth + 1):
                        found = True
                        break
        self._names[key] = found
        return found

    def binding(self, binding: Binding, path: str) -> bool:
        """Whether what ``binding`` binds may read the GPU."""
        if binding.kind in ("def", "expr") and binding.node is not None:
            return self.node(path, binding.node)
        if binding.kind != "import":
            return False
        target = self.index.find(binding.module, path, binding.level)
        if not binding.attr:
            return target is not None  # a tree module used by attribute: cannot tell
        if target is not None and self.name(binding.attr, target):
            return True
        sub = self.index.find(f"{binding.module}.{binding.attr}".strip("."), path, binding.level)
        return sub is not None or (target is None and binding.attr in SOURCES)

    def _identifiers(self, node: ast.AST) -> tuple[frozenset[str], frozenset[str]]:
        names, attrs = set(), set()
        for inner in walk(node):
            if isinstance(inner, ast.Name):
                names.add(inner.id)
            elif isinstance(inner, ast.Attribute):
                attrs.add(inner.attr)
        return frozenset(names), frozenset(attrs)
