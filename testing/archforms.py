"""A mini upstream with one file per form the arch evaluator must read.

Predicates are defined as sglang and flashinfer define them (a ``partial`` of a
capability check under ``lru_cache``, a ``_match_sm_version`` over
``f"{major}{minor}"`` strings, module-level cached values, re-exports through a
package's ``from .common import *``); each ``pkg/forms/*.py`` uses one of them
in the shape the upstream does.
"""

from __future__ import annotations

from pathlib import Path

from testing.gitutil import Repo

COMMON = '''\
import os

import torch
from functools import lru_cache, partial


@lru_cache(maxsize=1)
def is_cuda():
    return torch.cuda.is_available() and torch.version.cuda is not None


@lru_cache(maxsize=1)
def is_hip():
    return torch.version.hip is not None


def _check_cuda_device_version(device_capability_majors, cuda_version):
    if not is_cuda():
        return False
    return (
        torch.cuda.get_device_capability()[0] in device_capability_majors
        and tuple(map(int, torch.version.cuda.split(".")[:2])) >= cuda_version
    )


is_blackwell_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[10, 11, 12],
            cuda_version=(12, 8)))
is_sm100_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[10], cuda_version=(12, 8)))
is_sm90_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[9], cuda_version=(12, 3)))


def get_bool_env_var(name):
    return os.environ.get(name, "false").lower() in ("1", "true")


def get_compute_capability(device=None):
    return torch.cuda.get_device_capability(device)


def _match_sm_version(device, sm_version):
    major, minor = get_compute_capability(device)
    device_arch = f"{major * 10 + minor}"
    return device_arch in sm_version


def is_sm100_family(device=None):
    return _match_sm_version(device, ["100", "103"])


def supported_compute_capability(supported_ccs):
    def decorator(func):
        func._supported_ccs = set(supported_ccs)
        return func
    return decorator
'''

