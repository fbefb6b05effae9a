from __future__ import annotations

import pytest

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Capabilities
from contrib.analysis.gates import find_gates, gate_findings, touched_gates
from contrib.arch import parse_arch
from testing import miniupstream as mu

# What the expressions below name, defined as upstreams define them (the evaluator
# knows no predicate by its name).
DEFINITIONS = """
import torch

def get_device_capability():
    return torch.cuda.get_device_capability()

def is_sm90_supported():
    return get_device_capability()[0] == 9

def is_sm100_supported():
    return get_device_capability()[0] == 10 and torch.version.cuda >= "12.8"

def is_sm120_supported():
    return get_device_capability() in [(12, 0), (12, 1)]

def is_hopper():
    return get_device_capability()[0] == 9

def is_blackwell():
    return get_device_capability()[0] in (10, 11, 12)

def is_sm12x():
    return get_device_capability()[0] == 12

def is_sm120a_supported(device=None):
    major, minor = get_compute_capability(device)
    return major == 12 and minor == 0 and torch.version.cuda >= "12.8"

def is_sm121a_supported(device=None):
    major, minor = get_compute_capability(device)
    return major == 12 and minor == 1 and torch.version.cuda >= "12.9"

def get_device_sm():
    major, minor = get_device_capability()
    return major * 10 + minor

def get_compute_capability(device=None):
    return torch.cuda.get_device_capability(device)

def is_cuda():
    return torch.cuda.is_available()

_is_sm90_supported = is_sm90_supported()
_is_sm100_supported = is_sm100_supported()
_is_sm120_supported = is_sm120_supported()
major = get_device_capability()[0]
cc_major = major
capability = get_device_sm()
"""
UTILS = {"pkg/defs.py": DEFINITIONS}
STAR = "\n\nfrom pkg.defs import *\n"  # at the end: the lines above keep their numbers


def evaluator(text: str, path: str = "pkg/m.py") -> TreeEval:
    files = {**UTILS, path: text}
    return TreeEval(files.get, files)


def majors(expr: str):
    text = f"from pkg.defs import *\n\n\ndef f(server_args, items, x, enable_x, y):\n    if {expr}:\n        go()\n"
    gates, _ = find_gates("pkg/m.py", text, evaluator(text))
    return gates[0].admits.numbers() if gates and gates[0].admits is not None else None


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("_is_sm90_supported or _is_sm100_supported", "9, 10"),
        ("is_sm90_supported() or is_sm100_supported() or is_sm120_supported()", "9, 10, 12"),
        ("server_args.enable_fusion and (_is_sm90_supported or _is_sm100_supported)", "9, 10"),
        ("not is_sm100_supported()", "7, 8, 9, 11, 12"),  # a toolkit that can build SM100
        ("is_hopper() or is_blackwell()", "9, 10, 11, 12"),
        ("is_sm12x()", "12"),
        ("major >= 9", "9, 10, 11, 12"),
        ("cc_major in [9, 10]", "9, 10"),
        ("9 <= major < 12", "9, 10, 11"),
        ("torch.cuda.get_device_capability() >= (9, 0)", "9, 10, 11, 12"),
        ("torch.cuda.get_device_capability()[0] == 10", "10"),
        ("get_device_sm() >= 100", "10, 11, 12"),
        ("capability >= 90 and capability < 120", "9, 10, 11"),
        # where the code names a minor, the capability is kept, not its major
        ("get_device_capability() in [(9, 0), (12, 0)]", "9, 12.0"),
        ("get_compute_capability() == (12, 0)", "12.0"),
        ("get_device_sm() == 120", "12.0"),
        ("get_device_sm() in (100, 103)", "10"),  # every 10.x read (10.0, 10.3) is true
        ("major == 12 and get_device_capability()[1] == 0", "12.0"),
        ("is_sm120a_supported()", "12.0"),  # its body tests `minor == 0`
        ("is_sm120a_supported() or is_sm121a_supported()", "12"),
    ],
)
def test_boolean_and_comparison_gates(expr, expected):
    assert majors(expr) == expected


