"""What a gate does to the target, as a kind: refuses, falls back, or serves it."""

from __future__ import annotations

import pytest

from contrib.arch import parse_arch
from contrib.audit.finding.gates import gates_of_file
from contrib.audit.model import EffectKind

SM120 = parse_arch("sm_120a")
PRELUDE = ("import torch\n\ndef cap():\n    return torch.cuda.get_device_capability()\n\n"
           "def run(): pass\ndef fast(): pass\ndef slow(): pass\n")


def _effects(body: str) -> dict[int, EffectKind]:
    return {g.line: g.effect.kind for g in gates_of_file("pkg/x.py", body + PRELUDE, SM120)}


@pytest.mark.parametrize(("code", "line", "kind"), [
    ("def f():\n    if cap()[0] != 10:\n        raise RuntimeError('no')\n    run()\n",
     2, EffectKind.REFUSED),
    ("def f():\n    assert cap()[0] == 9, 'Hopper only'\n    run()\n", 2, EffectKind.ASSERT_FAILS),
    ("def f():\n    if cap()[0] == 10:\n        fast()\n    else:\n        raise ValueError('x')\n",
     2, EffectKind.ELSE_REFUSES),
    ("def f():\n    if cap()[0] == 10:\n        fast()\n    else:\n        slow()\n",
     2, EffectKind.FALLS_BACK),
    ("def f():\n    if cap()[0] == 10:\n        fast()\n    elif cap()[0] == 12:\n        slow()\n",
     2, EffectKind.CHOOSES),
    ("def f():\n    if cap()[0] >= 9:\n        fast()\n", 2, EffectKind.TAKES_BRANCH),
    ("def f():\n    if cap()[0] == 10:\n        fast()\n", 2, EffectKind.SKIPS_CODE),
    ("def f():\n    use = cap()[0] == 10\n    return use\n", 2, EffectKind.VALUE),
])
def test_each_shape_has_its_kind(code: str, line: int, kind: EffectKind) -> None:
    assert _effects(code)[line] is kind


def test_a_kind_says_what_the_readers_ask() -> None:
    refused, fallback = EffectKind.REFUSED, EffectKind.FALLS_BACK
    assert refused.excludes and refused.refuses and refused.stops and not refused.not_taken
    assert fallback.excludes and not fallback.refuses and not fallback.stops and fallback.not_taken
    assert EffectKind.SKIPPED.stops and not EffectKind.SKIPPED.not_taken
    assert not EffectKind.TAKES_BRANCH.excludes and not EffectKind.TAKES_BRANCH.not_taken
    assert EffectKind.OMITTED.refuses and not EffectKind.OMITTED.stops
    assert {k for k in EffectKind if k.excludes} == {
        EffectKind.OMITTED, EffectKind.REFUSED, EffectKind.SKIPPED, EffectKind.ASSERT_FAILS,
        EffectKind.BRANCH_REFUSES, EffectKind.ELSE_REFUSES, EffectKind.ONLY_SAYS,
        EffectKind.FALLS_BACK, EffectKind.VALUE_FALLS_BACK, EffectKind.SKIPS_CODE}


def test_a_flag_and_a_returned_value_are_named_as_data() -> None:
    code = ("class M:\n    def __init__(self):\n        self.use_fast = cap()[0] == 10\n"
            "    def go(self):\n        if self.use_fast:\n            fast()\n        else:\n"
            "            slow()\n\ndef decide():\n    return cap()[0] == 10\n")
    gates = {g.line: g for g in gates_of_file("pkg/x.py", code + PRELUDE, SM120)}
    flag = gates[3].effect
    assert flag.kind is EffectKind.VALUE_FALLS_BACK and flag.self_flag() == "use_fast"
    returned = gates[11]
    assert returned.effect.returned == "decide" and returned.returns_decision()
    # the wording, once: a returned value's effect names its function to people
    assert returned.effect.why.endswith("; it is what decide() returns")
