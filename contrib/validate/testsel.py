"""Targeted upstream tests: pick the few test files that exercise the change, run them.

Selection reads the patch (unidiff): the changed Python modules, the changed
functions (hunk section headers and the ``def`` around each changed line), the
modules that import a changed module, and then the test files that import any
of those or call a changed function.  Never the whole suite.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from unidiff.patch import PatchSet

from contrib.arch import Arch
from contrib.errors import PatchError
from contrib.validate.tree import SourceTree

_TEST_FILE = re.compile(r"(?:^|/)(?:tests?|testing)/(?:.*/)?(?:test_[^/]*|[^/]*_test)\.py$")
_SECTION_NAME = re.compile(r"\b(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
_C_FUNCTION = re.compile(r"([A-Za-z_]\w*)\s*\(")


@dataclass
class FileChange:
    """What a patch does to one file (after-side path; line numbers per side)."""

    path: str
    old_path: str | None
    added: set[int] = field(default_factory=set)  # after-side lines added
    removed: set[int] = field(default_factory=set)  # before-side lines removed
    touched: set[int] = field(default_factory=set)  # after-side lines at or next to a change
    sections: list[str] = field(default_factory=list)
    deleted: bool = False


def _strip_prefix(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_diff(text: str) -> list[FileChange]:
    """Parse a unified diff (``git diff`` or format-patch output) into FileChanges."""
    try:
        patch = PatchSet(text)
    except Exception as exc:  # unidiff raises its own UnidiffParseError and friends
        raise PatchError(f"cannot parse the patch's diff: {exc}") from exc
    changes = []
    for pf in patch:
        after = _strip_prefix(pf.target_file)
        before = _strip_prefix(pf.source_file)
        change = FileChange(after or before or pf.path, before, deleted=pf.is_removed_file)
        for hunk in pf:
            if hunk.section_header:
                change.sections.append(hunk.section_header.strip())
            _hunk_lines(hunk, change)
        changes.append(change)
    return changes


def _hunk_lines(hunk: object, change: FileChange) -> None:
    pending_removal = False
    for line in hunk:  # type: ignore[attr-defined]
        if line.is_added:
            change.added.add(line.target_line_no)
            change.touched.add(line.target_line_no)
            pending_removal = False  # a replacement touches only its new lines
        elif line.is_removed:
            change.removed.add(line.source_line_no)
            pending_removal = True
        elif line.is_context and pending_removal:
            # A pure deletion touches the lines around it in the new file.
            change.touched.update({line.target_line_no - 1, line.target_line_no})
            pending_removal = False
    if pending_removal:
        change.touched.add(hunk.target_start + max(hunk.target_length - 1, 0))  # type: ignore[attr-defined]


def changed_functions(change: FileChange, after_text: str | None) -> set[str]:
    """Functions the change touches.

    For Python we read the ``def``/``class`` around each touched line (exact);
    otherwise the hunk section headers, which name the function *above* a
    hunk's first line, close enough for C and for files that do not parse.
    """
    names = set()
    module = None
    if after_text is not None and change.path.endswith(".py"):
        try:
            module = ast.parse(after_text)
        except SyntaxError:
            module = None
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
    names = parts[start:]
    if names[-1] == "__init__":
        names = names[:-1]
    return (".".join(names), "/".join(parts[:start])) if names else None


def imported_modules(text: str, own_module: str = "") -> set[str]:
    """Every module a Python file imports (``from a import b`` yields a, and a.b)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    found: set[str] = set()
    package = own_module.rsplit(".", 1)[0] if own_module else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: max(len(package.split(".")) - node.level + 1, 0)]
                base = ".".join([*anchor, base] if base else anchor)
            if base:
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _imports_any(imported: set[str], modules: Iterable[str]) -> str | None:
    for module in modules:
        if any(name == module or name.startswith(module + ".") for name in imported):
            return module
    return None


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
    """Pick test files that exercise ``changes`` (plus ``extra`` from patchset.toml)."""
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
    importers = _importers(tree, [p for p in python_files if p not in tests], list(modules))
    scored: dict[str, tuple[int, str]] = {t: (4, "changed by the patch") for t in direct_tests}
    for test in tests:
        if test in scored:
            continue
        score = _score(tree.read_text(test) or "", modules, importers, functions)
        if score:
            scored[test] = score
    for test in extra:
        scored[test] = (5, "listed in patchset.toml")
    ranked = sorted(scored, key=lambda t: (-scored[t][0], t))
    chosen = ranked[:limit]
    return Selection(chosen, {t: scored[t][1] for t in chosen}, sorted(modules), sorted(functions),
                     sorted({r for r in modules.values()}), max(len(ranked) - limit, 0))  # fmt: skip


def _importers(tree: SourceTree, files: list[str], modules: list[str]) -> dict[str, str]:
    """Modules (not tests) that import one of ``modules``: {importer: imported}."""
    found: dict[str, str] = {}
    if not modules:
        return found
    leaves = {m.rsplit(".", 1)[-1] for m in modules}
    for path in files:
        text = tree.read_text(path) or ""
        if not any(leaf in text for leaf in leaves):
            continue  # cheap filter before parsing
        named = module_name(tree, path)
        if named is None or named[0] in modules:
            continue
        hit = _imports_any(imported_modules(text, named[0]), modules)
        if hit:
            found[named[0]] = hit
    return found


