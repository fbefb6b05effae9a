"""Targeted upstream tests: pick the few test files that exercise the change, run them.

Selection reads the patch (unidiff): the changed Python modules, the changed
functions (hunk section headers and the ``def`` around each changed line), the
modules that import a changed module, and then the test files that import any
of those or call a changed function.  Never the whole suite.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

from contrib.analysis.diffs import FileChange
from contrib.analysis.pyparse import parse_python
from contrib.analysis.tree import SourceTree

_TEST_FILE = re.compile(r"(?:^|/)(?:tests?|testing)/(?:.*/)?(?:test_[^/]*|[^/]*_test)\.py$")
_SECTION_NAME = re.compile(r"\b(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
_C_FUNCTION = re.compile(r"([A-Za-z_]\w*)\s*\(")


def changed_functions(change: FileChange, after_text: str | None) -> set[str]:
    """Functions the change touches.

    For Python we read the ``def``/``class`` around each touched line (exact);
    otherwise the hunk section headers, which name the function *above* a
    hunk's first line, close enough for C and for files that do not parse.
    """
    names = set()
    module = None
    if after_text is not None and change.path.endswith(".py"):
        parsed = parse_python(change.path, after_text)
        module = parsed if isinstance(parsed, ast.Module) else None
    if module is not None:
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                span = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                if span & change.touched:
                    names.add(node.name)
    else:
        for header in change.sections:
            match = _SECTION_NAME.search(header) or _C_FUNCTION.search(header)
            if match:
                names.add(match.group(1))
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def module_name(tree: SourceTree, path: str) -> tuple[str, str] | None:
    """(dotted module, folder that must be on sys.path) for a .py file, or None.

    ``python/sglang/srt/x.py`` -> ("sglang.srt.x", "python"): we walk up while
    each folder is a package (has ``__init__.py``).
    """
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    start = len(parts) - 1
    while start > 0 and tree.exists("/".join(parts[:start]) + "/__init__.py"):
        start -= 1
    # Namespace packages (sglang's srt/ and layers/ have no __init__.py, but
    # python/sglang/ has): the package root is the HIGHEST folder with one.
    for top in range(start):
        if tree.exists("/".join(parts[: top + 1]) + "/__init__.py"):
            if all(part.isidentifier() for part in parts[top:]):
                start = top
            break
    names = parts[start:]
    if names[-1] == "__init__":
        names = names[:-1]
    return (".".join(names), "/".join(parts[:start])) if names else None


_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)"
    r"|import[ \t]+([^\n#;]*))",
    re.M,
)


def imported_modules(text: str, own_module: str = "") -> set[str]:
    """Every module a Python file imports (``from a import b`` yields a, and a.b).

    A line scan, not ``ast``: selection reads thousands of files (sglang), and
    parsing them all costs tens of seconds.  An ``import`` inside a string
    only adds a candidate, which the ranking then weighs.
    """
    found: set[str] = set()
    package = own_module.rsplit(".", 1)[0] if own_module else ""
    for match in _IMPORT.finditer(text):
        dots, module, names, plain = match.groups()
        if plain is not None:
            found.update(_names(plain))
            continue
        base = module
        if dots:
            anchor = package.split(".")[: max(len(package.split(".")) - len(dots) + 1, 0)]
            base = ".".join([*anchor, module] if module else anchor)
        if base:
            found.add(base)
            found.update(f"{base}.{name}" for name in _names(names))
    return found


def _names(clause: str) -> list[str]:
    """``a as b, c.d`` or ``(a,\n b)`` -> ["a", "c.d"]."""
    out = []
    for part in clause.strip().strip("()\\").replace("\n", " ").split(","):
        words = part.split()
        if words and re.fullmatch(r"[\w.]+", words[0]):
            out.append(words[0])
    return out


@dataclass
class Selection:
    """The tests chosen and why."""

    tests: list[str]
    reasons: dict[str, str]
    modules: list[str]
    functions: list[str]
    import_roots: list[str]  # folders to put on sys.path (e.g. "python" for sglang)
    truncated: int = 0  # how many more matched beyond the limit

    @property
    def packages(self) -> list[str]:
        """Top-level packages of the changed modules (what the interpreter must import)."""
        return sorted({m.split(".")[0] for m in self.modules})


def select_tests(
    tree: SourceTree, changes: Iterable[FileChange], extra: Iterable[str] = (), limit: int = 20
) -> Selection:
    """Pick test files that exercise ``changes`` (plus ``extra`` from patchset.toml).

    Ranked: listed in patchset.toml, changed by the patch, calls a changed
    function, calls a function of an importing module that calls one
    (``trtllm_custom_all_reduce`` -> ``get_trtllm_comm_module`` ->
    ``gen_trtllm_comm_module``), imports the changed module, imports it
    through another module or package; the first ``limit`` are kept.
    """
    changes = list(changes)
    modules: dict[str, str] = {}
    functions: set[str] = set()
    direct_tests: list[str] = []
    for change in changes:
        if _TEST_FILE.search(change.path) and not change.deleted:
            direct_tests.append(change.path)
            continue
        named = module_name(tree, change.path)
        if named:
            modules[named[0]] = named[1]
        if change.path.endswith(".py"):
            functions |= changed_functions(change, tree.read_text(change.path))
    python_files = [p for p in tree.paths() if p.endswith(".py")]
    tests = [p for p in python_files if _TEST_FILE.search(p)]
    reach = _Reach(tree, [p for p in python_files if p not in tests], list(modules), functions)
    scored: dict[str, tuple[float, str]] = {t: (4, "changed by the patch") for t in direct_tests}
    for test in tests:
        if test not in scored and (score := reach.score(tree.read_text(test) or "")):
            scored[test] = score
    for test in extra:
        scored[test] = (5, "listed in patchset.toml")
    ranked = everything = sorted(scored, key=lambda t: (-scored[t][0], t))
    if any(scored[t][0] >= 2.5 for t in ranked):
        # Tests that call the changed code exist: drop the ones that merely import it.
        ranked = [t for t in ranked if scored[t][0] >= 2]
    chosen = ranked[:limit]
    return Selection(chosen, {t: scored[t][1] for t in chosen}, sorted(modules), sorted(functions),
                     sorted({r for r in modules.values()}), len(everything) - len(chosen))


def _calls_into(text: str, names: set[str]) -> dict[str, str]:
    """Functions in ``text`` that (transitively, by name, within the file) use ``names``."""
    module = parse_python("", text)
    if not isinstance(module, ast.Module):
        return {}
    refs: dict[str, set[str]] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            used |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            refs.setdefault(node.name, set()).update(used - {node.name})
    affected: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name, used in refs.items():
            hit = next(iter(sorted(used & (names | set(affected)))), None)
            if name not in affected and name not in names and hit:
                affected[name] = hit
                changed = True
    return affected


_GENERIC = {"main", "run", "call", "get", "build", "load", "init", "setup", "forward", "wrapper",
            "inner", "helper", "apply", "test"}


class _Reach:
    """Which modules reach the changed code, and through which functions."""

    def __init__(
        self, tree: SourceTree, files: list[str], modules: list[str], functions: set[str]
    ) -> None:
        self.modules, self.functions = modules, functions
        self.importers: dict[str, str] = {}  # importer module -> what it imports (chain text)
        # function in an importer -> (its module, "f -> g -> changed_function")
        self.calls: dict[str, tuple[str, str]] = {}
        if not modules:
            return
        leaves = {m.rsplit(".", 1)[-1] for m in modules}
        texts = {}
        for path in files:
            text = tree.read_text(path) or ""
            named = module_name(tree, path)
            if named and named[0] not in modules and any(leaf in text for leaf in leaves):
                texts[named[0]] = (path, text)  # cheap filter before parsing
        self._first_level(texts)
        self._packages(tree, files)

    def _first_level(self, texts: dict[str, tuple[str, str]]) -> None:
        for module, (_, text) in texts.items():
            hit = _imports_any(imported_modules(text, module), self.modules)
            if not hit:
                continue
            through = _calls_into(text, self.functions) if self.functions else {}
            if self.functions and not (through or any(f in text for f in self.functions)):
                continue  # imports the module but not the changed functions
            self.importers[module] = hit
            for name, reached in through.items():
                if name in _GENERIC:
                    continue  # `main`, `run`... would match half the test suite
                chain = self.calls.get(reached, (module, reached))[1]
                self.calls.setdefault(name, (module, f"{name} -> {chain}"))

    def _packages(self, tree: SourceTree, files: list[str]) -> None:
        """Packages whose __init__ re-exports an importer (``import flashinfer.comm``)."""
        inits = [p for p in files if p.endswith("__init__.py")]
        for _ in range(3):
            grew = False
            for path in inits:
                named = module_name(tree, path)
                if named is None or named[0] in self.importers or named[0] in self.modules:
                    continue
                hit = _imports_any(imported_modules(tree.read_text(path) or "", named[0] + ".__init__"),
                                   list(self.importers))
                if hit:
                    self.importers[named[0]] = f"{hit}, which imports {self.importers[hit]}"
                    grew = True
            if not grew:
                break

    def _exposes(self, imported: set[str], module: str) -> bool:
        """Whether the test imports ``module`` or a package whose import chain reaches it."""
        if _imports_any(imported, [module]):
            return True
        packages = [
            p
            for p, chain in self.importers.items()
            if module.startswith(p + ".") and module in chain
        ]
        return _imports_any(imported, packages) is not None

    def score(self, text: str) -> tuple[float, str] | None:
        imported = imported_modules(text)
        direct = _imports_any(imported, self.modules)
        via = _imports_any(imported, self.importers)
        reachable = direct or via or _imports_any(imported, {m.split(".")[0] for m in self.modules})
        if not reachable:
            return None
        # `f in text` first: a substring test is far cheaper than a regex over every test file
        called = sorted(f for f in self.functions if f in text and re.search(rf"\b{re.escape(f)}\b", text))
        if called:
            return (3, f"calls {', '.join(called)}")
        through = sorted(
            c for c, (module, _) in self.calls.items()
            if c in text and re.search(rf"\b{re.escape(c)}\b", text) and self._exposes(imported, module)
        )
        if through:
            return (2.5, "calls " + "; ".join(self.calls[c][1] for c in through[:3]))
        if direct:
            return (2, f"imports {direct}")
        if via:
            return (1, f"imports {via}, which imports {self.importers[via]}")
        return None


def _imports_any(imported: set[str], modules: Iterable[str]) -> str | None:
    for module in sorted(modules):
        if any(name == module or name.startswith(module + ".") for name in imported):
            return module
    return None
