"""The planted token: the audit finds it where it is, and contrib writes it nowhere.

tests/reliability/conftest.py exports one planted token as GITHUB_TOKEN to
every reliability test and searches every recorded output and every byte
under the tests' folders for it when the session ends.  This file proves the
audit is not blind (it finds a planted copy in each encoding) and runs the
path where the token does the most: open-pr pushing over real smart HTTP that
demands it (first push, a refusal, an update), with validate, sync, status
and a dry run around it, then searches everything at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import testing.workspace as harness
from testing.audit import AUDIT, FIGURES, PLANTED, Audit, token_forms
from testing.fake_github import FakeGitHost, FakeGitHub
from testing.gitutil import Repo
from testing.pr_scene import FORK, TARGET, Scene


def test_audit_finds_every_form_of_the_token(tmp_path: Path) -> None:
    audit = Audit()
    leaks = tmp_path / "planted-on-purpose"
    leaks.mkdir()
    for i, form in enumerate(token_forms()):
        (leaks / f"leak{i}").write_bytes(b"prefix " + form + b" suffix")
    (leaks / "clean").write_bytes(PLANTED[:-1].encode())
    hits = audit.scan_tree(leaks)
    for leak in leaks.iterdir():  # the session audit searches tmp_path too
        leak.unlink()
    assert sorted(Path(h).name for h in hits) == [f"leak{i}" for i in range(len(token_forms()))]
    audit.record(f"error: {PLANTED}")
    assert audit.scan_outputs() == 1


@pytest.fixture
def githost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHost]:
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http")
    host = FakeGitHost(str(tmp_path / "githost"), PLANTED)
    yield host
    host.stop()


def test_token_used_everywhere_is_written_nowhere(tmp_path: Path, upstream: Repo,
                                                  planted_github: FakeGitHub,
                                                  githost: FakeGitHost, isolated: Path) -> None:
    scene = Scene(tmp_path, upstream, planted_github, githost)

    def cli(*args: str) -> harness.Result:
        return harness.run_contrib(*args, cwd=scene.root)  # recorded by the audit

    assert cli("validate", "--json", TARGET).code in (0, 1)
    assert cli("open-pr", "--dry-run", TARGET).code == 0
    githost.token = "ghp_someOtherTokenTheForkWants0"  # the fork refuses ours first
    refused = cli("open-pr", "--json", TARGET)
    assert refused.code == 1 and "refused the token" in refused.out
    githost.token = PLANTED
    assert cli("open-pr", TARGET).code == 0
    scene.rebase()
    for args in (("sync", "--json"), ("status",), ("open-pr", "--json", TARGET)):
        result = cli(*args)
        assert result.code == 0, (args, result.err)
    pushes = [r for r in githost.requests if r.path.endswith("/git-receive-pack")]
    assert len(pushes) == 2 and all(r.headers["authorization"] == githost.expected_auth()
                                    for r in pushes)
    [pr] = scene.prs()
    AUDIT.record(json.dumps(scene.prs()), *(r.body for r in planted_github.requests))
    for req in planted_github.requests:  # the token only ever in the Authorization header
        assert req.headers["authorization"] == f"token {PLANTED}"
        assert not any(form in req.body for form in token_forms())
    hits = AUDIT.scan_tree(tmp_path) + AUDIT.scan_tree(isolated)
    assert hits == []
    assert (Path(githost.root) / f"{FORK}.git" / "config").is_file()
    FIGURES["secrets: commands run with the token in use"] += 7