def _score(
    text: str, modules: dict[str, str], importers: dict[str, str], functions: set[str]
) -> tuple[int, str] | None:
    imported = imported_modules(text)
    direct = _imports_any(imported, modules)
    called = sorted(f for f in functions if re.search(rf"\b{re.escape(f)}\b", text))
    packages = {m.split(".")[0] for m in modules}
    if called and (direct or _imports_any(imported, packages)):
        return (3, f"calls {', '.join(called)}")
    if direct:
        return (2, f"imports {direct}")
    via = _imports_any(imported, importers)
    if via:
        return (1, f"imports {via}, which imports {importers[via]}")
    return None


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reports it."""

    name: str
    capability: str  # "12.0"


def probe_gpus() -> list[Gpu] | None:
    """GPUs from ``nvidia-smi --query-gpu=name,compute_cap``; None without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return []
    gpus = []
    for row in done.stdout.splitlines():
        name, _, cap = row.rpartition(",")
        if name.strip():
            gpus.append(Gpu(name.strip(), cap.strip()))
    return gpus


@dataclass
class TestRun:
    """What happened when we ran (or could not run) the selected tests."""

    status: str  # passed / failed / skipped
    reason: str
    counts: dict[str, int] = field(default_factory=dict)
    cases: list[dict[str, str]] = field(default_factory=list)
    command: list[str] = field(default_factory=list)


def gpu_problem(arch: Arch, gpus: list[Gpu] | None) -> str | None:
    """Why the tests cannot run on this host's GPUs for ``arch``, or None if they can."""
    if gpus is None:
        return f"no GPU here (nvidia-smi not found); the tests need a {arch.capability} GPU ({arch.name})"
    if not any(g.capability == arch.capability for g in gpus):
        seen = ", ".join(f"{g.name} {g.capability}" for g in gpus) or "none"
        return f"no GPU of compute capability {arch.capability} ({arch.name}) here (found: {seen})"
    return None


def run_tests(
    python: str, worktree: Path, selection: Selection, junit: Path, arch: Arch, *,
    need_gpu: bool = True, gpus: list[Gpu] | None | str = "probe", timeout: float = 1800,
) -> TestRun:  # fmt: skip
    """Run the selected tests with ``python -m pytest --junitxml`` in ``worktree``.

    Skipped (never passed) when nothing is selected, no GPU of the target
    architecture is present (``need_gpu``), the interpreter cannot import the
    upstream package, or pytest ran no test.
    """
    if not selection.tests:
        return TestRun("skipped", "no upstream test references the changed code")
    if need_gpu:
        problem = gpu_problem(arch, probe_gpus() if gpus == "probe" else gpus)  # type: ignore[arg-type]
        if problem:
            return TestRun("skipped", problem)
    env = dict(os.environ)
    roots = [str(worktree / r) for r in selection.import_roots] or [str(worktree)]
    env["PYTHONPATH"] = os.pathsep.join([*roots, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for package in selection.packages:
        problem = _import_problem(python, package, worktree, env)
        if problem:
            return TestRun("skipped", problem)
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
               *selection.tests]  # fmt: skip
    try:
        done = subprocess.run(
            command, cwd=worktree, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return TestRun("failed", f"pytest timed out after {timeout:.0f}s", command=command)
    except OSError as exc:
        return TestRun("skipped", f"cannot run {python}: {exc}", command=command)
    return _outcome(done.returncode, (done.stdout + done.stderr)[-1500:], junit, command)


def _import_problem(python: str, package: str, cwd: Path, env: dict[str, str]) -> str | None:
    try:
        done = subprocess.run([python, "-c", f"import {package}"], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run {python}: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"{python} cannot import {package}: {last}"
    return None


def _outcome(rc: int, tail: str, junit: Path, command: list[str]) -> TestRun:
    cases = read_junit(junit)
    counts = {
        k: sum(1 for c in cases if c["status"] == k)
        for k in ("passed", "failed", "error", "skipped")
    }
    counts["total"] = len(cases)
    ran = counts["passed"] + counts["failed"] + counts["error"]
    if rc in (0, 1) and ran == 0 or rc == 5:
        return TestRun(
            "skipped", f"pytest ran no test ({counts['skipped']} skipped)", counts, cases, command
        )
    if rc == 0:
        return TestRun(
            "passed",
            f"{counts['passed']} passed, {counts['skipped']} skipped",
            counts,
            cases,
            command,
        )
    bad = [c["name"] for c in cases if c["status"] in ("failed", "error")]
    if rc == 1 and bad:
        return TestRun(
            "failed", f"{len(bad)} of {ran} failed: {', '.join(bad[:5])}", counts, cases, command
        )
    return TestRun(
        "failed",
        f"pytest exited {rc}: {tail.strip().splitlines()[-1:] or ''}",
        counts,
        cases,
        command,
    )


def read_junit(path: Path) -> list[dict[str, str]]:
    """Test cases from a JUnit XML file: name, classname, status, message, time."""
    if not path.is_file():
        return []
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError:
        return []
    cases = []
    for case in root.iter("testcase"):
        status, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            child = case.find(tag)
            if child is not None:
                status = {"failure": "failed"}.get(tag, tag)
                message = child.get("message", "") or (child.text or "")[:500]
                break
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        cases.append(
            {"name": name, "status": status, "message": message, "time": case.get("time", "0")}
        )
    return cases
