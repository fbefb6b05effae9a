"""What a chain reaches below its gates that no stage here builds (the audit's targets),
a PR's diff read as changing a gate or not, and what the PR body says was proven."""

from __future__ import annotations

from contrib.analysis.reach.endpoints import Endpoint
from contrib.analysis.reach.endpoints import EndpointKind as Kind
from contrib.arch import parse_arch
from contrib.autopilot.proposals import arch_words, changes
from contrib.forge.api import PrFile
from contrib.pr.body import BodyInput, CommitLine, render_body
from contrib.pr.proof import ChainGate, Opened, below, kernel_less, opened, prove
from contrib.record import Record, Standing, arch_verdicts
from contrib.validate.report import StageResult, host_facts
from contrib.validate.testrun import Gpu
from contrib.workspace.schema import Decided, Done, GateAt
from contrib.workspace.validation import Settings
from testing.recordutil import run_of

SM120 = parse_arch("sm_120a")
JIT, AOT, LIB, TRITON, CHECKS = Kind.JIT, Kind.AOT, Kind.LIB, Kind.TRITON, Kind.CHECKS
CUBIN = Kind.CUBIN


def test_below_names_what_no_stage_here_builds() -> None:
    chain = [ChainGate(GateAt("flashinfer/gemm/gemm_base.py", 120, "mm_fp4"), "capability", (), (
        Endpoint(JIT, "flashinfer/jit/gemm/core.py", "gen_trtllm_gen_gemm_module", (10,),
                 "get_trtllm_gemm_module"),
        Endpoint(JIT, "flashinfer/jit/norm.py", "gen_norm_module", (), "gen_norm_module"),
        Endpoint(AOT, "csrc/ops.cpp", "torch.ops.sgl_kernel.fp8_gemm", (), "fp8_gemm"),
        Endpoint(LIB, "cudnn", "cudnn.graph", (), "execute"),
        Endpoint(TRITON, "pkg/k.py", "_kernel", (), "_kernel"),
        Endpoint(CHECKS, "pkg/a.py", "check", (), "check")))]
    assert below(chain, SM120) == [
        "runs gen_trtllm_gen_gemm_module (flashinfer/jit/gemm/core.py), built with nvcc flags "
        "for SM100 only",
        "runs the ahead-of-time built op torch.ops.sgl_kernel.fp8_gemm, whose binaries' arch "
        "list contrib does not read",
        "runs the kernels of cudnn.graph (cudnn), whose binaries' arch list contrib does not read",
        "runs the Triton kernel _kernel (pkg/k.py), compiled on the GPU at run time: no stage "
        "here builds it"]
    assert below([ChainGate(GateAt("pkg/a.py", 3, "f"), "predicate", (),
                            (Endpoint(CHECKS, "pkg/a.py", "f", (), "f"),))], SM120) == []


def test_a_chain_reaching_prebuilt_cubins_is_held_back_with_their_majors() -> None:
    """flashinfer's trtllm-gen GEMM: the cubins gen_trtllm_gen_gemm_module fetches are
    built nowhere here; the majors the audit read for them name the line.  Cubins whose
    arch list names the target hold nothing back."""
    fetcher = "gen_trtllm_gen_gemm_module"

    def gate(majors: tuple[int, ...]) -> ChainGate:
        return ChainGate(GateAt("flashinfer/gemm/gemm_base.py", 5699,
                                "_trtllm_gemm_fp4_requirement"),
                         "capability", (), (Endpoint(CUBIN, "flashinfer/jit/gemm/core.py",
                                                     fetcher, majors, "mm_fp4>" + fetcher),))

    assert below([gate((10,))], SM120) == [
        f"runs prebuilt SM100 cubins, fetched by {fetcher} (flashinfer/jit/gemm/core.py): "
        "none made for sm_120a"]
    assert below([gate(())], SM120) == [
        f"runs prebuilt cubins, fetched by {fetcher} (flashinfer/jit/gemm/core.py), whose arch "
        "list contrib does not read"]
    assert below([gate((10, 12))], SM120) == []


def _unit(path: str, builder: str, entries: int, why: str = "") -> dict[str, object]:
    return {"path": path, "why": why or f"built by {builder}", "builder": builder, "ok": True,
            "entries": entries}


