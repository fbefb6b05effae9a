"""A gate's effect on 12.0 and 12.1: the minor decides where the code names one."""

from __future__ import annotations

import pytest

from contrib.analysis.archvalues import Capabilities
from contrib.arch import parse_arch
from contrib.audit.finding.gates import gates_of_file
from contrib.audit.model import AuditGate, EffectKind, admits_text
from contrib.audit.serial import gate_cache, gate_from_cache, gate_json

SM120, SM121 = parse_arch("sm_120a"), parse_arch("sm_121a")

UTILS = (
    "import torch\n\n"
    "def get_compute_capability(device):\n"
    "    return torch.cuda.get_device_capability(device)\n\n"
    "def is_sm120a_supported(device):\n"
    "    major, minor = get_compute_capability(device)\n"
    "    return major == 12 and minor == 0 and torch.version.cuda >= '12.8'\n\n"
    "def is_sm121a_supported(device):\n"
    "    major, minor = get_compute_capability(device)\n"
    "    return major == 12 and minor == 1 and torch.version.cuda >= '12.9'\n\n"
    "def supported_compute_capability(ccs):\n"
    "    def wrap(f):\n        return f\n    return wrap\n\n"
    "def run(q):\n    return q\n"
)
# flashinfer's fmha_v2_prefill_deepseek before #2559 (9e5ec6a0c) opened 12.1
DEEPSEEK = (
    "def fmha_v2_prefill_deepseek(query):\n"
    "    if not is_sm120a_supported(query.device):\n"
    "        raise ValueError('fmha_v2_prefill_deepseek is only supported on SM120 GPUs.')\n"
    "    return run(query)\n\n"
)
# and nvfp4_attention_sm120_fwd before #3897 (0f69698c7)
NVFP4 = "@supported_compute_capability([120])\ndef nvfp4_fwd(q):\n    return run(q)\n\n"


def _gate(code: str, arch) -> AuditGate:
    (gate,) = [g for g in gates_of_file("pkg/x.py", code + UTILS, arch)
               if g.function in ("fmha_v2_prefill_deepseek", "nvfp4_fwd")]
    return gate


@pytest.mark.parametrize(("code", "kind"), [(DEEPSEEK, EffectKind.REFUSED),
                                            (NVFP4, EffectKind.OMITTED)])
def test_a_gate_naming_12_0_turns_12_1_away_and_serves_12_0(code, kind) -> None:
    on_120, on_121 = _gate(code, SM120), _gate(code, SM121)
    assert not on_120.excludes_target and on_121.excludes_target
    assert on_121.effect.kind is kind
    assert on_120.admits == on_121.admits == Capabilities.listed([(12, 0)])
    assert admits_text(on_121.admits) == "capability 12.0"


def test_the_commits_that_opened_12_1_serve_it() -> None:
    deepseek = DEEPSEEK.replace("if not is_sm120a_supported(query.device):",
                                "if not (is_sm120a_supported(query.device) "
                                "or is_sm121a_supported(query.device)):")
    nvfp4 = NVFP4.replace("[120]", "[120, 121]")
    for code in (deepseek, nvfp4):
        for arch in (SM120, SM121):
            gate = _gate(code, arch)
            assert not gate.excludes_target and gate.admits == Capabilities.of_majors({12})


def test_the_decorator_says_the_capability_it_omits() -> None:
    assert _gate(NVFP4, SM121).effect.why == "the capability decorator omits 12.1"
    assert _gate(NVFP4, SM120).effect.why == "the capability decorator admits 12.0"
    whole = _gate(NVFP4.replace("[120]", "[100]"), SM121)
    assert whole.effect.why == "the capability decorator omits major 12"


def test_the_written_forms_keep_the_minor() -> None:
    gate = _gate(NVFP4, SM121)
    assert gate_json(gate)["admits"] == "capability 12.0"
    assert gate_cache(gate)["admits"] == [[12, 0]]
    assert gate_from_cache(gate_cache(gate)) == gate