FORMS = {
    # the story's gate: a decision function over module-level cached values
    "pkg/forms/fusion.py": '''\
from pkg.utils import get_bool_env_var, is_cuda, is_hip, is_sm90_supported, is_sm100_supported

_is_cuda = is_cuda()
_is_sm90_supported = _is_cuda and is_sm90_supported()
_is_sm100_supported = _is_cuda and is_sm100_supported()


def apply_fusion(batch_size):
    return (
        (_is_sm90_supported or _is_sm100_supported)
        and batch_size > 0
    )


_use_rocm_fusion = get_bool_env_var("USE_ROCM_FUSION") and is_hip()


def forward(x, residual):
    # a ROCm operand beside the GPU test: false on every NVIDIA GPU
    if (_use_rocm_fusion or apply_fusion(x.shape[0])) and residual is not None:
        return fused_allreduce_norm(x, residual)
    return norm(allreduce(x)), residual
''',
    # a predicate read from its definition: admits 10, 11 and 12
    "pkg/forms/blackwell.py": '''\
from pkg.utils import is_blackwell_supported


def pick():
    if is_blackwell_supported():
        return "trtllm"
    return "naive"
''',
    # capability held in a name and indexed; sm-version strings
    "pkg/forms/names.py": '''\
import torch
from pkg.utils import _match_sm_version, is_sm100_family


def tile(device):
    cc = torch.cuda.get_device_capability(device)
    if cc[0] == 12:
        return 64
    return 128


def backend(device):
    if _match_sm_version(device, ["100", "103"]):
        return run_cutlass()
    return run_generic()


def family(device):
    if not is_sm100_family(device):
        raise ValueError("needs SM100")
    return run_cutlass()
''',
    # a value stored at module level in one file, tested in another
    "pkg/forms/config.py": '''\
from pkg.utils import is_sm100_supported

ENABLE_FLASHINFER_GEMM = is_sm100_supported()
''',
    "pkg/forms/gemm.py": '''\
from pkg.forms.config import ENABLE_FLASHINFER_GEMM


def gemm(x):
    if ENABLE_FLASHINFER_GEMM:
        return flashinfer_gemm(x)
    return torch_gemm(x)
''',
    # refusals in other shapes: a reason string, print then exit, a decorator
    "pkg/forms/refuse.py": '''\
import sys

import torch
from pkg.utils import supported_compute_capability


def why_not():
    major, _ = torch.cuda.get_device_capability()
    if major != 9:
        return "needs Hopper"
    return None


def main():
    if torch.cuda.get_device_capability()[0] not in (9, 10):
        print("SM90 or SM100 only")
        sys.exit(0)
    run()


@supported_compute_capability([100, 103])
def fp4_gemm(a, b):
    return a @ b


@supported_compute_capability([90, 100, 120])
def fp8_gemm(a, b):
    return a @ b
''',
    # the toolkit's version mixed in: the GPU part stays a gate
    "pkg/forms/toolkit.py": '''\
import torch
from pkg.utils import is_sm100_supported


def fused(x):
    if is_sm100_supported() and int(torch.version.cuda.split(".")[0]) >= 13:
        return kernel(x)
    return x
''',
    # a module's tests skipped through `pytestmark`, its condition an if-expression
    "tests/test_ssd.py": '''\
import pytest
import torch
from pkg.utils import get_compute_capability

pytestmark = pytest.mark.skipif(
    not get_compute_capability()[0] == 10 if torch.cuda.is_available() else True,
    reason="SM100 only",
)


def test_ssd():
    assert ssd_kernel(1)
''',
    # gates nested under an outer arch branch: the outer one is what the target meets
    "pkg/forms/nested.py": '''\
from pkg.utils import get_compute_capability


def swizzle(x):
    major = get_compute_capability()[0]
    if major == 12:
        layout = "strided"
    else:
        layout = "default"
        if major == 10:
            layout = "persistent"
        elif major == 9:
            layout = "split"
    return layout


def hopper_only(x):
    major = get_compute_capability()[0]
    if major == 9:
        if get_compute_capability()[1] == 0:
            return x * 2
    return x
''',
    # a flag an object sets from the GPU and its other methods test
    "pkg/forms/flags.py": '''\
from pkg.utils import is_sm100_supported


class Linear:
    def __init__(self):
        self.enable_fast_gemm = is_sm100_supported() and True
        self.is_sm100 = is_sm100_supported()

    def apply(self, x):
        return fast_gemm(x) if self.enable_fast_gemm else x
''',
    # a benchmark that only says it skips on the target; the work is in the else
    "benchmarks/bench_fp4.py": '''\
from pkg.utils import is_sm100_supported

if not is_sm100_supported():
    print("Skipping FP4 GEMM benchmark")
    if True:
        print("FP4 needs SM100")
else:
    run_fp4_benchmark()
''',
    # a test helper whose branch for the target is `pass` and whose else skips; a skip
    # whose condition refuses 12.1 but not the 12.0 audited
    "tests/test_gdn.py": '''\
import pytest
import torch


def _cc():
    return torch.cuda.get_device_capability()


def _skip_if_unsupported():
    if _cc()[0] == 10:
        pass
    elif _cc() == (12, 0) or _cc()[0] == 9:
        pass
    else:
        pytest.skip("GDN needs SM90, SM100 or SM120")


def _skip_if_cp_unsupported():
    if not (_cc()[0] == 9 or _cc() == (12, 0)):
        pytest.skip("CP GDN needs SM90 or SM120")
''',
    # a Triton kernel reached two calls down
    "pkg/forms/triton_path.py": '''\
import triton
from pkg.utils import is_sm100_supported


@triton.jit
def _add_kernel(x):
    pass


def _launch(x):
    _add_kernel[(1,)](x)


def add(x):
    if is_sm100_supported():
        return _launch(x)
    return x + 1
''',
}


def arch_forms_upstream(path: Path) -> Repo:
    """The mini upstream, one commit on main."""
    repo = Repo(path)
    files = {"pkg/__init__.py": "", "pkg/forms/__init__.py": "",
             "pkg/utils/__init__.py": "from .common import *\n",
             "pkg/utils/common.py": COMMON, **FORMS}
    repo.commit("Initial import", files)
    return repo
