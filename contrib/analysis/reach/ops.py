"""Ops registered with torch in Python: ``torch.ops.NS.name`` runs a function of the tree.
"""

from __future__ import annotations

import ast
import re

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Frame, Func, ordered
from contrib.analysis.pywalk import walk
from contrib.analysis.reach.names import MAX_REGISTERED


class PyOps:
    """The ops the tree registers with torch in Python, by op name: a function decorated
    by a ``custom_op`` maker (``@torch.library.custom_op("sglang::name", ...)``,
    sglang's ``@register_custom_op(op_name=...)``, named after the function when no
    name is given), or handed to one (``direct_register_custom_op(op_name="name",
    op_func=_run)``).  ``torch.ops.sglang.name(...)`` runs that function: Python, not
    an ahead-of-time build.  The files that may register a name are found by a regex
    over the texts naming ``custom_op``; one is parsed when a name it may register
    is asked for."""

    def __init__(self, ev: TreeEval) -> None:
        self.ev = ev
        self._files: dict[str, list[str]] | None = None  # op name -> files that may register it
        self._ops: dict[str, list[Func]] = {}  # NS::name or ::name -> functions
        self._read: set[str] = set()

    def of(self, op: str) -> list[Func]:
        """The functions registered as ``op`` (``torch.ops.NS.name``: NS and name)."""
        if self._files is None:
            self._files = {}
            for path in self.ev.index.paths():
                text = (self.ev.read(path) or "") if path.endswith(".py") else ""
                if "custom_op" in text:
                    for name in {n for found in _OP_NAMES.findall(text) for n in found if n}:
                        self._files.setdefault(name, []).append(path)
        namespace, _, name = op.removeprefix("torch.ops.").rpartition(".")
        for path in self._files.get(name, [])[:MAX_REGISTERED + 1]:
            if path not in self._read:
                self._read.add(path)
                self._index(path)
        found = self._ops.get(f"{namespace}::{name}") or self._ops.get(f"::{name}", [])
        return found if len(found) <= MAX_REGISTERED else []

    def _index(self, path: str) -> None:
        module = self.ev.module(path)
        if module is None:
            return
        frame = Frame(path)
        for node in walk(module[0]):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    name = _op_name(decorator, node.name)
                    if name:
                        self._ops.setdefault(name, []).append(Func(path, node))
            elif isinstance(node, ast.Call) and _is_op_maker(node.func):
                first = node.args[0] if node.args else None
                handed: ast.expr | None = first
                if isinstance(first, ast.Name):  # `register_custom_op(_run, op_name=...)`
                    name = _op_name(node, first.id)
                else:
                    name = _op_name(node, "")
                    handed = node.args[1] if len(node.args) > 1 else next(
                        (k.value for k in node.keywords if k.arg in ("op_func", "fn")), None)
                if name and handed is not None:
                    self.ev.cap = (0, 0)
                    for value in ordered(self.ev.eval(handed, frame)):
                        if isinstance(value, Func):
                            self._ops.setdefault(name, []).append(value)


# What may name an op registered in Python: a string a custom_op maker is given, or
# the name of a function defined within a few lines of a decorator naming one.
_OP_NAMES = re.compile(r"custom_op\(\s*[\"'](?:\w+::)?(\w+)[\"']|\bop_name\s*=\s*[\"'](?:\w+::)?(\w+)"
                       r"|^[ \t]*@[\w.]*custom_op\b(?:.*\n){0,12}?[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)",
                       re.MULTILINE)


def _is_op_maker(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return isinstance(name, str) and "custom_op" in name


def _op_name(node: ast.expr, default: str) -> str:
    """``NS::name`` (or ``::name`` when the namespace is the maker's own) of a
    ``custom_op`` maker's call or decorator; ``default`` named bare, "" for none."""
    if isinstance(node, ast.Call):
        if not _is_op_maker(node.func):
            return ""
        first = node.args[0] if node.args and isinstance(node.args[0], ast.Constant) else None
        given = next((k.value for k in node.keywords if k.arg in ("op_name", "name")), first)
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            namespace, _, name = given.value.rpartition("::")
            return f"{namespace}::{name}" if name else ""
        return f"::{default}" if default and given is None else ""
    return f"::{default}" if default and _is_op_maker(node) else ""
