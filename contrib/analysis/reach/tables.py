"""Registries written as dicts: a setting's value keys the class or function it picks.

sglang's ``BASE_QUANTIZATION_METHODS = {"fp8": Fp8Config, "modelopt_fp4":
ModelOptFp4Config, ...}`` (with ``BASE_QUANTIZATION_METHODS.update({"mxfp4":
Mxfp4Config})`` under ``if is_cuda():``): ``--quantization=modelopt_fp4`` makes a
``ModelOptFp4Config``, whose methods run.  A table is a module-level dict keyed by
string literals whose name holds the setting's name (``QUANTIZATION`` in
``BASE_QUANTIZATION_METHODS``, as a decorator named for the setting registers under
it); an ``update`` of it adds entries, but one under a test false on every NVIDIA GPU
(``if is_npu():``) does not count.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Frame, Func, truth_of
from contrib.analysis.reach.objects import classes_named, named_functions, object_methods
from contrib.arch import NVIDIA_FAMILIES

MAX_TABLES = 6  # files holding tables named for one setting; more is no registry
# a table named for another platform (sglang's ``CPU_QUANTIZATION_METHODS``) is not
# what an NVIDIA GPU picks from
_OTHER_PLATFORMS = frozenset({"CPU", "NPU", "HIP", "ROCM", "XPU", "MPS", "MUSA", "HPU"})


@dataclass(frozen=True)
class Entry:
    """What a table maps a value to: the table's file, the value's name there, and the
    class (None for a function) it names."""

    path: str
    name: ast.expr
    cls: tuple[str, ast.ClassDef] | None


class Tables:
    """The dict registries of a tree, read per setting on first use."""

    def __init__(self, ev: TreeEval) -> None:
        self.ev = ev
        self._found: dict[str, dict[str, list[Entry]]] = {}

    def entries(self, value: str, setting: str) -> list[Entry]:
        """What the tables named for ``setting`` map ``value`` to."""
        if setting not in self._found:
            self._found[setting] = self._read(setting)
        return self._found[setting].get(value, [])

    def under(self, value: str, setting: str) -> tuple[Func, ...]:
        """What running the entry ``value`` of the tables named for ``setting`` runs: a
        class's own methods (an object of it is made and used), or the function."""
        out: list[Func] = []
        for entry in self.entries(value, setting):
            frame = Frame(entry.path)
            out += (object_methods(self.ev, entry.name, frame) if entry.cls is not None
                    else named_functions(self.ev, entry.name, frame))
        return tuple(dict.fromkeys(out))

    def _read(self, setting: str) -> dict[str, list[Entry]]:
        word = setting.upper()
        if not word.replace("_", "").isalnum():
            return {}
        pattern = re.compile(rf"^(\w*{re.escape(word)}\w*)\s*(?::[^=\n]*)?=\s*\{{", re.MULTILINE)
        files = [p for p in self.ev.index.paths() if p.endswith(".py")
                 and word in (text := self.ev.read(p) or "") and pattern.search(text)]
        table: dict[str, list[Entry]] = {}
        if len(files) > MAX_TABLES:
            return table
        for path in files:
            module = self.ev.module(path)
            if module is None:
                continue
            for key, name in self._pairs(path, module[0].body, word):
                cls = next(iter(classes_named(self.ev, name, Frame(path))), None)
                table.setdefault(key, []).append(Entry(path, name, cls))
        return table

    def _pairs(self, path: str, body: list[ast.stmt], word: str) -> list[tuple[str, ast.expr]]:
        """The (key, value) pairs of the module's tables named for ``word``, in order:
        their literals and their updates, entering the ``if`` blocks the target may take."""
        pairs: list[tuple[str, ast.expr]] = []
        for node in body:
            if isinstance(node, ast.If):
                if not self._never_on_nvidia(node.test, path):
                    pairs += self._pairs(path, node.body, word)
                pairs += self._pairs(path, node.orelse, word)
                continue
            table = _table_of(node, word)
            if table is not None:
                pairs += [(k.value, v) for k, v in zip(table.keys, table.values, strict=True)
                          if isinstance(k, ast.Constant) and isinstance(k.value, str)
                          and isinstance(v, ast.Name | ast.Attribute)]
        return pairs

    def _never_on_nvidia(self, test: ast.expr, path: str) -> bool:
        """Whether ``test`` is false on every NVIDIA GPU: by the evaluator, or a test of
        another platform by name (``is_npu()``, ``_is_hip``), alone or or-ed."""
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) \
            else [test]
        if all(other_platform(p) for p in parts):
            return True
        cap = self.ev.cap
        try:
            for family in NVIDIA_FAMILIES:
                self.ev.cap = family
                if truth_of(self.ev.eval(test, Frame(path))) != {False}:
                    return False
            return True
        finally:
            self.ev.cap = cap


def other_platform(test: ast.expr) -> bool:
    """``is_npu()``, ``_is_hip``: a test named for another platform."""
    node = test.func if isinstance(test, ast.Call) and not test.args else test
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    words = set(name.upper().split("_"))
    return "IS" in words and bool(_OTHER_PLATFORMS & words)


def _named_for(name: str, word: str) -> bool:
    upper = name.upper()
    return word in upper and not _OTHER_PLATFORMS & set(upper.split("_"))


def _table_of(node: ast.stmt, word: str) -> ast.Dict | None:
    """The dict literal ``node`` binds to (or updates) a name holding ``word``."""
    if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and _named_for(t.id, word) for t in targets):
            return node.value
    if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "update"
            and isinstance(node.value.func.value, ast.Name)
            and _named_for(node.value.func.value.id, word)
            and len(node.value.args) == 1 and isinstance(node.value.args[0], ast.Dict)):
        return node.value.args[0]
    return None
