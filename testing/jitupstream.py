"""A mini library whose JIT chooses its nvcc target from the GPU and the CUDA release,
as flashinfer's compilation context does.

``jitlib.gemm`` loads ``gen_gemm_module``, whose JIT list admits majors 10 and 12;
``CompilationContext`` fills its targets with ``_normalize_cuda_arch`` of each GPU's
capability and formats ``-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}``.
At the first commit (as flashinfer at ad893cfab) SM 12.x builds ``"0f"`` from CUDA 13.0
and ``"0a"`` below it, in a ``try`` whose handler logs; the CUDA release comes from
``nvcc --version``, else ``torch.version.cuda``.  The second commit (as e2f821b8c)
builds ``"0f"`` from 12.9 and raises below it.
"""

from __future__ import annotations

from pathlib import Path

from testing.enableupstream import KERNEL
from testing.gitutil import Repo

CPP_EXT = '''\
import os
import re
import subprocess

import torch
from packaging.version import Version


def get_cuda_path():
    return os.environ.get("CUDA_HOME", "/usr/local/cuda")


def get_cuda_version():
    try:
        nvcc = os.path.join(get_cuda_path(), "bin/nvcc")
        txt = subprocess.check_output([nvcc, "--version"], text=True)
        matches = re.findall(r"release (\\d+\\.\\d+),", txt)
        if not matches:
            raise RuntimeError("cannot parse nvcc --version")
        return Version(matches[0])
    except (RuntimeError, FileNotFoundError) as e:
        if torch.version.cuda is None:
            raise RuntimeError("no CUDA") from e
        return Version(torch.version.cuda)


def is_cuda_version_at_least(version_str):
    return get_cuda_version() >= Version(version_str)
'''

CONTEXT = '''\
import logging
import os

import torch

logger = logging.getLogger(__name__)


class CompilationContext:
    COMMON_NVCC_FLAGS = ["-DENABLE_FP4"]

    @staticmethod
    def _normalize_cuda_arch(major, minor):
        if major == 9:
            return (major, str(minor) + "a")
        elif major == 12:
{sm12}
        elif major >= 10:
            return (major, str(minor) + "a")
        return (major, str(minor))

    def __init__(self):
        self.TARGET_CUDA_ARCHS = set()
        if "JITLIB_CUDA_ARCH_LIST" in os.environ:
            for arch in os.environ["JITLIB_CUDA_ARCH_LIST"].split(" "):
                major, minor = arch.split(".")
                self.TARGET_CUDA_ARCHS.add(self._normalize_cuda_arch(int(major), int(minor)))
        else:
            try:
                for device in range(torch.cuda.device_count()):
                    major, minor = torch.cuda.get_device_capability(device)
                    self.TARGET_CUDA_ARCHS.add(self._normalize_cuda_arch(major, minor))
            except Exception as e:
                logger.warning(f"Failed to get device capability: {{e}}.")

    def get_nvcc_flags_list(self, supported_major_versions=None):
        if supported_major_versions:
            archs = [t for t in self.TARGET_CUDA_ARCHS if t[0] in supported_major_versions]
        else:
            archs = self.TARGET_CUDA_ARCHS
        if len(archs) == 0:
            raise RuntimeError("No supported CUDA architectures found.")
        return [
            f"-gencode=arch=compute_{{major}}{{minor}},code=sm_{{major}}{{minor}}"
            for major, minor in sorted(archs)
        ] + self.COMMON_NVCC_FLAGS


current_compilation_context = CompilationContext()
'''

# SM 12.x as flashinfer at ad893cfab builds it: "0f" from CUDA 13.0, else "0a"
FROM_13 = '''\
            try:
                from jitlib.cpp_ext import is_cuda_version_at_least

                if is_cuda_version_at_least("13.0"):
                    return (major, "0f")
            except (ImportError, RuntimeError, ValueError):
                logger.debug("Could not determine CUDA version")
            return (major, "0a")'''

# ... and at e2f821b8c: "0f" from CUDA 12.9, and no build below it
FROM_12_9 = '''\
            from jitlib.cpp_ext import is_cuda_version_at_least

            if is_cuda_version_at_least("12.9"):
                return (major, "0f")
            else:
                raise RuntimeError("SM 12.x requires CUDA >= 12.9")'''

JIT = '''\
from jitlib.compilation_context import current_compilation_context


def build(name, sources, flags):
    return name


def gen_gemm_module():
    flags = current_compilation_context.get_nvcc_flags_list(supported_major_versions=[10, 12])
    return build("gemm", ["gemm.cu"], flags)
'''

API = '''\
from jitlib.jit import gen_gemm_module


def gemm(x):
    return gen_gemm_module().run(x)
'''


def jit_upstream(path: Path) -> Repo:
    """The mini library: "0a" below CUDA 13 at ``HEAD~1``, "0f" from 12.9 at ``HEAD``."""
    repo = Repo(path)
    repo.commit("fix: add SM120 support (#1)", {
        "jitlib/__init__.py": "from .api import gemm\n",
        "jitlib/api.py": API, "jitlib/jit.py": JIT, "jitlib/cpp_ext.py": CPP_EXT,
        "jitlib/compilation_context.py": CONTEXT.format(sm12=FROM_13),
        "csrc/gemm.cu": KERNEL.format(name="gemm"),
    })
    repo.commit("fix: arch 12.1 -> sm_120f for Spark, CUDA 12.9 (#2)", {
        "jitlib/compilation_context.py": CONTEXT.format(sm12=FROM_12_9)})
    return repo