@pytest.mark.parametrize("expr", ["enable_x and y", "len(items) >= 9", "is_cuda()", "x in [9, 10]"])
def test_non_gates(expr):
    assert majors(expr) is None


def test_find_gates_in_module():
    text = (
        "from pkg.defs import is_sm90_supported, is_sm100_supported\n"
        "_is_sm90_supported = is_sm90_supported()\n"
        "class Fusion:\n"
        "    def apply(self, args):\n"
        "        if args.enable and (_is_sm90_supported or is_sm100_supported()):\n"
        "            return flags(supported_major_versions=[9, 10])\n"
        "        return flags(supported_major_versions=VERSIONS)\n"
    )
    gates, functions = find_gates("pkg/m.py", text, evaluator(text))
    summary = [
        (g.line, g.function, g.kind, sorted(g.admits) if g.admits is not None else None)
        for g in gates
    ]
    assert summary == [
        (2, "<module>", "condition", [9]),
        (5, "Fusion.apply", "condition", [9, 10]),
        (6, "Fusion.apply", "supported_major_versions", [9, 10]),
        (7, "Fusion.apply", "supported_major_versions", None),
    ]
    assert "Fusion.apply" in functions
    assert gates[3].index == 1  # second keyword gate in the same function


def test_touched_gate_on_mini_upstream(sm120):
    before, after = mu.files("base")[mu.GATE_FILE], mu.files("gate-only")[mu.GATE_FILE]
    line = mu.line_of(after, mu.NEW_GATE)
    (gate,) = touched_gates(mu.GATE_FILE, before, after, {line})
    assert gate.after.function == "gen_trtllm_comm_module"
    assert (gate.after.line, gate.after.end_line) == (line - 1, line + 1)
    assert gate.majors_before == {9, 10} and gate.after.admits == Capabilities.of_majors({9, 10, 12})
    assert gate.admits(sm120) is True
    assert gate.sources == ["trtllm_allreduce.cu"]
    info = gate.to_dict(sm120)
    assert info["location"] == f"{mu.GATE_FILE}:{line - 1}" and info["majors_before"] == [9, 10]
    (finding,) = gate_findings([gate], sm120)
    assert finding.severity == "info" and "[9, 10] -> [9, 10, 12]" in finding.message


def test_a_gate_that_builds_through_a_helper_of_its_file_names_the_helpers_sources(sm120):
    """flashinfer's gen_cutlass_fused_moe_sm100_module gates the flags and hands them to
    gen_cutlass_fused_moe_module, which lists the units and adds flags of its own."""
    after = (
        "def gen_moe_sm100_module():\n"
        "    flags = ctx.flags(supported_major_versions=[10, 12])\n"
        "    return _gen_moe_module(flags + ['-DSM100'], '100')\n\n\n"
        "def _gen_moe_module(flags, arch):\n"
        "    return spec(['moe.cu', 'moe_ops.cu'], flags + ['-DMOE_BUILD'])\n\n\n"
        "def _unrelated():\n    return 1\n"
    )
    before = after.replace("[10, 12]", "[10]")
    (gate,) = touched_gates("jit/moe.py", before, after, {2})
    assert gate.sources == ["moe.cu", "moe_ops.cu"]
    assert gate.builders == ["gen_moe_sm100_module", "_gen_moe_module"]
    from contrib.analysis.profiles import flags_in
    assert [f for name in gate.builders for f in flags_in(after, name)] == ["-DSM100", "-DMOE_BUILD"]


def test_touched_gate_that_still_rejects_target_is_an_error(sm120):
    before = "def f():\n    return flags(supported_major_versions=[9, 10])\n"
    after = "def f():\n    # widened for Hopper only\n    return flags(supported_major_versions=[9, 10])\n"
    touched = touched_gates("g.py", before, after, {3})
    (finding,) = gate_findings(touched, sm120)
    assert finding.severity == "error" and finding.location == "g.py:3"
    assert "still rejects sm_120a" in finding.message
    # Changing an unrelated line touches no gate.
    assert touched_gates("g.py", before, after, {2}) == []


