"""``[autopilot] enable``: each run drafts for the uncovered gate-only gates, opens a
draft PR for a draft whose stages passed, lists it under "Drafted", and a run with
nothing new changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.analysis.ptx import find_nvcc
from contrib.workspace.model import Workspace
from testing.autopilot_scene import WSREPO, enabling_workspace, run_autopilot
from testing.enableupstream import enable_upstream
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import git

UPSTREAM, FORK = "upstream-org/mini", "me/mini"


def _workspace(tmp: Path, fake: FakeGitHub) -> Path:
    upstream = enable_upstream(tmp / "mini", every_form=False)
    return enabling_workspace(tmp, fake, upstream, UPSTREAM, FORK)


@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc: only a draft ptx proved gets a PR")
def test_autopilot_drafts_once_and_opens_one_draft_pr(tmp_path: Path, fake_github: FakeGitHub,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    root = _workspace(tmp_path, fake_github)
    code, doc, err = run_autopilot(Workspace(root), push=False)
    assert code == 0, (doc, err)
    (enabled,) = doc["enable"]
    assert [d["patchset"] for d in enabled["drafted"]] == ["mini/enable-norm"]
    # needs-kernel-work (allreduce over gen_comm_module) is no draft and no PR
    assert not (root / "patchsets" / "mini" / "enable-comm").exists()
    (pr,) = fake_github.pulls(UPSTREAM)
    assert pr["draft"] is True and "gen_norm_module" in pr["title"]
    (outcome,) = doc["patchsets"]
    assert outcome["patchset"] == "mini/enable-norm" and outcome["pr"]["number"] == pr["number"]
    (issue,) = [i for i in fake_github.issues(WSREPO)
                if (i.get("body") or "").startswith("<!-- contrib:dashboard -->")]
    drafted = str(issue["body"]).split("## Drafted", 1)[1].split("## ", 1)[0]
    assert "`mini/enable-norm` (sm_120a): `pkg/jit.py:5 gen_norm_module`, " \
           "`pkg/runtime.py:7 norm`; draft PR [#" in drafted
    head = git(root, "rev-parse", "HEAD")
    assert git(root, "show", "--stat", "--format=%s", head).startswith("autopilot: ")

    seen = len(fake_github.requests)
    code, doc, err = run_autopilot(Workspace(root), push=False)
    assert code == 0, (doc, err)
    assert doc["enable"][0]["drafted"] == [] and doc["enable"][0]["skipped"] == []
    assert len(fake_github.pulls(UPSTREAM)) == 1
    writes = [r for r in fake_github.requests[seen:] if r.method in ("POST", "PATCH", "PUT")]
    assert writes == [] and doc["dashboard"]["result"] == "unchanged"
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == ""
