"""Whether the upstream's PR workflows run a test: the commands they run and the scripts
those name, read at the commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.git.repo import Git
from contrib.pr.collected import Collection, collected
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo
from testing.pr_scene import Scene

PR_CI = """name: pr
on:
  pull_request:
jobs:
  unit:
    runs-on: ubuntu-latest
    steps:
      - run: |
          # pytest tests/gpu/ is for the nightly only
          python -m pytest -q tests/unit/
  suites:
    uses: ./.github/workflows/_suite.yml
    with:
      suite: ${{ matrix.suite }}
    strategy:
      matrix:
        suite: [fast]
"""

SUITE = """on:
  workflow_call:
    inputs:
      suite: {type: string}
jobs:
  run:
    runs-on: ubuntu-latest
    defaults:
      run:
        working-directory: ci
    steps:
      - run: bash run_${{ inputs.suite }}.sh
"""

NIGHTLY = """on:
  schedule: [{cron: "0 0 * * *"}]
jobs:
  gpu:
    runs-on: gpu
    steps:
      - run: pytest tests/gpu/
"""


@pytest.fixture
def tree(upstream: Repo) -> Git:
    upstream.commit("CI", {
        ".github/workflows/pr.yml": PR_CI, ".github/workflows/_suite.yml": SUITE,
        ".github/workflows/nightly.yml": NIGHTLY,
        "ci/run_fast.sh": "python3 collect.py\n",
        "ci/collect.py": 'import glob\nFILES = glob.glob("registered/*.py")  # unittest each\n',
        "ci/registered/test_reg.py": "", "tests/unit/test_a.py": "",
        "tests/gpu/test_b.py": "", "tests/other/test_c.py": ""})
    return Git(upstream.path)


def test_a_test_is_run_by_a_command_a_script_or_not_at_all(tree: Git) -> None:
    found = {c.test: c for c in collected(tree, "HEAD", [
        "tests/unit/test_a.py", "tests/gpu/test_b.py", "ci/registered/test_reg.py",
        "tests/other/test_c.py", "tests/gone/test_d.py"])}
    unit = found["tests/unit/test_a.py"]
    assert (unit.how, unit.workflow, unit.named) == (
        Collection.RUN, ".github/workflows/pr.yml", "tests/unit")
    assert unit.via == "python -m pytest -q tests/unit/"
    # the nightly workflow runs it, a comment names it: no PR workflow runs it
    assert found["tests/gpu/test_b.py"].how == Collection.NOT_FOUND
    # the matrix value goes into the reusable workflow's input, which names the script;
    # that script names the folder beside it, and decides what it runs
    reg = found["ci/registered/test_reg.py"]
    assert (reg.how, reg.workflow, reg.via, reg.named) == (
        Collection.BY_SCRIPT, ".github/workflows/_suite.yml", "ci/collect.py", "ci/registered")
    assert found["tests/other/test_c.py"].how == Collection.NOT_FOUND
    assert "tests/gone/test_d.py" not in found  # not in the tree: nothing to say


def test_the_body_says_whether_the_pr_ci_runs_the_tests(tmp_path: Path, upstream: Repo,
                                                        fake_github: FakeGitHub,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The record's test (tests/test_core.py) is named by no PR workflow: the body says so."""
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    upstream.commit("CI", {".github/workflows/pr.yml": PR_CI, "tests/test_core.py": ""})
    scene = Scene(tmp_path, upstream, fake_github)
    code, [res] = scene.run(dry_run=True)
    assert code == 0, res
    assert [(c["test"], c["how"]) for c in res["collected"]] == [
        ("tests/test_core.py", "not-found")]
    assert "- `tests/test_core.py`: **not run**: no command of a PR workflow" in res["body"]
