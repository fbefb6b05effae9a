"""Every missing header named once, with what ships it."""

from __future__ import annotations

from contrib.analysis.headers import cure, shipped_by


def test_each_known_header_names_its_package() -> None:
    assert shipped_by("spdlog/spdlog.h") == shipped_by("cutlass/cutlass.h")
    assert "flashinfer-python" in str(shipped_by("<cutlass/numeric_types.h>"))
    assert "apache-tvm-ffi" in str(shipped_by("tvm/ffi/function.h"))
    assert "CUDA toolkit" in str(shipped_by("curand_kernel.h"))
    assert shipped_by("my/own.h") is None


def test_one_message_lists_all_grouped_by_package() -> None:
    text = cure(["spdlog/spdlog.h", "tvm/ffi/c_api.h", "cutlass/cutlass.h", "spdlog/spdlog.h",
                 "my/own.h"])
    assert text.startswith("spdlog/spdlog.h, cutlass/cutlass.h (from flashinfer-python")
    assert "tvm/ffi/c_api.h (from apache-tvm-ffi" in text
    assert text.endswith("my/own.h (install what provides them, or waive the unit)")
    assert text.count("spdlog/spdlog.h") == 1
