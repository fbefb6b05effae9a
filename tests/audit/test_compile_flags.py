"""validate's PTX stage and ``audit --compile`` compile a unit alike: the upstream's own
nvcc flags (read from its build code at the commit), every missing header in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contrib.analysis.profiles import profile_for
from contrib.analysis.ptxjobs import PtxRequest
from contrib.analysis.tree import GitTree
from contrib.analysis.units import Unit
from contrib.arch import parse_arch
from contrib.audit.classing.ptxcheck import compile_gates
from contrib.audit.model import GATE_ONLY, AuditGate, Basis, GateKind
from contrib.git.repo import Git
from contrib.validate.ptxstage import check
from testing.gitutil import Repo

NVCC = shutil.which("nvcc")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")]
SM120 = parse_arch("sm_120a")

# flashinfer v0.5.3's shape: --expt-relaxed-constexpr inside generate_ninja_build_for_op
CPP_EXT = '''\
def generate_ninja_build_for_op(name, sources, extra_cuda_cflags):
    cuda_cflags = []
    cuda_cflags += ["$common_cflags", "--compiler-options=-fPIC", "--expt-relaxed-constexpr"]
    return cuda_cflags
'''
BUILD = '''\
def gen_inner_module():
    return gen_jit_spec("inner", ["inner.cu"], extra_cuda_cflags=["-DINNER_BUILD"])
'''
INNER = ("constexpr float twice(float x) { return 2 * x; }\n"  # a constexpr host function
         "#ifndef INNER_BUILD\n#error the gate's own flag is missing\n#endif\n"
         "__global__ void inner_kernel(float* o) { o[0] = twice(o[1]); }\n")
HEADERS = ('#include <spdlog/spdlog.h>\n#include <tvm/ffi/c_api.h>\n'
           "__global__ void logged_kernel(float* o) { o[0] = 1.0f; }\n")
GITMODULES = '[submodule "3rdparty/spdlog"]\n\tpath = 3rdparty/spdlog\n\turl = https://github.com/gabime/spdlog.git\n'


def _tree(tmp_path: Path) -> GitTree:
    repo = Repo(tmp_path / "up")
    repo.commit("units", {"flashinfer/jit/cpp_ext.py": CPP_EXT, "flashinfer/jit/inner.py": BUILD,
                          "csrc/inner.cu": INNER, "csrc/logged.cu": HEADERS,
                          ".gitmodules": GITMODULES})
    return GitTree(Git(repo.path), repo.head())


def _gate(unit: str) -> AuditGate:
    return AuditGate("flashinfer/jit/inner.py", 2, "gen_inner_module", GateKind.JIT,
                     frozenset({10}), True, class_=GATE_ONLY, units=(unit,))


def _request(tree: GitTree, unit: str, work: Path) -> PtxRequest:
    return PtxRequest(tree, SM120, [Unit(unit, "test", True, "gen_inner_module")],
                      profile_for(tree), None, ["-DINNER_BUILD"], [], [], work, {})


def test_both_compile_with_the_flags_the_upstreams_build_passes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))
    tree = _tree(tmp_path)
    (gate,), made = compile_gates(tree, [_gate("csrc/inner.cu")], SM120, nvcc=NVCC or "",
                                  python=None)
    assert gate.basis is Basis.COMPILED, gate.evidence
    assert made.flags_from == "read from flashinfer/jit/cpp_ext.py"
    stage = check(_request(tree, "csrc/inner.cu", tmp_path / "work"))
    assert stage.status == "passed", stage.reason
    assert stage.details["flags"] == ["--expt-relaxed-constexpr", "-DINNER_BUILD"]
    assert stage.details["flags_from"] == "read from flashinfer/jit/cpp_ext.py"
    assert not stage.details["flags_fallback"]
    # the same compile: validate found audit's result in the PTX cache
    assert stage.details["cached"] == 1


def test_every_missing_header_in_one_line_with_the_submodule_named(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))
    tree = _tree(tmp_path)
    stage = check(_request(tree, "csrc/logged.cu", tmp_path / "work"))
    assert stage.status == "skipped"
    assert stage.reason.startswith("nvcc cannot find 2 headers (1 unit not compiled): install "
                                   "spdlog/spdlog.h (the upstream's git submodule 3rdparty/spdlog")
    assert "`git submodule update --init 3rdparty/spdlog`" in stage.reason
    assert stage.reason.endswith("; tvm/ffi/c_api.h (from apache-tvm-ffi (pip install apache-tvm-ffi))")
    assert stage.details["missing_headers"] == {"csrc/logged.cu": ["spdlog/spdlog.h", "tvm/ffi/c_api.h"]}
    (gate,), made = compile_gates(tree, [_gate("csrc/logged.cu")], SM120, nvcc=NVCC or "",
                                  python=None)
    assert made.missing_headers == ("spdlog/spdlog.h", "tvm/ffi/c_api.h")
    assert "git submodule update --init 3rdparty/spdlog" in made.missing_hint
    assert gate.class_ == "unknown" and gate.basis is Basis.HEADER_MISSING
    assert [e.says for e in gate.evidence] == [
        "not compiled here: nvcc cannot find `spdlog/spdlog.h`, `tvm/ffi/c_api.h`"]
