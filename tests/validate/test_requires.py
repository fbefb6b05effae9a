"""Cross-project requirements: the sglang gate needs a flashinfer with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.validate.requires import check, read_pin
from contrib.workspace.model import Workspace as RealWorkspace
from testing.gitutil import Repo, git
from testing.workspace import Workspace, make_patch


@pytest.fixture
def two(tmp_path: Path) -> tuple[Workspace, Repo, Repo, str]:
    lib = Repo(tmp_path / "lib")
    lib.commit("lib: initial", {"lib/comm.py": "MAJORS = [9, 10]\n"})
    git(lib.path, "tag", "v0.1.0")
    fix = lib.commit("comm: admit SM12x (#3903)", {"lib/comm.py": "MAJORS = [9, 10, 12]\n"})
    git(lib.path, "tag", "v0.2.0")
    app = Repo(tmp_path / "app")
    app.commit("app: initial", {"python/pyproject.toml":
                                'dependencies = [\n  "lib_python==0.1.0",\n]\n',
                                "app/gate.py": "OK = (9, 10)\n"})
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"lib": lib, "app": app})
    ws.write_config()
    patches = make_patch(app, tmp_path, {"app/gate.py": "OK = (9, 10, 12)\n"}, "gate: sm120")
    assert ws.run("new", "app", "gate", "--base", "main", "--patch", str(patches[0])).code == 0
    meta = root / "patchsets" / "app" / "gate" / "patchset.toml"
    meta.write_text(meta.read_text() + f"""
[[requires]]
upstream = "lib"
commit = "{fix}"
patchset = "lib/backport"
pin_file = "python/pyproject.toml"
pin_package = "lib_python"
reason = "the gate is only correct with the kernel fix"
""")
    return ws, lib, app, fix


def _pinned(version: str) -> bytes:
    return f'dependencies = [\n  "lib-python == {version}",\n]\n'.encode()


def test_read_pin_spellings() -> None:
    assert read_pin('"flashinfer_python==0.6.16",', "flashinfer_python") == "0.6.16"
    assert read_pin("'flashinfer-python==0.6.3'", "flashinfer_python") == "0.6.3"
    assert read_pin('"flashinfer_python>=0.6"', "flashinfer_python") is None


def test_requirement_failed_names_the_fix(two: tuple[Workspace, Repo, Repo, str]) -> None:
    ws, _, _, fix = two
    real = RealWorkspace(ws.root)
    ps = real.patchset("app/gate")
    [outcome] = check(real, ps, lambda path: _pinned("0.1.0") if path.endswith("toml") else None)
    assert outcome.status == "failed"
    assert "lib_python==0.1.0 (v0.1.0) lacks lib" in outcome.message
    assert "bump lib_python to v0.2.0" in outcome.message
    assert "contrib sync lib/backport --to v0.1.0" in outcome.message
    assert outcome.details["commit"] == fix


def test_requirement_satisfied_by_release(two: tuple[Workspace, Repo, Repo, str]) -> None:
    ws, *_ = two
    real = RealWorkspace(ws.root)
    [outcome] = check(real, real.patchset("app/gate"), lambda path: _pinned("0.2.0"))
    assert outcome.status == "satisfied" and "(v0.2.0) contains" in outcome.message


def test_requirement_satisfied_by_our_patchset(two: tuple[Workspace, Repo, Repo, str],
                                               tmp_path: Path) -> None:
    ws, lib, _, _ = two
    git(lib.path, "checkout", "-q", "v0.1.0")
    git(lib.path, "checkout", "-q", "-b", "bp")
    lib.commit("backport: admit SM12x", {"lib/comm.py": "MAJORS = [9, 10, 12]\n"})
    patches = lib.format_patch("v0.1.0..HEAD", tmp_path / "bp")
    git(lib.path, "checkout", "-q", "main")
    assert ws.run("new", "lib", "backport", "--base", "v0.1.0", "--patch",
                  str(patches[0])).code == 0
    real = RealWorkspace(ws.root)
    [outcome] = check(real, real.patchset("app/gate"), lambda path: _pinned("0.1.0"))
    assert outcome.status == "satisfied"
    assert outcome.message.startswith("satisfied by patchset lib/backport")


def test_requirement_problems(two: tuple[Workspace, Repo, Repo, str]) -> None:
    ws, *_ = two
    real = RealWorkspace(ws.root)
    ps = real.patchset("app/gate")
    [missing] = check(real, ps, lambda path: None)
    assert missing.status == "failed" and "not in the patched tree" in missing.message
    [unpinned] = check(real, ps, lambda path: b'"lib_python>=0.1"')
    assert unpinned.status == "failed" and "pins no exact lib_python==X" in unpinned.message
    [untagged] = check(real, ps, lambda path: _pinned("9.9.9"))
    assert untagged.status == "failed" and "has no tag v9.9.9" in untagged.message