def test_kernel_less_modules_are_those_whose_every_unit_has_no_entry() -> None:
    units = [_unit("csrc/runner.cu", "gen_gemm_module", 0),
             _unit("csrc/binding.cu", "gen_norm_module", 0),
             _unit("csrc/norm.cu", "gen_norm_module", 3),
             _unit("csrc/host.cu", "", 0, why="changed")]
    (only,) = kernel_less({"units": units})
    assert only.startswith("gen_gemm_module compiles to no kernel of its own (csrc/runner.cu)")


def test_a_units_module_is_its_builder_key_not_its_words() -> None:
    # the builder decides, whatever `why` says for display
    worded = [_unit("csrc/runner.cu", "gen_gemm_module", 0, why="reached from the gate")]
    assert [r.split(" ", 1)[0] for r in kernel_less({"units": worded})] == ["gen_gemm_module"]
    # a record written before units had a builder cannot say which units a module
    # builds: it proves nothing, whatever its words say (the wording, once)
    older = [{"path": "csrc/runner.cu", "why": "built by gen_gemm_module", "ok": True,
              "entries": 0}]
    assert kernel_less({"units": older}) == [
        "the ptx record does not say which JIT module built each unit (it predates that): "
        "run contrib validate again"]


def test_a_pr_changes_a_gate_at_its_line_or_naming_its_function() -> None:
    gate = ChainGate(GateAt("flashinfer/jit/mla.py", 22, "gen_mla_module"), "jit")
    named = PrFile("flashinfer/jit/mla.py", "modified", "@@ -90,2 +90,2 @@ def gen_mla_module():\n")
    over = PrFile("flashinfer/jit/mla.py", "modified", "@@ -20,5 +20,6 @@\n-    [10]\n+    [10, 12]\n")
    beside = PrFile("flashinfer/jit/mla.py", "modified", "@@ -40,5 +40,6 @@ def other():\n")
    elsewhere = PrFile("flashinfer/jit/norm.py", "modified", "@@ -20,5 +20,6 @@ gen_mla_module\n")
    assert changes(named, gate) and changes(over, gate)
    assert not changes(beside, gate) and not changes(elsewhere, gate)
    assert not changes(PrFile("flashinfer/jit/mla.py", "modified", None), gate)
    assert arch_words(SM120) == "SM120 OR sm_120 OR sm120 OR SM12x OR sm_120a"


def _standing(*stages: StageResult, gpus: list[Gpu] | None = None) -> Standing:
    run = run_of(list(stages), host={**host_facts(gpus or []), "hostname": "box"}).run()
    record = Record("mini", "enable-norm", "a" * 40, "sha256:" + "0" * 64, (run,))
    return Standing(record, "", tuple(arch_verdicts(record.runs, Settings().required())))


def _body(standing: Standing, decisions: dict[str, Decided]) -> str:
    return render_body(BodyInput(
        target="mini/enable-norm", version="a" * 40, base_branch="main", summary="Drafted.",
        commits=[CommitLine("b" * 40, "0001-x.patch", "Enable norm", "Dev")],
        validation=standing, proof=prove(standing, SM120, None, decisions)))


GATES = StageResult("gates", "passed", "2 touched gates admit sm_120a", details={"gates": [
    {"location": "pkg/norm.py:8", "file": "pkg/norm.py", "line": 8, "function": "norm", "majors_before": [9, 10],
     "majors_after": [9, 10, 12]},
    {"location": "pkg/jit.py:5", "file": "pkg/jit.py", "line": 5, "function": "gen_norm_module", "majors_before": [9, 10],
     "majors_after": [9, 10, 12]}]})
PTX = StageResult("ptx", "passed", "1 kernel entry in 2 units for compute_120a", details={
    "compute": "compute_120a", "units": [
        {"path": "csrc/norm.cu", "why": "built by gen_norm_module",
         "builder": "gen_norm_module", "ok": True, "entries": 1, "kernels": ["norm_kernel"]},
        {"path": "csrc/binding.cu", "why": "built by gen_norm_module",
         "builder": "gen_norm_module", "ok": True, "entries": 0, "kernels": []}]})
DECISIONS = {d.gate: d for d in (
    Decided("pkg/norm.py:7 norm", Done.WIDENED,
             "pkg/norm.py:7: the condition gains `is_sm120_supported()` (norm)",
             "the target skips this code"),
    Decided("pkg/jit.py:5 gen_norm_module", Done.WIDENED,
             "pkg/jit.py:5: majors [9, 10] -> [9, 10, 12] (gen_norm_module)",
             "the JIT list omits 12"),
    Decided("pkg/api.py:30 api", Done.LEFT, why="pkg/api.py:30: names sm_120a's family"))}


