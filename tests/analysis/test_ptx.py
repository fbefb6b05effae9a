from __future__ import annotations

from pathlib import Path

import pytest

from contrib.analysis.ptx import (
    all_entries,
    compile_ptx,
    demangle,
    disabled_entries,
    empty_entries,
    find_nvcc,
    missing_header,
    nvcc_version,
    parsed,
)
from contrib.arch import parse_arch
from testing import miniupstream as mu

PTX = """
.version 9.0
.target sm_120a
.address_size 64

	// .globl	_Z5emptyPi
.visible .entry _Z5emptyPi(
	.param .u64 _Z5emptyPi_param_0
)
{


	ret;

}
	// .globl	_ZN2ns4workEPi
.visible .entry _ZN2ns4workEPi(
	.param .u64 _ZN2ns4workEPi_param_0
)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [_ZN2ns4workEPi_param_0];
	mov.u32 	%r1, 1;
	st.global.u32 	[%rd1], %r1;
	ret;

}
"""


def test_empty_entries_in_handwritten_ptx():
    assert all_entries(PTX) == ["_Z5emptyPi", "_ZN2ns4workEPi"]
    assert empty_entries(PTX) == ["_Z5emptyPi"]


STUB_PTX = """
.visible .entry _Z4stubPf(
	.param .u64 .ptr .align 1 _Z4stubPf_param_0
)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<3>;

	mov.u64 	%rd1, $str;
	cvta.global.u64 	%rd2, %rd1;
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 	[param0], %rd2;
	.param .b64 param1;
	st.param.b64 	[param1], 0;
	.param .b32 retval0;
	call.uni (retval0),
	vprintf,
	(
	param0,
	param1
	);
	ld.param.b32 	%r1, [retval0];
	} // callseq 0
	brkpt;
	ret;

}
.visible .entry _Z4workPf(
	.param .u64 .ptr .align 1 _Z4workPf_param_0
)
{
	{ // callseq 1, 0
	.param .b64 param0;
	st.param.b64 	[param0], %rd2;
	call.uni
	_Z6helperPf,
	(
	param0
	);
	} // callseq 1
	trap;
	ret;

}
"""


def test_an_entry_that_only_prints_an_error_and_traps_is_empty():
    """CUTLASS's stub for an arch its MMA is compiled out of; a call to any other
    function may do the work, so that entry is not empty."""
    assert empty_entries(STUB_PTX) == ["_Z4stubPf"]


def _bytes(text: bytes) -> str:
    return ", ".join(str(b) for b in text)


DISABLED_PTX = ("""
.global .align 1 .b8 $str[18] = {NOT_IMPLEMENTED};
.global .align 1 .b8 $str$1[28] = {DISABLED};
.visible .entry _Z3mmaPf(
	.param .u64 _Z3mmaPf_param_0
)
{
	ld.param.u64 	%rd1, [_Z3mmaPf_param_0];
	mov.u64 	%rd2, $str$1;
	st.global.u32 	[%rd1], %r1;
	brkpt;
	ret;

}
.visible .entry _Z5otherPf(
	.param .u64 _Z5otherPf_param_0
)
{
	ld.param.u64 	%rd1, [_Z5otherPf_param_0];
	mov.u64 	%rd2, $str;
	st.global.u32 	[%rd1], %r1;
	ret;

}
""".replace("NOT_IMPLEMENTED", _bytes(b"%s not implemented\0"))
                .replace("DISABLED", _bytes(b"without CUTE_ARCH_X_ENABLED\0")))


def test_an_entry_reaching_an_arch_disabled_error_path_is_named_with_its_text():
    """It stores, so it is not empty, but it prints CuTe's "without CUTE_ARCH_..._ENABLED"
    where its MMA should be; another error string ("%s not implement") is no such path.
    ``parsed`` counts it with the empty ones."""
    assert empty_entries(DISABLED_PTX) == []
    assert disabled_entries(DISABLED_PTX) == {"_Z3mmaPf": "without CUTE_ARCH_X_ENABLED"}
    outcome = parsed("u.cu", DISABLED_PTX, [])
    assert outcome.empty == ["_Z3mmaPf"] and outcome.entries == ["_Z3mmaPf", "_Z5otherPf"]


def test_demangle():
    assert demangle("_Z5emptyPi") == "empty"
    assert demangle(
        "_ZN10flashinfer16trtllm_allreduce24lamport_allreduce_kernelIfEEvPT_PKS2_i"
    ) == ("flashinfer::trtllm_allreduce::lamport_allreduce_kernel")
    assert demangle("plain_c_kernel") == "plain_c_kernel"


