"""`contrib open-pr --dry-run` is the recording forge: what it prints is what a real run
would ask of GitHub, and nothing reaches GitHub, the fork or the workspace: it is offline,
and says what it took from patchset.toml instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.forge.recording import RecordingForge
from contrib.pr.open import OFFLINE, open_pr
from contrib.validate.report import StageResult
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo
from testing.pr_scene import FORK, HEAD, PASSED, TARGET, UPSTREAM, Scene, fast_github
from testing.recordutil import run_of
from testing.workspace import run_contrib


@pytest.fixture
def scene(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
          monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    return Scene(tmp_path, upstream, fake_github)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".contrib" not in p.parts}


def test_dry_run_calls_are_the_real_runs_calls(scene: Scene) -> None:
    """The dry run lists the writes the real run then makes, one for one."""
    before = _tree(scene.root)
    res = run_contrib("open-pr", "--dry-run", "--json", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    [dry] = res.json["results"]  # type: ignore[index]
    assert scene.fake.requests == [] and scene.fork_tip() is None
    assert _tree(scene.root) == before
    assert (dry["result"], dry["would"], dry["push"]) == ("dry-run", "created", "would push")
    forge_calls = [a for a in dry["actions"] if a.split()[0] in ("GET", "POST", "PATCH")]
    assert forge_calls == [f"GET /repos/{UPSTREAM}/pulls state=all head={HEAD} base=main "
                           f"({OFFLINE})", f"POST /repos/{UPSTREAM}/pulls head={HEAD} draft=true"]
    assert not any(a.startswith("git ls-remote") for a in dry["actions"])
    assert len(dry["unchecked"]) == 3  # the fork's branch, whether a PR exists, the token
    code, [real] = scene.run()
    assert code == 0 and real["result"] == "created"
    assert [(r.method, r.path) for r in scene.fake.writes()] == [("POST", f"/repos/{UPSTREAM}/pulls")]


def test_dry_run_of_an_update_shows_the_patch(scene: Scene) -> None:
    code, _ = scene.run()
    assert code == 0
    scene.rebase()
    offline = run_contrib("open-pr", "--dry-run", TARGET, cwd=scene.root)
    assert offline.code == 1 and "a dry run does not fetch: run `contrib status`" in offline.err
    assert run_contrib("status", cwd=scene.root).code == 0  # fetches, as sync would have
    writes = len(scene.fake.writes())
    res = run_contrib("open-pr", "--dry-run", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    assert f"PATCH /repos/{UPSTREAM}/pulls/1 title, body" in res.out
    assert "git push --force-with-lease=refs/heads/contrib/sm120:" in res.out
    assert "not checked (a dry run is offline" in res.out
    assert "PR #1 on GitHub: taken as patchset.toml records it (open)" in res.out
    assert len(scene.fake.writes()) == writes  # nothing reached GitHub
    [pr] = scene.prs()
    assert "git range-diff" not in pr["body"]  # the body still says what the first run wrote


def test_dry_run_of_a_closed_pr_with_reopen(scene: Scene) -> None:
    """Offline, the PR is as patchset.toml records it: closed once a real run saw it so."""
    code, _ = scene.run()
    assert code == 0
    scene.fake.close_pr(UPSTREAM, 1)
    code, [closed] = scene.run()
    assert code == 1 and closed["result"] == "closed"
    res = run_contrib("open-pr", "--dry-run", "--reopen", "--json", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    [dry] = res.json["results"]  # type: ignore[index]
    assert dry["would"] == "reopened"
    assert f"PATCH /repos/{UPSTREAM}/pulls/1 state=open" in dry["actions"]
    assert scene.fake.pulls(UPSTREAM)[0]["state"] == "closed" and len(scene.fake.writes()) == 1


def test_a_callers_recorder_collects_the_calls(scene: Scene) -> None:
    """What a command that dry-runs several steps (the autopilot) hands open-pr."""
    recorder = RecordingForge(fast_github(scene.fake.url, scene.fake.token))
    seen: list[str] = []
    recorder.on_call = lambda call: seen.append(str(call))
    ws = scene.ws
    with ws.lock():
        code, [res] = open_pr(ws, [TARGET], dry_run=True, forge=recorder)
    assert code == 0 and res["would"] == "created"
    assert [str(c) for c in recorder.writes] == [f"POST /repos/{UPSTREAM}/pulls head={HEAD} draft=true"]
    assert seen == [str(c) for c in recorder.calls] and recorder.on_call is not None
    assert all(line in res["actions"] for line in seen)
    assert scene.fake.writes() == [] and scene.fork_tip() is None


def test_dry_run_never_reaches_the_fork_nor_github(scene: Scene,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the token nor a reachable fork is needed: nothing leaves the machine."""
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("GH_TOKEN", "")
    text = (scene.root / "contrib.toml").read_text()
    gone = scene.tmp / "no-such-fork.git"
    (scene.root / "contrib.toml").write_text(text.replace(str(scene.fork), str(gone)))
    res = run_contrib("open-pr", "--dry-run", "--json", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    [dry] = res.json["results"]  # type: ignore[index]
    assert (dry["would"], dry["push"]) == ("created", "would push")
    assert any(str(gone) in line and "absent" in line for line in dry["unchecked"])
    assert "no GitHub token here" in dry["unchecked"][-1]
    assert scene.fake.requests == [] and not gone.exists()


@pytest.mark.parametrize("key", ["fork", "github"])
@pytest.mark.parametrize("dry", [True, False])
def test_a_placeholder_left_by_init_is_refused_in_one_line(scene: Scene, key: str,
                                                           dry: bool) -> None:
    """The owner `contrib init` writes (doctor fails it): exit 2 naming the line to set."""
    config = scene.root / "contrib.toml"
    value = {"fork": "your-user/proj", "github": "upstream-owner/proj"}[key]
    config.write_text(config.read_text().replace(FORK if key == "fork" else UPSTREAM, value))
    line = next(n for n, row in enumerate(config.read_text().splitlines(), 1)
                if row.startswith(f"{key} ="))
    res = run_contrib("open-pr", *(["--dry-run"] if dry else []), TARGET, cwd=scene.root)
    assert res.code == 2 and res.err.count("\n") == 1, res.err
    assert f'{config}:{line}: [upstreams.proj] {key} = "{value}" is the placeholder' in res.err
    assert "OWNER/NAME" in res.err
    assert scene.fake.requests == [] and scene.fork_tip() is None


PROVEN = run_of([*PASSED.stages[:2], StageResult("gates", "passed", "1 touched gate admits sm_120a"),
                 PASSED.stages[3],
                 StageResult("ptx", "passed", "1 kernel entry in 1 unit", details={
                     "compute": "compute_120a", "units": [{
                         "path": "csrc/f3.cu", "why": "changed", "ok": True, "entries": 1,
                         "builder": "", "kernels": ["f3_kernel"]}]}),
                 StageResult("others", "passed", "unchanged for sm_90a, sm_100a: 1 kernel "
                             "identical on each (1 unit)"),
                 *PASSED.stages[5:]])


def test_status_and_a_dry_run_agree_on_what_is_held_back(scene: Scene) -> None:
    """A draft with no PR is held back by one rule (pr.prepare.holdback, the proof the
    autopilot proposes by): status says it, and open-pr, dry or not, refuses it so."""
    meta = scene.version_dir().parent / "patchset.toml"
    meta.write_text(meta.read_text().replace('upstream_status = "Pending"',
                                             'upstream_status = "Draft"'))

    def both() -> tuple[dict[str, object], str, dict[str, object]]:
        shown = run_contrib("status", "--no-fetch", "--json", TARGET, cwd=scene.root)
        assert shown.code == 0, shown.err
        (row,) = shown.json["patchsets"]  # type: ignore[index]
        human = run_contrib("status", "--no-fetch", TARGET, cwd=scene.root)
        dry = run_contrib("open-pr", "--dry-run", "--json", TARGET, cwd=scene.root)
        (result,) = dry.json["results"]  # type: ignore[index]
        assert dry.code == result["exit_code"]
        return row["proposal"], human.out + human.err, result

    # the record passes every required stage, but proves no kernel: gates and ptx had
    # nothing to check (what `status` used to hold back while open-pr would create)
    proposal, human, result = both()
    assert proposal["held_back"] == ["gates not-applicable: the patch touches no "
                                     "architecture gate", "ptx built nothing, and no audit of "
                                     "the chain shows that it reaches no device code",
                                     "no others stage in the record (whether other archs "
                                     "change is not shown): run contrib validate again"]
    sentence = proposal["sentence"]
    assert sentence == "held back from a draft PR: " + "; ".join(proposal["held_back"])
    assert f"{TARGET}: {sentence}" in human
    assert (result["result"], result["exit_code"]) == ("error", 1)
    assert sentence in str(result["error"]) and "--force" in str(result["error"])
    forced = run_contrib("open-pr", "--dry-run", "--force", "--json", TARGET, cwd=scene.root)
    assert forced.code == 0 and forced.json["results"][0]["would"] == "created"  # type: ignore[index]

    scene.write_validation(PROVEN)  # gates and ptx prove the kernels: nothing held back
    proposal, human, result = both()
    assert (proposal["held_back"], proposal["sentence"], proposal["proven"]) == ([], "", True)
    assert "held back" not in human
    assert (result["result"], result["would"]) == ("dry-run", "created")
    assert scene.fake.requests == []
