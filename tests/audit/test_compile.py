"""`contrib audit --compile`: the units behind the excluding gates, compiled with nvcc."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from contrib.analysis import ptx
from testing.gitutil import Repo, only_git_on_path
from testing.workspace import Workspace

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")


def _counting_nvcc(folder: Path) -> Path:
    """An nvcc on PATH that logs each call's arguments, then runs the real one."""
    assert NVCC is not None
    folder.mkdir()
    log = folder / "calls.log"
    shim = folder / "nvcc"
    shim.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{NVCC}" "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return log


def _by_function(doc: Any) -> dict[str, dict[str, Any]]:
    (upstream,) = doc["upstreams"]
    return {g["function"]: g for g in upstream["gates"] if g["kind"] == "jit"}


@pytest.mark.slow
@needs_nvcc
def test_compile_confirms_refutes_and_caches(mini: tuple[Workspace, Repo], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = mini
    log = _counting_nvcc(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{log.parent}{os.pathsep}{os.environ['PATH']}")
    first = ws.run("audit", "mini", "--arch", "sm_120a", "--compile", "--json")
    assert first.code == 1, first.err
    gates = _by_function(first.json)
    norm = gates["gen_norm_module"]  # non-empty PTX: stays gate-only, the entries named
    assert (norm["class"], norm["basis"]) == ("gate-only", "compiled")
    assert norm["evidence"] == ["csrc/norm.cu: compiled for sm_120a: 1 entry, none empty "
                                "(norm_kernel)"]
    comm = gates["gen_comm_module"]  # the guarded kernel is `ret;` only
    assert (comm["class"], comm["basis"]) == ("needs-kernel-work", "empty-entries")
    assert "csrc/comm.cu: 1 of 1 PTX entries for compute_120a are empty: comm_kernel" in \
        comm["evidence"]
    mma = gates["gen_mma_module"]  # the guards look fine; nvcc says otherwise
    assert (mma["class"], mma["basis"]) == ("not-buildable", "not-compiled")
    assert mma["evidence"][0].startswith("csrc/mma.cu: nvcc (compute_120a): csrc/mma.cu:3")
    assert "error: #error \"mma_kernel needs tcgen05" in mma["evidence"][0]
    assert gates["gen_mnnvl_module"]["class"] == "intentional"  # not compiled: on purpose
    # moe.cu is listed by the helper its gate builds through, which adds -DMOE_BUILD.
    assert gates["gen_moe_dense_module"]["evidence"] == [
        "csrc/moe.cu: compiled for sm_120a: 1 entry, none empty (moe_kernel)"]
    made = first.json["upstreams"][0]["compile"]
    assert (made["units"], made["compiled"], made["cached"]) == (4, 4, 0)
    # comm's empty entry is checked against an admitted arch too (sm_100a fills it).
    calls = [line for line in log.read_text().splitlines() if "--ptx" in line]
    assert len(calls) == 5 and sum("-arch=compute_120a" in line for line in calls) == 4
    assert any("-DMOE_BUILD" in line and "moe.cu" in line for line in calls)

    # The no-compile audit of the same tree is not changed by the compile's results.
    plain = _by_function(ws.run("audit", "mini", "--arch", "sm_120a", "--json").json)
    assert plain["gen_mma_module"]["class"] == "gate-only"
    assert plain["gen_norm_module"]["evidence"] == []

    # A repeat compiles nothing: every unit comes from the PTX cache.
    log.write_text("")
    again = ws.run("audit", "mini", "--arch", "sm_120a", "--compile", "--json")
    assert _by_function(again.json) == gates
    made = again.json["upstreams"][0]["compile"]
    assert (made["compiled"], made["cached"]) == (0, 4)
    assert not any("--ptx" in line for line in log.read_text().splitlines())


@pytest.mark.slow
@needs_nvcc
def test_compile_table_says_what_nvcc_did(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    table = ws.run("audit", "mini", "--arch", "sm_120a", "--compile")
    assert table.code == 1, table.err
    assert "--compile: 4 units for compute_120a, 0 from the PTX cache" in table.out
    assert "not-buildable" in table.out and "do not compile for sm_120a" in table.out


def test_compile_without_nvcc_exits_2_with_one_line(mini: tuple[Workspace, Repo],
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = mini
    monkeypatch.setenv("PATH", only_git_on_path(tmp_path / "bare-bin"))
    monkeypatch.setattr(ptx, "NVCC_LOCATIONS", ())
    result = ws.run("audit", "mini", "--arch", "sm_120a", "--compile")
    assert result.code == 2
    assert result.err.count("\n") == 1 and "--compile needs nvcc: not found" in result.err, \
        result.err


def test_a_missing_header_makes_a_gate_only_gate_unknown() -> None:
    """A header this machine lacks (curand, CUTLASS) says nothing about the arch: the
    unit is named as not compiled here.  gate-only would stand on the #if guards alone
    (flashinfer's gen_mla_module: SM100 MLA kernels behind CUTLASS headers), so the gate
    is unknown; a finding of the guards stands.  A unit with no kernel entry for the
    arch neither confirms nor refutes."""
    from contrib.analysis.ptx import Outcome
    from contrib.arch import parse_arch
    from contrib.audit.classing.ptxcheck import _apply
    from contrib.audit.model import (
        GATE_ONLY,
        NEEDS_KERNEL_WORK,
        AuditGate,
        Basis,
        Evidence,
        GateKind,
    )

    arch = parse_arch("sm_120a")
    given = AuditGate("pkg/jit.py", 3, "gen_x_module", GateKind.JIT, frozenset({10}), True,
                      class_=GATE_ONLY, units=("csrc/x.cu",))
    lacking = Outcome("csrc/x.cu", False, missing_header="curand_kernel.h",
                      error="csrc/x.cu:1:10: fatal error: curand_kernel.h: No such file")
    gate = _apply(given, [lacking], arch, "compute_120f")
    assert gate.class_ == "unknown" and given.class_ == "gate-only"  # a new value
    # gate-only would stand on the #if guards alone: the header is missing
    assert gate.basis is Basis.HEADER_MISSING and given.basis is None
    assert gate.evidence == (Evidence("csrc/x.cu", "csrc/x.cu", says="not compiled here: nvcc "
                                      "cannot find `curand_kernel.h`"),)
    # the wording, once: where the missing header comes from (no typed field holds it)
    assert "curand_kernel.h (from the CUDA toolkit" in gate.reason

    found = AuditGate("pkg/jit.py", 5, "gen_z_module", GateKind.JIT, frozenset({10}), True,
                      class_=NEEDS_KERNEL_WORK, units=("csrc/x.cu",),
                      evidence=(Evidence("csrc/x.cu:4", "csrc/x.cu", "empty-kernel", "...",
                                         line=4),),
                      reason="1 kernel compiled out", basis=Basis.COMPILED_OUT)
    finding = found.evidence
    found = _apply(found, [lacking], arch, "compute_120f")
    # the finding stands: its class and basis kept, the unit not compiled named beside it
    assert (found.class_, found.basis) == ("needs-kernel-work", Basis.COMPILED_OUT)
    assert found.evidence == (*finding, *gate.evidence)

    hollow = AuditGate("pkg/jit.py", 9, "gen_y_module", GateKind.JIT, frozenset({10}), True,
                       class_=GATE_ONLY, units=("csrc/y.cu",))
    hollow = _apply(hollow, [Outcome("csrc/y.cu", True, [], [])], arch, "compute_120f")
    assert hollow.class_ == "gate-only"
    assert [str(e) for e in hollow.evidence] == [
        "csrc/y.cu: compiled for sm_120a: no kernel entry in it"]  # the words, once


HIDDEN = '''\
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030)
#define HIDDEN_MMA_SUPPORTED 1
#endif
#include "hidden.cuh"
'''
HIDDEN_KERNEL = '''\
#pragma once
#ifdef HIDDEN_MMA_SUPPORTED
__global__ void hidden_kernel(float* out) { out[threadIdx.x] = 3.0f; }
#endif
'''


@pytest.mark.slow
@needs_nvcc
def test_kernels_compiled_out_behind_a_feature_macro(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit with no kernel entry for the target is compiled for an admitted arch too:
    entries there and none here make the gate needs-kernel-work, whatever macro hid them."""
    from contrib.analysis.tree import GitTree
    from contrib.arch import parse_arch
    from contrib.audit.classing.ptxcheck import compile_gates
    from contrib.audit.model import GATE_ONLY, AuditGate, Basis, GateKind
    from contrib.git.repo import Git

    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))
    repo = Repo(tmp_path / "up")
    repo.commit("units", {"csrc/hidden.cu": HIDDEN, "csrc/hidden.cuh": HIDDEN_KERNEL,
                          "csrc/plain.cu": "__global__ void k(float* o) { o[0] = 1.0f; }\n"})
    tree = GitTree(Git(repo.path), repo.head())
    gate = AuditGate("pkg/jit.py", 3, "gen_hidden_module", GateKind.JIT, frozenset({10}), True,
                     class_=GATE_ONLY, units=("csrc/hidden.cu",))
    plain = AuditGate("pkg/jit.py", 9, "gen_plain_module", GateKind.JIT, frozenset({10}), True,
                      class_=GATE_ONLY, units=("csrc/plain.cu",))
    (gate, plain), _ = compile_gates(tree, [gate, plain], parse_arch("sm_120a"), nvcc=NVCC or "",
                                     python=None)
    assert gate.class_ == "needs-kernel-work", gate.evidence
    assert gate.basis is Basis.NO_ENTRY and plain.basis is Basis.COMPILED
    assert [(e.path, e.says) for e in gate.evidence] == [
        ("csrc/hidden.cu", "no kernel entry for sm_120a, 1 entry for sm_100a (hidden_kernel): its "
                           "kernels are compiled out for sm_120a")]
    assert plain.class_ == "gate-only"

    # No entry for either arch: the kernels are instantiated elsewhere; nothing is decided.
    repo.commit("empty", {"csrc/hidden.cuh": "#pragma once\n"})
    tree = GitTree(Git(repo.path), repo.head())
    gate = AuditGate("pkg/jit.py", 3, "gen_hidden_module", GateKind.JIT, frozenset({10}), True,
                     class_=GATE_ONLY, units=("csrc/hidden.cu",))
    (gate,), _ = compile_gates(tree, [gate], parse_arch("sm_120a"), nvcc=NVCC or "", python=None)
    assert gate.class_ == "gate-only" and gate.basis is None  # neither confirmed nor refuted
    assert [(e.path, e.says) for e in gate.evidence] == [
        ("csrc/hidden.cu", "compiled for sm_120a: no kernel entry in it, nor for sm_100a (its "
                           "kernels are instantiated elsewhere)")]

    # An entry the compiler empties for every arch is not the target's.
    repo.commit("a no-op kernel", {"csrc/hidden.cuh": "#pragma once\n__global__ void noop(float* o) "
                                   "{ float x = o[0]; o[0] = x; }\n"})
    tree = GitTree(Git(repo.path), repo.head())
    gate = AuditGate("pkg/jit.py", 3, "gen_hidden_module", GateKind.JIT, frozenset({10}), True,
                     class_=GATE_ONLY, units=("csrc/hidden.cu",))
    (gate,), _ = compile_gates(tree, [gate], parse_arch("sm_120a"), nvcc=NVCC or "", python=None)
    assert gate.class_ == "gate-only" and gate.basis is Basis.COMPILED, gate.evidence
    assert (gate.evidence[0].path, gate.evidence[0].says) == (
        "csrc/hidden.cu", "noop empty for sm_100a too (compiled away for every arch; not counted)")


BUILD = '''\
from . import jit_env


def gen_inner_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])
    return gen_jit_spec("inner", [jit_env.FLASHINFER_CSRC_DIR / "inner.cu"], extra_cuda_cflags=flags,
                        extra_include_paths=[jit_env.FLASHINFER_CSRC_DIR / "nv_internal",
                                             str(jit_env.FLASHINFER_CSRC_DIR / "nv_internal" / "include"),
                                             jit_env.FLASHINFER_GEN_SRC_DIR / "made"])
'''


@pytest.mark.slow
@needs_nvcc
def test_extra_include_paths_of_the_gate_reach_nvcc(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A JIT function's extra_include_paths (tree folders, by the names the build code
    gives them) join the include path: the unit's headers there are found."""
    from contrib.analysis.tree import GitTree
    from contrib.analysis.units import gate_include_dirs
    from contrib.arch import parse_arch
    from contrib.audit.classing.ptxcheck import compile_gates
    from contrib.audit.model import GATE_ONLY, AuditGate, Basis, GateKind
    from contrib.git.repo import Git

    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))
    repo = Repo(tmp_path / "up")
    repo.commit("units", {
        "flashinfer/jit/cpp_ext.py": "", "flashinfer/jit/inner.py": BUILD,
        "csrc/inner.cu": '#include "tensorrt_llm/common/util.h"\n#include "deep.h"\n'
                         "__global__ void inner_kernel(float* o) { o[0] = ONE + TWO; }\n",
        "csrc/nv_internal/tensorrt_llm/common/util.h": "#pragma once\n#define ONE 1.0f\n",
        "csrc/nv_internal/include/deep.h": "#pragma once\n#define TWO 2.0f\n"})
    tree = GitTree(Git(repo.path), repo.head())
    assert gate_include_dirs(tree, [("flashinfer/jit/inner.py", "gen_inner_module")]) == [
        "csrc/nv_internal", "csrc/nv_internal/include"]  # the generated folder is not in the tree
    gate = AuditGate("flashinfer/jit/inner.py", 5, "gen_inner_module", GateKind.JIT, frozenset({10}), True,
                     class_=GATE_ONLY, units=("csrc/inner.cu",))
    (gate,), made = compile_gates(tree, [gate], parse_arch("sm_120a"), nvcc=NVCC or "",
                                  python=None)
    assert not made.missing_headers, gate.evidence
    assert gate.basis is Basis.COMPILED, gate.evidence
    assert [(e.path, e.says) for e in gate.evidence] == [
        ("csrc/inner.cu", "compiled for sm_120a: 1 entry, none empty (inner_kernel)")]


def test_entries_stopped_at_an_arch_disabled_mma_need_kernel_work() -> None:
    """flashinfer's SM100 FMHA on compute_120f still copies and stores, but prints CuTe's
    "without CUTE_ARCH_MMA_SM100A_ENABLED" where each MMA should be; on sm_100a it is
    whole: the gate needs kernel work, and the evidence quotes what the kernel prints."""
    from contrib.analysis.ptx import Outcome
    from contrib.arch import parse_arch
    from contrib.audit.classing.ptxcheck import _apply
    from contrib.audit.model import GATE_ONLY, AuditGate, Basis, GateKind

    text = "Attempting to use SM100_MMA_F16BF16_SS without CUTE_ARCH_MMA_SM100A_ENABLED"
    gate = AuditGate("pkg/jit.py", 3, "gen_fmha_module", GateKind.JIT, frozenset({10}), True,
                     class_=GATE_ONLY, units=("csrc/fmha.cu",))
    mine = Outcome("csrc/fmha.cu", True, ["_Z4fmhaPf"], ["_Z4fmhaPf"],
                   disabled={"_Z4fmhaPf": text})
    twin = Outcome("csrc/fmha.cu", True, ["_Z4fmhaPf"])
    gate = _apply(gate, [mine], parse_arch("sm_120a"), "compute_120f",
                  {"csrc/fmha.cu": (parse_arch("sm_100a"), twin)})
    assert gate.class_ == "needs-kernel-work" and gate.basis is Basis.EMPTY_ENTRIES
    assert [(e.path, e.says) for e in gate.evidence] == [(
        "csrc/fmha.cu", f"1 of 1 PTX entries for compute_120f reach “{text}” "
                        "where their MMA or tensor-memory work should be: fmha")]


@needs_nvcc
def test_a_symlinked_compile_scratch_is_refused_and_nothing_is_written_through_it(
        mini: tuple[Workspace, Repo], tmp_path: Path) -> None:
    from contrib import environ

    ws, _ = mini
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    scratch = environ.cache_root() / "audit" / "compile"
    scratch.parent.mkdir(parents=True, exist_ok=True)
    scratch.symlink_to(elsewhere, target_is_directory=True)
    result = ws.run("audit", "mini", "--arch", "sm_120a", "--compile")
    assert result.code == 2, result.err
    assert "is a symlink" in result.err and "Traceback" not in result.err
    assert list(elsewhere.iterdir()) == []


def test_a_unit_whose_kernel_needs_an_instruction_the_target_lacks_needs_kernel_work() -> None:
    """nvcc's ptxas check refused tcgen05 for compute_120f: not an unbuildable unit but a
    kernel written for another arch's instructions; a tile over 99 KiB likewise."""
    from contrib.analysis.ptx import Outcome
    from contrib.arch import parse_arch
    from contrib.audit.classing.ptxcheck import _apply
    from contrib.audit.model import GATE_ONLY, AuditGate, Basis, GateKind

    gate = AuditGate("pkg/jit.py", 3, "gen_mma_module", GateKind.JIT, frozenset({10}), True,
                     class_=GATE_ONLY, units=("csrc/mma.cu", "csrc/tile.cu"))
    refused = Outcome("csrc/mma.cu", False, ["_Z4tmemPf"], error="ptxas ...",
                      refused=[["_Z4tmemPf", "tcgen05.fence", "sm_120f"]])
    tile = Outcome("csrc/tile.cu", True, ["_Z4tilePf"], shared={"_Z4tilePf": 160000})
    gate = _apply(gate, [refused, tile], parse_arch("sm_120a"), "compute_120f")
    assert gate.class_ == "needs-kernel-work" and gate.basis is Basis.TARGET_LACKS
    assert [(e.path, e.says) for e in gate.evidence] == [
        ("csrc/mma.cu", "kernel tmem needs `tcgen05.fence`, which sm_120f lacks"),
        ("csrc/tile.cu", "kernel tile needs 160000 bytes of shared memory, over sm_120f's "
                         "per-block limit of 101376 (the PTX's static .shared)")]
