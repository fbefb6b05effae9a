"""`contrib doctor` against the fake GitHub, a PATH without nvcc, a damaged cache."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git, only_git_on_path
from testing.workspace import Workspace, make_patch


def _doctor(ws: Workspace) -> tuple[int, dict[str, dict[str, Any]]]:
    result = ws.run("doctor", "--json")
    doc = result.json
    assert isinstance(doc, dict)
    checks = {c["name"]: c for c in doc["checks"]}
    failed = [c for c in doc["checks"] if c["status"] == "FAIL"]
    assert result.code == (1 if failed else 0) and doc["ok"] is (not failed)
    assert all(c["fix"] for c in failed)  # every failure says what to do
    return result.code, checks


@pytest.fixture
def online(workspace: Workspace, fake_github: FakeGitHub,
           monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """The workspace talks to the fake GitHub; the token may push to the fork."""
    workspace.write_config(f'\n[github]\napi_url = "{fake_github.url}"\n')
    fake_github.add_repo("upstream-org/proj")
    fake_github.add_repo("me/proj", fork_of="upstream-org/proj", push=True)
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    return workspace


def test_accepted_token_with_scopes_and_push_access(online: Workspace,
                                                    fake_github: FakeGitHub) -> None:
    _, checks = _doctor(online)
    assert checks["token"]["status"] == "ok" and "contrib-bot" in checks["token"]["detail"]
    assert checks["token scopes"] == {"name": "token scopes", "status": "ok",
                                      "detail": "scopes: repo, workflow", "fix": ""}
    assert checks["push to me/proj"]["status"] == "ok"
    assert checks["upstream proj"]["status"] == "ok"
    assert checks["conflicts"]["status"] == "ok"
    assert fake_github.calls("GET", "/user")


def test_rejected_token(online: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    code, checks = _doctor(online)
    assert code == 1 and checks["token"]["status"] == "FAIL"
    assert "GITHUB_TOKEN" in checks["token"]["fix"] and "token scopes" not in checks


def test_token_lacking_scopes_and_push_access(online: Workspace, fake_github: FakeGitHub) -> None:
    fake_github.scopes = "gist, read:org"
    fake_github.add_repo("me/proj", fork_of="upstream-org/proj", push=False)
    code, checks = _doctor(online)
    assert code == 1 and checks["token"]["status"] == "ok"
    assert checks["token scopes"]["status"] == "FAIL"
    assert "gist, read:org" in checks["token scopes"]["detail"]
    assert "repo scope" in checks["token scopes"]["fix"]
    assert checks["push to me/proj"]["status"] == "FAIL"


def test_fine_grained_token_has_no_scopes_header(online: Workspace,
                                                 fake_github: FakeGitHub) -> None:
    fake_github.scopes = None
    _, checks = _doctor(online)
    assert checks["token scopes"]["status"] == "ok"
    assert "fine-grained" in checks["token scopes"]["detail"]


def test_no_token(workspace: Workspace) -> None:
    code, checks = _doctor(workspace)
    assert code == 1 and checks["token"]["status"] == "FAIL"
    assert "GITHUB_TOKEN" in checks["token"]["fix"]


def test_path_without_nvcc(workspace: Workspace, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", only_git_on_path(tmp_path / "bin"))
    code, checks = _doctor(workspace)
    assert code == 1 and checks["git"]["status"] == "ok"
    fallback = [p for p in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc")
                if os.access(p, os.X_OK)]
    if fallback:  # validate finds it there too, and doctor says where
        assert checks["nvcc"]["status"] == "ok" and "(not on PATH)" in checks["nvcc"]["detail"]
    else:
        assert checks["nvcc"]["status"] == "FAIL" and "CUDA toolkit" in checks["nvcc"]["fix"]
        assert checks["cuobjdump"]["status"] == "skip"
    assert checks["gpus"]["status"] == "FAIL"  # no nvidia-smi on that PATH either
    assert "nvidia-smi" in checks["gpus"]["detail"]


def test_damaged_cache(workspace: Workspace, upstream: Repo,
                                              tmp_path: Path, isolated: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/core.py": "X = 1\n"}, "core: X")
    assert workspace.run("new", "proj", "one", "--base", upstream.head(),
                         "--patch", *map(str, patches)).code == 0
    _, healthy = _doctor(workspace)
    assert healthy["cache proj"]["status"] == "ok" and "connected" in healthy["cache proj"]["detail"]
    [cache] = (isolated / "contrib-cache" / "upstreams").glob("proj-*.git")
    tree = git(cache, "rev-parse", "refs/remotes/origin/main^{tree}")
    for loose in cache.glob(f"objects/{tree[:2]}/{tree[2:]}"):
        loose.unlink()
    for pack in cache.glob("objects/pack/*"):
        pack.unlink()
    code, damaged = _doctor(workspace)
    assert code == 1 and damaged["cache proj"]["status"] == "FAIL"
    assert f"remove {cache}" in damaged["cache proj"]["fix"]


def test_outside_a_workspace_the_machine_is_still_checked(tmp_path: Path) -> None:
    from testing.workspace import run_contrib

    result = run_contrib("doctor", cwd=tmp_path)
    assert "git" in result.out and "not in a workspace" in result.out
    assert result.code == (1 if "FAIL" in result.out else 0)


def test_headers_are_looked_for_where_the_ptx_stage_looks(tmp_path: Path) -> None:
    """A toolkit holding curand but no flashinfer-python: the check names the rest and
    which package ships each."""
    from contrib.commands.doctor import FAIL, OK, check_headers

    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "include").mkdir()
    (toolkit / "include" / "curand_kernel.h").write_text("")
    check = check_headers(str(toolkit / "bin" / "nvcc"))
    if check.status == OK:  # this interpreter has flashinfer-python and apache-tvm-ffi
        return
    assert check.status == FAIL and "curand_kernel.h" not in check.detail
    assert "spdlog/spdlog.h" in check.detail and "flashinfer-python" in check.fix
    assert "tvm/ffi/c_api.h" in check.detail and "apache-tvm-ffi" in check.fix


def test_no_network_is_told_from_the_token(workspace: Workspace,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A host nobody answers on: one connection refused, no retries, and the fix is the
    network, never a new token."""
    import time

    workspace.write_config('\n[github]\napi_url = "http://127.0.0.1:9"\n')
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy",
                 "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    started = time.monotonic()
    code, checks = _doctor(workspace)
    assert time.monotonic() - started < 15
    token = checks["token"]
    assert code == 1 and token["status"] == "FAIL"
    assert token["detail"].startswith("no network: GitHub could not be reached at "
                                      "http://127.0.0.1:9")
    assert "network" in token["fix"] and "new token" not in token["fix"]
    assert "token scopes" not in checks


