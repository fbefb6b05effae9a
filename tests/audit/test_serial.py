"""The one serialiser: the JSON document's shape, and the cache read back as data."""

from __future__ import annotations

from contrib.analysis.archvalues import Capabilities
from contrib.analysis.gates import Form
from contrib.analysis.reach.endpoints import Endpoint, EndpointKind
from contrib.audit.model import (
    GATE_ONLY,
    NEEDS_KERNEL_WORK,
    RUNTIME,
    AuditGate,
    Below,
    Blame,
    Decision,
    EffectKind,
    Evidence,
    GateKind,
    Mismatch,
    Place,
)
from contrib.audit.serial import (
    gate_cache,
    gate_from_cache,
    gate_json,
    linked_cache,
    linked_from_cache,
    mismatch_cache,
    mismatch_from_cache,
    mismatch_json,
)

_BELOW = Below("flashinfer", "v0.5.3", "abc", "flashinfer/comm.py", 60, "gen_comm", Capabilities.of_majors({10}),
               True, NEEDS_KERNEL_WORK, "refused on the target", "flashinfer.comm.fuse",
               ("Layer.forward", "flashinfer.comm.fuse", "gen_comm"))


def _gate() -> AuditGate:
    return AuditGate(
        "flashinfer/jit/comm.py", 191, "gen_trtllm_comm_module", GateKind.JIT, Capabilities.of_majors({9, 10}),
        True, "supported_major_versions=[9, 10]",
        Decision(EffectKind.VALUE_FALLS_BACK, "self.fast: falls back: false on the target",
                 flag="self.fast", returned=""),
        GATE_ONLY, RUNTIME,
        (Evidence("csrc/a.cu:3", "csrc/a.cu", "empty-kernel", "body gone",
                  Place("csrc/a.cuh", 1), line=3),
         Evidence("gen_x_sm100_module", says="named for SM100"),
         Evidence("csrc/b.cu:9", "csrc/b.cu", upstream="flashinfer", line=9)),
        "why", units=("csrc/a.cu",), calls=(("a", "gen_x"), ("b",)),
        reached=(Endpoint(EndpointKind.JIT, "pkg/jit.py", "gen_x", (9, 10), ("a", "gen_x")),
                 Endpoint(EndpointKind.AOT, "", "torch.ops.ns.op"),
                 Endpoint(EndpointKind.CUBIN, "pkg/jit.py", "gen_gemm", (10,), ("a", "gen_gemm"))),
        parser_kind=Form.KEYWORD, index=2, end_line=192, below=(_BELOW,),
        opened_by=Blame("f" * 40, "Open it (#12)", 12))


def test_the_json_entry_says_decisions_in_words() -> None:
    data = gate_json(_gate())
    assert data["admits"] == "majors 9, 10" and data["class"] == "gate-only"
    assert data["effect"] == "self.fast: falls back: false on the target"
    assert data["reached"] == ["jit|pkg/jit.py|gen_x|9,10|a>gen_x", "aot||torch.ops.ns.op||",
                               "cubin|pkg/jit.py|gen_gemm|10|a>gen_gemm"]
    assert data["kind"] == "jit" and data["parser_kind"] == "supported_major_versions"
    assert data["evidence"] == ["csrc/a.cu:3 empty-kernel (guard csrc/a.cuh:1): body gone",
                                "gen_x_sm100_module: named for SM100",
                                "flashinfer:csrc/b.cu:9"]
    assert data["calls"] == ["a>gen_x", "b"]
    assert data["below"][0]["via"] == "Layer.forward > flashinfer.comm.fuse > gen_comm"
    assert data["below"][0]["admits"] == "majors 10"
    assert data["opened_by"] == {"sha": "f" * 40, "subject": "Open it (#12)", "pr": 12}
    unread = gate_json(AuditGate("a.py", 1, "f", GateKind.PREDICATE, None, False))
    assert unread["admits"] == "unknown" and unread["class"] is None


def test_the_cache_keeps_every_decision_as_data() -> None:
    gate = _gate()
    back = gate_from_cache(gate_cache(gate))
    assert back == gate
    assert back is not None and back.effect.kind is EffectKind.VALUE_FALLS_BACK
    assert back.effect.self_flag() == "fast" and back.admits == Capabilities.of_majors({9, 10})
    assert back.reached[2].kind is EndpointKind.CUBIN and back.reached[2].majors == (10,)
    assert gate_json(back) == gate_json(gate)


def test_a_cache_entry_of_another_shape_is_audited_again() -> None:
    good = gate_cache(_gate())
    broken = [
        {**good, "effect": "refused on the target"},  # the old text form
        {**good, "effect": {**good["effect"], "kind": "refuses-politely"}},
        {**good, "admits": "majors 9, 10"},
        {**good, "admits": [9, True]},
        {**good, "class": "maybe"},
        {**good, "class": ["gate-only"]},
        {**good, "kind": {"jit": 1}},
        {**good, "reached": ["jit|pkg/jit.py|gen_x|9,10|a>gen_x"]},
        {**good, "reached": [["kernel", "p", "n", [], []]]},
        {**good, "reached": [["jit", "p", "n", [], "a>b"]]},  # the old chain form
        {**good, "calls": ["a>gen_x"]},  # the old text form
        {**good, "evidence": ["csrc/a.cu:3 empty-kernel"]},
        {**good, "below": [{**good["below"][0], "via": "a > b"}]},
        {**good, "opened_by": {"sha": "f", "subject": "s"}},
        {**good, "line": "191"},
        {k: v for k, v in good.items() if k != "comment"},
        {**good, "extra": 1},
        [],
    ]
    assert all(gate_from_cache(entry) is None for entry in broken)


def test_what_linking_set_is_kept_and_checked() -> None:
    gate = _gate()
    kept = linked_cache(gate)
    other = AuditGate("a.py", 1, "f", GateKind.PREDICATE, None, True)
    back = linked_from_cache(other, kept)
    assert back is not None and back.class_ is GATE_ONLY and back.reason == "why"
    assert back.below == gate.below and back.evidence == gate.evidence
    assert other.class_ is None and other.below == ()  # the gate handed in is not changed
    assert linked_from_cache(other, {**kept, "class": "maybe"}) is None
    assert linked_from_cache(other, {**kept, "class": ["gate-only"]}) is None
    assert linked_from_cache(other, {**kept, "evidence": "csrc/a.cu"}) is None


def test_a_mismatch_is_kept_as_data_and_shown_in_words() -> None:
    mismatch = Mismatch("sglang/a.py", 3, "Layer.forward", _BELOW, "SM120 crashes there")
    assert mismatch_from_cache(mismatch_cache(mismatch)) == mismatch
    assert mismatch_json(mismatch)["below"]["via"] == "Layer.forward > flashinfer.comm.fuse > gen_comm"
    assert mismatch_from_cache({**mismatch_cache(mismatch), "below": {}}) is None
    kept = mismatch_cache(mismatch)
    # a class of the wrong type is refused, not looked up (a list is no key)
    assert mismatch_from_cache({**kept, "below": {**kept["below"], "class": ["x"]}}) is None
