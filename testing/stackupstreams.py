"""Two mini upstreams stacked as sglang is on flashinfer, for the audit's stack below.

``lower`` (package ``lower-lib``, import name ``lowerlib``) re-exports
``fused_allreduce`` and ``rmsnorm`` from its ``__init__``; each loads a JIT module
whose list is the gate.  At ``v1.0`` the comm module admits majors 9 and 10; at
``v2.0`` it admits 12 too.  The norm module admits 12 at both.

``top`` pins ``lower_lib[cu13]==VERSION`` in ``python/pyproject.toml`` and has:

* ``top/args.py``: ``if is_blackwell_supported(): self.enable_fusion = True``,
  a gate that admits SM12x (majors 10 and 12) and sets a flag;
* ``top/layers.py``: ``allreduce`` runs ``lowerlib.fused_allreduce`` when the
  flag is set (through a helper that imports it lazily): at ``v1.0`` the gate
  above is a mismatch;
* ``top/norm.py``: ``norm`` takes ``rmsnorm`` on SM100 only (excluding; the path
  below admits SM12x: gate-only), ``comm`` takes ``lowerlib.comm.fused_allreduce``
  on SM100 only (excluding; gate-only at both tags: at ``v1.0`` the comm gate below
  turns SM12x away from a kernel it compiles, so lifting both gates is the change);
* ``top/attn.py``: ``Backend.__init__`` picks ``backend = "cutlass"`` on SM100 only
  and hands it to ``lowerlib.attn.AttnWrapper``, whose ``run`` builds, for that
  backend, a module with literal SM100 flags and no gate: the class comes from what
  that path builds, not from the FA2 module (SM100 only, compiled out for SM12x) the
  wrapper's other backends build; ``MlaBackend.__init__`` picks ``"fmha"`` into an
  attribute, whose module admits SM12x into a kernel compiled out for it;
* ``top/gemm.py``: ``matmul`` runs ``lowerlib.gemm.gemm`` on majors 10 and 12,
  which dispatches SM12x to its own module (admitted) and SM100 to another: the
  branch the target does not take is no mismatch.
"""

from __future__ import annotations

from pathlib import Path

from testing.auditupstream import KERNEL, UTILS
from testing.gitutil import Repo, git

LOWER_JIT = '''\
from lowerlib.core import build, ctx


def gen_comm_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions={comm})
    return build("comm", ["comm.cu"], flags)


def gen_norm_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10, 12])
    return build("norm", ["norm.cu"], flags)


def gen_gemm_sm100_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])
    return build("gemm_sm100", ["gemm.cu"], flags)


def gen_gemm_sm120_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[12])
    return build("gemm_sm120", ["gemm.cu"], flags)
'''

LOWER_GEMM = '''\
import torch

from .jit import gen_gemm_sm100_module, gen_gemm_sm120_module


def gemm(x):
    major = torch.cuda.get_device_capability()[0]
    if major == 12:
        return gen_gemm_sm120_module().run(x)
    elif major == 10:
        return gen_gemm_sm100_module().run(x)
    raise ValueError("gemm: unsupported GPU")
'''

LOWER_ATTN = '''\
from lowerlib.core import build, ctx


def gen_attn_module():
    return build("attn", ["attn.cu"], ["-gencode=arch=compute_100a,code=sm_100a"])


def gen_fmha_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10, 12])
    return build("fmha", ["fmha.cu"], flags)


def gen_fa2_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])
    return build("fa2", ["decode.cu"], flags)


def pick_backend():
    return "fa2"


class AttnWrapper:
    def __init__(self, backend="auto"):
        self._backend = backend

    def run(self, x):
        if self._backend == "auto":
            self._backend = pick_backend()
        if self._backend == "cutlass":
            return gen_attn_module().run(x)
        if self._backend == "fmha":
            return gen_fmha_module().run(x)
        return gen_fa2_module().run(x)
'''

