"""`contrib init-ci` and the workflow it writes: every point of the design, read from
the YAML, and actionlint (with shellcheck on the run: scripts) on every output."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from contrib import __version__
from contrib.autopilot.workflow import MARKER, GpuRunner, Options, render, written_by_us
from testing.gitutil import Repo, git
from testing.workspace import Workspace, make_patch

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / ".github" / "workflows" / "contrib.yml"
ACTIONS = {"actions/checkout", "actions/setup-python", "actions/cache",
           "actions/upload-artifact", "actions/download-artifact"}


def actionlint(workflow: str, tmp_path: Path, labels: list[str]) -> None:
    """Run actionlint (from the test extra) on ``workflow``; fail with its report."""
    exe = shutil.which("actionlint")
    assert exe, "actionlint is not installed: pip install -e '.[test]'"
    repo = tmp_path / "lint"
    (repo / ".github" / "workflows").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(repo))
    (repo / ".github" / "workflows" / "contrib.yml").write_text(workflow, encoding="utf-8")
    (repo / ".github" / "actionlint.yaml").write_text(
        f"self-hosted-runner:\n  labels: [{', '.join(['gpu', *labels])}]\n", encoding="utf-8")
    done = subprocess.run([exe, "-no-color"], cwd=repo, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def steps_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["steps"])


def check_design(text: str, gpu: list[GpuRunner]) -> None:
    """Each point of the workflow's design, read back from the YAML."""
    doc = yaml.safe_load(text)
    on = doc[True]  # YAML 1.1 reads the key `on` as a boolean
    assert on["schedule"][0]["cron"] and "workflow_dispatch" in on
    assert on["push"]["paths"] == ["patchsets/**"]
    assert doc["concurrency"]["cancel-in-progress"] is False and doc["concurrency"]["group"]
    assert doc["permissions"] == {"contents": "write", "issues": "write"}
    jobs = doc["jobs"]
    for name, job in jobs.items():
        assert set(job.get("permissions", {}).values()) <= {"read", "write"}, name
        for step in steps_of(job):
            run = step.get("run", "")
            assert "secrets." not in run and "github.token" not in run, (name, step)
            assert "token" not in run.lower(), (name, run)  # never on a command line
            if "uses" in step:
                assert step["uses"].split("@")[0] in ACTIONS, step["uses"]
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False
            if step.get("uses", "").startswith("actions/cache"):
                assert "hashFiles('contrib.toml')" in step["with"]["key"]
                assert step["with"]["path"] == "${{ env.CONTRIB_CACHE }}"
        tokens = [s for s in steps_of(job) if "env" in s and any(
            "secrets." in str(v) or "github.token" in str(v) for v in s["env"].values())]
        for step in tokens:
            assert "contrib autopilot" in step["run"], (name, step)
            assert step["env"]["GH_TOKEN"] == "${{ secrets.CONTRIB_FORK_TOKEN }}"
            assert step["env"]["CONTRIB_WORKSPACE_TOKEN"] == "${{ github.token }}"
        assert "env" not in job
        assert any("CONTRIB_CACHE=" in s.get("run", "") for s in steps_of(job)), name
    assert "env" not in doc  # no token at the workflow level
    first = jobs["autopilot"]
    assert any("contrib autopilot --push" in s.get("run", "") for s in steps_of(first))
    if not gpu:
        assert set(jobs) == {"autopilot"}
        return
    legs = jobs["gpu"]
    assert legs["needs"] == "autopilot" and legs["permissions"] == {"contents": "read"}
    assert legs["strategy"]["matrix"]["include"] == [{"label": g.label, "arch": g.arch}
                                                     for g in gpu]
    assert legs["runs-on"] == ["self-hosted", "linux", "gpu", "${{ matrix.label }}"]
    validate = next(s for s in steps_of(legs) if "contrib validate" in s.get("run", ""))
    assert "--out" in validate["run"] and "env" in validate
    assert not any(k for k in validate["env"] if "TOKEN" in k)
    upload = next(s for s in steps_of(legs) if s.get("uses", "").startswith(
        "actions/upload-artifact"))
    assert upload["with"]["name"] == "contrib-validation-${{ matrix.label }}"
    merge = jobs["merge"]
    assert merge["needs"] == ["autopilot", "gpu"] and "!cancelled()" in merge["if"]
    download = next(s for s in steps_of(merge) if s.get("uses", "").startswith(
        "actions/download-artifact"))
    assert download["with"]["pattern"] == "contrib-validation-*"
    script = next(s for s in steps_of(merge) if "--merge" in s.get("run", ""))["run"]
    assert "contrib validate --merge" in script and "contrib autopilot --push" in script
    assert "--gpu-missing" in script  # a leg without a runner reaches the dashboard
    assert f"for leg in {' '.join(g.label for g in gpu)}; do" in script


