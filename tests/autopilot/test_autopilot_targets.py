"""The autopilot on a patchset carried on two lines: one PR per line, one landing comment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testing.autopilot_scene import IDENTITY, UPSTREAM, Scene, patched
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git


def _actions(doc: dict[str, Any], target: str, step: str) -> list[str]:
    (entry,) = [p for p in doc["patchsets"] if p["patchset"] == target]
    return [a["result"] for a in entry["actions"] if a["step"] == step]


def test_a_line_where_the_change_lands_gets_one_comment_the_other_keeps_its_pr(
        tmp_path: Path, upstream: Repo, fake_github: FakeGitHub, monkeypatch: Any) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github, "create")
    git(upstream.path, "branch", "release-1")
    meta = scene.root / "patchsets/proj/f7/patchset.toml"
    meta.write_text('targets = ["main", "release-1"]\n' + meta.read_text())
    git(scene.root, "commit", "-qam", "f7 on two lines", env=IDENTITY)
    code, doc, err = scene.run()
    assert code == 0, (doc, err)
    heads = sorted(p["head"]["ref"] for p in scene.prs())
    assert heads == ["contrib/f3", "contrib/f7--main", "contrib/f7--release-1"]
    bases = {p["head"]["ref"]: p["base"]["ref"] for p in scene.prs()}
    assert bases["contrib/f7--release-1"] == "release-1" and bases["contrib/f7--main"] == "main"
    landing = upstream.commit("core: f7 returns 77 (#77)", {
        "pkg/core.py": patched("    return 7\n", "    return 77\n")})
    code, doc, err = scene.run()
    assert code == 0, (doc, err)
    assert _actions(doc, "proj/f7@main", "sync") == ["upstreamed"]
    assert _actions(doc, "proj/f7@release-1", "sync") == ["unchanged"]
    number = {p["head"]["ref"]: p["number"] for p in scene.prs()}
    comments = scene.fake.comments(UPSTREAM, number["contrib/f7--main"])
    assert len(comments) == 1 and landing[:12] in comments[0]["body"]
    assert scene.fake.comments(UPSTREAM, number["contrib/f7--release-1"]) == []
    code, doc, err = scene.run()
    assert code == 0 and _actions(doc, "proj/f7@main", "comment") == ["already there"]
    assert len(scene.fake.comments(UPSTREAM, number["contrib/f7--main"])) == 1
