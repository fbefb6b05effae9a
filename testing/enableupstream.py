"""A mini upstream with one gate of each form ``contrib enable`` drafts for.

* ``gen_norm_module``: a JIT list over a unit that compiles for SM120, under the
  runtime predicate of ``norm`` (the audit links the two: gate-only);
* ``gen_fast_module``: a JIT list whose backend ``"fast"`` is refused by the
  ``@supported_compute_capability([100, 103])`` of its requirement (the chain of
  flashinfer's cuBLASLt BF16 GEMM); the file spells SM12x as ``120, 121``;
* ``use_fusion``: a predicate returned to the caller, over module-level cached
  values (``_is_sm100_supported = _is_cuda and is_sm100_supported()``);
* ``pick_backend``: a predicate whose target counterpart must be imported;
* ``gen_comm_module`` and ``allreduce`` above it: a kernel compiled out for SM120
  by its header's guard (needs-kernel-work);
* ``gen_wide_module``: a JIT list that admits SM120 already.
"""

from __future__ import annotations

from pathlib import Path

from testing.gitutil import Repo

UTILS = '''\
import torch


def is_cuda():
    return True


def is_sm90_supported():
    return torch.cuda.get_device_capability()[0] == 9


def is_sm100_supported():
    return torch.cuda.get_device_capability()[0] == 10


def is_sm120_supported():
    return torch.cuda.get_device_capability()[0] == 12


def supported_compute_capability(ccs):
    return lambda f: f


def backend_requirement(table):
    return lambda f: f
'''

JIT = '''\
from pkg.core import build, ctx


def gen_norm_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("norm", ["norm.cu"], flags)


def gen_comm_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("comm", ["comm.cu"], flags)
'''

MORE_JIT = '''

def gen_fast_module():
    flags = ctx.get_nvcc_flags_list(
        supported_major_versions=[10]
    )
    return build("fast", ["fast.cu"], flags)


def gen_wide_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10, 12])
    return build("wide", ["norm.cu"], flags)
'''

GEMM = '''\
from pkg.jit import gen_fast_module
from pkg.utils import backend_requirement, supported_compute_capability


@supported_compute_capability([100, 103])
def _fast_requirement(a):
    return True


@supported_compute_capability([90, 100, 103, 120, 121])
def _slow_requirement(a):
    return True


def get_fast_module():
    return gen_fast_module()


def run_gemm(a, backends):
    runners = []
    if "fast" in backends:
        runners.append(get_fast_module())
    return runners


@backend_requirement({"fast": _fast_requirement, "slow": _slow_requirement})
def mm(a, backend="auto"):
    return run_gemm(a, [backend])
'''

RUNTIME = '''\
from pkg.jit import gen_comm_module, gen_norm_module
from pkg.utils import is_sm90_supported, is_sm100_supported


def norm(x):
    out = x
    if is_sm90_supported() or is_sm100_supported():
        out = gen_norm_module()
    return out


def _comm(x):
    return gen_comm_module()


def allreduce(x):
    out = x
    if is_sm90_supported() or is_sm100_supported():
        out = _comm(x)
    return out
'''

FUSION = '''\
from pkg.utils import (
    is_cuda,
    is_sm90_supported,
    is_sm100_supported,
)

_is_cuda = is_cuda()
_is_sm90_supported = _is_cuda and is_sm90_supported()
_is_sm100_supported = _is_cuda and is_sm100_supported()


def use_fusion(batch):
    return (_is_sm90_supported or _is_sm100_supported) and batch > 0


def pick_backend():
    backend = "naive"
    if is_sm100_supported():
        backend = "fused"
    return backend
'''

KERNEL = '''\
__global__ void {name}_kernel(float* out) {{
  out[threadIdx.x] = 1.0f;
}}
'''

GUARDED = '''\
#pragma once
__global__ void comm_kernel(float* out) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200)
  out[threadIdx.x] = 1.0f;
#endif
}
'''

BASE = {
    "pkg/__init__.py": "",
    "pkg/core.py": "ctx = None\n\n\ndef build(name, sources, flags):\n    return name\n",
    "pkg/utils.py": UTILS,
    "pkg/runtime.py": RUNTIME,
    "csrc/norm.cu": KERNEL.format(name="norm"),
    "csrc/comm.cu": '#include "comm.cuh"\n',
    "csrc/comm.cuh": GUARDED,
}


def enable_upstream(path: Path, *, every_form: bool = True) -> Repo:
    """The mini upstream, one commit on main (subjects in Conventional Commits).  Without
    ``every_form``: only ``norm`` over ``gen_norm_module`` (gate-only) and ``allreduce``
    over ``gen_comm_module`` (needs-kernel-work)."""
    files = dict(BASE, **{"pkg/jit.py": JIT + (MORE_JIT if every_form else "")})
    if every_form:
        files |= {"pkg/gemm.py": GEMM, "pkg/fusion.py": FUSION,
                  "csrc/fast.cu": KERNEL.format(name="fast")}
    repo = Repo(path)
    repo.commit("feat(core): initial import (#1)", files)
    return repo