def test_new_gate_and_unknown_gate(sm120):
    after = (
        "def f(v):\n    if is_sm120_supported():\n        return flags(supported_major_versions=v)\n"
        + STAR
    )
    touched = touched_gates("pkg/m.py", None, after, {2, 3}, (None, evaluator(after)))
    findings = gate_findings(touched, sm120)
    assert [f.kind for f in findings] == ["gate", "gate-unknown"]
    assert "new gate" in findings[0].message
    assert touched[0].majors_before == frozenset()


def test_sglang_shaped_boolean_gate(sm120):
    before = (
        "def apply_flashinfer_allreduce_fusion(batch_size):\n"
        "    return (\n"
        "        (_is_sm90_supported or _is_sm100_supported)\n"
        "        and batch_size > 0\n"
        "    )\n"
    )
    before += STAR
    after = before.replace("_is_sm100_supported)", "_is_sm100_supported or _is_sm120_supported)")
    (gate,) = touched_gates("pkg/m.py", before, after, {3}, (evaluator(before), evaluator(after)))
    assert gate.majors_before == {9, 10} and gate.after.admits == Capabilities.of_majors({9, 10, 12})
    assert gate.admits(parse_arch("sm_120a")) and not gate.admits(parse_arch("sm_110a"))


def test_skip_conditions_are_inverted(sm120):
    text = (
        "import pytest\n"
        "pytestmark = pytest.mark.skipif(\n"
        "    not torch.cuda.is_available()\n"
        "    or get_compute_capability(torch.device('cuda:0'))[0] not in (9, 10, 12),\n"
        "    reason='SM90/SM100/SM12x only',\n"
        ")\n"
        "def build():\n"
        "    major = torch.cuda.get_device_capability()[0]\n"
        "    if major < 9:\n"
        "        raise RuntimeError('needs Hopper or newer')\n"
        "    if major == 11:\n"
        "        pytest.skip('no Thor')\n"
        "    if major >= 10:\n"
        "        use_tcgen05()\n"
    )
    text += STAR
    gates, _ = find_gates("tests/test_x.py", text, evaluator(text, "tests/test_x.py"))
    summary = [(g.line, g.kind, sorted(g.admits or ())) for g in gates]
    assert summary == [
        (3, "skip-condition", [9, 10, 12]),
        (9, "skip-condition", [9, 10, 11, 12]),
        (11, "skip-condition", [7, 8, 9, 10, 12]),
        (13, "condition", [10, 11, 12]),
    ]
    assert gates[0].text.startswith("skipped when not torch.cuda.is_available()")
    touched = touched_gates("tests/test_x.py", None, text, {4}, (None, evaluator(text, "tests/test_x.py")))
    assert [f.severity for f in gate_findings(touched, sm120)] == ["info"]


def test_sglang_shaped_refusal_gate(sm120):
    before = (
        "def resolve_backend(args):\n"
        "    if not (is_sm90_supported() or is_sm100_supported()):\n"
        "        raise ValueError('FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.')\n"
        "    return 'trtllm'\n"
    )
    before += STAR
    after = before.replace("is_sm100_supported())", "is_sm100_supported() or is_sm120_supported())")
    (gate,) = touched_gates("pkg/m.py", before, after, {2}, (evaluator(before), evaluator(after)))
    assert gate.after.kind == "skip-condition"
    assert gate.majors_before == {9, 10} and gate.after.admits == Capabilities.of_majors({9, 10, 12})
    assert gate.admits(sm120)
    (finding,) = gate_findings([gate], sm120)
    assert finding.severity == "info" and "[9, 10] -> [9, 10, 12]" in finding.message


# A private helper reads the capability its callers pass (flashinfer's
# `_cp_delta_rule_rejection_reason(arch_major=...)`, which b43c480141 widened to SM120).
REASON = (
    "def _rejection_reason(arch_major, x=None):\n"
    "    if arch_major != 9:\n"
    "        return 'CP delta rule is currently implemented only for SM90'\n"
    "    return None\n"
    "\n"
    "def run(q):\n"
    "    major = get_compute_capability(q.device)[0]\n"
    "    reason = _rejection_reason(arch_major=major)\n"
    "    if reason is not None:\n"
    "        raise ValueError(reason)\n"
)


