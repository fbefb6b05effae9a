"""A no-op `contrib sync` answered from the sync index says what the full command says.

Every case runs the real entry point (``python -m contrib``) in a child, once
as it is and once with ``CONTRIB_NO_QUICK=1``, and compares exit code, stdout
and stderr byte for byte.  A side file tells whether the full command line
(``contrib.cli``) loaded, so each case also proves which path answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from contrib import quick
from contrib.lockfile import FileLock
from tests.conftest import Workspace
from tests.gitutil import Repo
from tests.synchelp import F3_PATCH, add_patchset
from tests.test_progress import on_terminal

ROOT = Path(__file__).resolve().parent.parent
RUN = ("import sys\nmark = sys.argv.pop()\nsys.argv[0] = 'contrib'\n"
       "from contrib.__main__ import main\ncode = main()\n"
       "open(mark, 'w').write(str('contrib.cli' in sys.modules))\nsys.exit(code)")


def contrib(cwd: Path, *args: str, full: bool = False) -> tuple[int, str, str, bool]:
    """(exit code, stdout, stderr, whether the quick path answered) of one real run."""
    mark = cwd.parent / f"mark-{time.monotonic_ns()}"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CONTRIB_NO_QUICK")}
    env |= {"PYTHONPATH": str(ROOT)} | ({"CONTRIB_NO_QUICK": "1"} if full else {})
    proc = subprocess.run([sys.executable, "-c", RUN, *args, str(mark)], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    loaded_cli = mark.read_text() == "True"
    mark.unlink()
    return proc.returncode, proc.stdout, proc.stderr, not loaded_cli


def settle(ws: Workspace) -> None:
    """Let the files age past the racy margin, then a full sync writes a trusted index."""
    time.sleep(0.25)
    code, _, err, answered = contrib(ws.root, "sync", full=True)
    assert code == 0 and not answered, err


@pytest.fixture
def settled(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    """Two patchsets on the tip of their upstream, the index written and trusted."""
    add_patchset(workspace, upstream, tmp_path, "f3", [("f3 returns 33", {"pkg/core.py": F3_PATCH})])
    add_patchset(workspace, upstream, tmp_path, "docs", [
        ("docs: more", {"docs/more.md": "more\n"}), ("docs: more", {"docs/most.md": "most\n"})])
    upstream.commit("readme", {"README.md": "upstream project, moved\n"})
    code, _, err, _ = contrib(workspace.root, "sync", full=True)
    assert code == 0, err  # both rebased onto the tip
    settle(workspace)
    return workspace


@pytest.mark.parametrize("args", [
    ["sync"], ["sync", "--json"], ["sync", "proj/f3"], ["sync", "proj", "proj/docs", "--json"],
    ["sync", "proj/docs/", "proj/f3"], ["sync", "--no-fetch"], ["-q", "sync"], ["sync", "-q"],
    ["sync", "--progress"], ["--no-progress", "sync", "--json"],
])
def test_the_quick_answer_is_the_full_commands_answer(settled: Workspace,
                                                      args: list[str]) -> None:
    code, out, err, answered = contrib(settled.root, *args)
    assert answered, err
    assert code == 0 and "unchanged" in (out if "--json" not in args else json.loads(out)[
        "results"][0]["result"])
    assert (code, out, err) == contrib(settled.root, *args, full=True)[:3]


def test_dash_c_names_the_workspace_from_elsewhere(settled: Workspace, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    quick_run = contrib(elsewhere, "-C", str(settled.root / "patchsets"), "sync")
    assert quick_run[3] and quick_run[0] == 0
    assert quick_run[:3] == contrib(elsewhere, "-C", str(settled.root), "sync", full=True)[:3]


def test_on_a_terminal_too(settled: Workspace) -> None:
    quick_shown = on_terminal(settled.root, "sync")
    full_shown = on_terminal(settled.root, "sync", CONTRIB_NO_QUICK="1")
    assert "\rsync 2/2" in quick_shown and "\x1b[1mpatchset" in quick_shown
    assert quick_shown == full_shown


def test_a_moved_upstream_is_carried_by_the_full_command_fetched_once(
        settled: Workspace, upstream: Repo) -> None:
    upstream.commit("more docs", {"docs/again.md": "again\n"})
    code, out, err, answered = contrib(settled.root, "sync", "--json")
    assert not answered and code == 0
    assert [r["result"] for r in json.loads(out)["results"]] == ["rebased", "rebased"]
    assert err.count("fetching proj ...") == 0  # --json: no step line
    code, out, err, answered = contrib(settled.root, "sync", "proj/f3")
    assert code == 0 and err.count("fetching proj ...") == 1


def test_a_failed_fetch_is_reported_once_by_the_full_command(settled: Workspace,
                                                             upstream: Repo) -> None:
    upstream.path.rename(upstream.path.with_name("gone"))
    code, out, err, answered = contrib(settled.root, "sync")
    assert not answered and code == 2
    assert err.count("fetching proj ...") == 1 and err.count("fetch from") == 1
    assert (code, out, err) == contrib(settled.root, "sync", full=True)[:3]


def _current(ps: Path) -> Path:
    """The folder of the patchset's current version."""
    return ps / tomllib.loads((ps / "patchset.toml").read_text())["current"]


