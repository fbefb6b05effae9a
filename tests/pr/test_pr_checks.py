"""The upstream's own PR checks: the scripts of its tree its PR workflows run, read from
the workflows at the patched tip and run offline on the patched tree; a failed one
refuses the PR unless --allow-hook-failures, one that cannot run here never does."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.git.repo import Git
from contrib.pr.checks import CheckResult, Checks, CheckStatus, PrCheck, find_checks, run_checks
from contrib.pr.conventions import checks_block
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo
from testing.pr_scene import TARGET, Scene
from testing.workspace import run_contrib

WORKFLOW = """name: pr checks
on: [pull_request]
env:
  HEAD_SHA: ${{ github.event.pull_request.head.sha }}
jobs:
  checks:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: pip install -r requirements.txt
      - name: the API and docs
        run: |
          set -o pipefail
          if python scripts/check_ok.py \\
              --head "$HEAD_SHA" | tee ok.txt; then
            echo fine >> "$GITHUB_STEP_SUMMARY"
          fi
          python scripts/check_bad.py
      - run: python3 scripts/check_net.py
      - run: python scripts/check_secret.py --token ${{ secrets.X }}
      - run: bash scripts/setup_env.sh
      - run: python scripts/run_suite.py --suite fast
  tests:
    runs-on: ubuntu-22.04
    steps:
      - run: python -m pytest -q tests/ --junitxml reports/unit.xml
      - run: python scripts/summarize.py reports/
  summary:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/download-artifact@v4
      - run: python scripts/summarize.py .
  on-gpu:
    runs-on: [self-hosted, gpu]
    steps:
      - run: python scripts/warmup.py