@pytest.mark.parametrize("gpu", [[], [GpuRunner("sm_120", "sm_120a")],
                                 [GpuRunner("sm_120", "sm_120a"), GpuRunner("h200", "sm_90a")]],
                         ids=["no-gpu", "one-leg", "two-legs"])
def test_rendered_workflow_passes_actionlint_and_the_design(tmp_path: Path,
                                                            gpu: list[GpuRunner]) -> None:
    text = render(Options(gpu=gpu, branch="trunk"))
    assert text.startswith(MARKER) and written_by_us(text)
    assert not written_by_us(text.replace("ubuntu-latest", "ubuntu-22.04"))
    check_design(text, gpu)
    assert yaml.safe_load(text)[True]["push"]["branches"] == ["trunk"]
    actionlint(text, tmp_path, [g.label for g in gpu])


def test_shipped_workflow(tmp_path: Path) -> None:
    """This repository's own workflow is init-ci's output, unedited, and passes."""
    text = SHIPPED.read_text(encoding="utf-8")
    assert written_by_us(text)
    check_design(text, [GpuRunner("sm_120", "sm_120a")])
    assert "python -m pip install '.'" in text
    actionlint(text, tmp_path, ["sm_120"])


INSTALL = ("--install", "contrib-toolkit @ git+https://github.com/example/contrib@v0.1.0")


