"""A mini library whose public API is its features, as flashinfer's is.

* ``lib.scale``: two gates of one function on its way (SM90/SM100, then SM100 for
  its norm), each loading a JIT module (``gen_util_module``, ``gen_norm_module``)
  whose unit compiles for SM120: gate-only, four gates of one upstream, one patchset;
* ``lib.finalize``: loads ``gen_util_module`` too, then ``gen_comm_module``, whose
  kernel its header's guard compiles out for SM120: needs kernel work.  The gate of
  ``gen_util_module`` alone brings ``finalize``'s gate into its chain (a runtime gate
  calling the module), as flashinfer's ``gen_moe_utils_module`` at fb28d7242b brings
  a CuTe DSL finalize-fusion path; the feature ``lib.scale`` never meets it.
"""

from __future__ import annotations

from pathlib import Path

from testing.enableupstream import GUARDED, KERNEL, UTILS
from testing.gitutil import Repo

JIT = '''\
from lib.core import build, ctx


def gen_util_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("util", ["util.cu"], flags)


def gen_norm_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("norm", ["norm.cu"], flags)


def gen_comm_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("comm", ["comm.cu"], flags)
'''

API = '''\
from lib.jit import gen_comm_module, gen_norm_module, gen_util_module
from lib.utils import is_sm90_supported, is_sm100_supported


def scale(x):
    if not (is_sm90_supported() or is_sm100_supported()):
        raise RuntimeError("scale needs SM90 or SM100")
    x = gen_util_module()
    if not is_sm100_supported():
        raise RuntimeError("scale needs SM100 for its norm")
    return gen_norm_module()


def finalize(x):
    if not (is_sm90_supported() or is_sm100_supported()):
        raise RuntimeError("finalize needs SM90 or SM100")
    gen_util_module()
    return gen_comm_module()
'''


def lib_upstream(path: Path) -> Repo:
    """The mini library, one commit on main."""
    repo = Repo(path)
    repo.commit("feat(core): initial import (#1)", {
        "lib/__init__.py": "from .api import finalize, scale\n",
        "lib/core.py": "ctx = None\n\n\ndef build(name, sources, flags):\n    return name\n",
        "lib/utils.py": UTILS, "lib/jit.py": JIT, "lib/api.py": API,
        "csrc/util.cu": KERNEL.format(name="util"), "csrc/norm.cu": KERNEL.format(name="norm"),
        "csrc/comm.cu": '#include "comm.cuh"\n', "csrc/comm.cuh": GUARDED,
    })
    return repo
