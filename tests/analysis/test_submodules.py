"""A missing header of the upstream's git submodule: the hint names the submodule."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.analysis.profiles import FLASHINFER, GENERIC
from contrib.analysis.ptx import compile_ptx, every_missing, find_nvcc
from contrib.analysis.submodules import Submodule, hint, owner, submodules
from contrib.analysis.tree import DictTree

GITMODULES = """[submodule "3rdparty/cutlass"]
\tpath = 3rdparty/cutlass
\turl = https://github.com/NVIDIA/cutlass.git
[submodule "3rdparty/spdlog"]
\tpath = 3rdparty/spdlog
\turl = https://github.com/gabime/spdlog.git
[submodule "3rdparty/cccl"]
\tpath = 3rdparty/cccl
\turl = https://github.com/NVIDIA/cccl.git
"""
TREE = DictTree({".gitmodules": GITMODULES, "csrc/a.cu": ""})


def test_gitmodules_are_read_and_a_header_goes_to_its_library():
    entries = submodules(TREE)
    assert [s.path for s in entries] == ["3rdparty/cutlass", "3rdparty/spdlog", "3rdparty/cccl"]
    assert owner("spdlog/sinks/stdout_color_sinks.h", entries) == entries[1]
    assert owner("cute/tensor.hpp", entries) == entries[0]  # CuTe ships inside CUTLASS
    assert owner("cub/cub.cuh", entries) == entries[2]
    assert owner("tvm/ffi/c_api.h", entries) is None
    assert owner("spdlog.h", entries) is None  # no folder: no library to tell
    assert submodules(DictTree({"a.cu": ""})) == []
    # named by its URL's repository where the folder is called otherwise
    assert owner("fmt/core.h", [Submodule("third_party/libfmt", "https://x/fmtlib/fmt.git")])


def test_the_hint_names_the_submodule_and_the_package_that_ships_it():
    text = hint(["spdlog/spdlog.h", "spdlog/sinks/stdout_color_sinks.h", "tvm/ffi/c_api.h",
                 "cutlass/cutlass.h"], TREE, FLASHINFER)
    spdlog, cutlass, tvm = text.split("; ")
    assert spdlog.startswith("spdlog/spdlog.h, spdlog/sinks/stdout_color_sinks.h (the upstream's "
                             "git submodule 3rdparty/spdlog")
    assert "`git submodule update --init 3rdparty/spdlog`" in spdlog
    assert "3rdparty/spdlog/include to validation.ptx_include_dirs" in spdlog
    assert "install flashinfer-python, which ships it in flashinfer/data/spdlog" in spdlog
    assert "pip install" not in spdlog
    assert "3rdparty/cutlass/include" in cutlass
    assert tvm == "tvm/ffi/c_api.h (from apache-tvm-ffi (pip install apache-tvm-ffi))"
    # no .gitmodules: the package hint as before
    assert "pip install flashinfer-python" in hint(["spdlog/spdlog.h"], DictTree({}), GENERIC)


needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed here")


@needs_nvcc
def test_every_missing_header_of_a_unit_is_named_at_once(tmp_path: Path):
    source = tmp_path / "u.cu"
    source.write_text('#include <spdlog/spdlog.h>\n#include "cutlass/cutlass.h"\n'
                      "#include <cuda_runtime.h>\n#include <tvm/ffi/c_api.h>\n"
                      "__global__ void k(int* p) { *p = 1; }\n")
    done = compile_ptx(find_nvcc() or "", source, "compute_120f", [], tmp_path / "out")
    assert not done.ok and done.missing_header == "spdlog/spdlog.h"
    assert done.lacking() == ["spdlog/spdlog.h", "cutlass/cutlass.h", "tvm/ffi/c_api.h"]
    # a name that would leave the stand-in folder ends the search
    assert every_missing(done.command, "../outside.h") == ["../outside.h"]
