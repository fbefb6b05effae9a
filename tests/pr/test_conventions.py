"""The upstream's own conventions in the PR: its template filled by its headings, its
pre-commit hooks run on the touched files (a failing one refuses the PR unless
--allow-hook-failures), and its CODEOWNERS named, never requested on a draft."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo
from testing.pr_scene import TARGET, UPSTREAM, Scene
from testing.workspace import run_contrib

TEMPLATE = """<!-- Thank you for contributing! -->

## Description

<!-- What does this PR do? -->

## Related Issues

## Checklist

- [ ] I have installed the hooks with `pre-commit install`.
- [ ] I have run the hooks with `pre-commit run --all-files`.
- [ ] Tests have been added or updated.
- [ ] All tests are passing.

## Reviewer Notes

<!-- Anything for the reviewers -->
"""

OWNERS = "* @core-team\npkg/ @pkg-owner @second  # the package\n/docs/ @docs-owner\n"


def _hooks(failing_files: str) -> str:
    """One local hook that passes on Python files, one that fails on ``failing_files``:
    no repository to clone, nothing to install."""
    return f"""repos:
  - repo: local
    hooks:
      - id: passes
        name: a check that passes
        entry: "true"
        language: system
        files: \\.py$
      - id: refuses-pkg
        name: nothing may change here
        entry: nothing may change under this folder
        language: fail
        files: {failing_files}
      - id: manual-only
        name: never run at commit
        entry: "false"
        language: system
        stages: [manual]