TOP_ATTN = '''\
import lowerlib.attn as attn

from top.utils import is_sm100_supported


class Backend:
    def __init__(self):
        backend = "auto"
        if is_sm100_supported():
            backend = "cutlass"
        self.wrapper = attn.AttnWrapper(backend=backend)


class MlaBackend:
    def __init__(self):
        self.fmha_backend = "auto"
        if is_sm100_supported():
            self.fmha_backend = "fmha"
        self.wrapper = attn.AttnWrapper(backend=self.fmha_backend)
'''

# flashinfer's @backend_requirement: one function, a backend chosen by name.
LOWER_MM = '''\
from lowerlib.jit import gen_norm_module


def backend_requirement(checks):
    def mark(fn):
        return fn
    return mark


def _fused_requirement(x, backend="fused"):
    return True


def _plain_requirement(x, backend="fused"):
    return True


@backend_requirement({"fused": _fused_requirement, "plain": _plain_requirement})
def mm(x, backend="fused"):
    if backend == "fused":
        return gen_norm_module().run(x)
    return x
'''

# A decode module admitting SM100 only, its kernel compiled out for SM12x.
LOWER_DECODE = '''\
from lowerlib.core import build, ctx


def gen_decode_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])
    return build("decode", ["decode.cu"], flags)


def decode(x):
    return gen_decode_module().run(x)
'''
DECODE_UNIT = ("__global__ void decode_kernel(float* out) {\n"
               "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1200\n  out[threadIdx.x] = 1.0f;\n"
               "#endif\n}\n")

LOWER = {
    "pyproject.toml": '[project]\nname = "Lower_Lib"\nversion = "0"\n',
    "lowerlib/__init__.py": "from .comm import fused_allreduce\nfrom .norm import rmsnorm\n",
    "lowerlib/core.py": "ctx = None\n\n\ndef build(name, sources, flags):\n    return name\n",
    "lowerlib/comm.py": ("from lowerlib.jit import gen_comm_module\n\n\n"
                         "def fused_allreduce(x):\n    return gen_comm_module().run(x)\n"),
    "lowerlib/norm.py": ("from .jit import gen_norm_module\n\n\n"
                         "def rmsnorm(x):\n    return gen_norm_module().run(x)\n"),
    "lowerlib/gemm.py": LOWER_GEMM,
    "lowerlib/attn.py": LOWER_ATTN,
    "lowerlib/mm.py": LOWER_MM,
    "lowerlib/decode.py": LOWER_DECODE,
    "csrc/decode.cu": DECODE_UNIT,
    "csrc/fmha.cu": DECODE_UNIT.replace("decode", "fmha"),
    "csrc/attn.cu": KERNEL.format(name="attn"),
    "csrc/comm.cu": KERNEL.format(name="comm"),
    "csrc/norm.cu": KERNEL.format(name="norm"),
    "csrc/gemm.cu": KERNEL.format(name="gemm"),
}

TOP_GEMM = '''\
from lowerlib.gemm import gemm

from top.utils import is_blackwell_supported


def matmul(x):
    if is_blackwell_supported():
        return gemm(x)
    return x
'''

TOP_UTILS = UTILS + '''

def is_blackwell_supported():
    return get_device_capability()[0] in (10, 12)
'''

ARGS = '''\
from top.utils import is_blackwell_supported


class Args:
    enable_fusion = False

    def adjust(self):
        if is_blackwell_supported():
            self.enable_fusion = True


ARGS = Args()


def get_args():
    return ARGS
'''

LAYERS = '''\
from top.args import get_args


def allreduce(x):
    if get_args().enable_fusion:
        return _fused(x)
    return x


def _fused(x):
    from lowerlib import fused_allreduce  # imported when first needed

    return fused_allreduce(x)
'''

NORM = '''\
import lowerlib
import lowerlib.comm as comm

from top.utils import is_sm100_supported


def norm(x):
    if is_sm100_supported():
        return lowerlib.rmsnorm(x)
    return x


def comm_step(x):
    if is_sm100_supported():
        return comm.fused_allreduce(x)
    return x
'''

