"""`contrib audit` of an upstream stacked on another: the stack below, at the pinned version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contrib.audit.serial import gate_json
from testing.gitutil import Repo, git
from testing.stackupstreams import (
    LOWER_ATTN,
    LOWER_MM,
    TOP_MM,
    lower_upstream,
    repin,
    top_upstream,
)
from testing.workspace import Result, Workspace


@pytest.fixture
def stacked(tmp_path: Path) -> tuple[Workspace, Repo]:
    top = top_upstream(tmp_path / "top")
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"top": top, "lower": lower_upstream(tmp_path / "lower")})
    ws.write_config()
    return ws, top


def _audit(ws: Workspace, *args: str) -> tuple[Result, dict[str, Any]]:
    result = ws.run("audit", "top", "--arch", "sm_120a", "--json", *args)
    assert result.code in (0, 1), result.err
    data = result.json
    assert isinstance(data, dict)
    return result, data["upstreams"][0]


def _gate(audit: dict[str, Any], function: str) -> dict[str, Any]:
    return next(g for g in audit["gates"] if g["function"] == function)


def test_a_gate_admitting_the_target_over_a_refusing_gate_below_is_a_mismatch(
        stacked: tuple[Workspace, Repo]) -> None:
    ws, _ = stacked
    result, audit = _audit(ws)
    assert result.code == 1
    assert audit["stack"][0] | {"seconds": 0, "link_seconds": 0, "cached": False} == {
        "upstream": "lower", "package": "lower-lib", "pin": "python/pyproject.toml:6",
        "version": "1.0", "tag": "v1.0", "commit": audit["stack"][0]["commit"],
        "seconds": 0, "link_seconds": 0, "cached": False}
    [mismatch] = audit["mismatches"]
    assert mismatch["gate"] == {"file": "python/top/args.py", "line": 8,
                                "function": "Args.adjust"}
    below = mismatch["below"]
    assert (below["upstream"], below["tag"], below["file"], below["function"], below["admits"],
            below["excludes_target"]) == ("lower", "v1.0", "lowerlib/jit.py", "gen_comm_module",
                                          "majors 9, 10", True)
    assert "sets enable_fusion > read enable_fusion at python/top/layers.py:5" in below["via"]
    assert "lowerlib.fused_allreduce > gen_comm_module" in below["via"]
    assert "sm_120a crashes there" in mismatch["message"]  # the wording, once
    admitting = _gate(audit, "Args.adjust")
    assert not admitting["excludes_target"] and admitting["below"] == [below]
    human = ws.run("audit", "top", "--arch", "sm_120a", "--no-fetch").out
    assert human.index("mismatch") < human.index("class ")  # mismatches come first
    md = ws.run("audit", "top", "--arch", "sm_120a", "--no-fetch", "--markdown").out
    assert "**1 mismatch with the upstream below**" in md
    assert md.index("1 mismatch") < md.index("| class |")


WRAPPERS = """\
from top.utils import is_blackwell_supported

if is_blackwell_supported():
    from lowerlib import fused_allreduce

    def fused_step(x):
        return fused_allreduce(x)
"""
DISPATCH = """\
from top.utils import is_blackwell_supported
from top.wrappers import fused_step


def plain_step(x):
    return x


def pick_step():
    if is_blackwell_supported():
        return fused_step
    return plain_step
"""


def _assert_gate_only_over_lower_norm(gate: dict[str, Any]) -> None:
    """An excluding gate over the backend registered as ``"lower_norm"``, whose norm
    module below admits the target: gate-only, reached through the backend's method."""
    assert gate["excludes_target"] and gate["class"] == "gate-only", gate["reason"]
    [below] = gate["below"]
    assert below["function"] == "gen_norm_module"
    assert '"lower_norm" > forward_norm' in below["via"], below["via"]


