"""Shell completion through click's mechanism: scripts for bash, zsh and fish, and
commands, options, upstreams and UPSTREAM/NAME patchsets completed from a workspace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch

ROOT = Path(__file__).resolve().parent.parent


def _complete(cwd: Path, shell: str, words: str) -> str:
    """What click answers the shell's completion function for the command line ``words``."""
    incomplete = "" if words.endswith(" ") else words.split()[-1]
    # bash and zsh pass the index of the word being completed; fish passes the word.
    cword = incomplete if shell == "fish" else str(len(words.split()) - (not words.endswith(" ")))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "_CONTRIB_COMPLETE": f"{shell}_complete",
           "COMP_WORDS": words, "COMP_CWORD": cword}
    proc = subprocess.run([sys.executable, "-m", "contrib"], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(("shell", "marker"), [
    ("bash", "complete -o nosort -F _contrib_completion contrib"),
    ("zsh", "#compdef contrib"),
    ("fish", "complete --no-files --command contrib"),
])
def test_each_shell_gets_a_script(shell: str, marker: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "_CONTRIB_COMPLETE": f"{shell}_source"}
    proc = subprocess.run([sys.executable, "-m", "contrib"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and marker in proc.stdout, proc.stderr


@pytest.fixture
def two(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    for name in ("sm120-gate", "sm120-kernels"):
        patches = make_patch(upstream, tmp_path, {f"pkg/{name}.py": "X = 1\n"}, name, name)
        assert workspace.run("new", "proj", name, "--base", upstream.head(),
                             "--patch", *map(str, patches)).code == 0
    return workspace


def test_patchsets_upstreams_commands_and_options_complete(two: Workspace, tmp_path: Path) -> None:
    bash = _complete(two.root, "bash", "contrib sync proj/sm120-k")
    assert bash.split() == ["plain,proj/sm120-kernels"]
    both = _complete(two.root, "bash", "contrib validate pr")
    assert both.split() == ["plain,proj", "plain,proj/sm120-gate", "plain,proj/sm120-kernels"]
    assert _complete(two.root, "bash", "contrib new ").split() == ["plain,proj"]
    assert "plain,status" in _complete(two.root, "bash", "contrib st").split()
    assert "plain,--no-fetch" in _complete(two.root, "bash", "contrib sync --no").split()
    fish = _complete(two.root, "fish", "contrib open-pr proj/sm120-g")
    # click before 8.4 answers fish "plain,VALUE" a line; 8.4 TYPE, VALUE, HELP a line each
    lines = fish.splitlines()
    pairs = ([line.split(",", 1) for line in lines] if "," in fish
             else [lines[i:i + 2] for i in range(0, len(lines), 3)])
    assert pairs == [["plain", "proj/sm120-gate"]]
    zsh = _complete(two.root, "zsh", "contrib status proj/sm120-g")
    assert zsh.splitlines()[:2] == ["plain", "proj/sm120-gate"]
    elsewhere = _complete(tmp_path, "bash", f"contrib -C {two.root} sync proj/sm120-g")
    assert elsewhere.split() == ["plain,proj/sm120-gate"]


def test_outside_a_workspace_nothing_is_offered(tmp_path: Path) -> None:
    assert _complete(tmp_path, "bash", "contrib sync pr").split() == []


def test_every_command_help_ends_with_one_example() -> None:
    from click.testing import CliRunner

    from contrib.cli import cli

    runner = CliRunner()
    for name in [None, *cli.commands]:
        args = ["--help"] if name is None else [name, "--help"]
        text = runner.invoke(cli, args).output.rstrip()
        tail = text.rsplit("Example:", 1)
        assert len(tail) == 2, f"contrib {name or ''} --help has no example"
        example = tail[1].strip().splitlines()
        assert len(example) == 1 and example[0].startswith("contrib "), (name, example)


def test_arch_values_and_branch_targets_complete(two: Workspace) -> None:
    archs = _complete(two.root, "bash", "contrib audit --arch sm_12").split()
    assert archs == ["plain,sm_120", "plain,sm_120a", "plain,sm_121", "plain,sm_121a"]
    meta = two.root / "patchsets" / "proj" / "sm120-gate" / "patchset.toml"
    meta.write_text('targets = ["release-1", "main"]\n' + meta.read_text())  # a top-level key
    branches = _complete(two.root, "bash", "contrib sync proj/sm120-gate@").split()
    assert branches == ["plain,proj/sm120-gate@release-1", "plain,proj/sm120-gate@main"]
