"""`contrib audit` on a mini upstream: finding, judging, covering, history, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contrib.arch import parse_arch
from contrib.audit.finding.gates import gates_of_file, says_intentional
from contrib.audit.model import EffectKind
from testing.auditupstream import open_gate
from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch


def _gates(result: Any) -> dict[str, dict[str, Any]]:
    (upstream,) = result.json["upstreams"]
    return {f"{g['function']}:{g['kind']}": g for g in upstream["gates"]}


def test_audit_judges_each_kind_of_gate(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    result = ws.run("audit", "mini", "--arch", "sm_120a", "--json")
    assert result.code == 1, result.err  # uncovered runtime gates turn SM120 away
    gates = _gates(result)
    assert gates["gen_norm_module:jit"]["class"] == "gate-only"
    comm = gates["gen_comm_module:jit"]
    assert comm["class"] == "needs-kernel-work" and comm["excludes_target"] is True
    assert comm["basis"] == "compiled-out" and comm["units"] == ["csrc/comm.cu"]
    assert any(e.startswith("csrc/comm.cuh:2 empty-kernel (guard csrc/comm.cuh:3)")
               for e in comm["evidence"]), comm["evidence"]
    # The units and flags of a helper of the same file the gate's function builds through.
    moe = gates["gen_moe_dense_module:jit"]
    assert moe["class"] == "gate-only" and moe["units"] == ["csrc/moe.cu"], moe
    assert moe["builders"] == ["_gen_moe_module"]
    mnnvl = gates["gen_mnnvl_module:jit"]
    assert (mnnvl["class"], mnnvl["basis"]) == ("intentional", "upstream-says")
    assert mnnvl["comment"] == "MNNVL needs NVLink: SM12x parts are not supported on purpose."
    # What a refusal says joins the reason; it does not decide the class.
    fp8 = gates["fp8_prefill:predicate"]
    assert fp8["class"] == "unknown" and fp8["message"] == "FP8 is not yet supported on SM120"
    assert fp8["basis"] == "nothing-reached"
    # the wording, once: the refusal's message, quoted in the reason
    assert fp8["reason"].endswith("; it refuses with “FP8 is not yet supported on SM120”")
    pick = gates["pick_backend:predicate"]
    assert pick["excludes_target"] is True and pick["scope"] == "runtime"
    assert pick["class"] == "unknown" and pick["basis"] == "nothing-reached" and pick["reason"]
    # A helper defined in the same file loads the JIT module: its verdict, one call down.
    allreduce = gates["allreduce:predicate"]
    assert allreduce["excludes_target"] is True and allreduce["class"] == "needs-kernel-work"
    # it stands on gen_comm_module, whose gate (pkg/jit.py:10) admits majors 9, 10,
    # reached through _comm_allreduce
    assert (comm["file"], comm["line"], comm["admits"]) == ("pkg/jit.py", 10, "majors 9, 10")
    assert allreduce["basis"] == "compiled-out"
    assert allreduce["reached"] == ["jit|pkg/jit.py|gen_comm_module||_comm_allreduce>gen_comm_module"]
    assert allreduce["units"] == ["csrc/comm.cu"] and allreduce["evidence"] == comm["evidence"]
    assert gates["test_fusion:predicate"]["scope"] == "test"
    assert gates["test_fusion:predicate"]["excludes_target"] is True
    # A choice between paths that serves SM120 is listed, not counted as a refusal.
    tiles = [g for g in result.json["upstreams"][0]["gates"] if g["function"] == "tile_size"]
    assert len(tiles) == 2 and not any(g["excludes_target"] for g in tiles)
    order = [g["scope"] for g in result.json["upstreams"][0]["gates"]]
    assert order == sorted(order, key=["runtime", "test", "benchmark", "example"].index)
    # Admitting the target's major, every gate lets sm_100a in.
    assert ws.run("audit", "--arch", "sm_100a", "--json").code == 0


def test_table_markdown_and_repeat_from_cache(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    table = ws.run("audit", "mini", "--arch", "sm_120a")
    assert table.code == 1 and "needs-kernel-work" in table.out and "pkg/jit.py" in table.out
    assert "tile_size" not in table.out and "tile_size" in ws.run(
        "audit", "--arch", "sm_120a", "--all").out
    again = ws.run("audit", "mini", "--arch", "sm_120a", "--json", "--no-fetch")
    assert again.json["upstreams"][0]["cached"] is True  # type: ignore[index]
    md = ws.run("audit", "mini", "--arch", "sm_120a", "--markdown").out
    assert md.startswith("## Architecture gates that turn `sm_120a` away")
    assert "| needs-kernel-work | runtime | `pkg/jit.py:" in md


def test_patchset_covers_its_gate(mini: tuple[Workspace, Repo], tmp_path: Path) -> None:
    ws, repo = mini
    from testing.auditupstream import JIT

    widened = JIT.replace("[9, 10])\n    return build(\"norm\"", "[9, 10, 12])\n    return build(\"norm\"")
    assert widened != JIT
    patches = make_patch(repo, tmp_path, {"pkg/jit.py": widened}, "jit: build norm for SM12x")
    assert ws.run("new", "mini", "sm120-norm", "--base", repo.head(),
                  "--patch", str(patches[0])).code == 0
    gates = _gates(ws.run("audit", "mini", "--arch", "sm_120a", "--json"))
    assert gates["gen_norm_module:jit"]["covered_by"] == "mini/sm120-norm"
    assert gates["gen_comm_module:jit"]["covered_by"] is None


def test_since_names_the_commit_that_opened_a_gate(mini: tuple[Workspace, Repo]) -> None:
    ws, repo = mini
    repo.commit("tag point")
    from testing.gitutil import git

    git(repo.path, "tag", "v1.0")
    sha = open_gate(repo)
    result = ws.run("audit", "mini", "--arch", "sm_120a", "--since", "v1.0", "--json")
    pick = _gates(result)["pick_backend:predicate"]
    assert pick["excludes_target"] is False
    assert pick["opened_by"] == {"sha": sha, "subject": "fusion: admit SM120 (#42)", "pr": 42}
    assert result.json["upstreams"][0]["since"] == "v1.0"  # type: ignore[index]


@pytest.mark.parametrize("args, words", [
    (["nosuch", "--arch", "sm_120a"], "no upstream 'nosuch'"),
    (["mini", "--arch", "sm_120a", "--at", "nosuchref"], "unknown revision 'nosuchref'"),
    (["mini", "--arch", "sm_999"], "unknown GPU architecture 'sm_999'"),
])
def test_bad_input_exits_2_with_one_line(mini: tuple[Workspace, Repo], args: list[str],
                                         words: str) -> None:
    ws, _ = mini
    result = ws.run("audit", *args)
    assert result.code == 2
    assert result.err.count("\n") == 1 and words in result.err, result.err


def test_cuda_toolkit_checks_are_not_gates(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    result = ws.run("audit", "mini", "--arch", "sm_120a", "--all", "--json")
    files = {g["file"] for g in result.json["upstreams"][0]["gates"]}  # type: ignore[index]
    assert "pkg/toolkit.py" not in files and "pkg/jit.py" in files


@pytest.mark.parametrize("source", [
    'if torch.version.cuda >= "12.8":\n        raise RuntimeError("x")',
    "if get_cuda_version() >= (12, 8):\n        raise RuntimeError('x')",
    "major, minor = get_cuda_version()\n    if major < 13:\n        raise RuntimeError('x')",
    "v = torch.version.cuda\n    major = int(v.split('.')[0])\n    if major < 13:\n"
    "        raise RuntimeError('x')",
    "nvcc_major, _ = get_nvcc_version()\n    if nvcc_major < 13:\n        raise RuntimeError('x')",
    "if CUDA_VERSION < 12080:\n        raise RuntimeError('x')",
    "if get_cuda_runtime_version()[0] < 13:\n        raise RuntimeError('x')",
])
def test_toolkit_version_forms(source: str) -> None:
    text = f"def f():\n    {source}\n"
    assert gates_of_file("pkg/x.py", text, parse_arch("sm_120a")) == []


PRELUDE = """