def test_a_definition_is_not_a_run_and_a_function_handed_back_is(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's ``fp8_utils`` defines flashinfer wrappers under ``if
    is_blackwell_supported():``: defining runs nothing, so that block is no mismatch
    (its callers ask flashinfer first).  The dispatcher that hands the wrapper back
    for the target to call is one, at its own line."""
    ws, top = stacked
    top.commit("wrappers", {"python/top/wrappers.py": WRAPPERS})
    _, audit = _audit(ws)
    assert [m["gate"]["function"] for m in audit["mismatches"]] == ["Args.adjust"]
    top.commit("dispatch", {"python/top/dispatch.py": DISPATCH})
    _, audit = _audit(ws)
    found = {m["gate"]["function"]: m for m in audit["mismatches"]}
    assert sorted(found) == ["Args.adjust", "pick_step"]
    assert found["pick_step"]["gate"]["line"] == 10
    assert "fused_step" in found["pick_step"]["below"]["via"]


METHOD = """\
import lowerlib

from top.utils import is_sm100_supported


class NormMethod:
    def __init__(self, eps):
        if not is_sm100_supported():
            raise ValueError("NormMethod needs SM100")
        self.eps = eps

    def apply(self, x):
        return lowerlib.rmsnorm(x)
"""


def test_a_refusal_in_init_takes_its_class_from_what_the_methods_reach_below(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's ``ModelOptNvFp4FusedMoEMethod.__init__`` refuses; the flashinfer calls
    are in its other methods, which the object it would make runs."""
    ws, top = stacked
    top.commit("method", {"python/top/method.py": METHOD})
    _, audit = _audit(ws)
    gate = _gate(audit, "NormMethod.__init__")
    assert gate["excludes_target"] and gate["class"] == "gate-only", gate["reason"]
    assert [b["function"] for b in gate["below"]] == ["gen_norm_module"]


FLAGGED = """\
import lowerlib
import lowerlib.comm as comm

from top.utils import is_blackwell_supported, is_sm120_supported


class Method:
    def __init__(self):
        self._native = is_sm120_supported()

    def apply(self, x):
        if self._native:
            return lowerlib.rmsnorm(x)
        return comm.fused_allreduce(x)


def get_method():
    if is_blackwell_supported():
        return Method()
    return None
"""


def test_the_targets_way_through_an_object_goes_where_its_flags_send_it(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's ``Mxfp4FlashinferCutlassMoEMethod`` sets ``self._use_mxfp8_act_scaling =
    is_sm120_supported()`` and its weight loading takes the SM90 interleave only in the
    else: the object a Blackwell gate hands on runs the target's branch, not that one."""
    ws, top = stacked
    top.commit("flagged", {"python/top/flagged.py": FLAGGED})
    _, audit = _audit(ws)
    assert [m["gate"]["function"] for m in audit["mismatches"]] == ["Args.adjust"]
    flipped = FLAGGED.replace("is_sm120_supported()\n\n", "not is_sm120_supported()\n\n")
    top.commit("flipped", {"python/top/flagged.py": flipped})
    _, audit = _audit(ws)
    assert sorted(m["gate"]["function"] for m in audit["mismatches"]) == ["Args.adjust",
                                                                          "get_method"]


def test_an_excluding_gate_takes_its_class_from_below(stacked: tuple[Workspace, Repo]) -> None:
    ws, _ = stacked
    _, audit = _audit(ws)
    norm, comm = _gate(audit, "norm"), _gate(audit, "comm_step")
    assert norm["excludes_target"] and norm["class"] == "gate-only"
    # lower v1.0's one gate on that path admits sm_120a with its kernels
    assert norm["basis"] == "below-admits", norm["reason"]
    assert [(b["upstream"], b["tag"], b["function"], b["excludes_target"]) for b in norm["below"]
            ] == [("lower", "v1.0", "gen_norm_module", False)]
    # The comm module below turns the target away from kernels it compiles: lifting
    # both gates is the whole change.
    assert comm["excludes_target"] and comm["class"] == "gate-only"
    assert comm["basis"] == "below-gated", comm["reason"]
    assert [(b["file"], b["line"], b["function"], b["excludes_target"], b["class"])
            for b in comm["below"]] == [("lowerlib/jit.py", 5, "gen_comm_module", True, "gate-only")]


def test_a_value_handed_below_takes_its_class_from_the_path_it_builds(
        stacked: tuple[Workspace, Repo]) -> None:
    """``backend = "cutlass"`` on SM100 only, then ``AttnWrapper(backend=backend)``: the
    statement reading the value is what the gate decides; below, no gate stands on the
    wrapper's path, and the module it builds (SM100 flags) compiles for the target."""
    ws, _ = stacked
    _, audit = _audit(ws)
    gate = _gate(audit, "Backend.__init__")
    assert gate["excludes_target"] and gate["class"] == "gate-only", gate["reason"]
    # the code below, on a path with no gate: no gate below, nothing compiled out
    assert gate["basis"] == "below-code" and gate["below"] == [] and gate["evidence"] == []
    assert gate["calls"] == ["AttnWrapper"]
    # the wording, once: the module below and its build (no typed field holds what the
    # code below reaches)
    assert "lowerlib.attn.AttnWrapper, on a path with no gate" in gate["reason"]
    assert "gen_attn_module" in gate["reason"] and "built for majors 10" in gate["reason"]


def test_a_value_passed_for_a_parameter_below_goes_that_backends_way(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's MLA backend: ``self.fmha_backend = "cutlass"`` on SM100 only, then
    ``BatchPrefillWithRaggedKVCacheWrapper(..., backend=self.fmha_backend)``, whose
    ``plan`` tests ``self._backend``: the CUTLASS path's module admits SM12x, but its
    kernel is compiled out for it (flashinfer's SM100-only CUTLASS FMHA), so lifting
    the gate needs kernels; the wrapper's FA2 path is not what the gate chose."""
    ws, _ = stacked
    _, audit = _audit(ws)
    gate = _gate(audit, "MlaBackend.__init__")
    assert gate["excludes_target"] and gate["class"] == "needs-kernel-work", gate["reason"]
    # no gate on the way below: the code there, gen_fmha_module's unit (fmha.cu, not
    # gen_fa2_module's decode.cu), its kernel compiled out by the #if at line 2
    assert gate["basis"] == "below-code" and gate["below"] == [], gate["below"]
    [evidence] = gate["evidence"]
    assert evidence.startswith("lower:csrc/fmha.cu:1 empty-kernel (guard csrc/fmha.cu:2)"), evidence


def test_a_string_passed_for_a_parameter_chooses_among_what_the_callee_tests() -> None:
    """A keyword's string is a backend of the callee when the callee (its class, through
    what ``__init__`` stores) compares that parameter with it; a value the code replaces
    when it holds it (``"auto"``) chooses nothing."""
    import ast

    from contrib.analysis.reach.backends import parameter_key
    from contrib.analysis.reach.objects import classes_of

    module = ast.parse(LOWER_ATTN)
    wrapper = next(n for n in module.body if isinstance(n, ast.ClassDef))
    run = wrapper.body[1]
    assert isinstance(run, ast.FunctionDef)
    owner = classes_of(module).get(id(run))
    assert owner is wrapper
    names = frozenset({"auto", "cutlass", "fmha"})
    assert parameter_key(owner, run, [("backend", "cutlass")]) == ("cutlass", names)
    assert parameter_key(owner, run, [("other", "cutlass"), ("backend", "fmha")]) == (
        "fmha", names)
    assert parameter_key(owner, run, [("backend", "auto")]) is None
    assert parameter_key(owner, run, [("backend", "fa3")]) is None
    mm = next(n for n in ast.parse(LOWER_MM).body
              if isinstance(n, ast.FunctionDef) and n.name == "mm")
    assert parameter_key(None, mm, [("backend", "fused")]) == ("fused", frozenset({"fused"}))


def test_the_class_from_below_is_what_the_lower_path_needs() -> None:
    """Kernels missing below (a lower gate of class needs-kernel-work, or one admitting
    the target into code compiled out) make the upper gate needs-kernel-work; a lower
    gate of unknown class leaves it unknown.  A lower gate leaving the target out on
    purpose (flashinfer's MNNVL allreduce) is a way not taken beside one that admits
    it; alone on the path, the intent is the class."""
    from contrib.arch import parse_arch
    from contrib.audit.model import UNKNOWN, AuditGate, Evidence, GateClass, GateKind
    from contrib.audit.stack.link import _inherit
    from contrib.audit.stack.reading import Outside

    class _Lower:
        name, tag = "lower", "v1.0"

    out = (Evidence("csrc/comm.cu:3", "csrc/comm.cu", "empty-kernel", "compiled out", line=3),)

    def lower(excludes: bool, class_: str | None, evidence: tuple[Evidence, ...]) -> AuditGate:
        return AuditGate("lowerlib/jit.py", 5, "gen_comm_module", GateKind.JIT, frozenset({9, 10}),
                         excludes, class_=None if class_ is None else GateClass(class_),
                         evidence=evidence, reason="why")
    for below, expected in (
        ([lower(True, "needs-kernel-work", out)], "needs-kernel-work"),
        ([lower(False, None, out)], "needs-kernel-work"),
        ([lower(True, "gate-only", ())], "gate-only"),
        ([lower(True, "unknown", ())], None),
        ([lower(False, None, ())], "gate-only"),
        ([lower(True, "intentional", ()), lower(False, None, ())], "gate-only"),
        ([lower(True, "intentional", ())], "intentional"),
        ([lower(True, "intentional", ()), lower(True, "unknown", ())], None),
    ):
        gate = AuditGate("top/layer.py", 9, "step", GateKind.CAPABILITY, frozenset({9, 10}), True,
                         class_=UNKNOWN)
        reached = [(Outside("lowerlib.fused_allreduce", ()), b) for b in below]
        found = _inherit(gate, _Lower(), reached, parse_arch("sm_120a"))  # type: ignore[arg-type]
        # None: a lower gate of unknown class leaves the gate as it was
        assert (found and found.class_) == expected, (below, found)
        if expected == "needs-kernel-work":
            assert found is not None and found.evidence == tuple(e.below("lower") for e in out)


def test_a_branch_below_the_target_does_not_take_is_not_followed(
        stacked: tuple[Workspace, Repo]) -> None:
    ws, _ = stacked
    _, audit = _audit(ws)
    matmul = _gate(audit, "matmul")
    assert not matmul["excludes_target"]
    functions = [b["function"] for b in matmul["below"]]
    assert "gen_gemm_sm120_module" in functions and "gen_gemm_sm100_module" not in functions
    assert all(m["gate"]["function"] != "matmul" for m in audit["mismatches"])


def test_the_targets_way_ends_where_the_upper_tree_refuses_it(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's fp8_utils: ``dispatch`` admits the target into ``run_backend``, whose
    SM90-only backend raises for it before calling below.  The target is refused above,
    with a message; it never reaches the lower gate, so there is no mismatch.  The
    Blackwell block's wrappers read locals of their own: those are no names the block
    hands to later code."""
    ws, _ = stacked
    _, audit = _audit(ws)
    flagged = {m["gate"]["function"] for m in audit["mismatches"]}
    assert flagged == {"Args.adjust"}  # the real one, through the fusion flag
    refusal = next(g for g in audit["gates"]
                   if g["file"] == "python/top/fp8.py" and g["function"] == "run_backend")
    assert refusal["excludes_target"] and refusal["effect"] == "refused on the target"
    # What SM90 runs past it still reaches the lower gate.
    assert [b["function"] for b in refusal["below"]] == ["gen_comm_module"]


def test_a_backend_chosen_by_name_takes_its_class_from_the_path_below(
        stacked: tuple[Workspace, Repo]) -> None:
    """A model override sets ``norm_backend`` to ``"lower_norm"`` on SM100 only; the
    tree registers that name on a factory whose class calls ``lowerlib.rmsnorm``."""
    ws, _ = stacked
    _, audit = _audit(ws)
    _assert_gate_only_over_lower_norm(_gate(audit, "model_overrides"))


def test_a_backend_passed_by_name_below_is_followed_its_own_way(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's ``bmm_fp8(..., backend="cublas")`` into flashinfer's
    ``@backend_requirement`` function: the lower function's tests of its registry's
    names go the chosen backend's way: ``backend="plain"`` never reaches the module
    the fused backend builds."""
    ws, _ = stacked
    _, audit = _audit(ws)
    plain, fused = _gate(audit, "plain_mm"), _gate(audit, "fused_mm")
    assert not plain["excludes_target"] and plain["below"] == []
    [below] = fused["below"]
    assert below["function"] == "gen_norm_module" and not below["excludes_target"]
    assert "lowerlib.mm.mm > gen_norm_module" in below["via"], below["via"]


def test_kernels_missing_below_outweigh_a_helper_above(stacked: tuple[Workspace, Repo]) -> None:
    """sglang's trtllm_mha backend runs a Triton page-table helper of its own and the
    attention kernel of flashinfer: read alone the helper says gate-only, but the
    module below compiles its kernel out for the target."""
    ws, _ = stacked
    _, audit = _audit(ws)
    gate = _gate(audit, "attend")
    assert gate["excludes_target"] and gate["class"] == "needs-kernel-work", gate["reason"]
    assert gate["basis"] == "below-hollow", gate["basis"]
    assert [(b["file"], b["line"], b["function"], b["class"]) for b in gate["below"]] == [
        ("lowerlib/decode.py", 5, "gen_decode_module", "needs-kernel-work")]
    # the helper above is reached too, and outweighed
    assert gate["reached"] == ["triton|python/top/decode.py|_page_table_kernel||_page_table_kernel"]


FUSION = '''\
import lowerlib

from top.utils import is_sm100_supported


def _resolve_backend(backend):
    if not is_sm100_supported():
        raise ValueError("the fusion needs SM100")
    return backend


def resolve_fusion_backend(args):
    return _resolve_backend(args.backend)


def ensure_fused(x, args):
    backend = resolve_fusion_backend(args)
    if backend is None:
        return x
    return lowerlib.fused_allreduce(x)
'''


def test_a_refusing_decision_function_takes_its_class_from_what_its_callers_run_below(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's ``flashinfer_comm_fusion._resolve_backend`` refuses the target; a
    function hands its answer back (``return _resolve_backend(...)``) and its caller
    runs flashinfer's fusion with it: that is what the refusal keeps from the target
    (at v1.0 a gate below that turns SM12x from a kernel it compiles: gate-only)."""
    ws, top = stacked
    top.commit("fusion", {"python/top/fusion.py": FUSION})
    _, audit = _audit(ws)
    gate = _gate(audit, "_resolve_backend")
    assert gate["excludes_target"] and gate["class"] == "gate-only", gate["reason"]
    [below] = gate["below"]
    assert below["function"] == "gen_comm_module", below
    assert "returned by resolve_fusion_backend()" in below["via"], below["via"]


def test_the_stack_at_two_pinned_versions(stacked: tuple[Workspace, Repo]) -> None:
    ws, top = stacked
    old = top.head()
    new = repin(top, "lower_lib==2.0")
    _, at_new = _audit(ws, "--at", new)
    assert at_new["stack"][0]["tag"] == "v2.0"
    assert at_new["mismatches"] == []
    assert _gate(at_new, "comm_step")["class"] == "gate-only"
    assert _gate(at_new, "Args.adjust")["below"][0]["excludes_target"] is False
    _, at_old = _audit(ws, "--at", old, "--no-fetch")
    assert len(at_old["mismatches"]) == 1 and at_old["stack"][0]["tag"] == "v1.0"
    again, cached = _audit(ws, "--at", old, "--no-fetch")  # from the caches: the same answer
    assert cached["mismatches"] == at_old["mismatches"] and cached["cached"]


@pytest.mark.parametrize(("requirement", "says"), [
    ("lower_lib", "'lower_lib' pins no one version of lower"),
    ("lower-lib>=1.0", "'lower-lib>=1.0' pins no one version of lower"),
    ("lower_lib==3.0", "pins lower 3.0, but lower's cache has no tag v3.0 or 3.0"),
])
def test_a_pin_the_stack_cannot_follow_is_one_note(stacked: tuple[Workspace, Repo],
                                                   requirement: str, says: str) -> None:
    ws, top = stacked
    sha = repin(top, requirement)
    result, audit = _audit(ws, "--at", sha)
    notes = [line for line in result.err.splitlines() if "python/pyproject.toml:6" in line]
    assert len(notes) == 1 and says in notes[0], result.err
    assert audit["stack"] == [] and audit["mismatches"] == []
    assert all(g["below"] == [] for g in audit["gates"])
    assert _gate(audit, "comm_step")["class"] == "unknown"


def test_the_package_key_names_a_lower_upstream_without_a_pyproject(
        stacked: tuple[Workspace, Repo]) -> None:
    ws, _ = stacked
    lower = ws.upstreams["lower"]
    lower.commit("no packaging metadata", {"pyproject.toml": None})
    _, audit = _audit(ws)
    assert audit["stack"] == []  # its name cannot be read: not stacked
    ws.write_config()
    config = (ws.root / "contrib.toml").read_text(encoding="utf-8")
    (ws.root / "contrib.toml").write_text(
        config.replace('[upstreams.lower]\n', '[upstreams.lower]\npackage = "lower-lib"\n'),
        encoding="utf-8")
    _, audit = _audit(ws)
    assert audit["stack"][0]["package"] == "lower-lib" and len(audit["mismatches"]) == 1


def test_a_lower_upstream_that_cannot_be_read_is_one_note(stacked: tuple[Workspace, Repo]) -> None:
    ws, _ = stacked
    config = (ws.root / "contrib.toml").read_text(encoding="utf-8")
    lower = config.index("[upstreams.lower]")
    (ws.root / "contrib.toml").write_text(
        config[:lower] + config[lower:].replace('branch = "main"', 'branch = "nosuch"', 1),
        encoding="utf-8")
    result, audit = _audit(ws)
    notes = [line for line in result.err.splitlines() if "the stack below is not audited" in line]
    assert len(notes) == 1 and "branch 'nosuch' not found" in notes[0], result.err
    assert audit["stack"] == [] and _gate(audit, "norm")["class"] == "unknown"


def test_a_pyproject_nested_past_the_parser_pins_nothing() -> None:
    """A hostile ``pyproject.toml`` (nesting that makes tomllib recurse out) is read as
    no metadata: the audit goes on without the stack, with no traceback."""
    from contrib.analysis.tree import DictTree
    from contrib.audit.stack.pins import find_pin, package_name, required_names

    deep = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
    tree = DictTree({"pyproject.toml": deep, "python/pyproject.toml": deep})
    assert find_pin(tree, "flashinfer-python") is None
    assert required_names(tree) == set() and package_name(tree) is None


WORKSPACE = '''\
import lowerlib

from top.utils import is_sm100_supported

_decode = None
if lowerlib is not None:
    import lowerlib.decode as dec

    _decode = dec.decode


class Manager:
    def prepare(self, x):
        return _decode(x)


class Other:
    def prepare(self, x):
        return x


class Third:
    def prepare(self, x):
        return x


def _manager() -> "Manager":
    return Manager()


def run_decode(x):
    if not is_sm100_supported():
        return None
    manager = _manager()
    return manager.prepare(x)


def fused_decode(x):
    if not is_sm100_supported():
        return None, None
    return _decode(x), x


def forward(x):
    fused = fused_decode(x)
    if fused[0] is not None:
        return fused
    return x
'''


def test_an_object_a_factory_annotates_and_a_result_a_gate_tests_lead_below(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's allreduce fusion: ``_create_workspace = comm.create_...`` bound at module
    level under an ``if``, called from a method of the object ``_get_workspace_manager()
    -> FlashInferWorkspaceManager`` returns (a method name the tree defines thrice);
    and ``fused = flashinfer_allreduce_residual_rmsnorm(...)`` then ``if fused[0] is not
    None: return fused``: the call the test reads is the path the admitted archs take.
    Below, the decode module admits SM100 only, its kernel compiled out for SM12x."""
    ws, top = stacked
    top.commit("workspace", {"python/top/workspace.py": WORKSPACE})
    _, audit = _audit(ws)
    for function in ("run_decode", "forward"):
        gate = _gate(audit, function)
        assert gate["excludes_target"] and gate["class"] == "needs-kernel-work", gate["reason"]
        assert [b["function"] for b in gate["below"]] == ["gen_decode_module"], gate["below"]


CHECKS = '''\
from top.utils import is_sm100_supported


class Checks:
    def check(self, norm_backend):
        if norm_backend == "lower_norm" and not is_sm100_supported():
            raise ValueError("lower_norm needs SM100")
        return norm_backend
'''


def test_a_refusal_naming_a_backend_takes_its_class_from_that_backend_below(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang's ``if prefill_backend == "trtllm_mha" and not is_sm100_supported():
    raise``: the backend registered under the name calls below, whose norm module
    admits the target: lifting the refusal is the change."""
    ws, top = stacked
    top.commit("checks", {"python/top/checks.py": CHECKS})
    _, audit = _audit(ws)
    _assert_gate_only_over_lower_norm(_gate(audit, "Checks.check"))


def test_the_link_walked_beside_the_lower_audit_is_the_link_walked_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``audit_and_link`` walks the upper tree in a thread while the lower tree is audited;
    what it links is what :func:`link` finds over the same two audits, and the second
    time it comes from the cache.  An error of the walk reaches the caller."""
    import contrib.audit.stack.link as stack
    from contrib.analysis.tree import GitTree
    from contrib.arch import parse_arch
    from contrib.audit.engine import audit_commit
    from contrib.git.repo import Git

    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))
    top, lower = top_upstream(tmp_path / "top"), lower_upstream(tmp_path / "lower")
    arch, up, down = parse_arch("sm_120a"), Git(top.path), Git(lower.path)
    commit, at = up.run("rev-parse", "HEAD").strip(), down.run("rev-parse", "v1.0").strip()
    audit = audit_commit(up, commit, arch)
    serial = audit_commit(up, commit, arch).gates
    serial, expected = stack.link(serial, GitTree(up, commit), stack.Lower(
        "lower", "v1.0", at, audit_commit(down, at, arch), GitTree(down, at), arch=arch), arch)
    linked = stack.audit_and_link(audit.gates, GitTree(up, commit), audit.tree, down, "lower",
                                  "v1.0", at, arch)
    assert not linked.cached and linked.mismatches == expected and len(expected) == 1
    assert [gate_json(g) for g in linked.gates] == [gate_json(g) for g in serial]
    again = audit_commit(up, commit, arch)
    cached = stack.audit_and_link(again.gates, GitTree(up, commit), again.tree, down, "lower",
                                  "v1.0", at, arch)
    assert cached.cached and cached.mismatches == expected
    assert [gate_json(g) for g in cached.gates] == [gate_json(g) for g in serial]

    def broken(*_: object) -> list[object]:
        raise stack.ContribError("the walk failed")

    monkeypatch.setattr(stack, "upper_calls", broken)
    other = audit_commit(up, commit, arch)
    with pytest.raises(stack.ContribError, match="the walk failed"):
        stack.audit_and_link(other.gates, GitTree(up, commit), other.tree, down, "lower",
                             "v2.0", down.run("rev-parse", "v2.0").strip(), arch)


PASSES = """\
from top.utils import is_sm100_supported


def fusion_auto_enable(args):
    if args.fusion_backend is None and is_sm100_supported():
        return {"fusion_backend": "auto"}
    return {}
"""
FUSE = """\
import lowerlib

from top.args import get_args


def fuse(x):
    if get_args().fusion_backend is not None:
        return lowerlib.fused_allreduce(x)
    return x


def fuse_off(x):
    if get_args().fusion_backend == "off":
        return lowerlib.rmsnorm(x)
    return x


def fuse_none(x):
    if get_args().fusion_backend is None:
        return lowerlib.rmsnorm(x)
    return x
"""


def test_a_setting_a_pass_returns_enables_what_reads_it(
        stacked: tuple[Workspace, Repo]) -> None:
    """sglang main's allreduce-fusion auto-enable is a pass returning
    ``{"flashinfer_allreduce_fusion_backend": "auto"}`` on SM90/SM100, which the server's
    arguments take as attributes: what the tree runs where ``.fusion_backend is not None``
    is what it keeps from the target; a test the string fails (``== "off"``, ``is None``)
    is not its way."""
    ws, top = stacked
    top.commit("auto-enable", {"python/top/passes.py": PASSES, "python/top/fuse.py": FUSE})
    _, audit = _audit(ws)
    gate = _gate(audit, "fusion_auto_enable")
    assert gate["excludes_target"] and gate["class"] == "gate-only", gate["reason"]
    assert [b["function"] for b in gate["below"]] == ["gen_comm_module"], gate["below"]
    assert "returns fusion_backend='auto' > read fusion_backend at python/top/fuse.py:7" in (
        gate["below"][0]["via"])


LOWER_GEMM8 = '''\
import torch

from lowerlib.core import build, ctx


def gen_gemm8_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10, 12])
    return build("gemm8", ["gemm.cu"], flags)


def gen_trt_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])
    return build("gemm8_trt", ["decode.cu"], flags)  # compiled out for SM12x


def gemm8(x, backend="cutlass"):
    major = torch.cuda.get_device_capability()[0]
    if backend == "cutlass":
        if major not in {cutlass}:
            raise ValueError("gemm8: its cutlass backend needs another GPU")
        return gen_gemm8_module().run(x)
    elif backend == "trtllm":
        if major != 10:
            raise ValueError("gemm8: its trtllm backend needs SM100")
        return gen_trt_module().run(x)
    raise ValueError(backend)
'''
# TOP_MM's first function, calling gemm8's trtllm backend on SM100 only
TOP_GEMM8 = TOP_MM.split("\n\n\ndef fused_mm")[0] + "\n"
for old, new in (("lowerlib.mm import mm", "lowerlib.gemm8 import gemm8"),
                 ("is_blackwell_supported", "is_sm100_supported"), ("plain_mm", "matmul8"),
                 ('mm(x, backend="plain")', 'gemm8(x, backend="trtllm")')):
    TOP_GEMM8 = TOP_GEMM8.replace(old, new)


@pytest.mark.parametrize(("cutlass", "expected", "basis", "evidence"), [
    # 'cutlass' of the same call serves sm_120a: its gate at lowerlib/gemm8.py:7 admits it
    ("(10, 12)", "gate-only", "served-otherwise", "lower:lowerlib/gemm8.py:7"),
    # none does: gen_trt_module's unit, compiled out
    ("(10,)", "needs-kernel-work", "below-hollow", "lower:csrc/decode.cu:1 empty-kernel"),
])
def test_a_backend_chosen_by_name_without_kernels_is_gate_only_where_another_serves_the_target(
        stacked: tuple[Workspace, Repo], cutlass: str, expected: str, basis: str,
        evidence: str) -> None:
    """sglang's fp8_utils called flashinfer's ``gemm_fp8_nt_groupwise(...,
    backend="trtllm")`` on SM100 only: trtllm runs cubins made for sm_10x, but the
    cutlass backend of the same call admits SM120 and builds for it.  Choosing it there
    is what upstream did (no kernel work); where no other backend admits the target,
    the kernels are what it takes.  The gates on the branch the chosen backend does
    not take are not on its way below."""
    ws, top = stacked
    lower = ws.upstreams["lower"]
    lower.commit("gemm8", {"lowerlib/gemm8.py": LOWER_GEMM8.format(cutlass=cutlass)})
    git(lower.path, "tag", "v3.0")
    top.commit("gemm8", {"python/top/gemm8.py": TOP_GEMM8})
    _, audit = _audit(ws, "--at", repin(top, "lower_lib==3.0"))
    gate = _gate(audit, "matmul8")
    assert gate["excludes_target"] and gate["class"] == expected, gate["reason"]
    assert gate["basis"] == basis, gate["reason"]
    [found] = gate["evidence"]
    assert found == evidence or found.startswith(evidence + " "), found
    # the trtllm branch's gates only, not the cutlass branch's (line 19): gen_trt_module first
    assert [b["line"] for b in gate["below"]] == [12, 23], gate["below"]
    assert gate["below"][0]["function"] == "gen_trt_module"
