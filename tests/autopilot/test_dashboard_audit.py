"""The dashboard's "Audit" section: counts, uncovered runtime gates, what upstream opened
since the last run; no write when nothing changed; a failed audit is a Need."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contrib.workspace.model import Workspace
from testing.auditupstream import audit_upstream, audit_workspace, open_gate
from testing.autopilot_scene import WSREPO, run_autopilot
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo
from testing.stackupstreams import lower_upstream, top_upstream
from testing.workspace import run_contrib

BLOB = "https://github.com/upstream-org/mini/blob"
COMMIT = "https://github.com/upstream-org/mini/commit"


@pytest.fixture
def mini(tmp_path: Path) -> Repo:
    return audit_upstream(tmp_path / "mini")


def _body(fake: FakeGitHub) -> str:
    (issue,) = [i for i in fake.issues(WSREPO)
                if (i.get("body") or "").startswith("<!-- contrib:dashboard -->")]
    return str(issue["body"])


def _run(root: Path) -> tuple[int, dict[str, Any]]:
    code, doc, _ = run_autopilot(Workspace(root), push=False)
    return code, doc


def test_audit_section_tracks_the_upstream(tmp_path: Path, mini: Repo, fake_github: FakeGitHub,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    fake_github.add_repo(WSREPO)
    root = audit_workspace(tmp_path, mini, fake_github.url, WSREPO)
    first = mini.head()

    code, doc = _run(root)
    assert code == 0 and doc["dashboard"]["result"] == "created", doc
    body = _body(fake_github)
    audit = body.split("## Audit", 1)[1].split("## Needs you", 1)[0]
    assert "### `sm_120a`" in audit
    assert f"#### mini at [`{first[:7]}`]({COMMIT}/{first})" in audit
    assert ("9 gates turn `sm_120a` away (2 needs-kernel-work, 4 gate-only, 1 intentional, "
            "2 unknown); 8 at runtime that no patchset covers.") in audit
    assert (f"| [`pkg/fusion.py:7`]({BLOB}/{first}/pkg/fusion.py#L7) | `pick_backend` | "
            "unknown |") in audit
    assert "test_fusion" not in audit  # a test gate is counted, not listed
    assert "No earlier audit to compare with yet." in audit
    assert " s]" not in audit and "seconds" not in audit  # nothing that moves by itself
    (view,) = doc["audit"]
    assert view["commit"] == first and view["counts"]["needs-kernel-work"] == 2

    # Nothing changed: the body says the same, nothing is written.
    seen = len(fake_github.requests)
    code, doc = _run(root)
    assert doc["dashboard"]["result"] == "unchanged", doc
    assert not [r for r in fake_github.requests[seen:] if r.method in ("POST", "PATCH")]

    # Upstream opens pick_backend: the section names it, with the commit.
    sha = open_gate(mini)
    code, doc = _run(root)
    assert doc["dashboard"]["result"] == "updated", doc
    audit = _body(fake_github).split("## Audit", 1)[1]
    assert f"Opened since [`{first[:7]}`]({COMMIT}/{first}):" in audit
    assert (f"- [`pkg/fusion.py:7`]({BLOB}/{sha}/pkg/fusion.py#L7) `pick_backend`: "
            f"[`{sha[:7]}`]({COMMIT}/{sha}) fusion: admit SM120 (#42)") in audit
    assert "| `pick_backend` |" not in audit
    assert doc["audit"][0]["opened"][0]["opened_by"]["pr"] == 42

    # And a run after that, upstream still: the same comparison, no write.
    code, doc = _run(root)
    assert doc["dashboard"]["result"] == "unchanged", doc


def test_a_failed_audit_is_a_line_and_a_need(tmp_path: Path, mini: Repo,
                                             fake_github: FakeGitHub,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    fake_github.add_repo(WSREPO)
    gone = tmp_path / "gone"
    root = audit_workspace(tmp_path, mini, fake_github.url, WSREPO,
                           extra=f'\n[upstreams.gone]\nurl = "{gone}"\nbranch = "main"\n')
    code, doc = _run(root)
    assert code == 1 and doc["dashboard"]["result"] == "created", doc
    body = _body(fake_github)
    assert f"#### gone\n\nThe audit failed: upstream gone: {gone} does not exist" in body
    assert "#### mini at " in body  # the other upstream is still audited
    assert f"- **audit**: audit of gone for sm_120a: upstream gone: {gone}" in body
    assert [p["kind"] for p in doc["problems"]] == ["audit"]


def test_a_bug_in_the_audit_is_logged_and_the_rest_goes_on(
        tmp_path: Path, mini: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug (not a ContribError) costs one upstream's section, not the dashboard; its
    traceback goes to the cache's error log, which the line names."""
    from contrib.autopilot import audits

    cache = tmp_path / "cache"
    monkeypatch.setenv("CONTRIB_CACHE", str(cache))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("gates")

    monkeypatch.setattr(audits, "audit_upstream", broken)
    root = audit_workspace(tmp_path, mini, "http://127.0.0.1:9", "me/ws")
    view = audits.audit_one(Workspace(root), "mini", "sm_120a", fetch=True, remember=False)
    log = cache / "contrib-error.log"
    assert view.error == (f"KeyError: 'gates' (a bug in contrib's audit; details in {log}: "
                          "please report it)")
    text = log.read_text(encoding="utf-8")
    assert "Traceback" in text and "in broken" in text and "KeyError: 'gates'" in text


