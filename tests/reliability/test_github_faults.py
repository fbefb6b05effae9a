"""GitHub faults through `contrib open-pr`, the gaps the other suites leave.

Already proven elsewhere, not repeated here: a bad token (401) and a 403
naming the missing permission at the API level, 422 "already exists", a 502
after the create landed (with and without retries), a secondary rate limit
waited out, a create that times out but lands, a refused connection
(tests/test_github.py, tests/test_open_pr.py).

Here, end to end with a real fork: a rate limit that never lifts, a 403 on
the create, a 422 that is not "already exists", a 502 that never lands, a
502 after an update landed, an unreachable API and a lookup that always times
out.  Each: exit 1, one line without the token, at most one PR, the fork
branch absent or exactly our commit, patchset.toml whole; and once the fault
is gone the next run ends with exactly one PR.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contrib.workspace.model import Workspace
from testing.audit import FIGURES, PLANTED
from testing.fake_github import FakeGitHub, Fault
from testing.gitutil import Repo
from testing.pr_scene import UPSTREAM, Scene, fast_github

PULLS = rf"/repos/{UPSTREAM}/pulls"
ONE_PR = rf"/repos/{UPSTREAM}/pulls/\d+"


def _rate_limited(fake: FakeGitHub) -> list[Fault]:
    return [fake.rate_limit_next("POST", PULLS, count=50, retry_after=1)]


def _forbidden(fake: FakeGitHub) -> list[Fault]:
    return [fake.add_fault(Fault("POST", PULLS, "status", 50, 403, {
        "message": "Resource not accessible by integration",
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"}))]


def _invalid(fake: FakeGitHub) -> list[Fault]:
    return [fake.add_fault(Fault("POST", PULLS, "status", 50, 422, {
        "message": "Validation Failed", "status": "422",
        "errors": [{"resource": "PullRequest", "field": "base", "code": "invalid"}]}))]


def _bad_gateway(fake: FakeGitHub) -> list[Fault]:
    return [fake.add_fault(Fault("POST", PULLS, "status", 50, 502))]


def _lookup_times_out(fake: FakeGitHub) -> list[Fault]:
    return [fake.delay_next("GET", PULLS, seconds=2.0, count=50)]


FAULTS: dict[str, tuple[Callable[[FakeGitHub], list[Fault]], str, dict[str, Any]]] = {
    "rate limit never lifts": (_rate_limited, "could not create a pull request on "
                               "upstream-org/proj at http://127.0.0.1:", {}),
    "403 on create": (_forbidden, "token lacks Pull requests: write on upstream-org/proj (403 "
                      "Resource not accessible by integration)", {}),
    "422 base invalid": (_invalid, "GitHub refused to create a pull request on upstream-org/proj"
                         " (422 Validation Failed: base invalid)", {}),
    "502 that never lands": (_bad_gateway, "it kept answering 5xx after retries", {}),
    "lookup always times out": (_lookup_times_out, "list pull requests of upstream-org/proj at "
                                "http://127.0.0.1", {"timeout": 1}),
}


def _check(scene: Scene, code: int, res: dict[str, Any], says: str) -> None:
    assert code == 1, res
    error = res["error"]
    assert says in error and "\n" not in error and PLANTED not in error, error
    assert len(scene.prs()) <= 1
    Workspace(scene.root).patchset("proj/sm120")  # patchset.toml still loads
    tip = scene.fork_tip()
    assert tip is None or tip == res.get("tip", tip)


@pytest.mark.parametrize("label", list(FAULTS))
def test_github_fault_is_one_line_then_recovers(tmp_path: Path, upstream: Repo,
                                                planted_github: FakeGitHub, label: str) -> None:
    inject, says, options = FAULTS[label]
    scene = Scene(tmp_path, upstream, planted_github)
    faults = inject(planted_github)
    factory = functools.partial(fast_github, retries=1, max_wait=1.0, **options)
    code, [res] = scene.run(github_factory=factory)
    _check(scene, code, res, says)
    if label == "rate limit never lifts":
        assert res["error"].endswith(
            "kept answering 403 rate limit (Retry-After) after retries; try again later")
    assert scene.prs() == []
    for fault in faults:
        fault.count = 0
    code, [res] = scene.run()
    assert code == 0 and res["result"] == "created", res
    [pr] = scene.prs()
    assert pr["head"]["sha"] == scene.fork_tip() == res["tip"]
    FIGURES["faults survived: GitHub (open-pr end to end)"] += 1


def test_unreachable_api_pushes_nothing(tmp_path: Path, upstream: Repo,
                                        planted_github: FakeGitHub) -> None:
    scene = Scene(tmp_path, upstream, planted_github)
    config = scene.root / "contrib.toml"
    config.write_text(config.read_text().replace(planted_github.url, "http://127.0.0.1:1"))
    code, [res] = scene.run()
    _check(scene, code, res, "could not read repository upstream-org/proj at "
                             "http://127.0.0.1:1: could not connect")
    assert scene.fork_tip() is None and planted_github.requests == []
    config.write_text(config.read_text().replace("http://127.0.0.1:1", planted_github.url))
    code, [res] = scene.run()
    assert code == 0 and len(scene.prs()) == 1
    FIGURES["faults survived: GitHub (open-pr end to end)"] += 1


def test_502_after_an_update_landed_then_unchanged(tmp_path: Path, upstream: Repo,
                                                   planted_github: FakeGitHub) -> None:
    scene = Scene(tmp_path, upstream, planted_github)
    code, [first] = scene.run()
    assert code == 0
    scene.rebase()
    planted_github.add_fault(Fault("PATCH", ONE_PR, "after", 1, 502))
    code, [res] = scene.run(github_factory=functools.partial(fast_github, retries=0))
    _check(scene, code, res, "GitHub failed to update pull request #1 on upstream-org/proj (502")
    [pr] = scene.prs()
    assert f"version={scene.version_dir().name}" in pr["body"]  # it did land
    code, [res] = scene.run()
    assert code == 0 and res["result"] == "unchanged" and len(scene.prs()) == 1
    assert res["tip"] == scene.fork_tip() != first["tip"]
    FIGURES["faults survived: GitHub (open-pr end to end)"] += 1