import torch


def cap():
    return torch.cuda.get_device_capability()


def is_sm12x_supported(device=None):
    return cap()[0] == 12


def is_sm100_supported(device=None):
    return cap()[0] == 10 and torch.version.cuda >= "12.8"


def is_sm100a_supported(device=None):
    return cap()[0] == 10


def is_sm90_supported():
    return cap()[0] == 9


def get_device_sm():
    major, minor = cap()
    return major * 10 + minor
"""
# Names held at module level, as upstreams cache them.
NAMES = """
_is_hopper = is_sm90_supported()
IS_BLACKWELL = cap()[0] == 10
major = cap()[0]
sm_version = device_cc = cc = get_device_sm()
_sm = get_device_sm()
get_sm = get_device_sm
"""


def test_a_name_reassigned_from_the_device_is_a_gate_again() -> None:
    text = ("def f():\n    major, minor = get_cuda_version()\n"
            "    major, minor = torch.cuda.get_device_capability()\n"
            "    if major != 10:\n        raise RuntimeError('x')\n"
            "    major, minor = get_cuda_version()\n    if major < 13:\n        raise RuntimeError('y')\n")
    (gate,) = gates_of_file("pkg/x.py", text, parse_arch("sm_120a"))
    assert gate.excludes_target and gate.line == 4


def test_an_elif_after_a_branch_the_target_takes_turns_nothing_away() -> None:
    """flashinfer's check_cuda_arch: ``if major >= 8: ok  elif major == 7 and ...``."""
    text = ("def check():\n    major, minor = cap()\n    if major >= 8:\n        ok = True\n"
            "    elif major == 7 and minor >= 5:\n        ok = True\n    return ok\n" + PRELUDE)
    gates = gates_of_file("pkg/x.py", text, parse_arch("sm_120a"))
    assert [(g.line, g.excludes_target) for g in gates] == [(3, False), (5, False)]
    assert gates[1].effect.kind is EffectKind.EARLIER_BRANCH, gates[1].effect
    # An earlier branch that is not about the arch serves nobody in particular.
    text = ("def pick(fast):\n    major = cap()[0]\n    if fast:\n        out = 1\n"
            "    elif major == 10:\n        out = fused()\n    return out\n" + PRELUDE)
    (gate,) = gates_of_file("pkg/x.py", text, parse_arch("sm_120a"))
    assert gate.excludes_target and gate.calls == (("fused",),)


