"""The dynamic shared memory host code asks for, where the source fixes it, and why not."""

from __future__ import annotations

from contrib.analysis.smemlaunch import sites

HOST = """#define TILE_BYTES (132 * 1024)
constexpr int kStages = 3;
void launch(float* out, int n, cudaStream_t stream) {
  // a constant through a #define
  cudaFuncSetAttribute(tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, TILE_BYTES);
  constexpr size_t smem = kStages * 16384;
  ragged<<<n, 128, smem, stream>>>(out);
  auto kernel = PrefillKernel<KTraits, Params>;
  size_t smem_size = sizeof(typename KTraits::SharedStorage);
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_size);
  cudaFuncSetAttribute(other, cudaFuncAttributeMaxDynamicSharedMemorySize, n * 4);
  int grown = 1024;
  grown *= 2;
  config.dynamicSmemBytes = grown;
  cudaFuncSetAttribute(other, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
}
"""


def test_constants_are_evaluated_and_what_is_not_says_why() -> None:
    found = sites("csrc/host.cu", HOST)
    assert [(s.line, s.kernel, s.expression, s.value) for s in found] == [
        (5, "tile_kernel", "TILE_BYTES", 132 * 1024),
        (10, "PrefillKernel", "smem_size", None),
        (11, "other", "n * 4", None),
        (7, "ragged", "smem", 3 * 16384),
        (14, "(cudaLaunchKernelEx)", "grown", None),
    ]
    why = {s.line: s.why for s in found}
    assert why[10].startswith("`sizeof(typename KTraits::SharedStorage)` is a type's size")
    assert why[11].startswith("`n` is not a constant of the source")
    assert why[14].startswith("`grown` is not a constant")  # reassigned before the launch


def test_casts_leave_the_value() -> None:
    code = """void f(int n) {
  constexpr int S = 1 << 16;
  a<<<1, 1, (size_t)48 * 1024>>>();
  b<<<1, 1, static_cast<int>(S)>>>();
  c<<<1, 1, size_t(2) * S>>>();
  d<<<1, 1, (unsigned int)S>>>();
  e<<<1, 1, sizeof(int) * n>>>();
}
"""
    found = sites("k.cu", code)
    assert [(s.kernel, s.value) for s in found] == [
        ("a", 48 * 1024), ("b", 1 << 16), ("c", 2 << 16), ("d", 1 << 16), ("e", None)]
    assert found[-1].why.startswith("`sizeof(int)` is a type's size")