@pytest.fixture
def repo_ws(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    """The workspace as a git repository on branch main, with one patchset for sm_120a."""
    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")
    assert workspace.run("new", "proj", "x", "--base", "main", "--patch",
                         str(patches[0])).code == 0
    git(workspace.root, "init", "-q", "-b", "main")
    return workspace


def test_init_ci_writes_refuses_and_forces(repo_ws: Workspace, tmp_path: Path) -> None:
    path = repo_ws.root / ".github" / "workflows" / "contrib.yml"
    default = repo_ws.run("init-ci", "--json")  # contrib's own distribution, this version
    assert default.code == 0, default.err
    assert f"python -m pip install 'contrib-toolkit=={__version__}'" in path.read_text()
    path.unlink()
    first = repo_ws.run("init-ci", *INSTALL, "--json")
    assert first.code == 0, first.err
    assert first.json["result"] == "written"  # type: ignore[index]
    text = path.read_text()
    check_design(text, [GpuRunner("sm_120", "sm_120a")])  # the patchset's arch by default
    assert "python -m pip install 'contrib-toolkit @ git+https://github.com/example/contrib@v0.1.0'" \
        in text
    actionlint(text, tmp_path, ["sm_120"])
    assert repo_ws.run("init-ci", *INSTALL).code == 0 and path.read_text() == text  # unchanged
    again = repo_ws.run("init-ci", *INSTALL, "--json", "--gpu-runner", "rtx6000=sm_120a",
                        "--gpu-runner", "h100=sm_90a", "--cron", "0 3 * * *")
    assert again.json["result"] == "replaced"  # type: ignore[index]
    two = path.read_text()
    check_design(two, [GpuRunner("rtx6000", "sm_120a"), GpuRunner("h100", "sm_90a")])
    actionlint(two, tmp_path / "two", ["rtx6000", "h100"])
    path.write_text(two.replace("timeout-minutes: 120", "timeout-minutes: 30"))
    refused = repo_ws.run("init-ci", *INSTALL)
    assert refused.code == 1 and "not written by contrib init-ci" in refused.err
    assert "timeout-minutes: 30" in path.read_text()  # left as it is
    forced = repo_ws.run("init-ci", *INSTALL, "--force")
    assert forced.code == 0 and written_by_us(path.read_text())
    leftovers = [p.name for p in path.parent.iterdir() if p.name != "contrib.yml"]
    assert leftovers == []  # written atomically: no temp file beside it


@pytest.mark.parametrize(("args", "message"), [
    (["--gpu-runner", "sm_120"], "give LABEL=ARCH"),
    (["--gpu-runner", "a b=sm_120a"], "give LABEL=ARCH"),
    (["--gpu-runner", "x=sm_1200zz"], "give LABEL=ARCH"),
    (["--gpu-runner", "x=sm_120a", "--gpu-runner", "x=sm_90a"], "given twice"),
    (["--cron", "every day"], "five cron fields"),
    (["--install", "contrib'; curl x"], "--install"),
])
def test_init_ci_bad_input(repo_ws: Workspace, args: list[str], message: str) -> None:
    result = repo_ws.run("init-ci", *INSTALL, *args)
    assert result.code == 2 and message in result.err, result.err
    assert not (repo_ws.root / ".github").exists()


def test_init_ci_refuses_a_workspace_below_the_repository_root(repo_ws: Workspace) -> None:
    git(repo_ws.root.parent, "init", "-q")
    shutil.rmtree(repo_ws.root / ".git")
    result = repo_ws.run("init-ci", *INSTALL)
    assert result.code == 2 and "subfolder of the repository" in result.err
    assert not (repo_ws.root.parent / ".github").exists()


FAKE_CONTRIB = """#!/bin/sh
if [ "$1" = status ]; then
  echo '{"patchsets": [{"patchset": "flashinfer/a", "arch": "sm_120a"},
                       {"patchset": "sglang/b", "arch": "sm_90a"}], "github": null}'
  exit 1
fi
echo "$@" >> "$CALLS"
"""


def test_the_gpu_leg_selects_patchsets_by_the_arch_status_reports(tmp_path: Path) -> None:
    doc = yaml.safe_load(render(Options(gpu=[GpuRunner("h200", "sm_90a")])))
    script = next(s for s in steps_of(doc["jobs"]["gpu"]) if "contrib validate" in s.get("run", ""))
    assert "sed " not in script["run"] and "patchset.toml" not in script["run"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "contrib").write_text(FAKE_CONTRIB)
    (bin_dir / "contrib").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{Path(shutil.which('python3') or '/usr/bin/python3').parent}:/usr/bin:/bin",
           "RUNNER_TEMP": str(tmp_path), "ARCH": "sm_90a", "LABEL": "h200",
           "CALLS": str(tmp_path / "calls")}
    done = subprocess.run(["bash", "-e", "-c", script["run"]], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "contrib-validation"
    assert (tmp_path / "calls").read_text().split() == [
        "validate", "sglang/b", "--arch", "sm_90a", "--out", f"{out}/h200--sglang--b.json"]


@pytest.mark.parametrize("cron", ['0 "5 * * *', "0 5\\ * * *", '0 \\" * * *', "0 5 * * 'mon'",
                                  "0 5 * * \u00e9", "0 \\n5 * * *"])
def test_a_cron_holding_quotes_or_backslashes_still_writes_valid_yaml(repo_ws: Workspace,
                                                                      cron: str) -> None:
    result = repo_ws.run("init-ci", *INSTALL, "--cron", cron)
    assert result.code == 0, result.err
    text = (repo_ws.root / ".github" / "workflows" / "contrib.yml").read_text()
    assert yaml.safe_load(text)[True]["schedule"][0]["cron"] == cron


def test_the_workflow_is_written_0644_and_a_replaced_file_keeps_its_mode(repo_ws: Workspace) -> None:
    path = repo_ws.root / ".github" / "workflows" / "contrib.yml"
    old = os.umask(0o022)
    try:
        assert repo_ws.run("init-ci", *INSTALL).code == 0
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o664)
        assert repo_ws.run("init-ci", *INSTALL, "--cron", "0 6 * * *").code == 0
        assert stat.S_IMODE(path.stat().st_mode) == 0o664
    finally:
        os.umask(old)


def test_the_default_install_is_where_this_contrib_came_from_or_a_warning() -> None:
    from contrib.commands.init_ci import spec_for

    assert spec_for(None) == (f"contrib-toolkit=={__version__}", "")  # from an index: the same
    git_url = {"url": "https://github.com/me/contrib", "vcs_info": {"vcs": "git",
                                                                   "commit_id": "ab" * 20}}
    assert spec_for(git_url) == (f"contrib-toolkit @ git+https://github.com/me/contrib@{'ab' * 20}", "")
    for local in ({"url": "file:///home/me/contrib", "dir_info": {"editable": True}},
                  {"url": "https://tok@github.com/me/contrib", "vcs_info": {"vcs": "git",
                                                                          "commit_id": "ab" * 20}}):
        spec, warning = spec_for(local)
        assert spec == f"contrib-toolkit=={__version__}" and "--install" in warning
        assert "tok@" not in warning


def test_an_editable_contrib_says_its_default_install_may_not_work(repo_ws: Workspace) -> None:
    result = repo_ws.run("init-ci")
    assert result.code == 0, result.err
    text = (repo_ws.root / ".github" / "workflows" / "contrib.yml").read_text()
    assert "which a runner cannot reach" in result.err  # this test's contrib is an editable install
    assert "# contrib runs here from" in text and yaml.safe_load(text)
