"""The autopilot proposes only what it proved, a few at a time, in order, and never a
second PR for a gate someone already widens upstream (a mini upstream with six
gate-only openings: three with kernels compiled here, one whose unit needs a header
the tree lacks, one whose runner has no kernel of its own, one JIT gate alone)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contrib.analysis.ptx import find_nvcc
from contrib.workspace.model import Workspace
from testing.autopilot_scene import WSREPO, enabling_workspace, run_autopilot
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.proofupstream import proof_upstream
from testing.workspace import run_contrib

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc: ptx proves the drafts")]

UPSTREAM, FORK = "upstream-org/mini", "me/mini"
WRITES = ("POST", "PATCH", "PUT", "DELETE")


def _workspace(tmp: Path, fake: FakeGitHub) -> tuple[Path, Repo]:
    upstream = proof_upstream(tmp / "mini")
    return enabling_workspace(tmp, fake, upstream, UPSTREAM, FORK), upstream


def _dashboard(fake: FakeGitHub) -> str:
    (issue,) = [i for i in fake.issues(WSREPO)
                if (i.get("body") or "").startswith("<!-- contrib:dashboard -->")]
    return str(issue["body"])


def _drafted(fake: FakeGitHub) -> str:
    return _dashboard(fake).split("## Drafted", 1)[1].split("\n## ", 1)[0]


def _states(doc: dict[str, Any]) -> dict[str, str]:
    return {p["patchset"]: p["state"] for p in doc["proposals"]}


def _ours(fake: FakeGitHub) -> list[str]:
    return [p["head"]["label"].removeprefix("me:contrib/") for p in fake.pulls(UPSTREAM)
            if p["state"] == "open" and p["head"]["label"].startswith("me:")]


def _land(root: Path, upstream: Repo, name: str) -> None:
    """A maintainer applies the draft's patches on main, as its PR would land."""
    (version,) = [d for d in (root / "patchsets" / "mini" / name).iterdir() if d.is_dir()]
    patches = sorted(str(p) for p in version.glob("*.patch"))
    git(upstream.path, "am", "-q", *patches, env=upstream.env())


