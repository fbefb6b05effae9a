"""A mini server stacked on ``lower`` (:mod:`testing.stackupstreams`), whose settings are
one dataclass as sglang's are: one feature for each verdict ``contrib why`` gives.

``python/top/server_args.py`` declares ``ServerArgs`` and its flags:

* ``--enable-fusion``: read under ``is_sm100_supported() or is_sm90_supported()``
  (turned away), calling ``lowerlib.comm.fused_allreduce``: at ``v1.0`` the comm module
  below omits SM12x too, with a kernel it compiles (gate-only: both gates, one per
  upstream); at ``v2.0`` only the gate above;
* ``--enable-quick-reduce``: read with no gate, calling ``lowerlib.fused_allreduce``:
  a crash at ``v1.0`` (refused below), on at ``v2.0``;
* ``--attention-backend=decode``: reaches ``attend``, whose gate keeps SM12x from a
  decode kernel compiled out for it (needs kernel work); ``=plain`` runs no gate (on);
* ``--enable-custom-op``: a gate whose code runs a built op of another package
  (unknown);
* ``--enable-scaled-quant``: calls ``lowerlib.quant.quant``, which refuses other GPUs
  than SM100 only when its caller passes ``scale`` (a misuse of the API, not a crash);
* ``--log-requests``: declared, read nowhere (not followed).

:func:`feature_lower` is ``lower`` with that ``quant`` module.
"""

from __future__ import annotations

from pathlib import Path

from testing.auditupstream import UTILS
from testing.gitutil import Repo, git
from testing.stackupstreams import LOWER, LOWER_JIT, TOP_DECODE, TOP_UTILS, pyproject

QUANT = '''\
from lowerlib.jit import gen_norm_module
from lowerlib.utils import is_sm100_supported


def quant(x, scale=None):
    if not is_sm100_supported() and scale is not None:
        raise ValueError("scale is supported on SM100 only")
    return gen_norm_module().run(x)
'''

SERVER_ARGS = '''\
import argparse
import dataclasses
from typing import Optional

ATTENTION_BACKEND_CHOICES = ["plain", "decode"]


@dataclasses.dataclass
class ServerArgs:
    enable_fusion: bool = False
    enable_quick_reduce: bool = False
    enable_custom_op: bool = False
    enable_scaled_quant: bool = False
    log_requests: bool = False
    attention_backend: Optional[str] = None
    port: int = 30000

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--enable-fusion", action="store_true")
        parser.add_argument("--attention-backend", choices=ATTENTION_BACKEND_CHOICES)


_ARGS = ServerArgs()


def get_server_args():
    return _ARGS
'''

LAYERS = '''\
import lowerlib
import lowerlib.comm as comm
import lowerlib.quant as quant
import torch

from top.decode import attend
from top.server_args import get_server_args
from top.utils import is_sm90_supported, is_sm100_supported


def allreduce(x):
    if get_server_args().enable_fusion and (is_sm100_supported() or is_sm90_supported()):
        return comm.fused_allreduce(x)
    return x


def quick_reduce(x):
    if get_server_args().enable_quick_reduce:
        return lowerlib.fused_allreduce(x)
    return x


def attention(x):
    if get_server_args().attention_backend == "decode":
        return attend(x)
    if get_server_args().attention_backend == "plain":
        return x * 2
    return x


def quantize(x):
    if get_server_args().enable_scaled_quant:
        return quant.quant(x)
    return x


def custom(x):
    if get_server_args().enable_custom_op:
        if is_sm100_supported():
            return torch.ops.vendor_ops.fused(x)
    return x
'''


def feature_upstream(path: Path, requirement: str = "lower_lib==1.0") -> Repo:
    """``top`` with a ``ServerArgs`` dataclass, pinning ``requirement``."""
    repo = Repo(path)
    repo.commit("top", {
        "python/pyproject.toml": pyproject(requirement),
        "python/top/__init__.py": "", "python/top/utils.py": TOP_UTILS,
        "python/top/server_args.py": SERVER_ARGS, "python/top/layers.py": LAYERS,
        "python/top/decode.py": TOP_DECODE,
    })
    return repo


def feature_lower(path: Path) -> Repo:
    """``lower`` (tags ``v1.0`` and ``v2.0``, as :func:`~testing.stackupstreams.
    lower_upstream`) with ``lowerlib/quant.py``."""
    repo = Repo(path)
    extra = {"lowerlib/quant.py": QUANT, "lowerlib/utils.py": UTILS}
    repo.commit("lower 1.0", {**LOWER, **extra, "lowerlib/jit.py": LOWER_JIT.format(comm="[9, 10]")})
    git(path, "tag", "v1.0")
    repo.commit("comm: admit SM12x (#7)", {"lowerlib/jit.py": LOWER_JIT.format(comm="[9, 10, 12]")})
    git(path, "tag", "v2.0")
    return repo
