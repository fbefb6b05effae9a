"""A chain reaching a server's own C++ op ends in the object of the kernel wheel it pins:
a mini sglang whose op lives in a tiny shared object nvcc builds here (SASS for sm_90
and sm_120a only), shipped in an ``sglang-kernel`` wheel found through
CONTRIB_FIND_LINKS.  On 12.1 the object has no image: a crash naming the object, and
the CMake line that builds sm_120a; on 12.0 the op runs; no wheel here: "not read"."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.analysis.tree import GitTree
from contrib.arch import parse_arch
from contrib.audit.chains import Feature, FeatureKind, Role, Verdict
from contrib.audit.feature.chain import decide
from contrib.audit.stack.kernelwheel import ARCH_LIST, NO_IMAGE, Shelf
from contrib.audit.stack.reading import Outside
from contrib.audit.stack.sglkernel import NAMESPACE, Kernels, kernel_ops
from contrib.git.repo import Git
from testing import miniupstream as mu
from testing.devicecode import KERNEL, build, gencode, needs_cuobjdump, needs_nvcc, wheel

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuobjdump]

REGISTER = """\
TORCH_LIBRARY_FRAGMENT(sgl_kernel, m) {
  m.def("any_gpu(Tensor! out) -> ()");
  m.impl("any_gpu", torch::kCUDA, &any_gpu);
}
"""
ANY = """\
void any_gpu(torch::Tensor& out) {
  run(out);
}
"""
CMAKE = """\
cmake_minimum_required(VERSION 3.26)
set(SGL_KERNEL_CUDA_FLAGS "-O3")
list(APPEND SGL_KERNEL_CUDA_FLAGS
    "-gencode=arch=compute_90,code=sm_90"
    "-gencode=arch=compute_120a,code=sm_120a"
)
Python_add_library(common_ops MODULE USE_SABI 3 WITH_SOABI csrc/common_extension.cc csrc/any.cu)
"""
SCHEMA = KERNEL + r"""
extern "C" {
__attribute__((used)) const char* schema = "any_gpu(Tensor! out) -> ()";
}
"""
PYPROJECT = """\
[project]
name = "top"
version = "1.0"
dependencies = [
  "torch",
  "sglang-kernel==0.4.10",
]
"""
OP = Outside("torch.ops.sgl_kernel.any_gpu.default", ("run",))
FEATURE = Feature(FeatureKind.FLAG, "--enable-any", "enable_any")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A find-links folder holding the x86_64 and aarch64 wheels of sglang-kernel 0.4.10."""
    folder = tmp_path_factory.mktemp("wheels")
    built = build(tmp_path_factory.mktemp("so"), "common_ops.abi3.so",
                  [gencode("compute_90", "sm_90"), gencode("compute_120a", "sm_120a")],
                  kind="so", source=SCHEMA)
    members = {"sgl_kernel/common_ops.abi3.so": built.read_bytes(),
               "sgl_kernel/__init__.py": b""}
    for platform in ("x86_64", "aarch64"):
        wheel(folder, "sglang_kernel", "0.4.10", f"cp310-abi3-manylinux2014_{platform}", members)
    return folder


def _kernels(root: Path) -> Kernels:
    files = {"python/pyproject.toml": PYPROJECT, "sgl-kernel/CMakeLists.txt": CMAKE,
             "sgl-kernel/csrc/common_extension.cc": REGISTER, "sgl-kernel/csrc/any.cu": ANY}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    mu.git(root, "init", "-q", "-b", "main")
    mu.git(root, "add", "-A")
    mu.git(root, "commit", "-q", "-m", "top")
    git = Git(root)
    head = str(git.rev_parse("HEAD"))
    tree = GitTree(git, head)
    return Kernels("top", head, tree, Shelf(NAMESPACE, tree))


@pytest.fixture(autouse=True)
def _no_pip_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))


def test_an_op_whose_object_has_no_image_for_the_target_is_a_crash_naming_it(
        tmp_path: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(shipped))
    links = _kernels(tmp_path / "top").links(kernel_ops([OP]), parse_arch("sm_121a"))
    assert [(link.role, link.upstream, link.refuses) for link in links] == [
        (Role.CALL, "top", False), (Role.BELOW, "sglang-kernel", True)]
    crash = links[1]
    assert (crash.commit, crash.file, crash.admits) == (
        "0.4.10", "sgl_kernel/common_ops.abi3.so", "sm_90, sm_120a")
    assert [(e.kind, e.where) for e in crash.evidence] == [
        (NO_IMAGE, "sgl_kernel/common_ops.abi3.so"), (ARCH_LIST, "sgl-kernel/CMakeLists.txt:5")]
    assert "no kernel image for sm_121a" in crash.why
    assert "add -gencode=arch=compute_121a,code=sm_121a beside sgl-kernel/CMakeLists.txt:5" \
        in crash.why
    chain = decide(FEATURE, tuple(links))
    assert chain.verdict == Verdict.CRASH
    assert chain.where == ("refused by sglang-kernel 0.4.10 sgl_kernel/common_ops.abi3.so:0 "
                           "torch.ops.sgl_kernel.any_gpu.default")


def test_an_op_whose_object_runs_on_the_target_ends_there_admitted(
        tmp_path: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(shipped))
    links = _kernels(tmp_path / "top").links(kernel_ops([OP]), parse_arch("sm_120a"))
    assert [(link.role, link.refuses, link.excludes) for link in links] == [
        (Role.CALL, False, False), (Role.BELOW, False, False)]
    assert links[1].why == ("sglang-kernel==0.4.10 (x86_64) declares any_gpu in "
                            "sgl_kernel/common_ops.abi3.so: native (sm_120a) on sm_120a")
    assert decide(FEATURE, tuple(links)).verdict == Verdict.ON


def test_a_wheel_not_here_offline_is_said_and_the_chain_carries_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(tmp_path / "empty"))
    links = _kernels(tmp_path / "top").links(kernel_ops([OP]), parse_arch("sm_121a"))
    assert [(link.role, link.refuses) for link in links] == [(Role.CALL, False), (Role.BELOW, False)]
    assert links[1].why == ("not read: sglang-kernel==0.4.10 (aarch64) not in pip's cache or "
                            "the find-links folders (CONTRIB_FIND_LINKS); the chain carries on "
                            "from the source")
    assert decide(FEATURE, tuple(links)).verdict == Verdict.ON
