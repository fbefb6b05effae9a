"""sgl-kernel's C++ ops read to the host checks refusing a GPU (a mini sgl-kernel tree
in a real git repository: a registration, entries calling into other files, the three
shapes of a refusal, and a fix that widens ``== 120`` to ``>= 120``)."""

from __future__ import annotations

from pathlib import Path

from contrib.analysis.hostpaths import Condition, reached
from contrib.analysis.torchops import TorchOps, op_name
from contrib.analysis.tree import GitTree
from contrib.arch import parse_arch
from contrib.audit.chains import Feature, FeatureKind, Role, Verdict
from contrib.audit.feature.chain import decide
from contrib.audit.stack.reading import Handed, Outside
from contrib.audit.stack.sglkernel import Kernels, kernel_ops
from contrib.git.repo import Git
from testing import miniupstream as mu

REGISTER = """\
#include "sgl_kernel_ops.h"
// m.impl("commented_out", torch::kCUDA, &nothing);
TORCH_LIBRARY_FRAGMENT(sgl_kernel, m) {
  m.def("mla_decode(Tensor! out, Tensor q) -> ()");
  m.impl("mla_decode", torch::kCUDA, &mla_decode);
  m.def("blockwise_mm(Tensor a, Tensor b, ScalarType out_dtype) -> Tensor");
  m.impl("blockwise_mm", torch::kCUDA, &blockwise_mm);
  m.def("fp4_group_mm(Tensor! out, Tensor a) -> ()");
  m.impl("fp4_group_mm", torch::kCUDA, &fp4_group_mm);
  m.def("grouped_mm(Tensor! out, Tensor a) -> ()");
  m.impl("grouped_mm", torch::kCUDA, &grouped_mm);
  m.def("any_gpu(Tensor! out) -> ()");
  m.impl("any_gpu", torch::kCUDA, &any_gpu);
}
"""
ROCM = """\
TORCH_LIBRARY_EXPAND(sgl_kernel, m) {
  m.impl("any_gpu", torch::kCUDA, &any_gpu_rocm);
}
"""
MLA = """\
#include "utils.h"
#if !defined(CUDA_VERSION) || CUDA_VERSION < 12040
void mla_decode(torch::Tensor const& out, torch::Tensor const& q) {
  TORCH_CHECK(false, "CUDA version must be >= 12.4 for mla_decode");
}
#else
void mla_decode(torch::Tensor const& out, torch::Tensor const& q) {
  auto sm_version = getSMVersion();
  // a comment: TORCH_CHECK(sm_version == 90, "not this one");
  TORCH_CHECK(sm_version == 100, "mla_decode is only supported on compute capability 10.0");
  run_mla(out, q);
}
#endif
"""
BLOCKWISE = """\
torch::Tensor blockwise_mm(const torch::Tensor& a, const torch::Tensor& b, const torch::Dtype& out_dtype) {
  TORCH_CHECK(a.dim() == 2, "a must be a 2D tensor");
  TORCH_CHECK(out_dtype == torch::kHalf || out_dtype == torch::kBFloat16, "out_dtype");
  auto sm_version = getSMVersion();
  torch::Tensor out = torch::empty({a.size(0), b.size(1)}, a.options());
#if defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)
  if (sm_version == 90) {
    sm90_dispatch(out, a, b);
    return out;
  }
#endif
#if defined(CUTLASS_ARCH_MMA_SM120_SUPPORTED)
  if (sm_version == 120) {
    if (out_dtype == torch::kBFloat16) {
      sm120_dispatch<cutlass::bfloat16_t>(out, a, b);
    } else {
      sm120_dispatch<cutlass::half_t>(out, a, b);
    }
    return out;
  }
#endif
  TORCH_CHECK_NOT_IMPLEMENTED(false, "No implemented blockwise_mm for current compute capability: ", sm_version);
}
"""
GROUP_ENTRY = """\
void fp4_group_mm_sm100_sm120(torch::Tensor& out, const torch::Tensor& a);

void fp4_group_mm(torch::Tensor& out, const torch::Tensor& a) {
#if defined ENABLE_NVFP4 && ENABLE_NVFP4
  fp4_group_mm_sm100_sm120(out, a);
  return;
#endif
  TORCH_CHECK_NOT_IMPLEMENTED(false, "No compiled fp4_group_mm kernel");
}
"""
GROUP_KERNELS = """\
void fp4_group_mm_sm100_sm120(torch::Tensor& out, const torch::Tensor& a) {
  auto sm_version = getSMVersion();
  if (sm_version == 100 || sm_version == 103) {
    run_sm100(out, a);
  } else if (sm_version == 120) {
    if (out.scalar_type() == torch::kBFloat16) {
      run_sm120(out, a);
    } else {
      TORCH_CHECK(false, "half output is not implemented on sm120");
    }
  } else {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "Unsupported SM version: " + std::to_string(sm_version));
  }
}
"""
GROUPED = """\
void grouped_mm(torch::Tensor& out, const torch::Tensor& a) {
  bool can_implement = false;
  auto sm_version = getSMVersion();
  if (sm_version == 100) {
    run_sm100(out, a);
    can_implement = true;
  }
  if (sm_version == 90) {
    run_sm90(out, a);
    can_implement = true;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(can_implement, "No implemented grouped_mm for current compute capability");
}
"""
ANY = """\
void any_gpu(torch::Tensor& out) {
  int major, minor;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major >= 8) {
    run(out);
  } else {
    throw std::runtime_error("needs sm_80 or newer");
  }
}
"""