def _same_size_edit(path: Path) -> None:
    text = path.read_text()
    path.write_text(text.replace("f3 returns 33", "f3 returns 34"))
    assert len(path.read_text()) == len(text)


@pytest.mark.parametrize("change", [
    "edited in place", "new patchset folder", "removed patchset", "config", "transaction",
    "conflict state", "validation written", "index garbled", "series edited",
])
def test_any_change_since_the_index_hands_over(settled: Workspace, upstream: Repo,
                                               tmp_path: Path, change: str) -> None:
    ps = settled.root / "patchsets" / "proj" / "f3"
    if change == "edited in place":
        _same_size_edit(ps / "patchset.toml")
    elif change == "new patchset folder":
        (ps.parent / "later").mkdir()
    elif change == "removed patchset":
        subprocess.run(["rm", "-r", str(settled.root / "patchsets" / "proj" / "docs")], check=True)
    elif change == "config":
        settled.write_config("\n# a comment\n")
    elif change == "transaction":
        (settled.root / ".contrib" / "txn" / "left-over.tmp").write_text("x")
    elif change == "conflict state":
        (settled.root / ".contrib" / "sync-state.json").write_text(
            '{"state_version": 1, "pending": {}}')
    elif change == "validation written":
        (_current(ps) / "validation.json").write_text("{}")
    elif change == "index garbled":
        (settled.root / ".contrib" / quick.INDEX_NAME).write_text("{not json")
    elif change == "series edited":
        series = _current(ps) / "series"
        series.write_text(series.read_text() + "# a comment\n")
    code, out, err, answered = contrib(settled.root, "sync")
    assert not answered, (change, out, err)
    assert (code, out, err) == contrib(settled.root, "sync", full=True)[:3]


def test_a_fresh_index_is_not_trusted_until_its_files_age(settled: Workspace,
                                                          upstream: Repo) -> None:
    upstream.commit("more docs", {"docs/again.md": "again\n"})
    assert contrib(settled.root, "sync")[0] == 0  # rebased: the files are new
    assert not contrib(settled.root, "sync")[3]  # racily clean: the full command again
    settle(settled)
    assert contrib(settled.root, "sync")[3]


def test_a_busy_workspace_is_left_to_the_full_command(settled: Workspace) -> None:
    lock = FileLock(settled.root / ".contrib" / "lock", 0)
    lock.acquire()
    try:
        code, _, err, answered = contrib(settled.root, "sync")
    finally:
        lock.release()
    assert not answered and code == 2 and "another contrib process" in err


@pytest.mark.parametrize("args", [
    ["sync", "nope"], ["sync", "proj/nope"], ["sync", "--to", "HEAD"], ["sync", "--commit"],
    ["sync", "-v"], ["sync", "--help"], ["sync", "--", "proj"], ["-C", "contrib.toml", "sync"],
])
def test_what_the_quick_path_does_not_know_goes_to_click(settled: Workspace,
                                                         args: list[str]) -> None:
    code, out, err, answered = contrib(settled.root, *args)
    assert not answered
    assert (code, out, err) == contrib(settled.root, *args, full=True)[:3]


def test_contrib_no_quick_always_takes_the_full_command(settled: Workspace) -> None:
    assert not contrib(settled.root, "sync", full=True)[3]


def test_parse() -> None:
    request = quick.parse(["-C", "ws", "-q", "sync", "a/b/", "--json", "--no-fetch", "a"])
    assert request is not None
    assert (request.directory, request.targets, request.json_mode, request.fetch,
            request.quiet, request.progress) == ("ws", ["a/b", "a"], True, False, True, None)
    for argv in (["status"], ["sync", "--to=x"], ["-v", "sync"], ["-C"], ["-C", "--json", "sync"],
                 ["sync", "/"], ["--version", "sync"]):
        assert quick.parse(argv) is None, argv