# sglang's fp8_utils: a Blackwell block defining wrappers (whose locals are their own),
# and a dispatcher whose SM90-only backend refuses other archs before it calls below.
FP8 = '''\
from lowerlib import fused_allreduce

from top.utils import is_blackwell_supported, is_sm90_supported

if is_blackwell_supported():
    def blackwell_gemm(x):
        scale = 2
        return x * scale


def run_backend(backend, x):
    scale = 1
    if backend == "hopper":
        if not is_sm90_supported():
            raise RuntimeError("--gemm-backend hopper requires SM90")
        return fused_allreduce(x * scale)
    return blackwell_gemm(x)


def dispatch(backend, x):
    if is_blackwell_supported():
        return run_backend(backend, x)
    return x
'''

# sglang's attention registry and a model override choosing a backend by name on
# SM100: the backend's methods call below.
BACKENDS = '''\
import lowerlib

REGISTRY = {}


def register_norm_backend(name):
    def mark(fn):
        REGISTRY[name] = fn
        return fn
    return mark


class LowerNorm:
    def __init__(self, runner):
        self.runner = runner

    def forward_norm(self, x):
        return lowerlib.rmsnorm(x)


@register_norm_backend("lower_norm")
def create_lower_norm(runner):
    return LowerNorm(runner)
'''

TOP_MM = '''\
from lowerlib.mm import mm

from top.utils import is_blackwell_supported


def plain_mm(x):
    if is_blackwell_supported():
        return mm(x, backend="plain")
    return x


def fused_mm(x):
    if is_blackwell_supported():
        return mm(x, backend="fused")
    return x
'''

# A Triton page-table helper above, the attention kernel below.
TOP_DECODE = '''\
import triton

import lowerlib.decode as dec

from top.utils import is_sm100_supported


@triton.jit
def _page_table_kernel(x):
    pass


def attend(x):
    if is_sm100_supported():
        _page_table_kernel[(1,)](x)
        return dec.decode(x)
    return x
'''

OVERRIDES = '''\
from top.utils import is_sm100_supported


def model_overrides(args):
    if is_sm100_supported():
        return {"norm_backend": "lower_norm"}
    return {}
'''


def pyproject(requirement: str) -> str:
    """``python/pyproject.toml`` of ``top`` requiring ``requirement``."""
    return (f'[project]\nname = "top"\nversion = "0"\ndependencies = [\n  "click",\n'
            f'  "{requirement}",  # keep aligned with the Dockerfile\n]\n')


def lower_upstream(path: Path) -> Repo:
    """``lower`` with tags ``v1.0`` (comm admits 9, 10) and ``v2.0`` (12 too) on main."""
    repo = Repo(path)
    repo.commit("lower 1.0", {**LOWER, "lowerlib/jit.py": LOWER_JIT.format(comm="[9, 10]")})
    git(path, "tag", "v1.0")
    repo.commit("comm: admit SM12x (#7)", {"lowerlib/jit.py": LOWER_JIT.format(comm="[9, 10, 12]")})
    git(path, "tag", "v2.0")
    return repo


def top_upstream(path: Path, requirement: str = "lower_lib[cu13]==1.0") -> Repo:
    """``top`` pinning ``requirement``, one commit on main."""
    repo = Repo(path)
    repo.commit("top", {
        "python/pyproject.toml": pyproject(requirement),
        "python/top/__init__.py": "", "python/top/utils.py": TOP_UTILS,
        "python/top/args.py": ARGS, "python/top/layers.py": LAYERS, "python/top/norm.py": NORM,
        "python/top/gemm.py": TOP_GEMM, "python/top/attn.py": TOP_ATTN,
        "python/top/fp8.py": FP8, "python/top/backends.py": BACKENDS,
        "python/top/overrides.py": OVERRIDES, "python/top/mm.py": TOP_MM,
        "python/top/decode.py": TOP_DECODE,
    })
    return repo


def repin(repo: Repo, requirement: str) -> str:
    """A commit of ``top`` that pins ``requirement`` instead; returns its sha."""
    return repo.commit(f"pin {requirement}", {"python/pyproject.toml": pyproject(requirement)})
