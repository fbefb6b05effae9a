"""The features an upstream declares, read from its own code.

A feature is what a user turns on, named as they would name it:

* a server argument of a Python server whose settings are one dataclass: sglang's
  ``ServerArgs``, another server's class as its upstream's ``settings_class`` in
  ``contrib.toml`` names it.  A flag (a ``bool`` field) is one feature
  (``--enable-flashinfer-allreduce-fusion``); a setting with choices is one feature
  per choice (``--attention-backend=trtllm_mla``).  The choices are read from the
  field's annotation (``Literal[...]``, ``Arg(choices=...)``) or from the
  ``add_argument`` call that declares its flag, with module-level lists of strings
  followed by name.  The flag is the one ``add_argument`` declares, else the field's
  name with dashes, as ``dataclass``-driven parsers derive it.
* a public function of a library package (what its ``__init__`` exports:
  ``flashinfer.mm_bf16``); with one feature per value of its ``backend`` parameter
  where the parameter is a ``Literal`` (``flashinfer.mm_bf16:backend=cublaslt``).

Each feature keeps where it is declared.  What the feature runs, and the gates on
the way, are the chain's business (:mod:`contrib.audit.feature.chain`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from contrib.analysis.pyparse import PARSE_ERRORS
from contrib.analysis.tree import SourceTree
from contrib.audit.chains import Feature, FeatureKind
from contrib.audit.feature.envvars import variables
from contrib.audit.finding.gates import scope_of
from contrib.audit.model import RUNTIME
from contrib.audit.stack.lower import package_roots
from contrib.audit.stack.reading import Function

_BACKEND = "backend"
_MAX_CHOICES = 40  # more than this is a free-form value, not a list of features


def declared(tree: SourceTree, settings_class: str) -> list[Feature]:
    """Every feature the tree declares: its server arguments (the fields of its class
    ``settings_class``) and the environment variables it declares
    (:func:`~contrib.audit.feature.envvars.variables`), else its public API."""
    paths = [p for p in tree.paths() if p.endswith(".py")]
    flags = server_arguments(tree, paths, settings_class)
    return flags + variables(tree, paths) if flags else public_api(tree, paths)


def _parse(tree: SourceTree, path: str) -> ast.Module | None:
    text = tree.read_text(path)
    return None if text is None else _parse_text(text, path)


def _parse_text(text: str, path: str = "<unknown>") -> ast.Module | None:
    try:
        return ast.parse(text, filename=path)
    except PARSE_ERRORS:
        return None


# -- server arguments -----------------------------------------------------------------


def server_arguments(tree: SourceTree, paths: list[str], settings_class: str) -> list[Feature]:
    """The features of the tree's settings dataclass, named ``settings_class``
    (sglang's ``ServerArgs``)."""
    found = _settings_class(tree, paths, settings_class)
    if found is None:
        return []
    path, module, cls = found
    lists = _string_lists(module)
    cli = _cli_arguments(module, lists)
    features: list[Feature] = []
    for item in cls.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        attr = item.target.id
        if attr.startswith("_"):
            continue
        flag, choices = cli.get(attr, (None, []))
        flag = flag or "--" + attr.replace("_", "-")
        choices = choices or _annotated_choices(item.annotation, lists)
        default = constant_default(item.value)
        if choices:
            features += [Feature(FeatureKind.FLAG, f"{flag}={c}", attr, c, path, item.lineno,
                                 default=c == default) for c in choices]
        elif _is_bool(item):
            features.append(Feature(FeatureKind.FLAG, flag, attr, "", path, item.lineno,
                                    default=default is True))
    return features


UNNAMED = object()  # a default that is no constant (None is one: chosen at start)


def opt_in(tree: SourceTree, paths: list[str], settings_class: str) -> frozenset[str]:
    """The boolean settings of ``settings_class`` written to default to ``False``: off
    unless the user turns them on (one chosen at start, ``None``, is not among them)."""
    found = _settings_class(tree, paths, settings_class)
    if found is None:
        return frozenset()
    return frozenset(item.target.id for item in found[2].body
                     if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                     and _is_bool(item) and constant_default(item.value) is False)


def constant_default(node: ast.expr | None) -> object:
    """A default written as a constant, or as ``field(default=constant)``; else
    :data:`UNNAMED`."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Call):
        for keyword in node.keywords:
            if keyword.arg == "default":
                return constant_default(keyword.value)
    return UNNAMED


def _settings_class(tree: SourceTree, paths: list[str], name: str
                    ) -> tuple[str, ast.Module, ast.ClassDef] | None:
    """The module defining the settings dataclass, and the class: of the package's
    files declaring ``class <name>`` (``ServerArgs``: the name is sglang's, the shape any
    dataclass-driven server's), the one with the most fields (a router's or a test's
    smaller one is not the server's)."""
    found = _settings_classes(tree, paths, name)
    return found[0][1:] if found else None


def _settings_classes(tree: SourceTree, paths: list[str], name: str
                      ) -> list[tuple[int, str, ast.Module, ast.ClassDef]]:
    """Each ``class <name>`` of the package's files with its field count, path and
    module, the most fields first."""
    roots = tuple(prefix + root + "/" for root, prefix in package_roots(paths).items())
    found: list[tuple[int, str, ast.Module, ast.ClassDef]] = []
    for path in paths:
        if not path.startswith(roots):
            continue
        text = tree.read_text(path) or ""
        if f"class {name}" not in text:
            continue
        module = _parse(tree, path)
        for node in module.body if module else ():
            if module is not None and isinstance(node, ast.ClassDef) and (
                    node.name == name):
                found.append((sum(isinstance(i, ast.AnnAssign) for i in node.body), path,
                              module, node))
    return sorted(found, key=lambda f: (-f[0], f[1]))


def settings_elsewhere(tree: SourceTree, settings_class: str) -> dict[str, tuple[str, ...]]:
    """The settings that other programs of the package declare under the server's own
    names (in classes named ``settings_class`` too), by attribute: the folder of each
    such program.  sglang's
    ``multimodal_gen/`` has a ``ServerArgs`` of its own with an ``attention_backend``;
    a read of ``.attention_backend`` under ``python/sglang/multimodal_gen/`` is that
    program's, not the server's.  A program's folder is where its path leaves the
    server's (``python/sglang/`` + ``multimodal_gen/``); one declared beside the
    server's own module cannot be told apart and is left out."""
    paths = [p for p in tree.paths() if p.endswith(".py")]
    found = _settings_classes(tree, paths, settings_class)
    if len(found) < 2:
        return {}
    own = found[0][1].split("/")
    mine = {i.target.id for i in found[0][3].body
            if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)}
    out: dict[str, tuple[str, ...]] = {}
    for _, path, _, cls in found[1:]:
        parts = path.split("/")
        common = 0
        while common < min(len(own), len(parts)) - 1 and own[common] == parts[common]:
            common += 1
        if common >= len(parts) - 1:
            continue  # in the server's own folder, or above it
        folder = "/".join(parts[:common + 1]) + "/"
        for item in cls.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and (
                    item.target.id in mine):
                out[item.target.id] = tuple(dict.fromkeys((*out.get(item.target.id, ()),
                                                           folder)))
    return out


def _string_lists(module: ast.Module) -> dict[str, list[str]]:
    """Module-level names bound to a list, tuple or set of strings (or a dict's string
    keys), and aliases of them (``NSA_CHOICES = DSA_CHOICES``)."""
    lists: dict[str, list[str]] = {}
    for node in module.body:
        if not (isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        values = _strings(node.value, lists)
        if values is not None:
            lists.update((n, values) for n in names)
    return lists


def _strings(node: ast.expr, lists: dict[str, list[str]]) -> list[str] | None:
    if isinstance(node, ast.Name):
        return lists.get(node.id)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        elts = node.elts
    elif isinstance(node, ast.Dict):
        elts = [k for k in node.keys if k is not None]
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _strings(node.left, lists), _strings(node.right, lists)
        return None if left is None or right is None else left + right
    else:
        return None
    values = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if len(values) != len(elts) or not values:
        return None
    return list(dict.fromkeys(values))


def _cli_arguments(module: ast.Module, lists: dict[str, list[str]]
                   ) -> dict[str, tuple[str | None, list[str]]]:
    """Per attribute, the long flag and choices its ``add_argument`` call declares."""
    found: dict[str, tuple[str | None, list[str]]] = {}
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant)
                 and isinstance(a.value, str) and a.value.startswith("--")]
        if not flags:
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        dest = keywords.get("dest")
        attr = (dest.value if isinstance(dest, ast.Constant) and isinstance(dest.value, str)
                else flags[0][2:].replace("-", "_"))
        choices = _strings(keywords["choices"], lists) if "choices" in keywords else None
        if choices is None and _is_store_false(keywords):
            continue  # --disable-x storing False into x: the flag of another name
        found.setdefault(attr, (flags[0], _few(choices)))
    return found


