"""Progress shows on a terminal and nowhere else; -q, -v, NO_COLOR, TERM=dumb, CI.

The same `contrib sync` runs on a pseudo-terminal (the pty module) and through
pipes; the bytes are compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import testing.terminal as terminal
from contrib.ui import show_progress, use_colour
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo
from testing.synchelp import F3_PATCH, add_patchset
from testing.workspace import Workspace

ROOT = Path(__file__).resolve().parent.parent
ESC = "\x1b["


def redrawn(text: str, shown: str) -> bool:
    """Whether the status line was drawn with ``text``, after its spinner."""
    return re.search(r"\r[|/\\-] " + re.escape(text), shown) is not None


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "TERM")}
    return env | {"PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "100"} | extra


def on_terminal(cwd: Path, *args: str, **env: str) -> str:
    """Run contrib with stdout and stderr on one pseudo-terminal 100 columns wide; what it
    showed (each "\r" left is contrib's own)."""
    return terminal.on_terminal(cwd, 100, *args, **env)


def through_pipes(cwd: Path, *args: str, **env: str) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-m", "contrib", *args], cwd=cwd, env=_env(**env),
                          capture_output=True, text=True, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout, proc.stderr


@pytest.fixture
def moved(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    """A patchset whose upstream moved on: the next sync probes and rebases it."""
    add_patchset(workspace, upstream, tmp_path, "f3", [("f3 returns 33", {"pkg/core.py": F3_PATCH})])
    upstream.commit("docs", {"docs/more.md": "more\n"})
    upstream.commit("readme", {"README.md": "upstream project, moved\n"})
    return workspace


def _fresh(ws: Workspace, tmp_path: Path, name: str) -> Path:
    """A copy of the workspace, so each run has the same work to do."""
    copy = tmp_path / name
    subprocess.run(["cp", "-a", str(ws.root), str(copy)], check=True)
    return copy


def test_terminal_shows_progress_and_pipes_or_json_show_none(moved: Workspace,
                                                             tmp_path: Path) -> None:
    shown = on_terminal(_fresh(moved, tmp_path, "tty"), "sync")
    assert redrawn("sync 1/1", shown) and "proj/f3" in shown and "rebased" in shown
    assert f"{ESC}2m" in shown  # the step line is dim on a terminal
    assert redrawn("proj: ", shown)  # git's own fetch progress, on the same line

    out, err = through_pipes(_fresh(moved, tmp_path, "pipe"), "sync")
    assert "rebased" in out
    for text in (out, err):
        assert "\r" not in text and ESC not in text and "sync 1/1" not in text

    shown_json = on_terminal(_fresh(moved, tmp_path, "json"), "sync", "--json")
    assert "\r" not in shown_json and ESC not in shown_json
    assert json.loads(shown_json)["results"][0]["result"] == "rebased"


def test_quiet_ci_and_dumb_terminals_show_no_progress(moved: Workspace, tmp_path: Path) -> None:
    quiet = on_terminal(_fresh(moved, tmp_path, "q"), "-q", "sync")  # before the command too
    assert "\r" not in quiet and "fetching" not in quiet and "rebased" in quiet
    ci = on_terminal(_fresh(moved, tmp_path, "ci"), "sync", CI="true")
    assert "sync 1/1" not in ci and "rebased" in ci
    dumb = on_terminal(_fresh(moved, tmp_path, "dumb"), "sync", TERM="dumb")
    assert "\r" not in dumb and ESC not in dumb
    no_colour = on_terminal(_fresh(moved, tmp_path, "nc"), "sync", NO_COLOR="1")
    assert redrawn("sync 1/1", no_colour) and ESC not in no_colour


def test_progress_flag_forces_it_into_a_pipe_even_in_ci(moved: Workspace, tmp_path: Path) -> None:
    _, err = through_pipes(_fresh(moved, tmp_path, "forced"), "sync", "--progress", CI="1")
    assert "sync 1/1" in err and "\r" not in err and ESC not in err


def test_verbose_shows_each_git_command_with_tokens_hidden(moved: Workspace, tmp_path: Path) -> None:
    token = "ghp_" + "v" * 36
    out, err = through_pipes(_fresh(moved, tmp_path, "v"), "sync", "-v", GITHUB_TOKEN=token)
    assert "+ git -C " in err and " fetch --prune" in err and "apply --cached" in err
    assert token not in out + err
    plain, plain_err = through_pipes(_fresh(moved, tmp_path, "plain"), "sync")
    assert "+ git" not in plain + plain_err


def test_the_one_rule() -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    tty = Tty()
    common = {"verbosity": 0, "stdout": tty, "stderr": tty}
    assert show_progress(json_mode=False, forced=None, env={"TERM": "xterm"}, **common)
    assert not show_progress(json_mode=True, forced=True, env={}, **common)
    assert not show_progress(json_mode=False, forced=None, env={"CI": "true"}, **common)
    assert show_progress(json_mode=False, forced=True, env={"CI": "true"}, **common)
    assert not show_progress(json_mode=False, forced=None, env={"TERM": "dumb"}, **common)
    assert not show_progress(json_mode=False, forced=None, env={"CI": "1"}, **common)
    assert show_progress(json_mode=False, forced=None, env={"CI": "false"}, **common)
    assert not show_progress(json_mode=False, verbosity=-1, forced=True, env={},
                             stdout=tty, stderr=tty)
    assert use_colour(tty, {}) and not use_colour(tty, {"NO_COLOR": "1"})
    assert not use_colour(tty, {"TERM": "dumb"})


def test_open_pr_shows_the_push_on_the_status_line(upstream: Repo, tmp_path: Path,
                                                   fake_github: FakeGitHub,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from testing.pr_scene import Scene

    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github)
    heard: list[str] = []
    code, [result] = scene.run(progress=heard.append)
    assert code == 0 and result["push"] == "pushed"
    assert any(m.startswith("push contrib/sm120 to me/proj: ") for m in heard), heard
    assert scene.fork_tip() is not None