def test_a_private_helpers_parameter_holds_what_its_callers_pass(sm120):
    text = REASON + STAR
    gates, _ = find_gates("pkg/m.py", text, evaluator(text), sm120)
    [gate] = [g for g in gates if g.function == "_rejection_reason"]
    assert (gate.line, gate.kind, sorted(gate.admits or ())) == (2, "skip-condition", [9])
    # a caller passing it positionally, or leaving it to its default, counts too
    positional = REASON.replace("arch_major=major", "major") + STAR
    assert any(g.function == "_rejection_reason"
               for g in find_gates("pkg/m.py", positional, evaluator(positional), sm120)[0])
    default = (REASON.replace("(arch_major, x=None)", "(x, arch_major=get_compute_capability()[0])")
               .replace("arch_major=major", "x=1")) + STAR
    assert any(g.function == "_rejection_reason"
               for g in find_gates("pkg/m.py", default, evaluator(default), sm120)[0])


@pytest.mark.parametrize("change", [
    ("def _rejection_reason", "def rejection_reason", "_rejection_reason(", "rejection_reason("),
    ("    return None\n", "    return None\n\nHOOKS = [_rejection_reason]\n"),  # escapes
    ("def _rejection_reason", "@cache\ndef _rejection_reason"),  # a decorator may rebind it
    ("reason = _rejection_reason(arch_major=major)", "reason = _rejection_reason(**kw)"),
])
def test_a_parameter_whose_callers_are_not_all_known_stays_unknown(change, sm120):
    text = REASON
    for old, new in zip(change[::2], change[1::2], strict=True):
        text = text.replace(old, new)
    text += STAR
    gates, _ = find_gates("pkg/m.py", text, evaluator(text), sm120)
    assert not [g for g in gates if "reason" in g.function and "run" not in g.function]


@pytest.mark.parametrize("links", range(12, 26))
def test_a_value_read_deep_in_a_chain_is_still_a_gate_at_the_top(links):
    # sglang's cutedsl_gdn_mtp_ring.py: a helper's parameter, read through its caller's
    # chain of names, reached the module's `_GPU_MAJOR` near the evaluator's depth; the
    # value cut short there was kept for every later reader, and the module's own
    # `_GPU_MAJOR >= 10` was no gate (16 to 20 links here lost it).
    chain = "".join(f"    a{n + 1} = a{n}\n" for n in range(links))
    text = (
        "import torch\n"
        "def _use(v):\n"
        "    if v >= 10:\n"
        "        go()\n"
        f"def caller():\n    a0 = _GPU_MAJOR\n{chain}    _use(a{links})\n"
        "_GPU_MAJOR, _ = torch.cuda.get_device_capability(0)\n"
        "_USE_FMA = _GPU_MAJOR >= 10\n"
    )
    gates, _ = find_gates("pkg/m.py", text, evaluator(text))
    assert ("<module>", "_GPU_MAJOR >= 10") in [(g.function, g.text) for g in gates]


def test_a_parameter_not_followed_two_hops_away_is_followed_where_it_is_read(sm120):
    # `_inner`'s callers pass `_outer`'s own parameter (two hops from the GPU: not
    # followed from `_inner`); read in `_outer` itself, it is one hop, and a gate
    text = (
        "def _inner(x):\n"
        "    if x >= 10:\n"
        "        go()\n"
        "\n"
        "def _outer(y):\n"
        "    _inner(y)\n"
        "    if y >= 10:\n"
        "        go()\n"
        "\n"
        "def run():\n"
        "    _outer(get_device_capability()[0])\n"
    ) + STAR
    gates, _ = find_gates("pkg/m.py", text, evaluator(text), sm120)
    assert [(g.function, g.line) for g in gates] == [("_outer", 7)]