def test_missing_header_parsing():
    out = "csrc/a.cu:3:10: fatal error: torch/extension.h: No such file or directory\n #include <torch/extension.h>\n"
    assert missing_header(out) == "torch/extension.h"
    assert missing_header("error: identifier undefined") is None


needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed here")


@pytest.mark.slow
@needs_nvcc
def test_real_nvcc_flags_the_empty_kernel_on_sm120(tmp_path: Path):
    nvcc = find_nvcc()
    assert nvcc is not None and nvcc_version(nvcc)
    results = {}
    for variant in ("gate-only", "full-fix"):
        root = tmp_path / variant
        mu.write(root, variant)
        result = compile_ptx(
            nvcc, root / mu.SOURCE, parse_arch("sm_120a"), [root / "include"], tmp_path
        )
        assert result.ok, result.error
        assert len(result.entries) == 2
        results[variant] = [demangle(e) for e in result.empty]
    assert results["gate-only"] == ["flashinfer::trtllm_allreduce::lamport_allreduce_kernel"]
    assert results["full-fix"] == []


@pytest.mark.slow
@needs_nvcc
def test_real_nvcc_sm100_compiles_the_body(tmp_path: Path):
    mu.write(tmp_path, "gate-only")
    result = compile_ptx(
        find_nvcc() or "",
        tmp_path / mu.SOURCE,
        parse_arch("sm_100a"),
        [tmp_path / "include"],
        tmp_path,
    )
    assert result.ok and result.empty == []


@pytest.mark.slow
@needs_nvcc
def test_real_nvcc_missing_header_is_named(tmp_path: Path):
    source = tmp_path / "k.cu"
    source.write_text('#include "not_here/missing.cuh"\n__global__ void k() {}\n')
    result = compile_ptx(find_nvcc() or "", source, parse_arch("sm_120a"), [], tmp_path)
    assert not result.ok
    assert result.missing_header == "not_here/missing.cuh"


@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
def test_real_nvcc_host_only_source_is_a_failure_not_a_crash(tmp_path: Path):
    """nvcc --ptx of a .cpp succeeds and writes nothing: an outcome that says so."""
    source = tmp_path / "host.cpp"
    source.write_text("int answer() { return 42; }\n")
    result = compile_ptx(find_nvcc() or "", source, parse_arch("sm_120a"), [], tmp_path)
    assert not result.ok and "nvcc wrote no PTX for host.cpp" in result.error


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("ndebug", [True, False])
def test_real_nvcc_cutlass_style_stubs_are_empty_and_work_is_not(tmp_path: Path, ndebug: bool):
    source = tmp_path / "stubs.cu"
    source.write_text('''#include <cstdio>
#include <cassert>
__global__ void only_print(float* out) {
#if defined(__CUDA_ARCH_FEAT_SM100_ALL)
  out[threadIdx.x] = 1.0f;
#else
  printf("ERROR : Arch conditional MMA instruction used without targeting sm100a. Aborting.\\n");
#endif
}
__global__ void invalid_path(float* out, int n) {
#if defined(__CUDA_ARCH_FEAT_SM100_ALL)
  out[threadIdx.x] = 1.0f;
#else
  assert(0 && "no tcgen05"); if (n > 0) printf("bad %d\\n", n); __brkpt();
#endif
}
__global__ void only_trap(float* out) { __trap(); }
__global__ void prints_and_stores(float* out) {
  if (threadIdx.x == 0) printf("hi\\n");
  out[threadIdx.x] = 2.0f;
}
__global__ void counts(int* out) { atomicAdd(out, 1); }
''', encoding="utf-8")
    flags = ["-DNDEBUG"] if ndebug else []
    result = compile_ptx(find_nvcc() or "", source, parse_arch("sm_120a"), [], tmp_path,
                         flags=flags)
    assert result.ok, result.error
    stubs = sorted(demangle(e) for e in result.empty)
    assert stubs == ["invalid_path", "only_print", "only_trap"]
    # On the arch the MMA is compiled for, the same kernels do work.
    done = compile_ptx(find_nvcc() or "", source, parse_arch("sm_100a"), [], tmp_path,
                       flags=flags)
    assert sorted(demangle(e) for e in done.empty) == ["only_trap"]
