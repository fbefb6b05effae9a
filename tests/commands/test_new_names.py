"""`contrib new UPSTREAM/NAME`, `--commits A..B` on A, and a summary without PR boilerplate."""

from __future__ import annotations

import tomllib
from pathlib import Path

from contrib.commands.new import without_boilerplate
from testing.gitutil import Repo, git
from testing.workspace import Workspace, make_patch


def test_new_takes_upstream_slash_name_like_every_other_command(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")
    result = workspace.run("new", "proj/x", str(patches[0]), "--base", upstream.head(),
                           "--json")
    assert result.code == 0, result.err
    assert result.json["patchset"] == "proj/x"  # type: ignore[index]
    bare = workspace.run("new", "proj", "--patch", str(patches[0]), "--base", upstream.head())
    assert bare.code == 2 and "UPSTREAM/NAME" in bare.err


def test_commits_a_to_b_takes_a_as_the_base(workspace: Workspace, upstream: Repo,
                                            tmp_path: Path) -> None:
    base = upstream.head()
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    work = Repo.__new__(Repo)
    work.path, work.who, work.tick = clone, "Patch Author", 100
    work.commit("one change", {"pkg/a.py": "A = 1\n"})
    result = workspace.run("new", "proj/one", "--commits", f"{base}..HEAD", "--repo", str(clone),
                           "--json")
    assert result.code == 0, result.err
    assert result.json["base"] == base  # type: ignore[index]


MESSAGE = """\
attention: SM120 path for the decode kernel (#9000)

Route sm_120a to the FA2 decode kernel.

<!-- Thank you for your contribution! Please follow these steps. -->

## Motivation

SM120 fell through to the slow path.

## Checklist

- [x] Format your code according to the Code Formatting with Pre-Commit.
- [ ] Add unit tests as outlined in the Running Unit Tests.

## Summary by CodeRabbit

* **New Features** — faster decode on new GPUs.
"""


def test_the_pr_template_boilerplate_stays_out_of_the_summary() -> None:
    kept = without_boilerplate(MESSAGE)
    assert "Route sm_120a to the FA2 decode kernel." in kept
    assert "## Motivation" in kept and "SM120 fell through" in kept
    for gone in ("Thank you", "Checklist", "Format your code", "CodeRabbit", "New Features"):
        assert gone not in kept


def test_summary_written_by_new_is_the_cleaned_message(workspace: Workspace, upstream: Repo,
                                                       tmp_path: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/y.py": "Y = 1\n"}, MESSAGE)
    assert workspace.run("new", "proj/y", "--base", upstream.head(), "--patch",
                         str(patches[0])).code == 0
    meta = tomllib.loads((workspace.root / "patchsets/proj/y/patchset.toml").read_text())
    assert "Checklist" not in meta["summary"] and "SM120 fell through" in meta["summary"]
