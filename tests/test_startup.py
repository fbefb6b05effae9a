"""Start-up stays light: a regression guard on what gets imported, not a timing.

Each check runs a fresh interpreter and lists the modules it loaded.  When one
fails, ``python -X importtime -c 'import contrib.cli'`` shows who pulled the
library in; import it inside the function that needs it (``TYPE_CHECKING``
for annotations).  benchmarks/startup_bench.py has the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch

ROOT = Path(__file__).resolve().parent.parent
# Heavy libraries no command needs just to start: each costs tens of milliseconds.
HEAVY = ("git", "github", "rich", "requests", "urllib3", "tomlkit", "filelock", "unidiff",
         "platformdirs", "contrib.forge.github", "contrib.forge.http",
         # validate's analysis machinery (status reads only the stage table and settings)
         "contrib.validate.stages", "contrib.analysis.gates", "contrib.analysis.cuda_arch",
         "contrib.validate.testsel", "contrib.analysis.ptx")
# What carrying a patchset needs and a sync that finds nothing to carry does not: the
# engine's probes and bisection, landing detection, conflicts, the version writer, the
# record (retention reads it) and the thread pool the landed look runs on.
CARRY_ENGINE = ("contrib.carry.plan", "contrib.carry.carrier", "contrib.carry.bisection",
                "contrib.carry.landed", "contrib.carry.places", "contrib.carry.imports",
                "contrib.carry.scope", "contrib.carry.trees", "contrib.carry.series",
                "contrib.carry.outcome", "contrib.carry.conflict", "contrib.carry.resume",
                "contrib.carry.retention", "contrib.carry.versions", "contrib.record",
                "concurrent.futures")


def _modules_after(code: str, cwd: Path = ROOT) -> set[str]:
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.stderr, proc
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str], allowed: tuple[str, ...] = (),
           heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules
                  if any(m == h or m.startswith(h + ".") for h in heavy if h not in allowed))


def test_import_cli_loads_no_heavy_library() -> None:
    assert _heavy(_modules_after("import contrib.cli")) == []


def test_version_answers_before_the_command_line_machinery_loads() -> None:
    modules = _modules_after("import sys\nsys.argv = ['contrib', '--version']\n"
                             "from contrib.__main__ import main\nmain()")
    assert "click" not in modules and _heavy(modules) == []


def test_fast_version_says_what_click_says() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    fast = subprocess.run([sys.executable, "-m", "contrib", "--version"], env=env,
                          capture_output=True, text=True, check=True).stdout
    full = subprocess.run([sys.executable, "-c",
                           "import sys; from contrib.cli import main; sys.exit(main(['--version']))"],
                          env=env, capture_output=True, text=True, check=True).stdout
    assert fast == full and fast.startswith("contrib, version ")


@pytest.fixture
def carried(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    """A workspace with one patchset, synced, its cache warm."""
    patches = make_patch(upstream, tmp_path, {"pkg/core.py": "X = 1\n"}, "core: X")
    assert workspace.run("new", "proj", "one", "--base", upstream.head(),
                         "--patch", *map(str, patches)).code == 0
    return workspace


def _command_modules(ws: Workspace, args: list[str]) -> set[str]:
    return _modules_after(f"import contrib.cli\nrc = contrib.cli.main({args!r})\n"
                          "assert rc == 0, rc", cwd=ws.root)


@pytest.mark.parametrize("args", [["status", "--no-fetch", "--json"], ["sync", "--json"]])
def test_everyday_commands_load_only_what_they_use(carried: Workspace, args: list[str]) -> None:
    # Reading patchset.toml is tomllib's; tomlkit loads only to write it.
    assert _heavy(_command_modules(carried, args)) == []


def test_a_no_op_sync_loads_none_of_the_carry_engine(carried: Workspace) -> None:
    """Every patchset already at the tip: decided from the workspace's files and one ref
    lookup; what carrying needs loads only when a patchset moves."""
    assert _heavy(_command_modules(carried, ["sync", "--json"]), heavy=CARRY_ENGINE) == []


def test_a_sync_that_carries_loads_the_engine(carried: Workspace, upstream: Repo) -> None:
    """The pin above holds because a no-op skips the engine, not because the engine
    moved: a patchset that moves loads it."""
    upstream.commit("docs: a note", {"docs/note.md": "note\n"})
    modules = _command_modules(carried, ["sync", "--json"])
    assert {"contrib.carry.plan", "contrib.carry.outcome"} <= modules
