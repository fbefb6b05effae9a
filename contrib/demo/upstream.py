"""A mini upstream shaped like flashinfer: our own small imitation of the story.

Used by ``contrib demo`` and by the tests (``tests/validate/miniupstream.py``).

It reproduces the *shape* of the SM120 allreduce trap from the seed story:

* ``flashinfer/jit/comm.py``: ``gen_trtllm_comm_module`` asks
  ``get_nvcc_flags_list(supported_major_versions=[9, 10])`` and lists
  ``csrc/trtllm_allreduce.cu``;
* ``csrc/trtllm_allreduce.cu`` includes ``include/flashinfer/comm/trtllm_allreduce.cuh``,
  which has (a) a kernel whose whole body sits under ``__CUDA_ARCH__ < 1200``,
  (b) a kernel where only ``cudaGridDependencySynchronize()`` is guarded that
  way, (c) ``#elif``/``#else``/nested/``!defined(__CUDA_ARCH__)`` cases and a
  guard that also depends on an unknown macro, (d) a ``>= 1000`` guard that
  must not be reported;
* a few Python modules and tests for targeted test selection.

``files(variant)`` returns the tree as ``{path: text}``; variants are
``"base"`` (upstream), ``"gate-only"`` (the seed's one-line patch) and
``"full-fix"`` (gate + guards).  ``write(root, variant)`` writes it to disk and
``init_repo(root)`` (in the tests) commits ``base`` in a fresh git repository.
"""

from __future__ import annotations

OLD_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
NEW_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"
OLD_GATE = "supported_major_versions=[9, 10]"
NEW_GATE = "supported_major_versions=[9, 10, 12]"
GATE_FILE = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
SOURCE = "csrc/trtllm_allreduce.cu"

_CORE = '''\
"""JIT helpers (mini imitation)."""

TARGET_CUDA_ARCHS = [(9, "0a"), (10, "0a"), (12, "0a")]


def get_nvcc_flags_list(supported_major_versions=None):
    archs = [
        (major, minor)
        for major, minor in TARGET_CUDA_ARCHS
        if supported_major_versions is None or major in supported_major_versions
    ]
    if not archs:
        raise RuntimeError(
            f"No supported CUDA architectures found for major versions {supported_major_versions}"
        )
    return [f"-gencode=arch=compute_{a}{b},code=sm_{a}{b}" for a, b in archs]


def gen_jit_spec(name, sources, extra_cuda_cflags=None):
    return {"name": name, "sources": [str(s) for s in sources], "flags": extra_cuda_cflags or []}
'''

_ENV = '''\
"""Where the JIT finds its sources (mini imitation)."""

import pathlib

CSRC_DIR = pathlib.Path(__file__).resolve().parents[2] / "csrc"
'''

_COMM = f'''\
"""JIT module definitions for communication kernels (mini imitation)."""

from . import env as jit_env
from .core import gen_jit_spec, get_nvcc_flags_list


def gen_comm_alltoall_module():
    return gen_jit_spec("comm", [jit_env.CSRC_DIR / "alltoall.cu"])


def gen_trtllm_comm_module():
    nvcc_flags = get_nvcc_flags_list(
        {OLD_GATE}
    )
    return gen_jit_spec(
        "trtllm_comm",
        [
            jit_env.CSRC_DIR / "trtllm_allreduce.cu",
        ],
        extra_cuda_cflags=nvcc_flags,
    )
'''

_TRTLLM_AR = '''\
"""Python wrapper around the allreduce kernels (mini imitation)."""

from flashinfer.jit.comm import gen_trtllm_comm_module


def allreduce_fusion_spec():
    return gen_trtllm_comm_module()
'''

_NORM = '''\
"""Unrelated module."""


def rmsnorm_spec():
    return {"name": "norm"}
'''

_TEST_JIT = """\
from flashinfer.jit.comm import gen_trtllm_comm_module


def test_trtllm_comm_module_lists_sources():
    spec = gen_trtllm_comm_module()
    assert spec["sources"][0].endswith("trtllm_allreduce.cu")
"""

_TEST_AR = """\
from flashinfer.comm.trtllm_ar import allreduce_fusion_spec


def test_allreduce_fusion_spec_has_flags():
    assert allreduce_fusion_spec()["flags"]
"""