def test_the_chain_is_the_decisions_left_or_read_by_the_gates_stage() -> None:
    assert opened(DECISIONS, GATES.to_stage()) == [
        Opened("pkg/norm.py:7 norm", GateAt("pkg/norm.py", 7, "norm"), (9, 10), (9, 10, 12),
               read=True),
        Opened("pkg/jit.py:5 gen_norm_module", GateAt("pkg/jit.py", 5, "gen_norm_module"),
               (9, 10), (9, 10, 12), read=True),
        Opened("pkg/api.py:30 api", GateAt("pkg/api.py", 30, "api"), left=True,
               why="pkg/api.py:30: names sm_120a's family")]
    # left is the value's, whatever its words: no gate is read as left for saying so
    said = Decided("pkg/norm.py:7 norm", Done.WIDENED, "left as it is: no", "words only")
    (one,) = opened({said.gate: said}, GATES.to_stage())
    assert not one.left and one.read
    # left with no reason given is left all the same
    bare = Decided("pkg/api.py:30 api", Done.LEFT)
    assert opened({bare.gate: bare}, None) == [Opened("pkg/api.py:30 api", GateAt("pkg/api.py", 30, "api"), left=True)]


def test_the_body_says_what_was_proven_and_the_chain_below_it() -> None:
    standing = _standing(StageResult("apply", "passed", "2 patches applied"), GATES, PTX,
                         StageResult("tests", "skipped", "no upstream test references it"))
    body = _body(standing, DECISIONS)
    section = body.split("### What was proven", 1)[1].split("### Patches", 1)[0]
    assert "For sm_120a, `contrib validate` passed:\n\n- apply: 2 patches applied\n" \
           "- gates: 2 touched gates admit sm_120a\n" in section
    assert "Not proven here:\n\n- tests, skipped: no upstream test references it\n" \
           "- No GPU of the target (sm_120a) ran this patch.\n" in section
    assert "1. `pkg/norm.py:7` `norm`: admits majors 9, 10 -> 9, 10, 12\n" \
           "2. `pkg/jit.py:5` `gen_norm_module`: admits majors 9, 10 -> 9, 10, 12\n" \
           "3. `pkg/api.py:30` `api`: left as it is: pkg/api.py:30: names sm_120a's family\n" \
           in section
    assert "Below them, the CUDA units the ptx stage compiled for compute_120a:\n\n" \
           "- `csrc/norm.cu` (built by gen_norm_module): 1 kernel entry (`norm_kernel`)\n" \
           "- `csrc/binding.cu` (built by gen_norm_module): no kernel of its own; the kernels " \
           "it launches were not compiled here\n" in section
    assert "held back" not in body and len(section.strip().splitlines()) <= 25


def test_a_gpu_of_the_target_that_ran_the_tests_is_said_and_no_decisions_no_chain() -> None:
    blackwell = [Gpu("NVIDIA RTX PRO 6000 Blackwell", "12.0")]
    ran = _standing(GATES, StageResult("ptx", "not-applicable", "no CUDA unit at stake"),
                    StageResult("tests", "passed", "3 passed"), gpus=blackwell)
    body = _body(ran, {})
    assert "A GPU of the target (sm_120a) ran this patch." in body
    assert "Not proven here" not in body and "### The chain" not in body
    # a GPU of the target in the host, but no test ran on it
    idle = _standing(GATES, StageResult("tests", "skipped", "none selected"), gpus=blackwell)
    assert "- No GPU of the target (sm_120a) ran this patch." in _body(idle, {})
    widened = Decided("pkg/jit.py:5 gen_norm_module", Done.WIDENED, "pkg/jit.py:5: majors ...")
    chain = _body(ran, {widened.gate: widened})
    assert "Below them: no device code (no CUDA unit at stake)." in chain


def test_a_body_without_a_record_for_the_arch_has_the_chain_only() -> None:
    run = run_of([GATES], arch="sm_90a").run()
    record = Record("mini", "enable-norm", "a" * 40, "sha256:" + "0" * 64, (run,))
    standing = Standing(record, "", tuple(arch_verdicts(record.runs, Settings().required())))
    body = _body(standing, DECISIONS)
    assert "### What was proven" not in body
    assert "1. `pkg/norm.py:7` `norm`: changed; the gates stage did not read it" in body
    assert "Below them: nothing was compiled here (no ptx stage in the record)." in body