@pytest.mark.parametrize("value, words", [
    ('["sm_120a", "sm_999"]', "autopilot.audit_arch holds 'sm_999', which is not a GPU"),
    ('"sm_120a"', "autopilot.audit_arch must be a list of strings"),
    ('["sm_120a", "SM120a"]', "autopilot.audit_arch names sm_120a twice"),
])
def test_bad_audit_arch_exits_2_naming_the_line(tmp_path: Path, mini: Repo, value: str,
                                                words: str) -> None:
    root = audit_workspace(tmp_path, mini, "https://api.github.com", WSREPO, audit_arch=value)
    lines = (root / "contrib.toml").read_text().splitlines()
    number = next(n for n, line in enumerate(lines, 1) if line.startswith("audit_arch"))
    result = run_contrib("autopilot", "--dry-run", cwd=root)
    assert result.code == 2
    assert result.err.count("\n") == 1, result.err
    assert f"contrib.toml:{number}: {words}" in result.err, result.err


def _stacked(tmp_path: Path, fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch, top: Repo,
             lower: Repo) -> tuple[dict[str, Any], str]:
    """One autopilot run of a workspace of ``top`` (as ``mini``) over ``lower``: its
    document and the dashboard's audit of ``mini``."""
    monkeypatch.setenv("GITHUB_TOKEN", fake.token)
    fake.add_repo(WSREPO)
    root = audit_workspace(tmp_path, top, fake.url, WSREPO,
                           extra=f'\n[upstreams.lower]\nurl = "{lower.path}"\nbranch = "main"\n')
    _, doc = _run(root)
    return doc, _body(fake).split("#### mini", 1)[1].split("####", 1)[0]


def test_a_mismatch_with_the_upstream_below_comes_first(
        tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    top = top_upstream(tmp_path / "top")
    doc, audit = _stacked(tmp_path, fake_github, monkeypatch, top,
                          lower_upstream(tmp_path / "lower"))
    assert "**1 mismatch with the upstream below** (admitted here, refused there):" in audit
    line = f"- [`python/top/args.py:8`]({BLOB}/{top.head()}/python/top/args.py#L8): "
    assert line in audit and "sm_120a crashes there" in audit
    assert audit.index(line) < audit.index("| uncovered runtime gate |")
    (view,) = [v for v in doc["audit"] if v["upstream"] == "mini"]
    assert view["mismatches"][0]["below"]["function"] == "gen_comm_module"


def test_the_section_answers_by_feature_the_crash_first(
        tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    from testing.featureupstreams import feature_lower, feature_upstream

    doc, audit = _stacked(tmp_path, fake_github, monkeypatch,
                          feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower"))
    assert ("7 features (1 crash, 1 needs-kernel-work, 2 unknown, 1 gate-only, 2 on); "
            "5 rows with a gate on the way:") in audit
    rows = [line for line in audit.splitlines() if line.startswith("| ") and "`--" in line]
    assert rows[0] == ("| crash | `--enable-quick-reduce` | refused by lower v1.0 "
                       "lowerlib/jit.py:5 gen_comm_module |")
    fusion = next(row for row in rows if "`--enable-fusion`" in row)
    assert "`contrib enable lower lowerlib/jit.py:gen_comm_module --only --arch sm_120a --at " \
           "v1.0 --name enable-fusion`; `contrib enable mini --feature=--enable-fusion " in fusion
    assert audit.index("| verdict | feature | next |") < audit.index("| uncovered runtime gate |")
    (view,) = [v for v in doc["audit"] if v["upstream"] == "mini"]
    assert view["feature_counts"]["crash"] == 1
    assert view["features"][0] == {"verdict": "crash", "feature": "--enable-quick-reduce",
                                   "next": rows[0].split(" | ")[2].removesuffix(" |")}
