"""The arch evaluator and the gate finder on the forms upstreams write (a real repo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.analysis.archvalues import Capabilities, truth_of
from contrib.analysis.reach.tree import PyTree
from contrib.analysis.tree import DictTree, GitTree
from contrib.arch import parse_arch
from contrib.audit.engine import find_all
from contrib.audit.finding.gates import gates_of_file
from contrib.audit.model import AuditGate, EffectKind
from contrib.git.repo import Git
from testing.archforms import arch_forms_upstream

SM120 = parse_arch("sm_120a")


def tree_eval(tree: GitTree) -> PyTree:
    """The tree's evaluator, with the indexes the audit's walks keep."""
    return PyTree(tree.read_text, [p for p in tree.paths() if p.endswith(".py")])


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> GitTree:
    repo = arch_forms_upstream(Path(tmp_path_factory.mktemp("forms")) / "up")
    return GitTree(Git(repo.path), repo.head())


def audited(tree: GitTree, path: str) -> dict[str, AuditGate]:
    ev = tree_eval(tree)
    return {g.function: g for g in gates_of_file(path, tree.read_text(path) or "", SM120, ev)}


def test_the_decision_over_cached_predicates_falls_back_on_the_target(tree: GitTree) -> None:
    gate = audited(tree, "pkg/forms/fusion.py")["apply_fusion"]
    assert gate.admits == Capabilities.of_majors({9, 10}) and gate.excludes_target
    assert gate.effect.why.startswith("falls back: false on the target")


def test_a_rocm_operand_beside_the_gpu_test_is_false_on_nvidia(tree: GitTree) -> None:
    """`is_hip()` reads `torch.version.hip`, None on an NVIDIA GPU: `(_use_rocm or
    apply_fusion(n)) and ...` is decided by the fusion's gate, and the `if` is one
    (sglang's communicator tests `apply_aiter_all_reduce_fusion(x) or ...`)."""
    gate = audited(tree, "pkg/forms/fusion.py")["forward"]
    assert gate.admits == Capabilities.of_majors({9, 10}) and gate.excludes_target
    assert gate.effect.why.startswith("falls back: the target takes the generic code")
    assert ("fused_allreduce_norm",) in gate.calls
    assert "is_hip" not in audited(tree, "pkg/utils/common.py")  # not a GPU's value itself


def test_a_predicate_means_what_its_definition_says(tree: GitTree) -> None:
    gate = audited(tree, "pkg/forms/blackwell.py")["pick"]
    assert gate.admits == Capabilities.of_majors({10, 11, 12}) and not gate.excludes_target


def test_names_indexes_and_sm_strings(tree: GitTree) -> None:
    gates = audited(tree, "pkg/forms/names.py")
    assert gates["tile"].admits == Capabilities.of_majors({12}) and not gates["tile"].excludes_target
    assert gates["backend"].admits == Capabilities.of_majors({10})
    assert gates["backend"].excludes_target and gates["backend"].effect.why.startswith("falls back")
    assert gates["family"].excludes_target and gates["family"].message == "needs SM100"


def test_a_value_stored_in_another_file_is_a_gate_where_it_is_tested(tree: GitTree) -> None:
    gate = audited(tree, "pkg/forms/gemm.py")["gemm"]
    assert gate.admits == Capabilities.of_majors({10}) and gate.excludes_target
    assert ("flashinfer_gemm",) in gate.calls


def test_refusals_in_other_shapes(tree: GitTree) -> None:
    gates = audited(tree, "pkg/forms/refuse.py")
    assert gates["main"].excludes_target and gates["main"].effect.why.endswith("refused on the target")
    assert gates["fp4_gemm"].excludes_target and gates["fp4_gemm"].admits == Capabilities.listed([(10, 0), (10, 3)])
    assert not gates["fp8_gemm"].excludes_target
    assert gates["why_not"].kind and gates["why_not"].excludes_target


def test_the_toolkit_part_of_a_condition_stays_satisfiable(tree: GitTree) -> None:
    gate = audited(tree, "pkg/forms/toolkit.py")["fused"]
    assert gate.admits == Capabilities.of_majors({10}) and gate.excludes_target


def test_a_triton_kernel_two_calls_down_is_reached(tree: GitTree) -> None:
    gate = audited(tree, "pkg/forms/triton_path.py")["add"]
    assert ("_launch", "triton:_add_kernel") in gate.calls


def test_a_module_skip_through_pytestmark_refuses_the_target(tree: GitTree) -> None:
    gate = audited(tree, "tests/test_ssd.py")["<module>"]
    assert gate.parser_kind == "skip-condition" and gate.excludes_target
    assert gate.effect.why == "skipped on the target" and gate.admits == Capabilities.of_majors({10})
    assert ("ssd_kernel",) in gate.calls  # the module's tests are what it keeps away


def test_a_gate_the_target_never_reaches_excludes_nothing(tree: GitTree) -> None:
    ev = tree_eval(tree)
    text = tree.read_text("pkg/forms/nested.py") or ""
    gates = {(g.function, g.line): g for g in gates_of_file("pkg/forms/nested.py", text, SM120, ev)}
    assert not gates[("swizzle", 6)].excludes_target  # the target's own branch
    inner = gates[("swizzle", 10)]  # in the else of `major == 12`: never the target's
    assert not inner.excludes_target
    assert inner.effect.why == "the target never reaches it: the if at line 6 sends it elsewhere"
    outer, nested = gates[("hopper_only", 19)], gates[("hopper_only", 20)]
    assert outer.excludes_target  # the target meets this one
    assert not nested.excludes_target and "line 19" in nested.effect.why


def test_a_flag_an_object_sets_from_the_gpu_is_the_decision(tree: GitTree) -> None:
    ev = tree_eval(tree)
    text = tree.read_text("pkg/forms/flags.py") or ""
    gates = {g.line: g for g in gates_of_file("pkg/forms/flags.py", text, SM120, ev)}
    flag = gates[6]
    assert flag.excludes_target and flag.admits == Capabilities.of_majors({10})
    assert flag.effect.why == ("self.enable_fast_gemm: falls back: false on the target, "
                           "true on majors 10")
    assert 7 not in gates  # `self.is_sm100`: an arch predicate's value
    assert ("fast_gemm",) in flag.calls  # what the class runs where the flag is true


def test_a_branch_that_only_says_it_skips_refuses_the_target(tree: GitTree) -> None:
    gate = audited(tree, "benchmarks/bench_fp4.py")["<module>"]
    assert gate.excludes_target and gate.message == "Skipping FP4 GEMM benchmark"
    assert gate.effect.why.startswith("the branch the target takes only prints a message")
    assert ("run_fp4_benchmark",) in gate.calls


def test_a_pass_for_the_target_and_the_minor_it_is(tree: GitTree) -> None:
    """A branch of ``pass`` the target takes, before an else that skips, runs it (it
    "only says" nothing); a skip of everything but 12.0 and SM90 refuses 12.1, not the
    sm_120a audited (flashinfer's GDN tests at the commits that opened them)."""
    gates = {(g.function, g.line): g for g in gates_of_file(
        "tests/test_gdn.py", tree.read_text("tests/test_gdn.py") or "", SM120, tree_eval(tree))}
    assert not gates[("_skip_if_unsupported", 12)].excludes_target
    assert gates[("_skip_if_unsupported", 12)].effect.why == "the target takes this branch"
    cp = gates[("_skip_if_cp_unsupported", 19)]
    assert cp.admits == Capabilities(frozenset({9}), frozenset({(12, 0)})) and not cp.excludes_target
    spark = {g.line: g for g in gates_of_file("tests/test_gdn.py", tree.read_text(
        "tests/test_gdn.py") or "", parse_arch("sm_121a"), tree_eval(tree))}
    assert spark[19].excludes_target


def test_the_toolkit_is_one_that_can_build_the_target(tree: GitTree) -> None:
    """`torch.version.cuda` compared with any version is newer; `torch.cuda.is_available()`
    is true and `torch.version.hip` None: the question is a CUDA machine with the GPU."""
    import ast

    from contrib.analysis.archvalues import Frame

    ev = tree_eval(tree)
    nodes = [ast.parse(text, mode="eval").body for text in (
        "is_sm100_supported()", "is_blackwell_supported()",
        'torch.cuda.get_device_capability()[0] == 12 and torch.version.cuda < "12.8"')]
    frame = Frame("pkg/utils/common.py")
    read = [ev.on_caps(node, frame, [(10, 0), (12, 0), (9, 0)]) for node in nodes]
    assert read[0] == {(10, 0): {True}, (12, 0): {False}, (9, 0): {False}}
    assert read[1] == {(10, 0): {True}, (12, 0): {True}, (9, 0): {False}}
    assert read[2] is None or all(v == {False} for v in read[2].values())


CAPABILITY_WITH_TRY = '''\
import torch


def get_device_capability(device_id=0):
    major, minor = None, None
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(device_id)
    if hasattr(torch, "hpu") and torch.hpu.is_available():
        try:
            major, minor = None, None
        except Exception as e:
            raise RuntimeError("hpu") from e
    return major, minor
'''
TRY_CALLER = '''\
from pkg.utils import get_device_capability


def create(runner):
    major, minor = get_device_capability()
    assert major == 9, "FlashAttention v3 requires SM90"
    return runner
'''


def test_a_name_bound_in_a_try_keeps_what_it_could_hold() -> None:
    """sglang's ``get_device_capability`` binds ``major`` in a ``try`` of its HPU branch:
    after it ``major`` is the GPU's major or None, not anything (a loop's would be), so
    ``assert major == 9`` (its FA3 backend) refuses SM120.  A name bound twice in the
    body may stop half-way: unknown then."""
    def gates(utils: str) -> list[AuditGate]:
        tree = DictTree({"pkg/__init__.py": "", "pkg/utils.py": utils, "pkg/reg.py": TRY_CALLER})
        return [g for g in find_all(tree, parse_arch("sm_120a"))[0] if g.file == "pkg/reg.py"]

    [gate] = gates(CAPABILITY_WITH_TRY)
    assert gate.excludes_target and gate.effect.kind == EffectKind.ASSERT_FAILS
    twice = CAPABILITY_WITH_TRY.replace(
        "            major, minor = None, None\n",
        "            major, minor = None, None\n            major = torch.hpu.version()\n"
    ).replace("torch.hpu.is_available()", "torch.hpu.enabled()")  # one not ruled out
    assert not [g for g in gates(twice) if g.excludes_target]


CAPABILITY_OF_PLATFORMS = '''\
import torch


def is_musa():
    return hasattr(torch, "musa") and torch.musa.is_available()


def get_device_capability(device_id=0):
    major, minor = None, None
    if (hasattr(torch, "cuda") and torch.cuda.is_available()) or is_musa():
        major, minor = torch.cuda.get_device_capability(device_id)
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        major, minor = None, None
    return major, minor
'''


def test_the_capability_asked_of_every_platform_is_the_gpus_on_a_cuda_machine() -> None:
    """sglang's ``get_device_capability`` asks CUDA, then XPU: on the target's machine
    torch has CUDA and no other accelerator's runtime, so the capability is the GPU's
    alone (``(10, 0) > get_device_capability() >= (8, 0)`` is false on 12.0)."""
    import ast

    from contrib.analysis.archvalues import Frame

    tree = DictTree({"pkg/__init__.py": "", "pkg/utils.py": CAPABILITY_OF_PLATFORMS})
    ev = PyTree(tree.read_text, ["pkg/__init__.py", "pkg/utils.py"])
    nodes = [ast.parse(text, mode="eval").body for text in (
        "get_device_capability()", "(10, 0) > get_device_capability() >= (8, 0)",
        "hasattr(torch, 'xpu') and torch.xpu.is_available()")]
    read = [ev.on_caps(node, Frame("pkg/utils.py"), [(12, 0), (9, 0)]) for node in nodes]
    assert read[0] == {(12, 0): {(12, 0)}, (9, 0): {(9, 0)}}
    assert read[1] == {(12, 0): {False}, (9, 0): {True}}
    assert read[2] is None  # no GPU decides it: false (unknown-false) everywhere
    [false] = [ev.eval(nodes[2], Frame("pkg/utils.py"))]
    assert truth_of(false) == {False}
