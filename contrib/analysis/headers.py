"""Which package ships a header nvcc could not find, so the message can say the cure.

flashinfer's JIT units include third-party headers that a source checkout has
only as git submodules, and that an installed flashinfer-python carries in
``flashinfer/data/``; ``tvm/ffi`` comes with apache-tvm-ffi; curand and the other
CUDA libraries with the CUDA toolkit.  A PTX stage or ``audit --compile`` that
lacks some lists them all in one message with these cures, and ``contrib
doctor`` checks for them before a validate skips its PTX stage.
"""

from __future__ import annotations

from collections.abc import Iterable

# (header path prefix, what ships it): the first matching prefix wins.
SHIPPED_BY: tuple[tuple[str, str], ...] = (
    ("spdlog/", "flashinfer-python (pip install flashinfer-python)"),
    ("cutlass/", "flashinfer-python (pip install flashinfer-python)"),
    ("cute/", "flashinfer-python (pip install flashinfer-python)"),
    ("cub/", "flashinfer-python (pip install flashinfer-python), or the CUDA toolkit"),
    ("thrust/", "flashinfer-python (pip install flashinfer-python), or the CUDA toolkit"),
    ("cuda/std/", "flashinfer-python (pip install flashinfer-python), or the CUDA toolkit"),
    ("tvm/ffi/", "apache-tvm-ffi (pip install apache-tvm-ffi)"),
    ("dlpack/", "apache-tvm-ffi (pip install apache-tvm-ffi)"),
    ("curand", "the CUDA toolkit (its curand headers: cuda-curand-dev)"),
    ("cublas", "the CUDA toolkit (its cuBLAS headers: cuda-cublas-dev)"),
    ("cusparse", "the CUDA toolkit (its cuSPARSE headers)"),
    ("nccl", "NCCL (pip install nvidia-nccl-cu13, or libnccl-dev)"),
    ("nvshmem", "NVSHMEM (pip install nvidia-nvshmem-cu13)"),
    ("mpi", "an MPI implementation (e.g. libopenmpi-dev)"),
)

# Headers doctor looks for: one per package above that flashinfer's units need.
PROBES: tuple[str, ...] = ("spdlog/spdlog.h", "cutlass/cutlass.h", "tvm/ffi/c_api.h",
                           "curand_kernel.h")


def shipped_by(header: str) -> str | None:
    """What ships ``header`` (``spdlog/spdlog.h`` -> flashinfer-python), None if not known."""
    name = header.strip().strip("<>\"").lstrip("./")
    return next((what for prefix, what in SHIPPED_BY if name.startswith(prefix)), None)


def cure(headers: Iterable[str]) -> str:
    """``a.h, b.h (flashinfer-python (...)); c.h (the CUDA toolkit ...)``: every missing
    header once, grouped by what ships it, those with no known source last."""
    groups: dict[str, list[str]] = {}
    for header in dict.fromkeys(headers):
        groups.setdefault(shipped_by(header) or "", []).append(header)
    parts = [f"{', '.join(names)} (from {what})" for what, names in groups.items() if what]
    unknown = groups.get("")
    if unknown:
        parts.append(f"{', '.join(unknown)} (install what provides them, or waive the unit)")
    return "; ".join(parts)
