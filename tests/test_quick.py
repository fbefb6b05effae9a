"""A plain `contrib sync` without click says what it says through click.

Every case runs the real entry point (``python -m contrib``) in a child, once
as it is and once with ``CONTRIB_NO_QUICK=1`` (click parses, as for every other
command), and compares exit code, stdout and stderr byte for byte.  A side
file tells which path ran: the sync index's answer, the sync command without
click, or click.
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
from contrib.workspace.lockfile import FileLock
from tests.conftest import Workspace
from tests.gitutil import Repo
from tests.synchelp import F3_PATCH, add_patchset
from tests.test_progress import on_terminal

ROOT = Path(__file__).resolve().parent.parent
RUN = ("import json, sys\nmark = sys.argv.pop()\nsys.argv[0] = 'contrib'\n"
       "from contrib.__main__ import main\ncode = main()\n"
       "json.dump({'click': 'contrib.cli' in sys.modules,\n"
       "           'sync': 'contrib.commands.sync' in sys.modules}, open(mark, 'w'))\n"
       "sys.exit(code)")
QUICK, SYNC, CLICK = "answered from the index", "the sync command", "click"


def contrib(cwd: Path, *args: str, full: bool = False) -> tuple[int, str, str, str]:
    """(exit code, stdout, stderr, which path ran) of one real run; ``full``: through click."""
    mark = cwd.parent / f"mark-{time.monotonic_ns()}"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CONTRIB_NO_QUICK")}
    env |= {"PYTHONPATH": str(ROOT)} | ({"CONTRIB_NO_QUICK": "1"} if full else {})
    proc = subprocess.run([sys.executable, "-c", RUN, *args, str(mark)], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    loaded = json.loads(mark.read_text())
    mark.unlink()
    path = CLICK if loaded["click"] else SYNC if loaded["sync"] else QUICK
    return proc.returncode, proc.stdout, proc.stderr, path


def settle(ws: Workspace) -> None:
    """Let the files age past the racy margin, then a full sync writes a trusted index."""
    time.sleep(0.25)
    code, _, err, path = contrib(ws.root, "sync", full=True)
    assert code == 0 and path == CLICK, err


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
    code, out, err, path = contrib(settled.root, *args)
    assert path == QUICK, err
    assert code == 0 and "unchanged" in (out if "--json" not in args else json.loads(out)[
        "results"][0]["result"])
    assert (code, out, err) == contrib(settled.root, *args, full=True)[:3]


def test_dash_c_names_the_workspace_from_elsewhere(settled: Workspace, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    quick_run = contrib(elsewhere, "-C", str(settled.root / "patchsets"), "sync")
    assert quick_run[3] == QUICK and quick_run[0] == 0
    assert quick_run[:3] == contrib(elsewhere, "-C", str(settled.root), "sync", full=True)[:3]


def test_on_a_terminal_too(settled: Workspace) -> None:
    quick_shown = on_terminal(settled.root, "sync")
    full_shown = on_terminal(settled.root, "sync", CONTRIB_NO_QUICK="1")
    assert "\rsync 2/2" in quick_shown and "\x1b[1mpatchset" in quick_shown
    assert quick_shown == full_shown


def test_a_moved_upstream_is_carried_by_the_full_command_fetched_once(
        settled: Workspace, upstream: Repo) -> None:
    upstream.commit("more docs", {"docs/again.md": "again\n"})
    code, out, err, path = contrib(settled.root, "sync", "--json")
    assert path == SYNC and code == 0
    assert [r["result"] for r in json.loads(out)["results"]] == ["rebased", "rebased"]
    assert err.count("fetching proj ...") == 0  # --json: no step line
    code, out, err, path = contrib(settled.root, "sync", "proj/f3")
    assert code == 0 and err.count("fetching proj ...") == 1


def test_a_carry_without_click_is_the_carry_through_click(settled: Workspace, upstream: Repo,
                                                          tmp_path: Path) -> None:
    upstream.commit("more docs", {"docs/again.md": "again\n"})
    twin = tmp_path / "twin"
    subprocess.run(["cp", "-a", str(settled.root), str(twin)], check=True)
    code, out, err, path = contrib(settled.root, "sync")
    assert path == SYNC and code == 0 and out.count("rebased") == 2
    assert (code, out, err) == contrib(twin, "sync", full=True)[:3]
    for ws in (settled.root, twin):
        assert contrib(ws, "sync", "--json")[3] == SYNC  # racily clean at first


def test_a_failed_fetch_is_reported_once_by_the_full_command(settled: Workspace,
                                                             upstream: Repo) -> None:
    upstream.path.rename(upstream.path.with_name("gone"))
    code, out, err, path = contrib(settled.root, "sync")
    assert path == SYNC and code == 2
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
    code, out, err, path = contrib(settled.root, "sync")
    assert path == SYNC, (change, out, err)
    assert (code, out, err) == contrib(settled.root, "sync", full=True)[:3]


def test_a_fresh_index_is_not_trusted_until_its_files_age(settled: Workspace,
                                                          upstream: Repo) -> None:
    upstream.commit("more docs", {"docs/again.md": "again\n"})
    assert contrib(settled.root, "sync")[0] == 0  # rebased: the files are new
    assert contrib(settled.root, "sync")[3] == SYNC  # racily clean: the sync command again
    settle(settled)
    assert contrib(settled.root, "sync")[3] == QUICK


def test_a_busy_workspace_is_left_to_the_full_command(settled: Workspace) -> None:
    lock = FileLock(settled.root / ".contrib" / "lock", 0)
    lock.acquire()
    try:
        code, _, err, path = contrib(settled.root, "sync")
    finally:
        lock.release()
    assert path == SYNC and code == 2 and "another contrib process" in err


@pytest.mark.parametrize("args", [
    ["sync", "nope"], ["sync", "proj/nope"], ["sync", "--to", "HEAD"], ["sync", "--commit"],
    ["sync", "-v"], ["sync", "--help"], ["sync", "--", "proj"], ["-C", "contrib.toml", "sync"],
])
def test_what_the_index_cannot_answer_goes_to_sync_and_other_options_to_click(settled: Workspace,
                                                         args: list[str]) -> None:
    code, out, err, path = contrib(settled.root, *args)
    assert path == (SYNC if args[1].startswith(("nope", "proj/")) else CLICK)
    assert (code, out, err) == contrib(settled.root, *args, full=True)[:3]


def test_contrib_no_quick_always_takes_the_full_command(settled: Workspace) -> None:
    assert contrib(settled.root, "sync", full=True)[3] == CLICK


def test_parse() -> None:
    request = quick.parse(["-C", "ws", "-q", "sync", "a/b/", "--json", "--no-fetch", "a"])
    assert request is not None
    assert (request.directory, request.targets, request.json_mode, request.fetch,
            request.quiet, request.progress) == ("ws", ["a/b", "a"], True, False, True, None)
    for argv in (["status"], ["sync", "--to=x"], ["-v", "sync"], ["-C"], ["-C", "--json", "sync"],
                 ["sync", "/"], ["--version", "sync"]):
        assert quick.parse(argv) is None, argv


def test_an_index_that_cannot_be_written_never_fails_the_sync(
        settled: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(path: str) -> quick.Stat:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(quick, "_stat", unreadable)
    result = settled.run("sync", "--no-fetch")
    assert result.code == 0 and "unchanged" in result.out, result.err
    assert not (settled.root / ".contrib" / quick.INDEX_NAME).exists()
