"""The PTX stage with nvcc: every unit, the gate's flags, header order, the cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contrib.analysis.profiles import GENERIC, Profile
from contrib.analysis.ptx import find_nvcc
from contrib.analysis.ptxjobs import PtxRequest
from contrib.analysis.tree import DictTree, FsTree, SourceTree
from contrib.analysis.units import Unit
from contrib.arch import parse_arch
from contrib.validate.ptxstage import check
from contrib.validate.stages import Inputs, run_pipeline
from testing import miniupstream

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")]

SM120 = parse_arch("sm_120a")


def _kernel(name: str) -> str:
    return f"__global__ void {name}(float* out) {{ out[threadIdx.x] = 2.0f * threadIdx.x; }}\n"


def _request(tree: SourceTree, units: list[str], tmp_path: Path, profile: Profile = GENERIC,
             python: str | None = None) -> PtxRequest:
    return PtxRequest(tree, SM120, [Unit(u, "test", True, "gen_mini") for u in units], profile, python, [], [], [],
                      tmp_path / "work", {})


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))


def test_a_break_in_the_third_unit_is_found_with_its_first_error_line(tmp_path: Path) -> None:
    tree = DictTree({"csrc/one.cu": _kernel("one"), "csrc/two.cu": _kernel("two"),
                     "csrc/three.cu": _kernel("three") + "int broken = undefined_name;\n"})
    result = check(_request(tree, ["csrc/one.cu", "csrc/two.cu", "csrc/three.cu"], tmp_path))
    assert result.status == "failed"
    assert "nvcc failed on csrc/three.cu" in result.reason
    assert "three.cu(2): error" in result.reason and "undefined_name" in result.reason
    units = {u["path"]: u for u in result.details["units"]}
    assert units["csrc/one.cu"]["ok"] and units["csrc/two.cu"]["ok"] and not units["csrc/three.cu"]["ok"]
    assert {u["builder"] for u in units.values()} == {"gen_mini"}  # the record's own key


def test_the_cache_compiles_nothing_twice_and_a_header_edit_only_its_includers(tmp_path: Path) -> None:
    files = {"csrc/one.cu": _kernel("one"), "csrc/two.cu": '#include "mini/h.cuh"\n' + _kernel("two"),
             "csrc/three.cu": _kernel("three"), "include/mini/h.cuh": "#define MINI_H 1\n"}
    units = ["csrc/one.cu", "csrc/two.cu", "csrc/three.cu"]
    first = check(_request(DictTree(files), units, tmp_path / "a"))
    assert first.status == "passed" and first.details["compiled"] == 3
    again = check(_request(DictTree(files), units, tmp_path / "b"))
    assert (again.details["compiled"], again.details["cached"]) == (0, 3)
    assert "3 from the cache" in again.reason
    edited = check(_request(DictTree({**files, "include/mini/h.cuh": "#define MINI_H 2\n"}), units, tmp_path / "c"))
    assert [u["path"] for u in edited.details["units"] if not u["cached"]] == ["csrc/two.cu"]


def test_the_patched_tree_wins_over_an_installed_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "site" / "minipkg"
    (package / "include" / "mini").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "include" / "mini" / "which.h").write_text("#define FROM_PACKAGE 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    profile = Profile("mini", "", package_includes=(("minipkg", "include"),))
    unit = ('#include "mini/which.h"\n#ifdef FROM_PACKAGE\n' + _kernel("from_package") +
            "#else\n" + _kernel("from_tree") + "#endif\n")
    with_header = DictTree({"csrc/u.cu": unit, "include/mini/which.h": "#define FROM_TREE 1\n"})
    result = check(_request(with_header, ["csrc/u.cu"], tmp_path / "a", profile, sys.executable))
    assert result.status == "passed", result.reason
    assert result.details["include_dirs"].index(str(package / "include")) > 0
    assert result.details["units"][0]["entries"] == 1
    assert result.details["units"][0]["kernels"] == ["from_tree"]
    # Without the tree's copy the installed package's header is found.
    result = check(_request(DictTree({"csrc/u.cu": unit}), ["csrc/u.cu"], tmp_path / "b", profile, sys.executable))
    assert result.details["units"][0]["kernels"] == ["from_package"]


def test_a_unit_gets_the_flag_the_gates_build_passes(tmp_path: Path) -> None:
    """The gate's function passes -DMINI_FLAG=1; the unit does not compile without it."""
    root = tmp_path / "up"
    base = miniupstream.init_repo(root)
    gate = root / miniupstream.GATE_FILE
    gate.write_text(gate.read_text().replace(miniupstream.OLD_GATE, miniupstream.NEW_GATE)
                    .replace("extra_cuda_cflags=nvcc_flags", 'extra_cuda_cflags=nvcc_flags + ["-DMINI_FLAG=1"]'))
    header = root / miniupstream.HEADER
    header.write_text(header.read_text().replace(miniupstream.OLD_GUARD, miniupstream.NEW_GUARD))
    source = root / miniupstream.SOURCE
    source.write_text("#ifndef MINI_FLAG\n#error the build passes -DMINI_FLAG=1\n#endif\n" + source.read_text())
    miniupstream.git(root, "add", "-A")
    miniupstream.git(root, "commit", "-q", "-m", "sm120 + the build flag")
    diff = miniupstream.git(root, "diff", base, "HEAD") + "\n"
    after = FsTree(root)
    before = DictTree(miniupstream.files("base"))
    results = run_pipeline(Inputs(SM120, before, after, diff, "applied", workdir=tmp_path / "w", gpus=None))
    ptx = next(r for r in results if r.name == "ptx")
    assert ptx.status == "passed", ptx.reason
    assert "-DMINI_FLAG=1" in ptx.details["flags"]
    assert [u["path"] for u in ptx.details["units"]] == [miniupstream.SOURCE]