def _kernel_repo(root: Path) -> Git:
    files = {
        "sgl-kernel/csrc/common_extension.cc": REGISTER,
        "sgl-kernel/csrc/common_extension_rocm.cc": ROCM,
        "sgl-kernel/csrc/attention/mla_kernel.cu": MLA,
        "sgl-kernel/csrc/gemm/blockwise_kernel.cu": BLOCKWISE,
        "sgl-kernel/csrc/moe/fp4_group_entry.cu": GROUP_ENTRY,
        "sgl-kernel/csrc/moe/fp4_group_kernels.cu": GROUP_KERNELS,
        "sgl-kernel/csrc/moe/grouped.cu": GROUPED,
        "sgl-kernel/csrc/any.cu": ANY,
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    mu.git(root, "init", "-q", "-b", "main")
    mu.git(root, "add", "-A")
    mu.git(root, "commit", "-q", "-m", "sgl-kernel")
    for path in ("sgl-kernel/csrc/gemm/blockwise_kernel.cu", "sgl-kernel/csrc/moe/fp4_group_kernels.cu"):
        text = (root / path).read_text()
        (root / path).write_text(text.replace("sm_version == 120", "sm_version >= 120"))
    mu.git(root, "commit", "-qam", "use >= 120 for SM12x")
    return Git(root)


def _ops(git: Git, rev: str) -> TorchOps:
    return TorchOps(GitTree(git, str(git.rev_parse(rev))), "sgl_kernel")


def test_an_op_call_names_its_op_only_in_its_namespace() -> None:
    assert op_name("torch.ops.sgl_kernel.blockwise_mm.default", "sgl_kernel") == "blockwise_mm"
    assert op_name("torch.ops.sgl_kernel.blockwise_mm", "sgl_kernel") == "blockwise_mm"
    assert op_name("torch.ops.sglang.blockwise_mm.default", "sgl_kernel") is None
    assert op_name("torch.empty", "sgl_kernel") is None


def test_a_check_on_the_capability_refuses_every_gpu_but_the_one_it_names(tmp_path: Path) -> None:
    ops = _ops(_kernel_repo(tmp_path), "HEAD")
    host = ops.host("mla_decode", parse_arch("sm_120a"))
    assert host is not None
    assert (host.registered, host.registered_line) == ("sgl-kernel/csrc/common_extension.cc", 5)
    assert (host.function, host.file) == ("mla_decode", "sgl-kernel/csrc/attention/mla_kernel.cu")
    # the stub of a build without CUDA 12.4 raises on every GPU: not a refusal of one
    assert [(r.line, r.admits) for r in host.refusals] == [(10, ("10.0",))]
    assert host.refusals[0].what.startswith("TORCH_CHECK(sm_version == 100,")
    assert not host.admits


def test_early_returns_then_a_raise_refuse_what_no_branch_takes(tmp_path: Path) -> None:
    git = _kernel_repo(tmp_path)
    before, after = _ops(git, "HEAD~1"), _ops(git, "HEAD")
    assert before.host("blockwise_mm", parse_arch("sm_120a")).admits  # type: ignore[union-attr]
    refused = before.host("blockwise_mm", parse_arch("sm_121a"))
    assert refused is not None
    assert [(r.file, r.line, r.admits) for r in refused.refusals] == [
        ("sgl-kernel/csrc/gemm/blockwise_kernel.cu", 22, ("9.0", "12.0"))]
    assert after.host("blockwise_mm", parse_arch("sm_121a")).admits  # type: ignore[union-attr]
    assert not after.host("blockwise_mm", parse_arch("sm_100a")).admits  # type: ignore[union-attr]


def test_an_else_chain_is_read_through_the_call_of_another_file(tmp_path: Path) -> None:
    git = _kernel_repo(tmp_path)
    refused = _ops(git, "HEAD~1").host("fp4_group_mm", parse_arch("sm_121a"))
    assert refused is not None
    assert refused.file == "sgl-kernel/csrc/moe/fp4_group_entry.cu"
    # the dtype refusal inside the sm120 branch depends on the output: not read as one
    assert [(r.file, r.line, r.function, r.admits) for r in refused.refusals] == [
        ("sgl-kernel/csrc/moe/fp4_group_kernels.cu", 12, "fp4_group_mm_sm100_sm120",
         ("10.0", "10.3", "12.0"))]
    assert _ops(git, "HEAD").host("fp4_group_mm", parse_arch("sm_121a")).admits  # type: ignore[union-attr]
    assert _ops(git, "HEAD").host("fp4_group_mm", parse_arch("sm_120a")).admits  # type: ignore[union-attr]


def test_a_flag_the_dispatch_sets_is_read_as_the_branches_setting_it(tmp_path: Path) -> None:
    host = _ops(_kernel_repo(tmp_path), "HEAD").host("grouped_mm", parse_arch("sm_120a"))
    assert host is not None
    assert [(r.line, r.admits) for r in host.refusals] == [(12, ("9.0", "10.0"))]


def test_a_throw_past_a_major_test_admits_newer_gpus_and_other_platforms_are_not_read(
        tmp_path: Path) -> None:
    ops = _ops(_kernel_repo(tmp_path), "HEAD")
    host = ops.host("any_gpu", parse_arch("sm_120a"))
    assert host is not None and host.admits
    assert host.file == "sgl-kernel/csrc/any.cu"  # not the ROCm registration's function
    assert not ops.host("any_gpu", parse_arch("sm_75")).admits  # type: ignore[union-attr]
    assert ops.host("nowhere", parse_arch("sm_120a")) is None


def test_a_way_another_value_decides_is_not_known() -> None:
    names = {"sm": "sm"}
    way = (Condition("sm == 120"), Condition("!(out_dtype == torch::kHalf)"))
    assert reached(way, names, 12, 0, {}) is None
    assert reached(way, names, 10, 0, {}) is False
    assert reached((Condition("!(sm == 90 && k % 128 == 0)"),), names, 12, 0, {}) is True
    assert reached((Condition("a.dim() == 2", assumed=True), Condition("sm >= 100")),
                   names, 12, 1, {}) is True


def test_a_refused_op_is_a_crash_below_and_an_admitted_one_a_call(tmp_path: Path) -> None:
    git = _kernel_repo(tmp_path)
    kernels = Kernels("sglang", str(git.rev_parse("HEAD~1")), GitTree(git, "HEAD~1"))
    outs = [Outside("torch.empty", ()),
            Outside("torch.ops.sgl_kernel.blockwise_mm.default", ("linear", "blockwise_mm")),
            Outside("torch.ops.sgl_kernel.any_gpu.default", ("run",))]
    arch = parse_arch("sm_121a")
    links = kernels.links(kernel_ops(outs), arch)
    assert [(link.role, link.file, link.line, link.refuses) for link in links] == [
        (Role.BELOW, "sgl-kernel/csrc/gemm/blockwise_kernel.cu", 22, True),
        (Role.CALL, "sgl-kernel/csrc/any.cu", 1, False)]
    assert links[0].admits == "9.0, 12.0"
    assert links[0].evidence[0].where == "sgl-kernel/csrc/gemm/blockwise_kernel.cu:22"
    feature = Feature(FeatureKind.FLAG, "--fp8-gemm-backend=cutlass", "fp8_gemm_backend", "cutlass")
    chain = decide(feature, tuple(links))
    assert chain.verdict == Verdict.CRASH
    assert "blockwise_kernel.cu:22" in chain.where
    assert kernels.links(kernel_ops(outs), None) == []  # refused above: nothing read
    handed = [Outside("torch.ops.sgl_kernel.blockwise_mm.default", (Handed('"x"'), "f"))]
    assert kernels.links(handed, arch) == []