def test_an_api_url_with_a_bad_port_is_a_failed_check_not_an_internal_error(
        workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace.write_config('\n[github]\napi_url = "https://127.0.0.1:abc"\n')
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    code, checks = _doctor(workspace)
    assert code == 1 and checks["token"]["status"] == "FAIL"
    assert "'https://127.0.0.1:abc' is not a usable URL" in checks["token"]["detail"]


def test_a_placeholder_fork_or_github_fails_with_the_line_to_edit(
        workspace: Workspace) -> None:
    workspace.write_config()
    config = workspace.root / "contrib.toml"
    config.write_text(config.read_text().replace('fork = "me/proj"', 'fork = "your-user/proj"')
                      .replace('github = "upstream-org/proj"', 'github = "upstream-owner/proj"'))
    code, checks = _doctor(workspace)
    assert code == 1
    assert checks["fork proj"]["detail"] == (f'{config}:5: fork = "your-user/proj" is the '
                                             "placeholder contrib init wrote")
    assert "your fork on GitHub" in checks["fork proj"]["fix"]
    assert checks["github proj"]["detail"].startswith(f"{config}:4: github = ")


def test_checks_that_do_not_apply_are_not_run(tmp_path: Path) -> None:
    """Right after `contrib init`: its repository is not advised again; flashinfer's
    headers are looked for only where flashinfer is carried."""
    from testing.workspace import run_contrib

    ws = tmp_path / "carry"
    assert run_contrib("init", str(ws), "--upstream", f"mini={tmp_path / 'up'}").code == 0
    result = run_contrib("doctor", "--json", cwd=ws)
    checks = {c["name"]: c for c in result.json["checks"]}  # type: ignore[index]
    assert checks["versions"]["status"] == "ok" and "git init" not in checks["versions"]["fix"]
    assert "first commit" in checks["versions"]["detail"]
    assert "headers" not in checks
    other = tmp_path / "fi"
    assert run_contrib("init", str(other), "--upstream",  # a mirror: no network
                       f"flashinfer={tmp_path / 'mirror'}").code == 0
    result = run_contrib("doctor", "--json", cwd=other)
    checks = {c["name"]: c for c in result.json["checks"]}  # type: ignore[index]
    assert ("headers" in checks) is (checks["nvcc"]["status"] == "ok")
    assert checks["fork flashinfer"]["status"] == "FAIL"  # init's placeholder
