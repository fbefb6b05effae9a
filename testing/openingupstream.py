"""A mini library whose gates the target passes only by a patch of one form each, or by
none: the audit calls gate-only exactly those ``contrib enable`` drafts.

``olib``'s public API, each loading ``gen_attn_module``, whose JIT list admits SM12x
over a unit that compiles for it (nothing behind the gates needs kernel work):

* ``olib.mla_decode``: ``device_arch != 80`` on ``major * 10 + minor`` refuses all but
  SM80 (flashinfer's ``BatchDecodeMlaWithPagedKVCacheWrapper.run`` at v0.6.16): a
  capability compared with one value, gate-only; enable compares it with the
  target's too;
* ``olib.prefill``: ``if chunked and is_sm12x_supported(): raise`` (flashinfer's
  ``trtllm_fmha_v2_prefill`` at v0.6.16): the test names the target's family and
  turns it away, upstream's refusal by name: intentional, not gate-only;
* ``olib.scaled``: ``if not config.SCALE_UE8M0: raise``, a value ``olib/config.py``
  decides from the arch (sglang's ``deep_gemm_wrapper.DEEPGEMM_SCALE_UE8M0`` at
  00e57d74f): the gate's own test holds no arch term a patch widens, so it is no
  gate-only gate (unknown: its value's source is no intentional gate here).
"""

from __future__ import annotations

from pathlib import Path

from testing.auditupstream import KERNEL, UTILS
from testing.gitutil import Repo

JIT = '''\
from olib.core import build, ctx


def gen_attn_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[8, 9, 10, 12])
    return build("attn", ["attn.cu"], flags)
'''

CONFIG = '''\
from olib.utils import is_sm100_supported

SCALE_UE8M0 = is_sm100_supported()
'''

API = '''\
from olib import config
from olib.jit import gen_attn_module
from olib.utils import get_device_capability, is_sm12x_supported


def mla_decode(q):
    major, minor = get_device_capability()
    device_arch = major * 10 + minor
    if device_arch != 80:
        raise RuntimeError("MLA decode supports SM80 only")
    return gen_attn_module().run(q)


def prefill(q, chunked=False):
    if chunked and is_sm12x_supported():
        raise ValueError("chunked prefill: the tiled kernels ignore the chunk size")
    return gen_attn_module().run(q)


def scaled(q):
    if not config.SCALE_UE8M0:
        raise RuntimeError("scaled needs ue8m0 scales")
    return gen_attn_module().run(q)
'''


def opening_upstream(path: Path) -> Repo:
    """The mini library, one commit on main."""
    repo = Repo(path)
    repo.commit("feat(core): initial import (#1)", {
        "olib/__init__.py": "from .api import mla_decode, prefill, scaled\n",
        "olib/core.py": "ctx = None\n\n\ndef build(name, sources, flags):\n    return name\n",
        "olib/utils.py": UTILS, "olib/config.py": CONFIG, "olib/jit.py": JIT,
        "olib/api.py": API, "csrc/attn.cu": KERNEL.format(name="attn"),
    })
    return repo