_TEST_NORM = """\
from flashinfer.norm import rmsnorm_spec


def test_norm():
    assert rmsnorm_spec()["name"] == "norm"
"""

_SOURCE_CU = """\
// Allreduce entry points (mini imitation).
#include "flashinfer/comm/trtllm_allreduce.cuh"

template __global__ void flashinfer::trtllm_allreduce::lamport_allreduce_kernel<float>(
    float*, float const*, int);
template __global__ void flashinfer::trtllm_allreduce::oneshot_allreduce_kernel<float>(
    float*, float const*, int);
"""

_ARCH_UTILS = """\
#pragma once
// Small arch helpers (mini imitation).
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define FI_HAS_PDL 1
#else
#define FI_HAS_PDL 0
#endif
"""

_HEADER_CUH = f"""\
#pragma once
#include <cuda_runtime.h>

#include "arch_utils.cuh"

namespace flashinfer {{
namespace trtllm_allreduce {{

// (a) The lamport kernel: its whole body sits under the arch guard.
template <typename T>
__global__ void lamport_allreduce_kernel(T* out, T const* in, int n) {{
{OLD_GUARD}
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < n) {{
    out[idx] = in[idx] + in[idx];
  }}
#endif
}}

// (b) Only the programmatic-dependent-launch sync is guarded.
template <typename T>
__global__ void oneshot_allreduce_kernel(T* out, T const* in, int n) {{
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
{OLD_GUARD}
  cudaGridDependencySynchronize();
#endif
  if (idx < n) {{
    out[idx] = in[idx];
  }}
#if FI_HAS_PDL
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}}

// (c) Alternatives: #elif / #else, nesting, host-only code, an unknown macro.
__device__ inline int vector_width() {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200
  return 8;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return 4;
#else
  return 2;
#endif
}}

__device__ inline void fence_peers() {{
#ifdef __CUDA_ARCH__
#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000
  __threadfence();
#else
  __threadfence_system();
#endif
#endif
}}

#if !defined(__CUDA_ARCH__)
inline int host_only_world_size() {{ return 8; }}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !FI_DISABLE_VECTORIZE
__device__ inline int use_vectorized() {{ return 1; }}
#endif

// (d) A Blackwell-and-newer path: SM120 keeps it, nothing to report.
__device__ inline void maybe_prefetch(void const* p) {{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}}

}}  // namespace trtllm_allreduce
}}  // namespace flashinfer
"""

_ALLTOALL_CU = """\
// Unrelated kernel source (mini imitation).
__global__ void alltoall_kernel(int* out) { out[0] = 1; }
"""


def files(variant: str = "base") -> dict[str, str]:
    """The mini-upstream tree as {path: text}: "base", "gate-only" or "full-fix"."""
    tree = {
        "README.md": "mini flashinfer-shaped upstream for contrib tests\n",
        "flashinfer/__init__.py": '"""mini flashinfer."""\n',
        "flashinfer/jit/__init__.py": "",
        "flashinfer/jit/core.py": _CORE,
        "flashinfer/jit/env.py": _ENV,
        GATE_FILE: _COMM,
        "flashinfer/comm/__init__.py": "",
        "flashinfer/comm/trtllm_ar.py": _TRTLLM_AR,
        "flashinfer/norm.py": _NORM,
        SOURCE: _SOURCE_CU,
        "csrc/alltoall.cu": _ALLTOALL_CU,
        HEADER: _HEADER_CUH,
        "include/flashinfer/comm/arch_utils.cuh": _ARCH_UTILS,
        "tests/jit/test_comm_jit.py": _TEST_JIT,
        "tests/comm/test_trtllm_allreduce.py": _TEST_AR,
        "tests/test_norm.py": _TEST_NORM,
    }
    if variant in ("gate-only", "full-fix"):
        tree[GATE_FILE] = tree[GATE_FILE].replace(OLD_GATE, NEW_GATE)
    if variant == "full-fix":
        tree[HEADER] = tree[HEADER].replace(OLD_GUARD, NEW_GUARD)
    if variant not in ("base", "gate-only", "full-fix"):
        raise ValueError(f"unknown mini-upstream variant {variant!r}")
    return tree


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line number of the ``occurrence``-th line containing ``needle``."""
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return hits[occurrence - 1]
