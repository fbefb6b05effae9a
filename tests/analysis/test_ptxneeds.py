"""What a kernel's PTX needs of its target: instruction families, shared memory, ptxas's word."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.analysis import ptxneeds
from contrib.analysis.ptx import compile_ptx, find_nvcc
from contrib.analysis.ptxneeds import FAMILIES, Lack, LackKind, family_of, lacks, read_module
from contrib.arch import parse_arch

PTX = """.version 9.0
.target sm_100a
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.shared .align 4 .b8 tile[110000];
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 p0, .param .b64 p1);

.func helper()
{
\tst.shared.u32 [tile], 1;
\ttcgen05.fence::before_thread_sync;
\tret;
}

.visible .entry _Z4tmemPf(
\t.param .u64 _Z4tmemPf_param_0
)
{
\t.reg .b32 %r<3>;
\t.shared .align 8 .v2 .b32 pair[4];
\tcall.uni helper, ();
\tst.shared.u32 [dyn], %r1;
\tret;
}

.visible .entry _Z5plainPf(
\t.param .u64 _Z5plainPf_param_0
)
{
\t@%p1 cp.async.bulk.tensor.1d.shared::cluster.global [%r1], [%rd1, {%r2}], [%r3];
\tret;
}
"""


def test_each_entry_reads_what_it_reaches_through_its_calls() -> None:
    """The tcgen05 of a .func the entry calls is the entry's; so is the module-scope tile it
    stores to; its own `.v2 .b32 pair[4]` is 32 bytes; `dyn` is dynamic."""
    reading = read_module(PTX)
    assert reading.families == {"_Z4tmemPf": ["tcgen05.fence"],
                                "_Z5plainPf": ["cp.async.bulk.tensor"]}
    assert reading.shared == {"_Z4tmemPf": 110000 + 32}
    assert reading.dynamic == ["_Z4tmemPf"]
    assert reading.lines["_Z5plainPf"][0] > reading.lines["_Z4tmemPf"][1]


def test_the_target_lacks_tcgen05_on_sm120_and_the_tile_passes_its_99_kib() -> None:
    reading = read_module(PTX)
    found = lacks("sm_120a", reading.families, reading.shared, [], {})
    assert [(f.kernel, f.kind, f.instruction, f.bytes, f.limit) for f in found] == [
        ("_Z4tmemPf", LackKind.INSTRUCTION, "tcgen05.fence", 0, 0),
        ("_Z4tmemPf", LackKind.SHARED, "", 110032, 101376)]
    # sm_100a has both: tcgen05 and 227 KiB a block
    assert lacks("sm_100a", reading.families, reading.shared, [], {}) == []
    # sm_80 has no bulk copy
    assert [(f.kernel, f.instruction) for f in lacks("sm_80", reading.families, {}, [], {})] == [
        ("_Z4tmemPf", "tcgen05.fence"), ("_Z5plainPf", "cp.async.bulk.tensor")]


@pytest.mark.parametrize(("instruction", "has", "lacks_it"), [
    ("tcgen05.alloc", ["sm_100a", "sm_100f", "sm_103a", "sm_110a", "sm_110f"],
     ["sm_90a", "sm_100", "sm_120a", "sm_120f", "sm_121a"]),
    ("wgmma.fence", ["sm_90a"], ["sm_90", "sm_100a", "sm_120a"]),
    ("setmaxnreg.inc", ["sm_90a", "sm_100a", "sm_120a", "sm_121f"], ["sm_90", "sm_120", "sm_89"]),
    ("elect.sync", ["sm_90", "sm_120"], ["sm_89", "sm_80"]),
    ("cp.async.ca", ["sm_80", "sm_120"], ["sm_75"]),
])
def test_the_table_rows_as_ptxas_13_accepts_them(instruction: str, has: list[str],
                                                 lacks_it: list[str]) -> None:
    family = family_of(instruction)
    assert family is not None and family.source
    assert [family.on(t) for t in has] == [True] * len(has)
    assert [family.on(t) for t in lacks_it] == [False] * len(lacks_it)
    assert all(f.source for f in FAMILIES)


PTXAS_SAYS = """ptxas /tmp/x.ptx, line 21; error   : Instruction 'tcgen05.fence' not supported on .target 'sm_120a'
ptxas error   : Entry function '_Z4tilePf' uses too much shared data (0x27100 bytes, 0x18c00 max)
ptxas info    : Compiling entry function '_Z5plainPf' for 'sm_120a'
ptxas info    : Function properties for _Z5plainPf
    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers, 65536 bytes smem
"""


def test_ptxas_refusals_name_their_kernel_and_v_gives_resources() -> None:
    lines = read_module(PTX).lines
    assert ptxneeds.refused(PTXAS_SAYS, lines) == [["_Z4tmemPf", "tcgen05.fence", "sm_120a"]]
    assert ptxneeds.over_shared(PTXAS_SAYS) == {"_Z4tilePf": [160000, 101376]}
    assert ptxneeds.resources(PTXAS_SAYS) == {"_Z5plainPf": [12, 65536, 8, 4]}
    found = lacks("sm_120a", {}, {}, [["_Z4tmemPf", "tcgen05.fence", "sm_120a"]],
                  {"_Z4tilePf": [160000, 101376]})
    assert found == [Lack("_Z4tmemPf", LackKind.INSTRUCTION, "sm_120a", "tcgen05.fence",
                          read_from="ptxas"),
                     Lack("_Z4tilePf", LackKind.SHARED, "sm_120a", bytes=160000, limit=101376,
                          read_from="ptxas")]
    assert found[1].figure() == ("160000 bytes of shared memory, over sm_120a's per-block "
                                 "limit of 101376 (ptxas)")


needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed here")

KERNELS = """__global__ void tile(float* out) {
  __shared__ float buf[40000];  // 160,000 bytes: over 99 KiB, under 227 KiB
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[(threadIdx.x + 1) % 256];
}
__global__ void tmem(float* out) {
  asm volatile("tcgen05.fence::before_thread_sync;");
  out[0] = 1.f;
}
"""


@pytest.mark.slow
@needs_nvcc
def test_real_nvcc_a_tcgen05_kernel_and_a_tile_over_the_limit_on_sm120(tmp_path: Path) -> None:
    """CUDA 13's nvcc --ptx refuses tcgen05 for compute_120a (its ptxas check): the kernel
    is named from the PTX it left.  For sm_100a the same unit compiles, and its tile is
    read from the PTX's .shared."""
    source = tmp_path / "k.cu"
    source.write_text(KERNELS, encoding="utf-8")
    nvcc = find_nvcc() or ""
    sm120 = compile_ptx(nvcc, source, parse_arch("sm_120a"), [], tmp_path / "a")
    assert not sm120.ok and sm120.refused == [["_Z4tmemPf", "tcgen05.fence", "sm_120a"]]
    assert [(f.kernel, f.kind) for f in sm120.lacks("compute_120a")] == [
        ("_Z4tmemPf", LackKind.INSTRUCTION)]
    sm100 = compile_ptx(nvcc, source, parse_arch("sm_100a"), [], tmp_path / "b")
    assert sm100.ok and sm100.shared == {"_Z4tilePf": 160000}
    assert sm100.families == {"_Z4tmemPf": ["tcgen05.fence"]}
    assert sm100.lacks("compute_100a") == []
    # the same PTX read for the 99 KiB target: the tile is over
    assert [(f.kernel, f.bytes, f.limit) for f in sm100.lacks("compute_120a")
            if f.kind is LackKind.SHARED] == [("_Z4tilePf", 160000, 101376)]
