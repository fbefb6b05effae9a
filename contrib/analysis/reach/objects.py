"""Classes, objects and methods of a tree: what calling a class, an object's method or a
method known by name alone runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Frame, Func, ModRef, ordered
from contrib.analysis.pyparse import PARSE_ERRORS, parse
from contrib.analysis.pywalk import walk
from contrib.analysis.reach.names import distinctive

MAX_DEFS = 2  # a method name defined more often than this is not followed by name


_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(", re.MULTILINE)  # a def, at any depth


def classes_named(ev: TreeEval, func: ast.expr, frame: Frame) -> Iterator[tuple[str, ast.ClassDef]]:
    """The tree classes ``func`` (a name, or ``module.Name``) is bound to."""
    if isinstance(func, ast.Name):
        local = frame.local.names.get(func.id) if frame.local is not None else None
        if local is None:
            yield from _module_class(ev, func.id, frame.path, 0)
            return
        for binding in local:  # `from .triton_backend import TritonAttnBackend` in the function
            if binding.kind == "import" and binding.attr:
                target = ev.index.find(binding.module, frame.path, binding.level)
                if target is not None:
                    yield from _module_class(ev, binding.attr, target, 1)
    elif isinstance(func, ast.Attribute):
        for path in modules_of(ev, func.value, frame):
            yield from _module_class(ev, func.attr, path, 0)


def modules_of(ev: TreeEval, node: ast.expr, frame: Frame, depth: int = 0) -> list[str]:
    """The tree modules ``node`` names: a bound module, or a submodule of one named as an
    attribute (``pkg.sub`` where the package's ``__init__`` does not bind ``sub``)."""
    paths = [v.path for v in ordered(ev.eval(node, frame)) if isinstance(v, ModRef)]
    if paths or depth > 4 or not isinstance(node, ast.Attribute):
        return paths
    for base in modules_of(ev, node.value, frame, depth + 1):
        folder = base.rsplit("/", 1)[0] if base.endswith("/__init__.py") else ""
        for candidate in (f"{folder}/{node.attr}.py", f"{folder}/{node.attr}/__init__.py"):
            if folder and ev.module(candidate) is not None:
                paths.append(candidate)
    return paths


def _module_class(ev: TreeEval, name: str, path: str, depth: int) -> Iterator[tuple[str, ast.ClassDef]]:
    module = ev.module(path)
    if module is None or depth > 6:
        return
    for binding in module[1].names.get(name, []):
        if binding.kind == "class" and isinstance(binding.node, ast.ClassDef):
            yield path, binding.node
        elif binding.kind == "import" and binding.attr:
            target = ev.index.find(binding.module, path, binding.level)
            if target is not None:
                yield from _module_class(ev, binding.attr, target, depth + 1)


def lookup(ev: TreeEval, path: str, cls: ast.ClassDef, name: str) -> list[Func]:
    """The method ``name`` of the tree class ``cls`` (at ``path``) as Python's attribute
    lookup finds it: in the class's own body, else in its tree bases, left to right."""
    for owner_path, owner in lineage(ev, path, cls):
        own = [Func(owner_path, item) for item in owner.body
               if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name]
        if own:
            return own
    return []


def lineage(ev: TreeEval, path: str, cls: ast.ClassDef,
            depth: int = 0, seen: set[int] | None = None) -> Iterator[tuple[str, ast.ClassDef]]:
    """``cls`` and its tree bases, depth first, left to right, each once (the order a
    lookup on an object of it takes, for single and simple multiple inheritance),
    read lazily: a lookup that finds its name in the class reads no base."""
    seen = set() if seen is None else seen
    if id(cls) in seen:
        return
    seen.add(id(cls))
    yield path, cls
    if depth > 6:
        return
    for base in cls.bases:
        for base_path, node in classes_named(ev, base, Frame(path)):
            yield from lineage(ev, base_path, node, depth + 1, seen)


def named_functions(ev: TreeEval, node: ast.expr, frame: Frame) -> list[Func]:
    """The tree's functions ``node`` hands on by name (an argument, a returned value, a
    name it is bound to): a distinctive module-level name bound to one, or a local the
    function imports (``from ...cutedsl_bf16_gemm import cutedsl_bf16_gemm``).  Any
    other local is a value, not a function of the tree, and is not evaluated."""
    if not isinstance(node, ast.Name) or not distinctive(node.id):
        return []
    if frame.local is not None and node.id in frame.local.names:
        bindings = frame.local.names[node.id]
        if not all(b.kind == "import" for b in bindings):
            return []
        return [v for b in bindings for v in ordered(ev.imported(b, frame.path))
                if isinstance(v, Func)]
    return [v for v in ordered(ev.global_(node.id, frame.path)) if isinstance(v, Func)]


def constructed(ev: TreeEval, func: ast.expr, frame: Frame) -> list[Func]:
    """What calling the tree class ``func`` names runs."""
    return [f for path, cls in classes_named(ev, func, frame) for f in on_making(path, cls)]


def on_making(path: str, cls: ast.ClassDef) -> list[Func]:
    """What making (and calling) an object of ``cls`` runs: its ``__init__``, ``__call__``."""
    return [Func(path, item) for item in cls.body
            if isinstance(item, ast.FunctionDef) and item.name in ("__init__", "__call__")]


def instance_methods(ev: TreeEval, func: ast.Attribute, frame: Frame) -> list[Func]:
    """``obj.method`` where the function's ``obj`` is made by a call: the method of the
    tree class the call makes (``obj = Manager(...)``) or that the called function's
    return annotation names (``obj = _get_workspace_manager(...)`` with ``->
    FlashInferWorkspaceManager``, sglang's allreduce-fusion workspace); and
    ``Class.method`` of a tree class (``CuteDSLPagedMQALogitsRunner.forward(...)``)."""
    def named(classes: Iterable[tuple[str, ast.ClassDef]]) -> list[Func]:
        return [Func(path, item) for path, node in classes for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name == func.attr]

    # `Runner.forward(...)`: a classmethod or staticmethod of a tree class
    found = named(classes_named(ev, func.value, frame)) if isinstance(func.value, ast.Name | ast.Attribute) else []
    if found or not isinstance(func.value, ast.Name) or frame.local is None:
        return found
    for binding in frame.local.names.get(func.value.id, []):
        if binding.kind == "expr" and isinstance(binding.node, ast.Call):
            found += named(made_classes(ev, binding.node, frame))
    return found


def made_classes(ev: TreeEval, call: ast.Call, frame: Frame) -> list[tuple[str, ast.ClassDef]]:
    """The tree classes of what ``call`` returns: the class it calls, or the class the
    return annotation of the tree function it calls names (``Optional[X]``, ``"X"``)."""
    found = list(classes_named(ev, call.func, frame))
    if found:
        return found
    for value in ordered(ev.eval(call.func, frame)):
        if isinstance(value, Func) and isinstance(value.node, ast.FunctionDef | ast.AsyncFunctionDef):
            named = _annotated(value.node.returns)
            if named is not None:
                found += classes_named(ev, named, Frame(value.path))
    return found


def _annotated(node: ast.expr | None) -> ast.expr | None:
    """The class an annotation names: ``X``, ``mod.X``, ``"X"``, ``Optional[X]``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = parse(node.value, mode="eval").body
        except PARSE_ERRORS:  # an annotation string that is no expression
            return None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name | ast.Attribute):
        outer = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
        return _annotated(node.slice) if outer == "Optional" else None
    return node if isinstance(node, ast.Name | ast.Attribute) else None


def object_methods(ev: TreeEval, func: ast.expr, frame: Frame) -> list[Func]:
    """The methods of the tree class ``func`` names, as an object of it handed on runs
    them (a factory's ``return TritonAttnBackend(runner)``, sglang's
    ``get_quant_method`` returning ``Mxfp4MoEMethod(...)``): its own methods, not its
    bases', ``__init__`` included, other dunders not."""
    return [Func(path, item) for path, cls in classes_named(ev, func, frame) for item in cls.body
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            and not (item.name.startswith("__") and item.name != "__init__")]


class Methods:
    """The tree's methods by name, for a call whose object's class is unknown: one regex
    pass over ``texts`` (the files whose definitions count; read on first use) and one
    walk of each module that defines a name asked for, shared by every walk that keeps
    this index (each GPU, each backend followed).  A name is followed when it is
    distinctive, defined (as a method or a function) in at most :data:`MAX_DEFS` of
    those files, and as a method at most :data:`MAX_DEFS` times: a name that common is
    no lead."""

    def __init__(self, ev: TreeEval, texts: Callable[[], Mapping[str, str]]) -> None:
        self.ev, self._texts = ev, texts
        self._files: dict[str, list[str]] | None = None  # def name -> the files defining it
        self._modules: dict[str, dict[str, list[Func]]] = {}  # path -> method name -> methods
        self._found: dict[str, list[Func]] = {}

    def named(self, name: str) -> list[Func]:
        if not distinctive(name):
            return []
        if self._files is None:
            self._files = {}
            for path, text in self._texts().items():
                for found in set(_DEF.findall(text)):
                    self._files.setdefault(found, []).append(path)
        if name not in self._found:
            paths = self._files.get(name, [])
            out = [f for path in paths for f in self._of_module(path).get(name, [])
                   ] if len(paths) <= MAX_DEFS else []
            self._found[name] = out if len(out) <= MAX_DEFS else []
        return self._found[name]

    def _of_module(self, path: str) -> dict[str, list[Func]]:
        """Every method of the module's classes (nested ones too) by name, in one walk."""
        if path not in self._modules:
            module = self.ev.module(path)
            table: dict[str, list[Func]] = {}
            for node in walk(module[0]) if module is not None else ():
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                            table.setdefault(item.name, []).append(Func(path, item))
            self._modules[path] = table
        return self._modules[path]


def classes_of(module: ast.Module) -> dict[int, ast.ClassDef]:
    """Each function defined in a class body of ``module`` (by id), with its class."""
    return {id(item): node for node in walk(module) if isinstance(node, ast.ClassDef)
            for item in node.body}