def test_only_proven_drafts_are_proposed_two_at_a_time_in_order(
        tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    root, upstream = _workspace(tmp_path, fake_github)

    code, doc, err = run_autopilot(Workspace(root), push=False)
    assert code == 0, (doc, err)
    assert sorted(d["patchset"] for d in doc["enable"][0]["drafted"]) == [
        f"mini/enable-{n}" for n in ("act", "gemm", "mla", "norm", "rope", "topk")]
    # act and norm: runtime features of two gates each, the oldest gates first
    assert _ours(fake_github) == ["enable-act", "enable-norm"]
    assert _states(doc) == {"mini/enable-act": "proposed", "mini/enable-norm": "proposed",
                            "mini/enable-topk": "waiting", "mini/enable-rope": "waiting",
                            "mini/enable-mla": "held back", "mini/enable-gemm": "held back"}
    drafted = _drafted(fake_github)
    assert "`mini/enable-mla` (sm_120a): `pkg/jit.py:15 gen_mla_module`, `pkg/mla.py:7 mla`; " \
           "held back: ptx skipped: nvcc cannot find 1 header (1 unit not compiled): install " \
           "cutlass/cutlass.h" in drafted
    assert "`mini/enable-gemm` (sm_120a): `pkg/gemm.py:7 gemm`, `pkg/jit.py:20 gen_gemm_module`; " \
           "held back: gen_gemm_module compiles to no kernel of its own (csrc/gemm.cu): it runs " \
           "kernels built elsewhere (prebuilt cubins or a library)" in drafted
    waiting = drafted.split("in the order they would be proposed", 1)[1]
    assert "1. `mini/enable-topk` (sm_120a): `pkg/jit.py:25 gen_topk_module`, " \
           "`pkg/topk.py:7 topk`\n2. `mini/enable-rope` (sm_120a): " \
           "`pkg/jit.py:30 gen_rope_module`" in waiting
    head = git(root, "rev-parse", "HEAD")

    # a second run: nothing new, nothing written anywhere
    seen = len(fake_github.requests)
    code, doc, err = run_autopilot(Workspace(root), push=False)
    assert code == 0, (doc, err)
    assert [f"{r.method} {r.path}" for r in fake_github.requests[seen:]
            if r.method in WRITES] == []
    assert doc["dashboard"]["result"] == "unchanged"
    assert git(root, "rev-parse", "HEAD") == head and git(root, "status", "--porcelain") == ""

    # norm lands upstream; meanwhile somebody proposes topk's opening themselves
    _land(root, upstream, "enable-norm")
    (norm,) = [p for p in fake_github.pulls(UPSTREAM)
               if p["head"]["label"] == "me:contrib/enable-norm"]
    fake_github.merge_pr(UPSTREAM, norm["number"])
    theirs = fake_github.add_pr_by(
        UPSTREAM, "alice", title="[SM120] Add SM120 support for topk",
        files=[{"filename": "pkg/jit.py", "patch": "@@ -26,3 +26,3 @@ def gen_topk_module():\n"
                "-    topk_flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])\n"
                "+    topk_flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10, 12])\n"
                }])
    code, doc, err = run_autopilot(Workspace(root), push=False)
    assert code == 0, (doc, err)
    assert _states(doc)["mini/enable-topk"] == "proposed elsewhere"
    assert _states(doc)["mini/enable-rope"] == "proposed"
    assert _ours(fake_github) == ["enable-act", "enable-rope"]
    assert f"`mini/enable-topk` (sm_120a): `pkg/jit.py:25 gen_topk_module`, " \
           f"`pkg/topk.py:7 topk`; already proposed upstream as " \
           f"[#{theirs}](https://github.com/{UPSTREAM}/pull/{theirs}) by @alice" \
           in _drafted(fake_github)
    (row,) = [r for r in _dashboard(fake_github).splitlines()
              if r.startswith("| `mini/enable-topk` |")]
    assert row.endswith(f"| [#{theirs}](https://github.com/{UPSTREAM}/pull/{theirs}) by "
                        "@alice (upstream) |")
    assert not (root / "patchsets" / "mini" / "enable-topk" / "patchset.toml").read_text(
        ).count("[pr]")  # no PR of its own; carried as usual
    norm_outcome = next(o for o in doc["patchsets"] if o["patchset"] == "mini/enable-norm")
    assert norm_outcome["result"] == "upstreamed"

    # and once more: the same answers, nothing written
    seen = len(fake_github.requests)
    code, doc, err = run_autopilot(Workspace(root), push=False)
    assert code == 0, (doc, err)
    assert [r for r in fake_github.requests[seen:] if r.method in WRITES] == []
    assert len(fake_github.pulls(UPSTREAM)) == 4


def test_a_draft_whose_ptx_was_skipped_is_held_back_in_status(
        tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    root, _ = _workspace(tmp_path, fake_github)
    text = (root / "contrib.toml").read_text(encoding="utf-8")
    (root / "contrib.toml").write_text(text + "max_open_drafts = 0\n", encoding="utf-8")
    code, doc, err = run_autopilot(Workspace(root), push=False)
    assert code == 0, (doc, err)
    assert fake_github.pulls(UPSTREAM) == []  # a ceiling of 0 proposes nothing
    assert "at most 0 draft PRs" in _drafted(fake_github)
    done = run_contrib("status", "--no-fetch", "--json", cwd=root)
    rows = {r["patchset"]: r for r in json.loads(done.out)["patchsets"]}
    mla = rows["mini/enable-mla"]["proposal"]
    assert not mla["proven"] and mla["held"][0].startswith("ptx skipped: nvcc cannot find")
    assert rows["mini/enable-act"]["proposal"]["proven"] is True
    shown = run_contrib("status", "--no-fetch", cwd=root)
    assert "mini/enable-mla: held back from a draft PR: ptx skipped: nvcc cannot find" \
        in shown.out + shown.err


def test_a_proposed_draft_says_what_was_proven_as_a_hand_open_pr_does(
        tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    root, _ = _workspace(tmp_path, fake_github)
    code, doc, err = run_autopilot(Workspace(root), push=False)
    assert code == 0, (doc, err)
    (pr,) = [p for p in fake_github.pulls(UPSTREAM) if p["head"]["label"] == "me:contrib/enable-act"]
    body = str(pr["body"])
    assert "### What was proven\n\nFor sm_120a, `contrib validate` passed:\n\n" in body
    assert "- gates: 2 touched gates admit sm_120a\n" \
           "- arch-guards: 1 file: sm_120a compiles what sm_90a, sm_100a compile\n" \
           "- ptx: 1 kernel entry in 1 unit for compute_120a, none empty\n" in body
    assert "Not proven here:\n\n- tests, skipped: no upstream test references the changed " \
           "code\n- No GPU of the target (sm_120a) ran this patch.\n" in body
    assert "### The chain\n\nThe gates this patch opens for sm_120a, in the order `contrib " \
           "enable` chained them from its audit of the base:\n\n" \
           "1. `pkg/act.py:7` `act`: admits majors 9, 10 -> 9, 10, 12\n" \
           "2. `pkg/jit.py:5` `gen_act_module`: admits majors 9, 10 -> 9, 10, 12\n\n" \
           "Below them, the CUDA units the ptx stage compiled for compute_120a:\n\n" \
           "- `csrc/act.cu` (built by gen_act_module): 1 kernel entry (`act_kernel`)\n" in body
    assert "held back" not in body

    # a hand-run `open-pr --dry-run` would write the very same body (offline, it cannot
    # compare it with GitHub's, so it says it would update the PR patchset.toml records)
    done = run_contrib("open-pr", "mini/enable-act", "--dry-run", "--json", cwd=root)
    (hand,) = json.loads(done.out)["results"]
    assert hand["body"] == body and hand["pr"]["number"] == pr["number"], hand
    assert any("its title and body were not compared" in u for u in hand["unchecked"])
