"""``contrib why`` on a feature loading a JIT module: the target its JIT builds for the
arch with the CUDA release asked, and a crash where the GPU cannot run it (a mini
library shaped as flashinfer at ad893cfab, whose SM 12.x build is ``sm_120a`` below
CUDA 13; its fix builds ``sm_120f`` from 12.9)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from contrib.analysis.jittarget import BuildVerdict
from contrib.audit.chains import Role, Verdict
from testing.gitutil import Repo
from testing.jitupstream import jit_upstream
from testing.workspace import Workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = Path(tmp_path_factory.mktemp("jitws"))
    repo = jit_upstream(root / "jitlib")
    (root / "ws").mkdir()
    workspace = Workspace(root / "ws", {"jitlib": repo})
    workspace.write_config()
    return workspace


def _why(ws: Workspace, arch: str, *more: str) -> dict[str, Any]:
    result = ws.run("why", "jitlib", "jitlib.gemm", "--arch", arch, "--json", "--no-fetch",
                    *more)
    assert result.code in (0, 1), result.err
    data = result.json
    assert isinstance(data, dict)
    return data


def _first(repo: Repo) -> str:
    return f"{repo.head()}~1"


def _builds(data: dict[str, Any]) -> dict[str, Any]:
    [chain] = data["features"]
    [link] = [link for link in chain["links"] if link["role"] == Role.BUILDS.value]
    return link


def test_the_jit_target_for_gb10_with_cuda_12_9_is_a_crash(ws: Workspace) -> None:
    data = _why(ws, "sm_121a", "--at", _first(ws.upstreams["jitlib"]), "--cuda", "12.9")
    [chain] = data["features"]
    assert chain["verdict"] == Verdict.CRASH.value
    # the call, the JIT module's gate admitting major 12, then what that module builds
    assert [(link["role"], link["function"]) for link in chain["links"]] == [
        (Role.CALL.value, "jitlib.gemm"), (Role.GATE.value, "gen_gemm_module"),
        (Role.BUILDS.value, "CompilationContext._normalize_cuda_arch")]
    link = _builds(data)
    assert (link["refuses"], link["file"], link["function"]) == (
        True, "jitlib/compilation_context.py", "CompilationContext._normalize_cuda_arch")
    built = link["builds"]["built"]
    assert (built["cuda"], built["verdict"], built["compute"], built["targets"]) == (
        "12.9", BuildVerdict.NO_IMAGE.value, ["compute_120a"], ["sm_120a"])
    assert (data["cuda"], data["cuda_from"]) == ("12.9", "given")


@pytest.mark.parametrize(("arch", "cuda", "at_fix", "targets"), [
    ("sm_120a", "12.9", False, ["sm_120a"]),  # sm_120a is 12.0's own
    ("sm_121a", "13.0", False, ["sm_120f"]),  # CUDA 13 builds the family target
    ("sm_121a", "12.9", True, ["sm_120f"]),  # the fix builds it from 12.9
])
def test_it_is_no_crash_where_the_gpu_runs_what_is_built(
        ws: Workspace, arch: str, cuda: str, at_fix: bool, targets: list[str]) -> None:
    repo = ws.upstreams["jitlib"]
    data = _why(ws, arch, "--at", repo.head() if at_fix else _first(repo), "--cuda", cuda)
    [chain] = data["features"]
    assert chain["verdict"] == Verdict.ON.value
    link = _builds(data)
    assert not link["refuses"]
    assert (link["builds"]["built"]["verdict"], link["builds"]["built"]["targets"]) == (
        BuildVerdict.RUNS.value, targets)


def test_the_fix_refuses_to_build_below_cuda_12_9(ws: Workspace) -> None:
    data = _why(ws, "sm_121a", "--at", ws.upstreams["jitlib"].head(), "--cuda", "12.8")
    assert data["features"][0]["verdict"] == Verdict.CRASH.value
    assert _builds(data)["builds"]["built"]["verdict"] == BuildVerdict.REFUSES.value


def test_the_chain_says_what_is_built_and_why_it_cannot_run(ws: Workspace) -> None:
    """The one test of the wording: which target, for which arch, with which CUDA."""
    result = ws.run("why", "jitlib", "jitlib.gemm", "--arch", "sm_121a", "--no-fetch",
                    "--at", _first(ws.upstreams["jitlib"]), "--cuda", "12.9")
    assert result.code == 1, result.err
    assert ("JIT builds compute_120a (sm_120a) for sm_121a with CUDA 12.9 (--cuda): "
            "sm_120a runs on 12.0 only; CUDA 13.0 builds sm_120f, which runs") in result.out
    assert "verdict: crash" in result.out


def test_a_bad_release_is_one_line(ws: Workspace) -> None:
    result = ws.run("why", "jitlib", "jitlib.gemm", "--arch", "sm_121a", "--no-fetch",
                    "--cuda", "12")
    assert result.code == 2
    assert "--cuda '12': expected a CUDA release as MAJOR.MINOR" in result.err
    assert "Traceback" not in result.err


def test_a_warm_answer_keeps_the_reading(ws: Workspace) -> None:
    """The second answer comes from the features cache, the reading's values with it;
    another release is another answer."""
    first = _why(ws, "sm_121a", "--at", _first(ws.upstreams["jitlib"]), "--cuda", "12.9")
    again = _why(ws, "sm_121a", "--at", _first(ws.upstreams["jitlib"]), "--cuda", "12.9")
    assert again["features"] == first["features"]
    other = _why(ws, "sm_121a", "--at", _first(ws.upstreams["jitlib"]), "--cuda", "13.0")
    assert other["features"][0]["verdict"] == Verdict.ON.value


def test_a_chain_with_a_builds_link_survives_the_cache() -> None:
    from contrib.analysis.jittarget import Built, JitTarget
    from contrib.audit.chains import Chain, Feature, FeatureKind, Link
    from contrib.audit.serial import chain_cache, chain_from_cache

    target = JitTarget("sm_121a", "ctx.py", 60, "C._normalize", "ctx.py", 103,
                       Built("12.9", BuildVerdict.NO_IMAGE, ("compute_120a",), ("sm_120a",)),
                       (Built("13.0", BuildVerdict.RUNS, ("compute_120f",), ("sm_120f",),
                              "sm_120f"),))
    feature = Feature(FeatureKind.API, "lib.gemm", "lib.gemm")
    chain = Chain(feature, (Link(Role.BUILDS, "lib", "v1", "ctx.py", 60, "C._normalize",
                                 excludes=True, refuses=True, why="...", builds=target),),
                  Verdict.CRASH, "r", "w")
    kept = chain_cache(chain)
    assert chain_from_cache(feature, kept) == chain
    broken = {**kept["links"][0], "builds": {**kept["links"][0]["builds"], "line": "60"}}
    assert chain_from_cache(feature, {**kept, "links": [broken]}) is None


def test_without_cuda_the_release_assumed_is_said(ws: Workspace) -> None:
    """No --cuda: this machine's nvcc's release, else one new enough for every version
    test; the JSON names which, and the link reads with it."""
    data = _why(ws, "sm_121a", "--at", _first(ws.upstreams["jitlib"]))
    assert data["cuda_from"] in ("nvcc", "assumed")
    assert (data["cuda"] == "new") == (data["cuda_from"] == "assumed")
    assert _builds(data)["builds"]["built"]["cuda"] == data["cuda"]


def _fake_nvcc(folder: Path, says: str) -> Path:
    """An nvcc on PATH that prints ``says`` and counts its runs in ``runs``."""
    folder.mkdir(exist_ok=True)
    nvcc = folder / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho x >> {folder / 'runs'}\necho '{says}'\n")
    nvcc.chmod(0o755)
    return nvcc


def _runs(folder: Path) -> int:
    runs = folder / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_nvcc_is_asked_once_until_it_changes(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm start reads nvcc's release from the cache (no process); another nvcc
    binary (its mtime) is asked again; one that says nothing readable is assumed new,
    and asked again next time."""
    from contrib.analysis.archtoolkit import ASSUMED, Cuda, CudaSource
    from contrib.audit.run import _nvcc_says, nvcc_cuda

    bin_dir = tmp_path / "bin"
    nvcc = _fake_nvcc(bin_dir, "Cuda compilation tools, release 12.9, V12.9.86")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert nvcc_cuda(_nvcc_says()) == Cuda((12, 9), CudaSource.NVCC)
    assert nvcc_cuda(_nvcc_says()) == Cuda((12, 9), CudaSource.NVCC)
    assert _runs(bin_dir) == 1
    _fake_nvcc(bin_dir, "Cuda compilation tools, release 13.0, V13.0.88")
    stat = nvcc.stat()
    os.utime(nvcc, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert nvcc_cuda(_nvcc_says()) == Cuda((13, 0), CudaSource.NVCC)
    assert _runs(bin_dir) == 2
    _fake_nvcc(bin_dir, "")
    os.utime(nvcc, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    assert nvcc_cuda(_nvcc_says()) == ASSUMED
    assert nvcc_cuda(_nvcc_says()) == ASSUMED
    assert _runs(bin_dir) == 4