"""

SCRIPTS = {
    # passes on the patched tree only: HEAD is the tip the workflow names
    "scripts/check_ok.py": "import subprocess, sys\n"
    "head = subprocess.check_output(['git', 'rev-parse', 'HEAD'], text=True).strip()\n"
    "print('::warning file=pkg/core.py,line=3::f3 has no docstring')\n"
    "sys.exit(0 if sys.argv[1:] == ['--head', head] else 3)\n",
    "scripts/check_bad.py": "import sys\n"
    "if 'return 30' in open('pkg/core.py').read():\n"
    "    print('pkg/core.py: f3 changed')\n    print('document it in docs/index.md')\n"
    "    sys.exit(1)\n",
    "scripts/check_net.py": "import not_installed_here_xyz\n",
    "scripts/check_secret.py": "print('never run')\n",
    "scripts/setup_env.sh": "pip install -e .\n",  # an install, in the script: no check
    "scripts/run_suite.py": "import unittest\n",  # runs tests: collected's business
    "scripts/warmup.py": "print('on the upstream GPU runner')\n",
    "scripts/summarize.py": "print('reads the reports of the steps before it')\n",
}


def _commit(upstream: Repo) -> None:
    upstream.commit("PR checks", {".github/workflows/checks.yml": WORKFLOW, **SCRIPTS})


def test_the_checks_are_read_from_the_workflows_and_run_on_the_patched_tree(
        upstream: Repo) -> None:
    _commit(upstream)
    base = upstream.head()
    tip = upstream.commit("Change f3", {"pkg/core.py": upstream.read("pkg/core.py")
                                        .replace("return 3\n", "return 30\n")})
    git = Git(upstream.path)
    found = find_checks(git, base, tip)
    assert [c.command() for c in found] == [
        f"python scripts/check_ok.py --head {tip}", "python scripts/check_bad.py",
        "python3 scripts/check_net.py", "python scripts/check_secret.py --token "
        "'${{ secrets.X }}'", "python scripts/summarize.py reports/",
        "python scripts/summarize.py .", "python scripts/warmup.py"]  # pip, pytest and the
    # scripts that install or run tests are no checks
    assert found[0].env == (("HEAD_SHA", tip),)
    checks = run_checks(git, base, tip)
    assert checks is not None
    assert [(r.status, r.detail) for r in checks.results] == [
        (CheckStatus.PASSED, "1 warning: f3 has no docstring"),
        (CheckStatus.FAILED, "exit code 1: pkg/core.py: f3 changed / document it in "
                             "docs/index.md"),
        (CheckStatus.NOT_RUN, "module not_installed_here_xyz is not installed here"),
        (CheckStatus.NOT_RUN, "needs CI context ${{ secrets.X }}"),
        (CheckStatus.NOT_RUN, "needs what `python -m pytest -q tests/ --junitxml "
                              "reports/unit.xml` leaves (an earlier step of its job)"),
        (CheckStatus.NOT_RUN, "needs what `actions/download-artifact@v4` leaves (an earlier "
                              "step of its job)"),
        (CheckStatus.NOT_RUN, "needs the upstream's own runner `self-hosted gpu` (a job not "
                              "on GitHub's hosted runners)")]
    assert [r.check for r in checks.failed] == [found[1]]
    unpatched = run_checks(git, base, base)  # the same checks on the base: both pass
    assert unpatched is not None and not unpatched.failed


def test_a_failed_check_refuses_the_pr_unless_allowed(tmp_path: Path, upstream: Repo,
                                                      fake_github: FakeGitHub,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    _commit(upstream)
    scene = Scene(tmp_path, upstream, fake_github)
    res = run_contrib("open-pr", "--dry-run", TARGET, cwd=scene.root)
    assert res.code == 1 and len(res.err.strip().splitlines()) == 1, res.err
    assert ("the upstream's PR checks failed on the patched tree: `python scripts/check_bad.py`"
            " (exit code 1: pkg/core.py: f3 changed / document it in docs/index.md)") in res.err
    assert "--allow-hook-failures (it covers the PR checks too)" in res.err
    assert fake_github.writes() == [] and scene.fork_tip() is None
    res = run_contrib("open-pr", "--dry-run", "--json", "--allow-hook-failures", TARGET,
                      cwd=scene.root)
    assert res.code == 0, res.err
    [dry] = res.json["results"]  # type: ignore[index]
    assert [(c["command"].split()[1], c["status"]) for c in dry["checks"]] == [
        ("scripts/check_ok.py", "passed"), ("scripts/check_bad.py", "failed"),
        ("scripts/check_net.py", "not run"), ("scripts/check_secret.py", "not run"),
        ("scripts/summarize.py", "not run"), ("scripts/summarize.py", "not run"),
        ("scripts/warmup.py", "not run")]
    body = dry["body"]
    workflow = "`.github/workflows/checks.yml`"
    assert "**Upstream PR checks**: the scripts of the tree the workflows" in body
    for line in (
            f"- `python scripts/check_bad.py` ({workflow}): **failed** (exit code 1: "
            "pkg/core.py: f3 changed / document it in docs/index.md)",
            f"- `python3 scripts/check_net.py` ({workflow}): not run (module "
            "not_installed_here_xyz is not installed here)",
            f"- `python scripts/check_secret.py --token '${{{{ secrets.X }}}}'` ({workflow}): "
            "not run (needs CI context ${{ secrets.X }})"):
        assert line in body.splitlines(), line
    assert any(line.startswith("- `python scripts/check_ok.py --head ")
               and line.endswith(f"({workflow}): passed (1 warning: f3 has no docstring)")
               for line in body.splitlines())
    assert "Opened with `contrib open-pr --allow-hook-failures` (it covers these checks too)" \
        in body
    assert "pip install" not in body and "- `python -m pytest" not in body


def test_many_checks_that_need_ci_are_folded() -> None:
    """sglang's PR workflows name dozens of scripts on its GPU runners: the body lists
    those that ran, and folds the rest under <details>."""
    ran = CheckResult(PrCheck("ci.yml", ("python", "scripts/a.py"), "", ()), CheckStatus.PASSED)
    needing = [CheckResult(PrCheck("gpu.yml", ("python3", f"scripts/w{n}.py"), "test", (),
                                   needs="the upstream's own runner `1-gpu`"),
                           CheckStatus.NOT_RUN, "needs the upstream's own runner `1-gpu`")
               for n in range(6)]
    lines = checks_block(Checks((ran, *needing)), allowed=False).splitlines()
    assert lines[2] == "- `python scripts/a.py` (`ci.yml`): passed"
    assert lines[4].startswith("<details><summary>6 more the workflows run, not run here")
    assert lines[6] == ("- `python3 scripts/w0.py` (in `test/`, `gpu.yml`): not run (needs the "
                        "upstream's own runner '1-gpu')")
    assert lines[-1] == "</details>"