def _is_store_false(keywords: dict[str, ast.expr]) -> bool:
    action = keywords.get("action")
    return isinstance(action, ast.Constant) and action.value == "store_false"


def _annotated_choices(annotation: ast.expr, lists: dict[str, list[str]]) -> list[str]:
    """Choices a field's annotation names: ``Literal["a", "b"]`` anywhere in it, or an
    ``Arg(choices=...)`` of an ``Annotated``-style alias."""
    for node in ast.walk(annotation):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id == "Literal"):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            values = [e.value for e in elts if isinstance(e, ast.Constant)
                      and isinstance(e.value, str)]
            if values:
                return _few(values)
        if isinstance(node, ast.Call):
            for k in node.keywords:
                if k.arg == "choices":
                    return _few(_strings(k.value, lists))
    return []


def _few(choices: list[str] | None) -> list[str]:
    return list(choices) if choices and len(choices) <= _MAX_CHOICES else []


def _is_bool(item: ast.AnnAssign) -> bool:
    """A field typed ``bool`` (alone or first in an ``Annotated``-style alias), or
    defaulting to True or False."""
    if isinstance(item.value, ast.Constant) and isinstance(item.value.value, bool):
        return True
    annotation = item.annotation
    if isinstance(annotation, ast.Subscript):
        first = annotation.slice.elts[0] if isinstance(annotation.slice, ast.Tuple) else (
            annotation.slice)
        annotation = first
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name) and (
            annotation.value.id == "Optional"):
        annotation = annotation.slice
    return isinstance(annotation, ast.Name) and annotation.id == "bool"


