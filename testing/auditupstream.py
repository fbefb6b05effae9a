"""A mini upstream with one gate of each kind the audit tells apart.

* ``gen_norm_module``: a JIT gate over a unit that compiles for SM120 (gate-only);
* ``gen_comm_module``: a JIT gate whose header guards the kernel body out for
  SM120 (needs-kernel-work);
* ``gen_mnnvl_module``: a JIT gate with an upstream comment excluding SM12x
  (intentional);
* ``gen_mma_module``: a JIT gate whose unit looks gate-only to the guard analysis
  but does not compile for SM12x (``#error`` in its device pass): not-buildable
  with ``--compile``;
* ``gen_moe_dense_module``: a JIT gate that builds through a helper of its file
  (``_gen_moe_module`` lists the unit and a flag the unit needs), gate-only;
* ``pick_backend``: a predicate gate in runtime code that leaves SM120 no path,
  and ``tile_size``: a choice between paths that serves SM120;
* ``allreduce``: a predicate gate over a helper that loads ``gen_comm_module``
  (it inherits needs-kernel-work one call down);
* ``fp8_prefill``: a refusal of SM12x whose message says work is to come (unknown,
  the message in its reason);
* ``tests/test_fusion.py``: a predicate gate in a skip marker (test scope);
* ``pkg/toolkit.py``: conditions on the CUDA toolkit's version, which read like
  gates (``major < 13``) and are none.
"""

from __future__ import annotations

from pathlib import Path

from testing.gitutil import Repo, git

JIT = '''\
from pkg.core import build, ctx


def gen_norm_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("norm", ["norm.cu", "norm_ops.cpp"], flags)


def gen_comm_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("comm", ["comm.cu"], flags)


def gen_mnnvl_module():
    # MNNVL needs NVLink: SM12x parts are not supported on purpose.
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("mnnvl", ["mnnvl.cu"], flags)


def gen_mma_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("mma", ["mma.cu"], flags)


def gen_moe_dense_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])
    return _gen_moe_module(flags, "100")


def _gen_moe_module(flags, arch):
    return build("moe_" + arch, ["moe.cu"], flags + ["-DMOE_BUILD"])
'''

FUSION = '''\
from pkg.utils import get_device_capability, is_sm90_supported, is_sm100_supported
from pkg.jit import gen_comm_module


def pick_backend():
    backend = "naive"
    if is_sm90_supported() or is_sm100_supported():
        backend = "fused"
    return backend


def tile_size():
    if get_device_capability()[0] == 10:
        return 128
    elif get_device_capability()[0] == 12:
        return 64
    raise RuntimeError("unsupported GPU")


def _comm_allreduce(x):
    return gen_comm_module()


def allreduce(x):
    out = x
    if is_sm90_supported() or is_sm100_supported():
        out = _comm_allreduce(x)
    return out


def fp8_prefill(x):
    from pkg.utils import is_sm12x_supported

    if is_sm12x_supported():
        raise ValueError("FP8 is not yet supported on SM120")
    return x
'''

OPENED = FUSION.replace("is_sm100_supported():\n        backend",
                        "is_sm100_supported() or is_sm120_supported():\n        backend")

TOOLKIT = '''\
import torch

from pkg.utils import get_cuda_version


def needs_cuda_13():
    major, minor = get_cuda_version()
    if major < 13:
        raise RuntimeError("needs CUDA 13")


def fp4_ok():
    version = torch.version.cuda
    major = int(version.split(".")[0])
    if major < 13:
        raise RuntimeError("needs CUDA 13")
    return True
'''

TEST = '''\
import pytest

from pkg.utils import is_sm100_supported


@pytest.mark.skipif(not is_sm100_supported(), reason="needs SM100")
def test_fusion():
    assert True
'''

UTILS = '''\
import torch


def get_device_capability():
    return torch.cuda.get_device_capability()


def is_sm90_supported():
    return get_device_capability()[0] == 9


def is_sm100_supported():
    major, _ = get_device_capability()
    return major == 10 and torch.version.cuda >= "12.8"


def is_sm120_supported():
    return get_device_capability()[0] == 12


def is_sm12x_supported():
    return get_device_capability()[0] == 12


def get_cuda_version():
    return tuple(int(x) for x in torch.version.cuda.split("."))
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

NO_SM12X = '''\
__global__ void mma_kernel(float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#error "mma_kernel needs tcgen05, which this architecture lacks"
#endif
  out[threadIdx.x] = 2.0f;
}
'''

NEEDS_ITS_FLAG = '''\
#ifndef MOE_BUILD
#error "moe.cu is built with -DMOE_BUILD"
#endif
''' + KERNEL.format(name="moe")

FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": "ctx = None\n\n\ndef build(name, sources, flags):\n    return name\n",
    "pkg/utils.py": UTILS,
    "pkg/jit.py": JIT,
    "pkg/fusion.py": FUSION,
    "pkg/toolkit.py": TOOLKIT,
    "tests/test_fusion.py": TEST,
    "csrc/norm.cu": KERNEL.format(name="norm"),
    "csrc/norm_ops.cpp": "int norm_ops() { return 0; }\n",  # host code: no PTX
    "csrc/mnnvl.cu": KERNEL.format(name="mnnvl"),
    "csrc/mma.cu": NO_SM12X,
    "csrc/moe.cu": NEEDS_ITS_FLAG,
    "csrc/comm.cu": '#include "comm.cuh"\n',
    "csrc/comm.cuh": GUARDED,
}


def audit_upstream(path: Path) -> Repo:
    """The mini upstream, one commit on main."""
    repo = Repo(path)
    repo.commit("Initial import", FILES)
    return repo


def open_gate(repo: Repo) -> str:
    """An upstream commit that lets SM120 into ``pick_backend`` (PR 42); returns its sha."""
    return repo.commit("fusion: admit SM120 (#42)", {"pkg/fusion.py": OPENED})


def audit_workspace(tmp: Path, upstream: Repo, api_url: str, repo: str,
                    audit_arch: str = '["sm_120a"]', extra: str = "") -> Path:
    """A workspace repository carrying no patchset, whose dashboard audits ``upstream``
    (GitHub name ``upstream-org/mini``) for ``audit_arch``; ``extra`` adds TOML."""
    root = tmp / "ws"
    root.mkdir()
    (root / "contrib.toml").write_text(
        f'[github]\napi_url = "{api_url}"\n\n[upstreams.mini]\nurl = "{upstream.path}"\n'
        f'branch = "main"\ngithub = "upstream-org/mini"\n{extra}\n'
        f'[autopilot]\nrepo = "{repo}"\naudit_arch = {audit_arch}\n', encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "workspace", env={
        "GIT_AUTHOR_NAME": "Maintainer", "GIT_AUTHOR_EMAIL": "m@example.com",
        "GIT_COMMITTER_NAME": "Maintainer", "GIT_COMMITTER_EMAIL": "m@example.com"})
    return root
