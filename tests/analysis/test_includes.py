from __future__ import annotations

from contrib.analysis.includes import (
    IncludeResolver,
    find_by_name,
    include_closure,
    include_roots,
    is_cuda_source,
)
from contrib.analysis.tree import DictTree
from testing import miniupstream as mu


def test_find_by_name_prefers_csrc_then_shallow():
    tree = DictTree(
        {"csrc/a.cu": "", "benchmarks/csrc_copy/a.cu": "", "x/y/b.cu": "", "b.cu": "", "c/d.cu": ""}
    )
    assert find_by_name(tree, "a.cu") == "csrc/a.cu"
    assert find_by_name(tree, "b.cu") == "b.cu"
    assert find_by_name(tree, "d.cu") == "c/d.cu"
    assert find_by_name(tree, "./c/d.cu") == "c/d.cu"
    assert find_by_name(tree, "missing.cu") is None


def test_include_roots_and_resolution_order():
    tree = DictTree({
        "include/fi/x.cuh": "", "3rdparty/lib/include/lib.h": "", "csrc/x.cuh": "", "csrc/k.cu": "",
        "csrc/sub/k2.cu": "",
    })
    assert include_roots(tree) == ["include", "3rdparty/lib/include"]
    resolve = IncludeResolver(tree)
    assert resolve("csrc/k.cu", "x.cuh") == "csrc/x.cuh"  # own folder first
    assert resolve("csrc/k.cu", "fi/x.cuh") == "include/fi/x.cuh"
    assert resolve("csrc/sub/k2.cu", "../x.cuh") == "csrc/x.cuh"
    assert resolve("csrc/k.cu", "lib.h") == "3rdparty/lib/include/lib.h"
    assert resolve("csrc/k.cu", "nope.h") is None


def test_closure_of_mini_upstream():
    tree = DictTree(mu.files("base"))
    closure = include_closure(tree, [mu.SOURCE])
    assert closure.files == [mu.SOURCE, mu.HEADER, "include/flashinfer/comm/arch_utils.cuh"]
    assert closure.unresolved == []  # <cuda_runtime.h> is a system header, not reported


def test_closure_reports_missing_quoted_includes_and_handles_cycles():
    tree = DictTree(
        {
            "a.cu": '#include "b.h"\n#include "gone.h"\n// #include "c.h"\n',
            "b.h": '#include "a.cu"\n',
        }
    )
    closure = include_closure(tree, ["a.cu"])
    assert closure.files == ["a.cu", "b.h"]
    assert closure.unresolved == [("a.cu", "gone.h")]


def test_is_cuda_source():
    assert all(is_cuda_source(p) for p in ["a.cu", "b.CUH", "c.cpp", "d.h", "e.hpp", "f.cc"])
    assert not any(is_cuda_source(p) for p in ["a.py", "b.txt", "cu"])
