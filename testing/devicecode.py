"""Tiny device code built with nvcc, and wheels made around it, for `contrib coverage`."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from contrib.analysis.binaries import find_cuobjdump
from contrib.analysis.ptx import find_nvcc

NVCC = find_nvcc()
CUOBJDUMP = find_cuobjdump()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed here: nothing to build")
needs_cuobjdump = pytest.mark.skipif(
    CUOBJDUMP is None, reason="no cuobjdump (pip install nvidia-cuda-cuobjdump) to read it back")

KERNEL = "__global__ void bump(float* x) { x[threadIdx.x] += 1.0f; }\n"
# A host object registering ops the way TORCH_LIBRARY's m.def leaves them: schema strings
# (the second split over two literals, as sgl_kernel's rotary_embedding is), among
# strings that are no schema.
HOST = KERNEL + r"""
extern "C" {
__attribute__((used)) const char* schema_a = "rmsnorm(Tensor! output, Tensor input, float eps) -> ()";
__attribute__((used)) const char* schema_b = "fp8_mm(Tensor a, Tensor b,   "
                                               "ScalarType out_dtype, Tensor? bias) -> Tensor";
__attribute__((used)) const char* pybind = "({torch.Tensor}, {int}) -> None";
__attribute__((used)) const char* prose = "see(the manual here) -> page";
__attribute__((used)) const char* bare = "bare_op";
}
"""


def gencode(arch: str, code: str) -> str:
    """``-gencode arch=compute_120a,code=sm_120a`` as one argument."""
    return f"-gencode=arch={arch},code={code}"


def build(folder: Path, name: str, gencodes: list[str], *, kind: str = "fatbin",
          source: str = KERNEL) -> Path:
    """``folder/name``: ``source`` built by nvcc into a fatbin, a cubin or a shared object."""
    assert NVCC is not None
    unit = folder / f"{name}.cu"
    unit.write_text(source)
    out = folder / name
    how = {"fatbin": ["-fatbin"], "cubin": ["-cubin"],
           "so": ["-shared", "-Xcompiler", "-fPIC"]}[kind]
    subprocess.run([NVCC, *how, *gencodes, "-o", str(out), str(unit)], check=True,
                   capture_output=True, timeout=600)
    unit.unlink()
    return out


def wheel(folder: Path, name: str, version: str, tag: str, members: dict[str, bytes],
          *, stored: bool = False) -> Path:
    """A wheel ``name-version-tag.whl`` holding ``members`` and its ``.dist-info``."""
    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-{tag}.whl"
    how = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w", compression=how) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
        archive.writestr(f"{dist}/METADATA",
                         f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        archive.writestr(f"{dist}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
                                          f"Tag: {tag}\n")
        archive.writestr(f"{dist}/RECORD", "")
    return path