# -- public API -----------------------------------------------------------------------


def public_api(tree: SourceTree, paths: list[str]) -> list[Feature]:
    """The functions and classes a package's top-level ``__init__`` exports (and its
    subpackages' ``__init__``s, named as imported: ``flashinfer.comm.x``), then the
    public functions of its public modules that no ``__init__`` exports, named by their
    module (``flashinfer.prefill.fmha_v2_prefill_deepseek``); each with one feature per
    ``backend`` value (:func:`_backends`)."""
    roots = package_roots(paths)
    names = set(paths)
    features: dict[str, Feature] = {}
    sources: set[tuple[str, str]] = set()  # (file, name): one feature per function
    parsed: dict[str, ast.Module | None] = {}
    for root, prefix in sorted(roots.items()):
        for path in sorted(p for p in paths if p.startswith(f"{prefix}{root}/")
                           and p.endswith("/__init__.py") and p.count("/") - prefix.count("/") <= 2):
            package = path[len(prefix):-len("/__init__.py")].replace("/", ".")
            for node in _imports(_parse(tree, path)):
                if node.level != 1 or not node.module:
                    continue
                for alias in node.names:
                    public = alias.asname or alias.name
                    if public.startswith("_") or alias.name == "*":
                        continue
                    source, defined = _origin(tree, parsed, names, path, node.module,
                                              alias.name)
                    dotted = f"{package}.{public}"
                    origin = (source or dotted, defined)
                    if dotted in features or origin in sources:
                        continue
                    sources.add(origin)
                    _add(features, dotted, path, node.lineno,
                         _backends(parsed.get(source or ""), defined))
    for path, dotted in _public_modules(paths, roots):
        for name, line, function in _public_functions(tree.read_text(path) or ""):
            if (path, name) not in sources:
                sources.add((path, name))
                _add(features, f"{dotted}.{name}", path, line, _backends(function, name),
                     listed=False)
    return list(features.values())


