"""Which units the PTX stage compiles, and the flags it reads from build code (no nvcc)."""

from __future__ import annotations

from contrib.analysis.profiles import FLASHINFER, GENERIC, flags_in, profile_for
from contrib.analysis.ptx import first_error
from contrib.analysis.ptx_cache import exit_only_functions
from contrib.analysis.ptxrun import unit_flags
from contrib.analysis.tree import DictTree
from contrib.analysis.units import gate_flags, includers, units_at_stake
from contrib.arch import parse_arch

KERNEL = "__global__ void k() {}\n"


def _tree() -> DictTree:
    return DictTree({
        "mini/jit.py": 'def gen_three():\n    return spec(["one.cu", "two.cu", "three.cu"], extra_cuda_cflags=["-DMINI_FLAG=1", "-O3"])\n',
        "csrc/one.cu": KERNEL,
        "csrc/two.cu": '#include "mini/shared.cuh"\n' + KERNEL,
        "csrc/three.cu": KERNEL,
        "csrc/other.cu": '#include "mini/deep.cuh"\n' + KERNEL,
        "csrc/unrelated.cu": KERNEL,
        "include/mini/shared.cuh": "#pragma once\n",
        "include/mini/deep.cuh": '#include "mini/shared.cuh"\n',
    })


def test_every_unit_the_gate_names_and_every_includer_of_a_changed_header() -> None:
    tree = _tree()
    units = units_at_stake(tree, [("gen_three", n) for n in ("one.cu", "two.cu", "three.cu")],
                           ["include/mini/shared.cuh"])
    by_path = {u.path: u for u in units}
    assert list(by_path) == ["csrc/one.cu", "csrc/two.cu", "csrc/three.cu", "csrc/other.cu"]
    assert by_path["csrc/three.cu"].gate and by_path["csrc/three.cu"].why == "built by gen_three"
    # reached through include/mini/deep.cuh: an includer, not built by the gate
    assert not by_path["csrc/other.cu"].gate
    assert by_path["csrc/three.cu"].builder == "gen_three" and by_path["csrc/other.cu"].builder == ""
    assert "include/mini/shared.cuh" in by_path["csrc/other.cu"].why


def test_includers_follow_the_closure_upwards() -> None:
    assert includers(_tree(), ["include/mini/deep.cuh"]) == {"csrc/other.cu": "include/mini/deep.cuh"}
    assert includers(_tree(), []) == {}


def test_gate_flags_are_read_from_the_gate_function() -> None:
    assert gate_flags(_tree(), [("mini/jit.py", "gen_three")]) == ["-DMINI_FLAG=1"]


BUILD = '''
def gen_jit_spec(name, sources, debug=False):
    cuda_cflags = ["-use_fast_math", "-DFLASHINFER_ENABLE_F16", "--threads=4"]
    if debug:
        cuda_cflags += ["-O0", "-DCUTLASS_DEBUG_TRACE_LEVEL=2"]
    else:
        cuda_cflags += ["-DNDEBUG", "-O3"]
    return cuda_cflags

class CompilationContext:
    COMMON_NVCC_FLAGS = ["-DFLASHINFER_ENABLE_FP8_E8M0"]
'''


def test_flags_are_read_from_build_code_without_debug_branches() -> None:
    assert flags_in(BUILD, "gen_jit_spec") == ["-use_fast_math", "-DFLASHINFER_ENABLE_F16", "-DNDEBUG"]
    assert flags_in(BUILD, "CompilationContext.COMMON_NVCC_FLAGS") == ["-DFLASHINFER_ENABLE_FP8_E8M0"]
    assert flags_in("def (:", "x") == [] and flags_in(None, "x") == []


def test_flashinfer_profile_reads_its_build_code_and_builds_sm120_as_120f() -> None:
    tree = DictTree({"flashinfer/jit/cpp_ext.py": ("def build_cuda_cflags():\n    cuda_cflags = "
                                                   "['--expt-relaxed-constexpr']\n"
                                                   "    return cuda_cflags\n"),
                     "flashinfer/jit/core.py": BUILD})
    profile = profile_for(tree)
    assert profile is FLASHINFER
    read = unit_flags(tree, profile, ["csrc/x.cu"])["csrc/x.cu"]
    assert {"-use_fast_math", "--expt-relaxed-constexpr"} <= set(read.texts())
    assert not read.fallback and "flashinfer/jit/core.py" in read.origin()
    assert profile.compute(parse_arch("sm_120a")) == "compute_120f"
    assert profile.compute(parse_arch("sm_121a")) == "compute_121a"
    assert profile.compute(parse_arch("sm_90a")) == "compute_90a"
    assert profile.arch_env(parse_arch("sm_90a")) == {"FLASHINFER_CUDA_ARCH_LIST": "9.0a"}
    assert profile_for(DictTree({"x.py": ""})) is GENERIC
    assert GENERIC.compute(parse_arch("sm_120a")) == "compute_120a"


def test_first_error_line_names_file_and_line() -> None:
    out = ("csrc/x.cuh(12): warning #177-D: unused\n"
           "/tmp/t/csrc/three.cu(3): error: identifier \"nope\" is undefined\n"
           "csrc/three.cu(4): error: expected a \";\"\n2 errors detected")
    assert first_error(out) == '/tmp/t/csrc/three.cu(3): error: identifier "nope" is undefined'
    assert first_error("a.cu:7:3: fatal error: foo.h: No such file or directory").startswith("a.cu:7:3")


SASS = """
	code for sm_120
		Function : _Z5emptyv
	.headerflags	@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM120)"
        /*0000*/                   EXIT ;                                   /* 0x000000000000794d */
        /*0010*/                   BRA 0x10;                                /* 0x00fc0000fffff947 */
		Function : _Z4fullPf
        /*0000*/                   LDC R1, c[0x0][0x28] ;                   /* 0x00000a00ff017b82 */
        /*0010*/              @!P0 EXIT ;                                   /* 0x000000000000894d */
        /*0020*/                   STG.E [R2.64], R5 ;                      /* 0x0000000502007986 */
        /*0030*/                   EXIT ;                                   /* 0x000000000000794d */
"""


def test_sass_functions_that_only_exit() -> None:
    assert exit_only_functions(SASS) == ["_Z5emptyv"]