def test_a_refusal_says_what_it_refuses_and_work_to_come_is_not_intentional() -> None:
    arch = parse_arch("sm_120a")
    text = ("def prefill(q, fp8):\n    if fp8 and is_sm12x_supported(q.device):\n"
            "        raise ValueError(\n            'FP8 is not yet supported on SM120. '\n"
            "            f'Got {q.dtype}.'\n        )\n    return run(q)\n\n\n"
            "def mla():\n    assert cap()[0] == 9, 'FP8 MLA needs ' + 'SM90'\n\n\n"
            "def ssd():\n    major = cap()[0]\n    if major == 10:\n        return fast()\n    elif major == 9:\n"
            "        return slow()\n    else:\n        raise RuntimeError(f'needs SM100, got SM{major}')\n" + PRELUDE)
    gates = {g.function: g for g in gates_of_file("pkg/x.py", text, arch) if g.excludes_target}
    assert gates["prefill"].message == "FP8 is not yet supported on SM120. Got {q.dtype}."
    assert gates["mla"].message == "FP8 MLA needs SM90"
    assert gates["ssd"].message == "needs SM100, got SM{major}"
    marker = ("@pytest.mark.skipif(not is_sm100_supported(), reason='needs SM100')\n"
              "def test_fused():\n    pass\n" + PRELUDE)
    (skip,) = gates_of_file("tests/test_x.py", marker, arch)
    assert skip.excludes_target and skip.message == "needs SM100"
    # An upstream comment is read a sentence at a time: work to come is not a choice.
    assert not says_intentional("FP8 is not yet supported on SM120.", arch)
    assert not says_intentional("SM12x is disabled for now.", arch)
    assert says_intentional("SM107 is not yet supported, so reject it. Consumer Blackwell "
                            "(SM120/SM121) lacks tcgen05, so reject it here.", arch)
    assert not says_intentional("Tuned on 12.0 hardware; other parts fall back.", arch)
    # served by another path of its own (sglang's NVFP4 KV-cache scales)
    assert says_intentional("SM120 uses a different kernel path where scales already "
                            "include this factor.", arch)
    assert not says_intentional("SM120 is different.", arch)


@pytest.mark.parametrize(("comment", "intentional"), [
    # another path of its own, however it is phrased
    ("SM12x has its own kernel.", True),
    ("SM120 is routed to a separate implementation.", True),
    ("On sm_120 the dedicated MMA backend handles this.", True),
    ("Consumer Blackwell (SM120) is served by a dedicated Triton kernel instead.", True),
    ("sm121 goes another way: its own code path.", True),
    # a difference that is no path of its own
    ("Expect different results on SM120.", False),
    ("Use a separate stream on SM120.", False),
    ("SM120 has its own shared memory size.", False),
    ("The kernel differs on SM120.", False),
    # another family's path, and work to come
    ("SM90 uses a different kernel path.", False),
    ("SM120: not yet, a separate path TODO.", False),
    ("SM120 needs its own kernel for now.", False),
])
def test_a_comment_saying_the_target_has_a_path_of_its_own_is_a_choice(
        comment: str, intentional: bool) -> None:
    assert says_intentional(comment, parse_arch("sm_120a")) is intentional