"""


def _scene(tmp_path: Path, upstream: Repo, fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch,
           failing_files: str) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake.token)
    upstream.commit("Conventions", {".github/pull_request_template.md": TEMPLATE,
                                    ".pre-commit-config.yaml": _hooks(failing_files),
                                    ".github/CODEOWNERS": OWNERS})
    return Scene(tmp_path, upstream, fake)


def _between(body: str, text: str, before: str, after: str) -> bool:
    return body.index(before) < body.index(text) < body.index(after)


def test_the_template_is_filled_by_its_headings(tmp_path: Path, upstream: Repo,
                                                fake_github: FakeGitHub,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    scene = _scene(tmp_path, upstream, fake_github, monkeypatch, failing_files="^docs/")
    code, [res] = scene.run()
    assert code == 0, res
    [pr] = scene.prs()
    body = pr["body"]
    assert body.splitlines()[0].startswith("**Validation:**")  # the verdict stays first
    assert _between(body, "### Patches (1", "## Description", "## Related Issues")
    hooks = res["hooks"]
    assert [(r["id"], r["status"]) for r in hooks["results"]] == [
        ("passes", "passed"), ("refuses-pkg", "skipped")]  # the manual hook is not a commit's
    assert hooks["files"] == ["pkg/core.py"] and res["template"] == ".github/pull_request_template.md"
    assert _between(body, "**pre-commit**: contrib ran", "## Checklist", "## Reviewer Notes")
    assert "`pre-commit run --files pkg/core.py`: 1 passed, 1 skipped" in body
    ticked = [line for line in body.splitlines() if line.startswith("- [x]")]
    unticked = [line for line in body.splitlines() if line.startswith("- [ ]")]
    assert [line.split(" — ")[0] for line in ticked] == [
        "- [x] I have run the hooks with `pre-commit run --all-files`.",
        "- [x] All tests are passing."]
    assert "contrib ran `pre-commit run --files pkg/core.py`" in ticked[0]
    assert "contrib validate ran `pytest tests/test_core.py` on sm_120a" in ticked[1]
    assert unticked == ["- [ ] I have installed the hooks with `pre-commit install`.",
                        "- [ ] Tests have been added or updated."]
    # the owners: the last matching line wins, named without a mention, never requested
    assert _between(body, "- `pkg/core.py`: `@pkg-owner` `@second`", "## Reviewer Notes",
                    "### Validation")  # no tests section: the record follows the template
    assert "@core-team" not in body
    assert not fake_github.calls(path=rf"/repos/{UPSTREAM}/pulls/\d+/requested_reviewers")
    assert scene.run()[1][0]["result"] == "unchanged"  # the same body again: no edit


def test_a_failing_hook_refuses_the_pr_unless_allowed(tmp_path: Path, upstream: Repo,
                                                      fake_github: FakeGitHub,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    scene = _scene(tmp_path, upstream, fake_github, monkeypatch, failing_files="^pkg/")
    for args in (("--dry-run",), ()):
        res = run_contrib("open-pr", *args, TARGET, cwd=scene.root)
        assert res.code == 1 and len(res.err.strip().splitlines()) == 1, res.err
        assert "pre-commit hooks failed on the touched files: refuses-pkg (exit code: 1; nothing may" in res.err
        assert "--allow-hook-failures" in res.err
    assert fake_github.writes() == [] and scene.fork_tip() is None
    code, [res] = scene.run(allow_hook_failures=True)
    assert code == 0 and res["result"] == "created"
    [pr] = scene.prs()
    assert "| `refuses-pkg` | failed: exit code: 1; nothing may change under this folder |" \
        in pr["body"]
    assert "Opened with `contrib open-pr --allow-hook-failures`" in pr["body"]
    assert "- [ ] I have run the hooks" in pr["body"]  # failed: not ticked


def test_hooks_that_need_the_network_are_not_run_offline(tmp_path: Path, upstream: Repo,
                                                        fake_github: FakeGitHub,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A dry run is offline: a hook repository not in the cache yet is reported as not
    run, with why, and is no failure."""
    config = _hooks("^docs/") + ("  - repo: https://github.com/pre-commit/pre-commit-hooks\n"
                                 "    rev: v5.0.0\n    hooks:\n      - id: trailing-whitespace\n")
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    upstream.commit("Conventions", {".pre-commit-config.yaml": config})
    scene = Scene(tmp_path, upstream, fake_github)
    res = run_contrib("open-pr", "--dry-run", "--json", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    [dry] = res.json["results"]  # type: ignore[index]
    statuses = {r["id"]: (r["status"], r["detail"]) for r in dry["hooks"]["results"]}
    assert statuses["passes"] == ("passed", "")
    status, why = statuses["trailing-whitespace"]
    assert status == "not run" and "a dry run is offline" in why
    assert "pre-commit-hooks v5.0.0 needs the network" in why
    assert dry["template"] is None  # no template: the body keeps contrib's own layout
    assert "| `trailing-whitespace` | not run: installing" in dry["body"]
    assert not (Path.home() / ".cache" / "pre-commit").exists()  # only in contrib's cache


def test_a_hooks_output_never_carries_credentials(tmp_path: Path, upstream: Repo,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """What a failing hook (or a clone pre-commit could not make) says is kept in the
    result, with a URL's credentials and the token taken out; the caller's GIT_DIR
    does not reach pre-commit's git."""
    from contrib.git.repo import Git
    from contrib.pr.hooks import HookStatus, run_hooks

    secret = "ghp_" + "s3cr3t" * 4
    monkeypatch.setenv("GITHUB_TOKEN", secret)
    config = ("repos:\n  - repo: local\n    hooks:\n      - id: leaks\n        name: leaks\n"
              f"        entry: fetch https://bot:{secret}@example.com/x.git failed\n"
              "        language: fail\n        files: \\.py$\n")
    base = upstream.commit("Hooks", {".pre-commit-config.yaml": config})
    tip = upstream.commit("Touch", {"pkg/core.py": "x = 2\n"})
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere.git"))
    hooks = run_hooks(Git(upstream.path), base, tip, offline=True)
    assert hooks is not None
    [result] = hooks.results
    assert result.status == HookStatus.FAILED and "https://***@example.com/x.git" in result.detail
    assert secret not in result.detail


def test_running_the_hooks_forgets_no_other_worktree_of_the_cache(tmp_path: Path,
                                                                  upstream: Repo) -> None:
    """A worktree of the cache whose folder moved (a workspace moved with mv, not yet
    repaired) stays registered; the hooks' own worktree, deleted, is made again."""
    from contrib.git.repo import Git
    from contrib.pr.hooks import HookStatus, run_hooks

    base = upstream.commit("Hooks", {".pre-commit-config.yaml": _hooks("^docs/")})
    tip = upstream.commit("Touch", {"pkg/core.py": "x = 2\n"})
    git = Git(upstream.path)
    git.run("worktree", "add", "-q", "--detach", str(tmp_path / "edit"), base)
    (tmp_path / "edit").rename(tmp_path / "moved")
    first = run_hooks(git, base, tip, offline=True)
    assert first is not None
    hooks_tree = next(p for p in git.run("worktree", "list", "--porcelain").splitlines()
                      if p.startswith("worktree ") and p.endswith("/src"))[len("worktree "):]
    shutil.rmtree(hooks_tree)
    again = run_hooks(git, base, tip, offline=True)
    assert again is not None and again == first
    assert [r.status for r in again.results] == [HookStatus.PASSED, HookStatus.SKIPPED]
    listed = git.run("worktree", "list", "--porcelain")
    assert f"worktree {tmp_path / 'edit'}" in listed