def _add(features: dict[str, Feature], dotted: str, path: str, line: int,
         backends: list[str], *, listed: bool = True) -> None:
    """``dotted``'s feature, and one per ``backend`` value."""
    features[dotted] = Feature(FeatureKind.API, dotted, dotted, "", path, line, listed)
    for value in backends:
        name = f"{dotted}:{_BACKEND}={value}"
        features[name] = Feature(FeatureKind.API, name, dotted, value, path, line, listed)


def _imports(module: ast.Module | None) -> Iterator[ast.ImportFrom]:
    """The ``from ... import`` statements of a module's top level, those in the body of a
    ``try`` that an ``except ImportError`` answers, in a ``with contextlib.suppress(...)``
    block and in an ``if`` (not ``TYPE_CHECKING``'s) included: flashinfer's optional
    exports (``with contextlib.suppress(ImportError): from .fused_moe import
    b12x_fused_moe``; ``if is_cute_dsl_available(): from .b12x_moe import ...``)."""
    stack = list(reversed(module.body)) if module else []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ImportFrom):
            yield node
        elif (isinstance(node, ast.Try) and any(_catches_import(h) for h in node.handlers)) or (
                isinstance(node, ast.With) and any(_suppresses(i.context_expr)
                                                   for i in node.items)):
            stack += reversed(node.body)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            stack += reversed([*node.body, *node.orelse])


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


