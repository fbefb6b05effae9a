"""The environment variables a server declares as features, read from its own code.

sglang declares its variables as the fields of one class
(``python/sglang/srt/environ.py``: ``SGLANG_ENABLE_JIT_DEEPGEMM = EnvBool(True)``),
each an object of a descriptor class that learns the field's name
(``__set_name__``) and reads the variable of that name when asked
(``envs.SGLANG_X.get()``).  A field whose class parses a ``bool`` is one feature,
``SGLANG_X=1``; a field parsing a ``str`` is one feature per string the code compares
its read with (``SGLANG_SM120_FLASHMLA_BACKEND=triton``), read where it is compared or
bound to a name first (``mode = envs.X.get().lower()``); numbers and paths are
tuning, not features.  Where each is read, and what that runs, is the walk's
(:func:`~contrib.audit.stack.reading.env_read`).
"""

from __future__ import annotations

import ast
import re

from contrib.analysis.pyparse import PARSE_ERRORS
from contrib.analysis.tree import SourceTree
from contrib.audit.chains import Feature, FeatureKind
from contrib.audit.finding.gates import scope_of
from contrib.audit.model import RUNTIME
from contrib.audit.stack.lower import package_roots
from contrib.audit.stack.reading import is_variable

_MAX_VALUES = 40  # more strings than this compared with one variable: free-form text
_DESCRIPTOR = re.compile(r"def __set_name__\(")
_METHODS = frozenset({"lower", "upper", "strip"})  # a read's value, normalised


def variables(tree: SourceTree, paths: list[str]) -> list[Feature]:
    """The environment features of the tree's packages: its declared ``bool`` variables,
    and its ``str`` ones per value compared (:func:`_values`)."""
    texts = _runtime_texts(tree, paths)
    features: list[Feature] = []
    strings: list[tuple[str, str, int]] = []
    for path, text in texts.items():
        if not _DESCRIPTOR.search(text):
            continue
        module = _parse(text, path)
        for name, parsed, line in _fields(module) if module else ():
            if parsed == "bool":
                features.append(Feature(FeatureKind.ENV, f"{name}=1", name, "", path, line))
            elif parsed == "str":
                strings.append((name, path, line))
    values = _values(texts, {name for name, _, _ in strings})
    for name, path, line in strings:
        features += [Feature(FeatureKind.ENV, f"{name}={v}", name, v, path, line)
                     for v in values.get(name, [])[:_MAX_VALUES]]
    return features


def _runtime_texts(tree: SourceTree, paths: list[str]) -> dict[str, str]:
    roots = tuple(prefix + root + "/" for root, prefix in package_roots(paths).items())
    return {p: tree.read_text(p) or "" for p in paths
            if p.startswith(roots) and scope_of(p, "", "") == RUNTIME}


def _parse(text: str, path: str) -> ast.Module | None:
    try:
        return ast.parse(text, filename=path)
    except PARSE_ERRORS:
        return None


def _fields(module: ast.Module) -> list[tuple[str, str, int]]:
    """Each variable a class of ``module`` declares (``NAME = EnvBool(False)``, of a class
    defining ``__set_name__`` or deriving from one here), with what its class's
    ``parse`` returns (``bool``, ``str``, ... by its annotation) and its line."""
    classes = {c.name: c for c in module.body if isinstance(c, ast.ClassDef)}
    found: list[tuple[str, str, int]] = []
    for cls in classes.values():
        for item in cls.body:
            if not (isinstance(item, ast.Assign) and len(item.targets) == 1
                    and isinstance(item.targets[0], ast.Name) and is_variable(item.targets[0].id)
                    and isinstance(item.value, ast.Call) and isinstance(item.value.func, ast.Name)):
                continue
            lineage = _lineage(classes, item.value.func.id)
            if any(_method(c, "__set_name__") for c in lineage):
                parse = next((m for c in lineage if (m := _method(c, "parse"))), None)
                returns = parse.returns if parse is not None else None
                found.append((item.targets[0].id, ast.unparse(returns) if returns else "",
                              item.lineno))
    return found


def _lineage(classes: dict[str, ast.ClassDef], name: str) -> list[ast.ClassDef]:
    """Class ``name`` and its bases defined beside it, in method resolution order
    (depth first, as far as it matters here)."""
    out: list[ast.ClassDef] = []
    todo = [name]
    while todo and len(out) < 20:
        cls = classes.get(todo.pop(0))
        if cls is not None and cls not in out:
            out.append(cls)
            todo = [b.id for b in cls.bases if isinstance(b, ast.Name)] + todo
    return out


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == name), None)


def _values(texts: dict[str, str], names: set[str]) -> dict[str, list[str]]:
    """Per variable of ``names``, the strings the code compares a read of it with
    (``envs.X.get() == "a"``, ``in ("a", "b")``), directly or through a name the read is
    bound to in the same file (``mode = envs.X.get().lower()``, then ``mode == "a"``)."""
    if not names:
        return {}
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\.get\(\)")
    found: dict[str, list[str]] = {}
    for path, text in texts.items():
        named = set(pattern.findall(text))
        module = _parse(text, path) if named else None
        if module is None:
            continue
        operands: dict[str, str] = {}  # the text of a read or of a name bound to one
        for node in ast.walk(module):
            read = _read_of(node, named)
            if read is not None:
                operands[ast.unparse(node)] = read
            if isinstance(node, ast.Assign) and (read := _read_of(node.value, named)):
                operands.update((ast.unparse(t), read) for t in node.targets
                                if isinstance(t, ast.Name))
        for node in ast.walk(module):
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
                    node.ops[0], ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                sides = (node.left, node.comparators[0])
                for side, other in (sides, sides[::-1]):
                    variable = operands.get(ast.unparse(other))
                    if variable is not None:
                        found.setdefault(variable, []).extend(_literals(side))
    return {k: list(dict.fromkeys(v)) for k, v in found.items()}


def _read_of(node: ast.AST, names: set[str]) -> str | None:
    """The variable ``node`` reads (``envs.X.get()``, ``.lower()`` of it), or None."""
    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
           and node.func.attr in _METHODS and not node.args):
        node = node.func.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and not node.args
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr in names):
        return node.func.value.attr
    return None


def _literals(node: ast.expr) -> list[str]:
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant)
            and isinstance(i.value, str) and i.value]
