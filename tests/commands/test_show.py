"""`contrib show`, `[defaults] arch`, "did you mean", and what `edit --help` promises."""

from __future__ import annotations

from pathlib import Path

from testing.gitutil import Repo, git
from testing.synchelp import F3_PATCH, add_patchset
from testing.workspace import Workspace


def test_show_lists_targets_versions_and_patches(workspace: Workspace, upstream: Repo,
                                                 tmp_path: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: say so", {"docs/f3.md": "f3 returns 33\nnow\n"})])
    result = workspace.run("show", "proj/two")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "proj/two: core: make f3 return 33"
    assert f"  target main: current {base[:12]}" in lines
    assert f"  {base[:12]}  2 patches  (current)" in lines
    assert "  1. core: make f3 return 33  (+1 -1)" in lines
    assert "       pkg/core.py" in lines
    assert "  2. docs: say so  (+2 -0)" in lines and "       docs/f3.md" in lines
    doc = workspace.run("show", "proj/two", "--json").json
    assert isinstance(doc, dict)
    assert doc["targets"] == [{"branch": "main", "current": base}]
    assert doc["versions"] == [{"base": base, "patches": 2}]
    assert [(p["subject"], p["files"], p["added"], p["removed"]) for p in doc["patches"]] == [
        ("core: make f3 return 33", ["pkg/core.py"], 1, 1),
        ("docs: say so", ["docs/f3.md"], 2, 0)]


def test_a_typo_gets_did_you_mean(workspace: Workspace, upstream: Repo,
                                  tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "sm120-gate", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    patchset = workspace.run("show", "proj/sm120-gaet")
    assert patchset.code == 2 and "did you mean 'sm120-gate'?" in patchset.err
    up = workspace.run("status", "porj", "--no-fetch")
    assert up.code == 2 and "did you mean 'proj'?" in up.err
    audit = workspace.run("audit", "porj", "--arch", "120", "--no-fetch")
    assert audit.code == 2 and "did you mean 'proj'?" in audit.err
    far = workspace.run("status", "vllm", "--no-fetch")
    assert far.code == 2 and "did you mean" not in far.err
    assert len(far.err.splitlines()) == 1 and "Traceback" not in far.err


def test_the_default_arch_in_contrib_toml_is_every_commands_arch(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    without = workspace.run("audit", "--no-fetch")
    assert without.code == 2
    assert "give --arch" in without.err and '[defaults] arch = "sm_120a"' in without.err
    workspace.write_config('\n[defaults]\narch = "sm120"\n')
    audit = workspace.run("audit", "--json")
    assert audit.code in (0, 1), audit.err
    assert audit.json["arch"] == "sm_120a"  # type: ignore[index]
    enable = workspace.run("enable", "proj", "--json", "--no-fetch")
    assert enable.code in (0, 1) and "give --arch" not in enable.err
    workspace.write_config('\n[defaults]\narch = "sm_90a"\n')
    patches = tmp_path / "p"
    patches.mkdir()
    git(upstream.path, "checkout", "-q", "-b", "side")
    upstream.commit("core: f3 33", {"pkg/core.py": F3_PATCH})
    git(upstream.path, "format-patch", "-q", "-o", str(patches), "HEAD~1")
    git(upstream.path, "checkout", "-q", "main")
    made = workspace.run("new", "proj/one", "--base", "main", "--patch",
                         *map(str, sorted(patches.iterdir())))
    assert made.code == 0, made.err
    assert 'arch = "sm_90a"' in (workspace.root / "patchsets/proj/one/patchset.toml").read_text()
    workspace.write_config('\n[defaults]\narch = "volta"\n')
    bad = workspace.run("status", "--no-fetch")
    assert bad.code == 2 and "contrib.toml:" in bad.err and "defaults.arch" in bad.err


def test_edit_makes_the_branch_its_help_names(workspace: Workspace, upstream: Repo,
                                              tmp_path: Path) -> None:
    from click.testing import CliRunner

    from contrib.cli import cli

    add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    shown = " ".join(CliRunner().invoke(cli, ["edit", "--help"], terminal_width=80)
                     .output.split())
    assert "contrib/WSID/NAME in a worktree of the upstream cache" in shown
    assert "contrib/NAME in the clone given by --repo" in shown
    opened = workspace.run("edit", "proj/two", "--json").json
    assert isinstance(opened, dict)
    wsid = opened["branch"].split("/")[1]
    assert opened["branch"] == f"contrib/{wsid}/two" and len(wsid) >= 8
