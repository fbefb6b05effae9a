"""The defaults of an upstream, as `contrib why` names its features: what a user gets
without asking for anything.

* a server's settings (sglang's ``ServerArgs``): each field's default, as the feature of
  that choice (``--kv-cache-dtype=auto``), or the flag itself for a ``bool`` field that
  defaults to True; a default of no named choice (``None``: chosen at start) is counted
  apart, it names no feature;
* a library's API (flashinfer's): each function's ``backend`` parameter's default, as
  the feature of that value (``flashinfer.mm_fp4:backend=auto``).

Read from the upstream's own source at the commit (``ast``; nothing is imported).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

from contrib.analysis.pyparse import PARSE_ERRORS
from contrib.analysis.tree import GitTree
from contrib.audit.chains import Feature, FeatureKind
from contrib.audit.feature.declared import UNNAMED, constant_default, declared
from contrib.git.repo import Git

BACKEND = "backend"


@dataclass
class Defaults:
    """The features that are an upstream's defaults at a commit, and the settings or
    functions whose default names none (``None``, a computed value)."""

    features: list[str] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)


def defaults(git: Git, rev: str, settings_class: str) -> Defaults:
    """The default features of the upstream in ``git`` at ``rev``."""
    tree = GitTree(git, git.run("rev-parse", f"{rev}^{{commit}}").strip())
    features = declared(tree, settings_class)
    if features and features[0].kind == FeatureKind.FLAG:
        return _settings_defaults(tree, features, settings_class)
    return _backend_defaults(tree, features)


def _parse(tree: GitTree, path: str) -> ast.Module | None:
    text = tree.read_text(path)
    try:
        return ast.parse(text) if text is not None else None
    except PARSE_ERRORS:
        return None


def _settings_defaults(tree: GitTree, features: Sequence[Feature], name: str) -> Defaults:
    module = _parse(tree, features[0].file)
    cls = next((n for n in (module.body if module else ())
                if isinstance(n, ast.ClassDef) and n.name == name), None)
    fields = {item.target.id: constant_default(item.value) for item in (cls.body if cls else ())
              if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
    found = Defaults()
    by_attr: dict[str, list[Feature]] = {}
    for feature in features:
        by_attr.setdefault(feature.attr, []).append(feature)
    for attr, choices in by_attr.items():
        default = fields.get(attr, UNNAMED)
        named = [f.name for f in choices if (f.value and f.value == default)
                 or (not f.value and default is True)]
        found.features += named
        if not named and (choices[0].value or default is UNNAMED):
            found.unnamed.append(choices[0].name.split("=")[0])
    return found


def _backend_defaults(tree: GitTree, features: Sequence[Feature]) -> Defaults:
    found = Defaults()
    texts = {p: tree.read_text(p) or "" for p in tree.paths() if p.endswith(".py")}
    for dotted in dict.fromkeys(f.attr for f in features if f.value):
        values = {f.value: f.name for f in features if f.attr == dotted and f.value}
        default = _backend_default(tree, texts, dotted.rsplit(".", 1)[1])
        if isinstance(default, str) and default in values:
            found.features.append(values[default])
        else:
            found.unnamed.append(dotted)
    return found


def _backend_default(tree: GitTree, texts: dict[str, str], name: str) -> object:
    """The default of the ``backend`` parameter of the module-level function ``name``
    whose ``backend`` is annotated (a ``Literal``), in the first file defining one."""
    needle = f"def {name}("
    for path, text in texts.items():
        if needle not in text:
            continue
        module = _parse(tree, path)
        for node in module.body if module else ():
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                default = _parameter_default(node.args, BACKEND)
                if default is not UNNAMED:
                    return default
    return UNNAMED


def _parameter_default(args: ast.arguments, name: str) -> object:
    positional = [*args.posonlyargs, *args.args]
    offset = len(positional) - len(args.defaults)
    for n, arg in enumerate(positional):
        if arg.arg == name and arg.annotation is not None and n >= offset:
            return constant_default(args.defaults[n - offset])
    for arg, value in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if arg.arg == name and arg.annotation is not None:
            return constant_default(value)
    return UNNAMED
