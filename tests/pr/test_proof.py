"""What a chain reaches below its gates that no stage here builds (the audit's targets),
and a PR's diff read as changing a gate or not."""

from __future__ import annotations

from contrib.arch import parse_arch
from contrib.autopilot.proposals import arch_words, changes
from contrib.forge.api import PrFile
from contrib.pr.proof import ChainGate, below, kernel_less

SM120 = parse_arch("sm_120a")


def test_below_names_what_no_stage_here_builds() -> None:
    chain = [ChainGate("flashinfer/gemm/gemm_base.py:120 mm_fp4", "capability", (), (
        "jit|flashinfer/jit/gemm/core.py|gen_trtllm_gen_gemm_module|10|get_trtllm_gemm_module",
        "jit|flashinfer/jit/norm.py|gen_norm_module||gen_norm_module",
        "aot|csrc/ops.cpp|torch.ops.sgl_kernel.fp8_gemm||fp8_gemm",
        "lib|cudnn|cudnn.graph||execute",
        "triton|pkg/k.py|_kernel||_kernel",
        "checks|pkg/a.py|check||check"))]
    assert below(chain, SM120) == [
        "runs gen_trtllm_gen_gemm_module (flashinfer/jit/gemm/core.py), built with nvcc flags "
        "for SM100 only",
        "runs the ahead-of-time built op torch.ops.sgl_kernel.fp8_gemm, whose binaries' arch "
        "list contrib does not read",
        "runs the kernels of cudnn.graph (cudnn), whose binaries' arch list contrib does not read",
        "runs the Triton kernel _kernel (pkg/k.py), compiled on the GPU at run time: no stage "
        "here builds it"]
    assert below([ChainGate("pkg/a.py:3 f", "predicate", (), ("checks|pkg/a.py|f||f",))],
                 SM120) == []


def test_kernel_less_modules_are_those_whose_every_unit_has_no_entry() -> None:
    units = [{"path": "csrc/runner.cu", "why": "built by gen_gemm_module", "ok": True,
              "entries": 0},
             {"path": "csrc/binding.cu", "why": "built by gen_norm_module", "ok": True,
              "entries": 0},
             {"path": "csrc/norm.cu", "why": "built by gen_norm_module", "ok": True,
              "entries": 3},
             {"path": "csrc/host.cu", "why": "changed", "ok": True, "entries": 0}]
    (only,) = kernel_less({"units": units})
    assert only.startswith("gen_gemm_module compiles to no kernel of its own (csrc/runner.cu)")


def test_a_pr_changes_a_gate_at_its_line_or_naming_its_function() -> None:
    gate = ChainGate("flashinfer/jit/mla.py:22 gen_mla_module", "jit")
    named = PrFile("flashinfer/jit/mla.py", "modified", "@@ -90,2 +90,2 @@ def gen_mla_module():\n")
    over = PrFile("flashinfer/jit/mla.py", "modified", "@@ -20,5 +20,6 @@\n-    [10]\n+    [10, 12]\n")
    beside = PrFile("flashinfer/jit/mla.py", "modified", "@@ -40,5 +40,6 @@ def other():\n")
    elsewhere = PrFile("flashinfer/jit/norm.py", "modified", "@@ -20,5 +20,6 @@ gen_mla_module\n")
    assert changes(named, gate) and changes(over, gate)
    assert not changes(beside, gate) and not changes(elsewhere, gate)
    assert not changes(PrFile("flashinfer/jit/mla.py", "modified", None), gate)
    assert arch_words(SM120) == "SM120 OR sm_120 OR sm120 OR SM12x OR sm_120a"
