"""A chain reaching a server's own C++ op ends in the object of the kernel wheel it pins:
a mini sglang whose op lives in a tiny shared object nvcc builds here (SASS for sm_90
and sm_120a only), shipped in an ``sglang-kernel`` wheel found through
CONTRIB_FIND_LINKS.  On 12.1 the object has no image: a crash naming the object, and
the CMake line that builds sm_120a; on 12.0 the op runs; no wheel here: "not read"."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from contrib.analysis.tree import GitTree
from contrib.arch import parse_arch
from contrib.audit.chains import Feature, FeatureKind, Role, Verdict
from contrib.audit.feature.chain import decide
from contrib.audit.stack.reading import Outside
from contrib.audit.stack.sglkernel import ARCH_LIST, NAMESPACE, NO_IMAGE, Kernels, Shelf, kernel_ops
from contrib.git.repo import Git
from testing.devicecode import KERNEL, build, gencode, needs_cuobjdump, needs_nvcc, wheel
from testing.featureupstreams import SERVER_ARGS, feature_lower, feature_upstream
from testing.gitutil import Repo
from testing.stackupstreams import pyproject
from testing.workspace import Workspace

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
    head = Repo(root).commit("top", {
        "python/pyproject.toml": PYPROJECT, "sgl-kernel/CMakeLists.txt": CMAKE,
        "sgl-kernel/csrc/common_extension.cc": REGISTER, "sgl-kernel/csrc/any.cu": ANY})
    tree = GitTree(Git(root), head)
    return Kernels("top", head, tree, Shelf(NAMESPACE, tree))


@pytest.fixture(autouse=True)
def _no_pip_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))


def test_an_op_whose_object_has_no_image_for_the_target_is_a_crash_naming_it(
        tmp_path: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(shipped))
    links = _kernels(tmp_path / "top").links(kernel_ops([OP]), parse_arch("sm_121a"))
    assert [(link.role, link.upstream, link.refuses) for link in links] == [
        (Role.CALL, "top", False), (Role.SHIPS, "sglang-kernel", True)]
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
        (Role.CALL, False, False), (Role.SHIPS, False, False)]
    assert links[1].file == "sgl_kernel/common_ops.abi3.so"
    assert links[1].why == ("sglang-kernel==0.4.10 (x86_64) declares any_gpu in "
                            "sgl_kernel/common_ops.abi3.so: native (sm_120a) on sm_120a")
    assert decide(FEATURE, tuple(links)).verdict == Verdict.ON


def test_a_wheel_not_here_offline_is_said_and_the_chain_carries_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(tmp_path / "empty"))
    links = _kernels(tmp_path / "top").links(kernel_ops([OP]), parse_arch("sm_121a"))
    assert [(link.role, link.refuses) for link in links] == [(Role.CALL, False), (Role.SHIPS, False)]
    assert links[1].why == ("not read: sglang-kernel==0.4.10 (aarch64) not in pip's cache or "
                            "the find-links folders (CONTRIB_FIND_LINKS); the chain carries on "
                            "from the source")
    assert decide(FEATURE, tuple(links)).verdict == Verdict.ON


# -- through `contrib why`, on a mini server stacked on `lower` --------------------------

ANY_OP = '''\
import torch

from top.server_args import get_server_args


def any_op(x):
    if get_server_args().enable_any_op:
        return torch.ops.sgl_kernel.any_gpu.default(x)
    return x
'''


def _server(tmp_path: Path) -> Workspace:
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    top.commit("an op of its own", {
        "python/pyproject.toml": pyproject("lower_lib==1.0").replace(
            '  "click",\n', '  "click",\n  "sglang-kernel==0.4.10",\n'),
        "python/top/server_args.py": SERVER_ARGS.replace(
            "    enable_custom_op: bool = False\n",
            "    enable_custom_op: bool = False\n    enable_any_op: bool = False\n"),
        "python/top/any_op.py": ANY_OP, "sgl-kernel/CMakeLists.txt": CMAKE,
        "sgl-kernel/csrc/common_extension.cc": REGISTER, "sgl-kernel/csrc/any.cu": ANY})
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"top": top, "lower": lower})
    ws.write_config()
    return ws


def test_why_ends_a_feature_at_the_object_its_op_lives_in(
        tmp_path: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _server(tmp_path)
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(tmp_path / "none"))
    result = ws.run("why", "top", "--enable-any-op", "--arch", "sm_121a", "--json", "--no-fetch")
    assert result.code in (0, 1), result.err
    [chain] = result.json["features"]  # type: ignore[index]
    assert chain["verdict"] == "on", chain
    [noted] = [link for link in chain["links"] if link["upstream"] == "sglang-kernel"]
    assert noted["why"].startswith("not read: sglang-kernel==0.4.10 (aarch64) not in pip's cache")
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(shipped))  # a wheel here: answered anew
    result = ws.run("why", "top", "--enable-any-op", "--arch", "sm_121a", "--json", "--no-fetch")
    [chain] = result.json["features"]  # type: ignore[index]
    assert chain["verdict"] == "crash", chain
    assert chain["where"] == ("refused by sglang-kernel 0.4.10 sgl_kernel/common_ops.abi3.so:0 "
                              "torch.ops.sgl_kernel.any_gpu.default")
    assert "no kernel image for sm_121a" in chain["reason"]
    assert chain["fix"] is None
    text = ws.run("why", "top", "--enable-any-op", "--arch", "sm_121a", "--no-fetch").out
    assert (" ships  sglang-kernel==0.4.10 sgl_kernel/common_ops.abi3.so "
            "torch.ops.sgl_kernel.any_gpu.default: no kernel image for sm_121a") in text, text


def test_a_damaged_wheel_is_said_in_one_line_and_the_chain_carries_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "damaged"
    folder.mkdir()
    (folder / "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_aarch64.whl").write_bytes(b"PK\x03\x04 no")
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(folder))
    links = _kernels(tmp_path / "top").links(kernel_ops([OP]), parse_arch("sm_121a"))
    assert [(link.role, link.refuses) for link in links] == [(Role.CALL, False), (Role.SHIPS, False)]
    assert links[1].why.startswith("not read: sglang_kernel-0.4.10-cp310-abi3-manylinux2014_aarch64"
                                   ".whl: ") and "not a wheel" in links[1].why, links[1].why


def test_an_op_declared_by_several_objects_some_lacking_an_image_is_no_crash(
        tmp_path: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sgl-kernel's ``sm90/`` and ``sm100/`` common_ops declare the same ops and one loads
    per GPU: one lacking the target is named, and nothing is refused."""
    wide = build(tmp_path, "wide.so", [gencode("compute_121a", "sm_121a")], kind="so",
                 source=SCHEMA)
    narrow = shipped / "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_aarch64.whl"
    with zipfile.ZipFile(narrow) as archive:
        old = archive.read("sgl_kernel/common_ops.abi3.so")
    folder = tmp_path / "mixed"
    folder.mkdir()
    wheel(folder, "sglang_kernel", "0.4.10", "cp310-abi3-manylinux2014_aarch64",
          {"sgl_kernel/sm90/common_ops.abi3.so": old,
           "sgl_kernel/sm100/common_ops.abi3.so": wide.read_bytes()})
    monkeypatch.setenv("CONTRIB_FIND_LINKS", str(folder))
    links = _kernels(tmp_path / "top").links(kernel_ops([OP]), parse_arch("sm_121a"))
    assert [(link.role, link.refuses, link.file) for link in links[1:]] == [
        (Role.SHIPS, False, "sgl_kernel/sm90/common_ops.abi3.so")]
    assert "which one loads is not read" in links[1].why