def _catches_import(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    kinds = caught.elts if isinstance(caught, ast.Tuple) else [caught] if caught else []
    return any(isinstance(k, ast.Name) and k.id in _IMPORT_ERRORS for k in kinds)


def _suppresses(context: ast.expr) -> bool:
    """``contextlib.suppress(...)`` or ``suppress(...)``."""
    return isinstance(context, ast.Call) and (
        (isinstance(context.func, ast.Attribute) and context.func.attr == "suppress")
        or (isinstance(context.func, ast.Name) and context.func.id == "suppress"))


def _public_modules(paths: list[str], roots: dict[str, str]) -> Iterator[tuple[str, str]]:
    """The package's public runtime modules (no part of the path led by an underscore;
    no ``__init__``), each with its dotted name."""
    for root, prefix in sorted(roots.items()):
        for path in sorted(p for p in paths if p.startswith(f"{prefix}{root}/")):
            inner = path[len(prefix):]
            if (path.endswith("/__init__.py") or any(part.startswith("_")
                                                     for part in inner.split("/"))
                    or scope_of(path, "", "") != RUNTIME):
                continue
            yield path, inner[:-len(".py")].replace("/", ".")


_TOP_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
_TOP_STATEMENT = re.compile(r"^[^\s#)\]}]", re.MULTILINE)  # a line starting one
_ALL = re.compile(r"^__all__\b", re.MULTILINE)


def _public_functions(text: str) -> list[tuple[str, int, ast.Module | None]]:
    """The functions a module defines at its top level for its users (those its
    ``__all__`` lists where it has one, else those named without a leading
    underscore), each once (the first of a set of ``@overload``s), with its line and,
    where its text names a ``backend``, its definition parsed.  Read by line, not
    parsed whole: a library has hundreds of modules of kernels."""
    listed = _listed(text)
    found: dict[str, tuple[str, int, ast.Module | None]] = {}
    for match in _TOP_DEF.finditer(text):
        name = match.group(1)
        if name in found or not (name in listed if listed is not None
                                 else not name.startswith("_")):
            continue
        end = _TOP_STATEMENT.search(text, match.end())
        source = text[match.start():end.start() if end else len(text)]
        found[name] = (name, text.count("\n", 0, match.start()) + 1,
                       _parse_text(source) if _BACKEND in source else None)
    return list(found.values())


def _listed(text: str) -> set[str] | None:
    """The names a module's ``__all__`` lists (a literal list or tuple), or None."""
    match = _ALL.search(text)
    if match is None:
        return None
    end = _TOP_STATEMENT.search(text, match.end())
    statement = _parse_text(text[match.start():end.start() if end else len(text)])
    value = statement.body[0] if statement and statement.body else None
    listed = _strings(value.value, {}) if isinstance(value, ast.Assign | ast.AnnAssign) \
        and value.value is not None else None
    return set(listed) if listed is not None else None


def _origin(tree: SourceTree, parsed: dict[str, ast.Module | None], names: set[str],
            path: str, module: str, name: str) -> tuple[str | None, str]:
    """The module that defines what ``from .module import name`` in ``path`` imports,
    re-exports through ``__init__``s followed, and its name there."""
    source = _module_path(path, module, names)
    for _ in range(6):
        if source is None:
            return None, name
        if source not in parsed:
            parsed[source] = _parse(tree, source)
        imported = next((n for n in _imports(parsed[source]) if n.level == 1 and n.module
                         and any((a.asname or a.name) == name for a in n.names)), None)
        if imported is None or imported.module is None:
            return source, name
        name = next(a.name for a in imported.names if (a.asname or a.name) == name)
        source = _module_path(source, imported.module, names)
    return source, name


def _module_path(init: str, module: str, names: set[str]) -> str | None:
    folder = init.rsplit("/", 1)[0]
    stem = f"{folder}/{module.replace('.', '/')}"
    return next((p for p in (f"{stem}.py", f"{stem}/__init__.py") if p in names), None)


def _backends(module: ast.Module | None, name: str) -> list[str]:
    """The ``backend`` values of function or class ``name`` of ``module`` (a class's:
    its ``__init__``'s): a ``Literal`` of its ``backend`` parameter, else the strings
    the function (or the class's methods) compares the parameter with, and the
    attributes ``__init__`` keeps it in (``self._backend = backend``, then ``if
    self._backend == "cutlass":``), as the registry reading finds what a call passing
    one chooses (:func:`~contrib.analysis.reach.backends.parameter_key`)."""
    for node in module.body if module else ():
        scope: list[Function]
        init: Function | None
        if isinstance(node, Function) and node.name == name:
            scope, init = [node], node
        elif isinstance(node, ast.ClassDef) and node.name == name:
            scope = [f for f in node.body if isinstance(f, Function)]
            init = next((f for f in scope if f.name == "__init__"), None)
        else:
            continue
        arg = next((a for a in [*init.args.args, *init.args.kwonlyargs]
                    if a.arg == _BACKEND), None) if init is not None else None
        if arg is None or init is None:
            continue
        typed = _annotated_choices(arg.annotation, {}) if arg.annotation else []
        return typed or _few(_tested(scope, init))
    return []


def _tested(scope: list[Function], init: Function) -> list[str]:
    """The strings ``scope`` compares ``init``'s ``backend`` parameter with, or the
    attributes ``init`` keeps it in."""
    operands = {_BACKEND} | {ast.unparse(t) for node in ast.walk(init)
                             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
                             and node.value.id == _BACKEND for t in node.targets
                             if isinstance(t, ast.Attribute)}
    found: list[str] = []
    for node in (n for f in scope for n in ast.walk(f)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
                node.ops[0], ast.Eq | ast.NotEq | ast.In | ast.NotIn):
            sides = (node.left, node.comparators[0])
            for side, other in (sides, sides[::-1]):
                if ast.unparse(other) in operands:
                    found += _strings(side, {}) or (
                        [side.value] if isinstance(side, ast.Constant)
                        and isinstance(side.value, str) else [])
    return list(dict.fromkeys(found))