def test_where_cuobjdump_exists_a_kernel_whose_sass_is_only_exit_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ptxas assembles the unit's PTX; cuobjdump's SASS (faked here) shows one EXIT-only kernel."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "cuobjdump"
    fake.write_text('#!/bin/sh\ntest -s "$2" || exit 1\nprintf "\\t\\tFunction : _Z3onePf\\n'
                    '        /*0000*/                   EXIT ;   /* 0x000000000000794d */\\n"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(find_nvcc() or '').parent}:/usr/bin:/bin")
    tree = DictTree({"csrc/one.cu": _kernel("one")})
    result = check(_request(tree, ["csrc/one.cu"], tmp_path))
    assert result.status == "failed"
    assert result.details["sass"] == f"checked with {fake}"
    (finding,) = [f for f in result.findings if f.kind == "exit-only-sass"]
    assert "empty kernel one on sm_120a: 1 SASS function for sm_120a (csrc/one.cu) are only EXIT" in finding.message


def test_an_entry_empty_on_the_reference_arch_too_is_info_not_an_error(tmp_path: Path) -> None:
    """A kernel the compiler optimises to `ret;` on every arch (a store of what was read)
    is not the target's loss; one emptied only for the target still fails."""
    noop = "__global__ void noop(float* o) { float x = o[0]; o[0] = x; }\n"
    guarded = ("__global__ void lost(float* o) {\n#if __CUDA_ARCH__ < 1200\n  o[0] = 1.0f;\n"
               "#endif\n}\n")
    tree = DictTree({"csrc/noop.cu": noop, "csrc/lost.cu": guarded})
    request = _request(tree, ["csrc/noop.cu"], tmp_path / "a")
    request.reference = parse_arch("sm_90a")
    result = check(request)
    assert result.status == "passed", result.reason
    [info] = [f for f in result.findings if f.kind == "empty-ptx-entry"]
    assert info.severity == "info" and "is empty on sm_90a too" in info.message
    assert result.details["reference"] == {"arch": "sm_90a", "units": ["csrc/noop.cu"]}

    request = _request(tree, ["csrc/lost.cu"], tmp_path / "b")
    request.reference = parse_arch("sm_90a")
    lost = check(request)
    assert lost.status == "failed" and "empty kernel lost on sm_120a" in lost.reason

    # Without a reference (no arch admitted before) every empty entry is an error, as before.
    plain = check(_request(tree, ["csrc/noop.cu"], tmp_path / "c"))
    assert plain.status == "failed"


CUTE_STYLE = """#include <cstdio>
__global__ void fmha(const float* q, float* o) {
  float acc = q[threadIdx.x];
#if defined(__CUDA_ARCH_FEAT_SM100_ALL)
  asm volatile("add.f32 %0, %0, %0;" : "+f"(acc));  // stands for the tcgen05 MMA
#else
  printf("Attempting to use SM100_MMA_F16BF16_SS without CUTE_ARCH_MMA_SM100A_ENABLED");
  __brkpt();
#endif
  o[threadIdx.x] = acc;  // the epilogue still stores: the entry is not empty
}
"""


def test_a_kernel_that_reaches_cutes_arch_disabled_mma_fails_and_says_what_it_printed(
        tmp_path: Path) -> None:
    """flashinfer's SM100 FMHA on compute_120f: TMA copies and stores remain, but each MMA
    is CuTe's printf-and-brkpt. Not empty, still no work: an error; on the arch the MMA is
    built for (the reference), the same kernel is whole."""
    tree = DictTree({"csrc/fmha.cu": CUTE_STYLE})
    request = _request(tree, ["csrc/fmha.cu"], tmp_path / "a")
    request.reference = parse_arch("sm_100a")
    result = check(request)
    assert result.status == "failed", result.reason
    [error] = [f for f in result.findings if f.severity == "error"]
    assert error.kind == "disabled-ptx-entry"
    assert ("kernel fmha on sm_120a reaches an arch-disabled path: 1 of 1 PTX entries for "
            "compute_120a (csrc/fmha.cu) print “Attempting to use SM100_MMA_F16BF16_SS without "
            "CUTE_ARCH_MMA_SM100A_ENABLED”") in error.message
    assert result.details["reference"] == {"arch": "sm_100a", "units": ["csrc/fmha.cu"]}


NEEDS = """__global__ void tmem(float* out) {
  asm volatile("tcgen05.fence::before_thread_sync;");
  out[0] = 1.f;
}
extern __shared__ float dyn[];
__global__ void ragged(float* out) { dyn[threadIdx.x] = 1.f; out[0] = dyn[1]; }
void launch(float* out) {
  cudaFuncSetAttribute(ragged, cudaFuncAttributeMaxDynamicSharedMemorySize, 132 * 1024);
  ragged<<<1, 128, 132 * 1024>>>(out);
}
"""


def test_a_kernel_needing_what_the_target_lacks_fails_with_the_kernel_and_the_figure(
        tmp_path: Path) -> None:
    """tcgen05 on sm_120a: ptxas refuses it and the finding names the kernel and the
    instruction (not a bare compile error); 132 KiB asked of a 99 KiB target by a constant
    is named with both figures."""
    result = check(_request(DictTree({"csrc/needs.cu": NEEDS}), ["csrc/needs.cu"], tmp_path))
    assert result.status == "failed", result.reason
    kinds = sorted((f.kind, f.line) for f in result.findings if f.severity == "error")
    assert kinds == [("ptx-lacks-instruction", 1), ("ptx-over-shared-memory", 8),
                     ("ptx-over-shared-memory", 9)]
    [lack] = result.details["lacks"]
    assert (lack["kernel"], lack["instruction"], lack["target"]) == ("tmem", "tcgen05.fence",
                                                                     "sm_120a")
    assert [(d["bytes"], d["limit"]) for d in result.details["dynamic_shared"]] == [
        (135168, 101376)] * 2