def test_early_exits_of_a_chain_leave_the_target_the_code_after_it_unless_an_else_refuses() -> None:
    arch = parse_arch("sm_120a")
    chain = ("def f():\n    if cap()[0] == 10:\n        return fast()\n    elif cap()[0] == 9:\n"
             "        return slow()\n")
    # The target takes the generic path after the chain, as pre-Hopper GPUs do: it
    # falls back (excluded from the fast paths); an elif is judged with its if.
    fallback = gates_of_file("x.py", chain + "    return naive()\n" + PRELUDE, arch)
    assert [(g.line, g.excludes_target) for g in fallback][:2] == [(2, True), (4, False)]
    assert fallback[0].effect.kind is EffectKind.FALLS_BACK, fallback[0].effect
    refused = gates_of_file("x.py", chain + "    else:\n        raise RuntimeError('no')\n"
                            + PRELUDE, arch)
    assert [(g.line, g.excludes_target) for g in refused][:2] == [(2, True), (4, False)]
    assert refused[0].effect.kind is EffectKind.ELSE_REFUSES, refused[0].effect
    # One refusal, one gate: sglang's get_arch_constraints has four elifs over it.
    assert refused[1].effect.kind is EffectKind.ELIF, refused[1].effect
    # the wording, once: the line of the chain's head (no typed field holds it)
    assert refused[1].effect.why == "an elif of the chain at line 2, which is judged there"


@pytest.mark.parametrize("condition", [
    "flags(supported_major_versions=[9])", "is_sm90_supported()", "_is_hopper",
    "IS_BLACKWELL", "torch.cuda.get_device_capability()[0] >= 9", "major == 10",
    "sm_version == 90", "device_cc >= 90", "cc == 90", "get_device_sm() >= 90",
    "get_sm() >= 90", "torch.cuda.get_device_capability() == (12, 0)", "_sm == 120",
])
def test_the_file_prefilter_keeps_every_file_with_a_gate(condition: str) -> None:
    from contrib.audit.engine import may_gate

    text = (f"def f():\n    if {condition}:\n        raise RuntimeError('x')\n" + PRELUDE
            + NAMES)
    assert gates_of_file("pkg/x.py", text, parse_arch("sm_120a")), condition
    assert may_gate(text)
    assert not may_gate("def small_access(success):\n    return success\n")


def test_a_skip_keeps_the_code_after_it_from_the_target() -> None:
    """The calls a refusal denies the target: the rest of its block (for a JIT getter
    there, the gate takes that module's class), or the function a skipif marks."""
    arch = parse_arch("sm_120a")
    text = ("def f(x):\n    y = prep(x)\n    if not is_sm100a_supported(x.device):\n"
            "        raise ValueError('needs SM100')\n    return get_fmha_module(y).run(x)\n"
            + PRELUDE)
    (gate,) = gates_of_file("pkg/x.py", text, arch)
    assert gate.excludes_target and sorted(gate.calls) == [("get_fmha_module",), ("run",)]
    marker = ("@pytest.mark.skipif(not is_sm100_supported(), reason='x')\n"
              "def test_a():\n    run_fused()\n" + PRELUDE)
    (skip,) = gates_of_file("tests/test_x.py", marker, arch)
    assert skip.calls == (("run_fused",),)


def test_audit_runs_while_another_contrib_holds_the_workspace(
        mini: tuple[Workspace, Repo], monkeypatch: pytest.MonkeyPatch) -> None:
    """It writes only the cache, so a long --compile holds up no `status` or `sync`, and
    a `sync` in progress holds up no audit."""
    import subprocess
    import sys

    ws, _ = mini
    assert ws.run("audit", "mini", "--arch", "sm_120a").code == 1  # fetched: warm cache
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from contrib.workspace.model import Workspace; "
         f"held = Workspace(Path({str(ws.root)!r})).lock(); held.__enter__(); "
         "print('held', flush=True); "
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setenv("CONTRIB_LOCK_TIMEOUT", "0")
        refused = ws.run("sync", "--no-fetch")  # a writer waits; status reads without it
        assert refused.code == 2 and "another contrib process" in refused.err
        result = ws.run("audit", "mini", "--arch", "sm_120a", "--no-fetch", "--json")
        assert result.code == 1, result.err
        assert _gates(result)["gen_comm_module:jit"]["class"] == "needs-kernel-work"
    finally:
        holder.communicate("")


def test_scope_by_path_function_and_marker() -> None:
    """Sample code under ``examples/`` is not the package's runtime; benchmarks and
    tests are read by path, test functions and skip markers anywhere else."""
    from contrib.audit.finding.gates import scope_of

    assert scope_of("examples/pytorch/flashinfer_modules.py", "_check", "sm == 90") == "example"
    assert scope_of("flashinfer/gemm/gemm_base.py", "mm", "major == 10") == "runtime"
    assert scope_of("benchmarks/bench_mm.py", "<module>", "major == 10") == "benchmark"
    assert scope_of("flashinfer/utils.py", "TestX.test_a", "major == 10") == "test"
    assert scope_of("flashinfer/utils.py", "f", "pytest.skip('x')") == "test"
