"""The history benchmark on a small upstream: which commits open a gate to SM12x, with what
expected class, and how each opening pairs with the audit's gate before and after."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from audit_history import Auditor, main, opened_names, spread
from history_corpus import drops, load, read, relabelled, relabels, write
from history_match import matching, measure
from history_mine import GATE_ONLY, NEEDS_KERNEL_WORK, Opening, mine

from contrib.arch import parse_arch
from contrib.audit.engine import audit_commit
from contrib.audit.model import AuditGate, GateKind
from contrib.git.repo import Git
from testing.gitutil import Repo
from testing.stackupstreams import lower_upstream, top_upstream

JIT = '''def gen_comm_module():
    flags = ctx.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )
    return build("comm", ["comm.cu"], flags)
'''
UNIT = '#include "comm.cuh"\nvoid launch(float* o) { k<<<1, 1>>>(o); }\n'
HEADER = '''#pragma once
__global__ void k(float* out) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200)
  out[threadIdx.x] = 1.0f;
#endif
}
'''
GEMM = '''def mm(x):
    """Multiply.  Runs on SM100."""
    if not is_sm100a_supported(x.device):
        raise ValueError("mm needs SM100")
    return x


def fused(x):
    if (
        is_sm100a_supported(x.device)
    ):
        return x * 2
    raise ValueError("unsupported")


import torch  # noqa: E402  (the predicates last: the gates above keep their lines)


def is_sm100a_supported(device):
    return torch.cuda.get_device_capability(device)[0] == 10


def is_sm120a_supported(device):
    return torch.cuda.get_device_capability(device)[0] == 12
'''
TEST = '''import pytest


@pytest.mark.skipif(get_compute_capability()[0] == 12, reason="broken on sm120")
def test_mm():
    assert mm(1) == 1
'''
LEGACY = '''def legacy(major):
    if major == 12:
        raise ValueError("not on this one")
    return major


def kept(x):
    return _patch(x, cc=(10, 3))
'''
ARCH = '''import torch


def is_blackwell():
    return torch.cuda.get_device_capability()[0] == 10


def run(x):
    if not is_blackwell():
        raise ValueError("needs Blackwell")
    return x
'''
NOISE = '''def suffix(major, minor):
    if major == 12:
        if get_cuda_version() < (12, 9):
            return ""
        return "a"
    return ""


def cmdline(text):
    if len(text) > 120:
        return text[:120]
    return text


def blocks(cc):
    if cc[0] >= 8:
        return (128, 128)
    return (64, 64)
'''

REWRITE = '''import pytest


def test_sink(cc):
    if cc[0] in [11, 12]:
        pytest.skip("not on 11 or 12")
    assert cc
'''
DISPATCH = '''from pkg.arch import (
    is_sm100_supported,
)


def moe(x, major):
    if major == 12:
        if get_cuda_version() < 13:
            raise ValueError("needs CUDA 13")
        return sm120_moe(x)
    return sm100_moe(x) if is_sm100_supported() else x
'''


@pytest.fixture
def history(tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    """An upstream whose main opens six gates, and makes changes that open none: prose,
    a rename of a predicate that already admitted SM12x, a deleted function with an SM12x
    refusal, a capability passed on as an argument, a CUDA toolkit check, a length of 120,
    a faster path for archs the old test already admitted, a skip rewritten to refuse
    SM12x still (``in [11, 12]`` to ``!= 10``), an SM120 dispatch branch removed (its
    toolkit ``raise`` is no refusal of the arch), a predicate renamed in an import list."""
    repo = Repo(tmp_path / "up")
    shas = {"base": repo.commit("base", {"pkg/jit/comm.py": JIT, "csrc/comm.cu": UNIT,
                                         "include/comm.cuh": HEADER, "pkg/gemm.py": GEMM,
                                         "tests/test_mm.py": TEST, "pkg/legacy.py": LEGACY,
                                         "pkg/arch.py": ARCH, "pkg/noise.py": NOISE})}
    shas["jit"] = repo.commit("comm on sm12x", {
        "pkg/jit/comm.py": JIT.replace("[9, 10]", "[9, 10, 12]"),
        "include/comm.cuh": HEADER.replace(" && (__CUDA_ARCH__ < 1200)", "")})
    shas["prose"] = repo.commit("docs", {"pkg/gemm.py": GEMM.replace(
        "Runs on SM100.", "Runs on SM100; SM120 is 12.0 (major == 12).")})
    gemm = repo.read("pkg/gemm.py")
    shas["mm"] = repo.commit("mm on sm120", {"pkg/gemm.py": gemm.replace(
        "if not is_sm100a_supported(x.device):",
        "if not (is_sm100a_supported(x.device) or is_sm120a_supported(x.device)):")})
    gemm = repo.read("pkg/gemm.py")
    shas["rename"] = repo.commit("rename", {"pkg/gemm.py": gemm.replace(
        "is_sm120a_supported", "is_sm12x_supported")})
    gemm = repo.read("pkg/gemm.py")
    shas["clause"] = repo.commit("fused on sm120", {"pkg/gemm.py": gemm.replace(
        "        is_sm100a_supported(x.device)\n    ):",
        "        is_sm100a_supported(x.device)\n        or is_sm120a_supported(x.device)\n    ):")})
    shas["moved"] = repo.commit("legacy goes; kept passes another capability", {
        "pkg/legacy.py": LEGACY.split("\n\n\n")[1].replace("(10, 3)", "(12, 0)")})
    shas["noise"] = repo.commit("a toolkit check, a length, a faster path above", {
        "pkg/noise.py": NOISE.replace("        if get_cuda_version() < (12, 9):\n            return \"\"\n",
                                      "").replace("    if len(text) > 120:\n        return text[:120]\n", "")
        .replace("    if cc[0] >= 8:", "    if cc[0] >= 9:\n        return (128, 64)\n    elif cc[0] >= 8:")})
    shas["skip"] = repo.commit("test on sm120", {"tests/test_mm.py": TEST.replace(
        '@pytest.mark.skipif(get_compute_capability()[0] == 12, reason="broken on sm120")\n',
        "")})
    shas["helper"] = repo.commit("blackwell is 10 and 12", {
        "pkg/arch.py": ARCH.replace("[0] == 10", "[0] in (10, 12)")})
    shas["quiet"] = repo.commit("a skip rewritten, an sm120 branch and an import", {
        "tests/test_sink.py": REWRITE, "pkg/moe.py": DISPATCH})
    shas["quiet2"] = repo.commit("still no SM12x", {
        "tests/test_sink.py": REWRITE.replace("if cc[0] in [11, 12]:", "if cc[0] != 10:"),
        "pkg/moe.py": DISPATCH.replace("is_sm100_supported", "is_blackwell_supported").replace(
            "    if major == 12:\n        if get_cuda_version() < 13:\n"
            "            raise ValueError(\"needs CUDA 13\")\n        return sm120_moe(x)\n",
            "")})
    return repo, shas


def test_mining_finds_each_opening_with_its_gate_and_class(
        history: tuple[Repo, dict[str, str]]) -> None:
    repo, shas = history
    found = mine(Git(repo.path), "up", "main")
    got = [(o.commit, o.file, o.function, o.mechanism, o.expected, o.lines) for o in found]
    assert got == [
        (shas["jit"], "include/comm.cuh", "<device>", "cuda-guard", NEEDS_KERNEL_WORK, [3]),
        (shas["jit"], "pkg/jit/comm.py", "gen_comm_module", "jit-list", NEEDS_KERNEL_WORK, [3]),
        (shas["mm"], "pkg/gemm.py", "mm", "condition", GATE_ONLY, [3]),
        (shas["clause"], "pkg/gemm.py", "fused", "condition", GATE_ONLY, [10]),
        (shas["skip"], "tests/test_mm.py", "test_mm", "skip", GATE_ONLY, [4]),
        (shas["helper"], "pkg/arch.py", "is_blackwell", "condition", GATE_ONLY, [5]),
    ]
    assert {o.parent for o in found if o.commit == shas["mm"]} == {shas["prose"]}
    assert found[1].device_files == ["include/comm.cuh"]


def test_measure_reads_the_audit_before_and_after_each_opening(
        history: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = history
    git = Git(repo.path)
    arch = parse_arch("sm_120a")
    rows = {}
    for opening in mine(git, "up", "main"):
        before = audit_commit(git, opening.parent, arch).gates
        later = audit_commit(git, opening.commit, arch).gates
        names = opened_names(git, opening)
        rows[(opening.file, opening.function)] = measure(opening, before, later, names)
    jit = rows[("pkg/jit/comm.py", "gen_comm_module")]
    assert (jit.found, jit.excluding, jit.got_class, jit.class_agrees) == (
        True, True, NEEDS_KERNEL_WORK, True)
    assert jit.gate.startswith("pkg/jit/comm.py:2 gen_comm_module")  # the call, lines 2-4
    assert not jit.still_excluding
    guard = rows[("include/comm.cuh", "<device>")]
    assert (guard.found, guard.excluding, guard.got_class) == (True, True, NEEDS_KERNEL_WORK)
    mm = rows[("pkg/gemm.py", "mm")]
    assert (mm.found, mm.excluding, mm.still_excluding) == (True, True, False)
    assert mm.gate.startswith("pkg/gemm.py:3 mm")
    # The helper's own test is a value; the gate it opened is its caller's refusal.
    helper = rows[("pkg/arch.py", "is_blackwell")]
    assert (helper.found, helper.excluding, helper.via) == (True, True, "users")
    assert helper.gate.startswith("pkg/arch.py:9 run")


def test_a_name_the_opening_defines_is_looked_for_in_its_own_file_first() -> None:
    """sglang's three NVFP4 benchmarks each set ``_NVFP4_SUPPORTED`` and test it: the
    gate an opening of one of them opened is that file's ``if not _NVFP4_SUPPORTED``,
    not another benchmark's; a user in another file counts only without one."""
    opening = Opening("up", "c" * 40, "p" * 40, "2026-01-01", "bench/scaled_mm.py", "<module>",
                      "condition", GATE_ONLY, [18], [15, 21])
    value = AuditGate("bench/scaled_mm.py", 18, "<module>", GateKind.PREDICATE, frozenset({10}), False,
                      "is_sm100_supported()")
    other = AuditGate("bench/moe.py", 254, "<module>", GateKind.PREDICATE, frozenset({10}), True,
                      "not _NVFP4_SUPPORTED")
    own = AuditGate("bench/scaled_mm.py", 180, "<module>", GateKind.PREDICATE, frozenset({10}), True,
                    "not _NVFP4_SUPPORTED")
    assert matching(opening, [value, other, own], ["_NVFP4_SUPPORTED"]) == ([own], "users")
    assert matching(opening, [value, other], ["_NVFP4_SUPPORTED"]) == ([other], "users")


def test_spread_keeps_whole_commits_evenly_and_the_corpus_round_trips(tmp_path: Path) -> None:
    openings = [Opening("up", f"{n:040x}", f"{n + 100:040x}", "2026-01-01", "a.py", f"f{k}",
                        "condition", GATE_ONLY, [n], [n, n + 2])
                for n in range(10) for k in range(2)]
    kept = spread(openings, 3)
    assert sorted({o.commit for o in kept}) == [f"{n:040x}" for n in (0, 3, 6)]
    assert len(kept) == 6 and spread(openings, 0) == openings
    path = tmp_path / "corpus.toml"
    write(path, openings)
    assert read(path) == openings


def test_the_script_reports_figures_and_misses_from_a_pinned_corpus(
        history: tuple[Repo, dict[str, str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = history
    corpus = tmp_path / "corpus.toml"
    write(corpus, mine(Git(repo.path), "flashinfer", "main"))
    out = tmp_path / "rows.json"
    argv = ["--upstream", "flashinfer", "--flashinfer-git", str(repo.path), "--corpus",
            str(corpus), "--cache", str(tmp_path / "cache"), "--json", str(out), "--quiet"]
    assert main(argv) == 0
    data = json.loads(out.read_text())["flashinfer"]
    assert len(data["rows"]) == 6 and data["main"]["commit"] == shas["quiet2"]
    jit = next(r for r in data["rows"] if r["opening"]["mechanism"] == "jit-list")
    assert jit["class_agrees"] and not jit["still_excluding"]
    printed = capsys.readouterr().out
    summary = next(line.split() for line in printed.splitlines() if line.startswith("flashinfer"))
    assert summary[:3] == ["flashinfer", "6", "5"]  # openings, commits
    assert "misses (" in printed
    assert any(f"{shas['skip'][:10]}  tests/test_mm.py:test_mm" in line
               for line in printed.splitlines())


def test_a_corpus_that_cannot_be_read_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "corpus.toml"
    bad.write_text('[[opening]]\nupstream = "flashinfer"\n')
    assert main(["--corpus", str(bad), "--upstream", "flashinfer",
                 "--flashinfer-git", str(Repo(tmp_path / "up").path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"audit_history: {bad}: [[opening]] number 1:") and "\n" not in err


def test_the_auditor_links_each_audit_to_the_stack_below(tmp_path: Path) -> None:
    top, lower = top_upstream(tmp_path / "top"), lower_upstream(tmp_path / "lower")
    stacked = Auditor(Git(top.path), "sm_120a", ("lower", Git(lower.path)))
    gates = {g.function: g for g in stacked.gates(top.head())}
    assert (stacked.stacked, stacked.mismatches, stacked.notes) == (1, 1, [])
    # comm's gate below turns the target from kernels it compiles: gate-only, from below
    assert gates["comm_step"].class_ == GATE_ONLY and gates["norm"].class_ == GATE_ONLY
    assert "lower v1.0" in gates["comm_step"].reason
    alone = Auditor(Git(top.path), "sm_120a")  # --no-stack
    assert {g.function: g.class_ for g in alone.gates(top.head())}["comm_step"] == "unknown"


def test_a_dropped_opening_stays_dropped_when_loaded_or_written_again(
        history: tuple[Repo, dict[str, str]], tmp_path: Path) -> None:
    repo, shas = history
    found = mine(Git(repo.path), "up", "main")
    corpus = tmp_path / "corpus.toml"
    write(corpus, found)
    corpus.write_text(corpus.read_text() + f'\n[[dropped]]\ncommit = "{shas["mm"][:10]}"\n'
                      'file = "pkg/gemm.py"\nfunction = "mm"\nwhy = "a person says so"\n')
    assert any(o.function == "mm" for o in read(corpus))  # pinned in the file still,
    loaded = load(argparse.Namespace(corpus=corpus, mine=False), {"up": Git(repo.path)})
    assert len(loaded) == len(found) - 1 and all(o.function != "mm" for o in loaded)  # not loaded
    write(corpus, found)  # mined again: the drop holds, and is kept in the file
    kept = read(corpus)
    assert len(kept) == len(found) - 1 and all(o.function != "mm" for o in kept)
    assert drops(corpus) == [{"commit": shas["mm"][:10], "file": "pkg/gemm.py",
                              "function": "mm", "why": "a person says so"}]
    corpus.write_text(corpus.read_text() + '\n[[dropped]]\ncommit = "abc"\n')
    with pytest.raises(ValueError, match=r"\[\[dropped\]\] number 2: needs commit, file"):
        drops(corpus)


def test_a_relabelled_opening_keeps_the_miners_class_beside_the_hands(
        history: tuple[Repo, dict[str, str]], tmp_path: Path) -> None:
    """``[[relabelled]]``: the class a person read from the upstream's later history
    (the gate taken back, the kernels in a follow-up) replaces the miner's, which is
    kept in ``mined_as``; the section survives the corpus being written again."""
    repo, shas = history
    found = mine(Git(repo.path), "up", "main")
    corpus = tmp_path / "corpus.toml"
    write(corpus, found)
    mm = next(o for o in found if o.function == "mm")
    other = NEEDS_KERNEL_WORK if mm.expected == GATE_ONLY else GATE_ONLY
    corpus.write_text(corpus.read_text() + f'\n[[relabelled]]\ncommit = "{shas["mm"][:10]}"\n'
                      f'file = "pkg/gemm.py"\nfunction = "mm"\nexpected = "{other}"\n'
                      'why = "taken back two days later"\n')
    write(corpus, found)  # mined again: the hand's section is kept
    entries = relabels(corpus)
    assert [e["why"] for e in entries] == ["taken back two days later"]
    pinned = relabelled(read(corpus), entries)
    again = next(o for o in pinned if o.function == "mm")
    assert (again.expected, again.mined_as) == (other, mm.expected)
    assert all(o.mined_as == "" for o in pinned if o.function != "mm")
    assert "mined_as" not in corpus.read_text()  # the file keeps the miner's labels
    head, _, tail = corpus.read_text().rpartition(f'expected = "{other}"')  # the hand's entry
    corpus.write_text(f'{head}expected = "maybe"{tail}')
    with pytest.raises(ValueError, match=r"\[\[relabelled\]\] number 1: expected must be one of"):
        relabels(corpus)


def test_a_kernel_written_in_python_is_device_code_for_the_expected_class(tmp_path: Path) -> None:
    """CuTe DSL and Triton kernels are Python files compiled for the GPU: an opening whose
    commit writes one needed kernel work; host Python beside it, or a kernel in the
    tests, does not."""
    gate = ("def run(x):\n    if not is_sm100_supported():\n        raise ValueError('SM100')\n"
            "    return x\n")
    triton = ("import triton\n\n\n@triton.jit\ndef k(x_ptr):\n    pass\n\n\n"
              "def host(x):\n    return x\n")
    repo = Repo(tmp_path / "up")
    repo.commit("base", {"pkg/a.py": gate, "pkg/b.py": gate, "pkg/c.py": gate,
                         "pkg/tri.py": triton})
    opened = gate.replace("is_sm100_supported()", "(is_sm100_supported() or is_sm120_supported())")
    cute = ("import cutlass.cute as cute\n\n\nclass Sm120Kernel:\n    @cute.kernel\n"
            "    def kernel(self, a):\n        pass\n")
    dsl = repo.commit("a: with a CuTe DSL kernel", {"pkg/a.py": opened, "pkg/sm120_dsl.py": cute})
    host = repo.commit("b: host python and a test kernel", {
        "pkg/b.py": opened, "pkg/tri.py": triton.replace("return x", "return x + 0"),
        "tests/kernels.py": cute})
    body = repo.commit("c: a line inside a triton kernel", {
        "pkg/c.py": opened, "pkg/tri.py": triton.replace("    pass\n", "    x = 1\n", 1)})
    found = {o.commit: (o.expected, o.device_files) for o in mine(Git(repo.path), "up", "main")}
    assert found[dsl] == (NEEDS_KERNEL_WORK, ["pkg/sm120_dsl.py"])
    assert found[host] == (GATE_ONLY, [])
    assert found[body] == (NEEDS_KERNEL_WORK, ["pkg/tri.py"])


def test_a_partial_opening_is_opened_while_its_other_configuration_still_excludes() -> None:
    """flashinfer 7b83d0c54: test_bmm_mxfp8 kept ``cap[0] != 10`` for cudnn and added
    ``cap[0] != 12`` for cutlass.  The kept gate still excludes the target, rightly; the
    opening is the gate the commit added in its hunk, which admits it."""
    from contrib.audit.model import AuditGate, GateKind

    opening = Opening("flashinfer", "c" * 40, "p" * 40, "2026-05-19", "tests/test_bmm.py",
                      "test_bmm", "condition", GATE_ONLY, [3], [1, 6], [1, 9])
    def gate(line: int, index: int, admits: frozenset[int], excludes: bool) -> AuditGate:
        return AuditGate("tests/test_bmm.py", line, "test_bmm", GateKind.CAPABILITY, admits, excludes,
                         class_=GATE_ONLY if excludes else None, parser_kind="skip-condition",
                         index=index, end_line=line)
    parent = [gate(3, 0, frozenset({10, 11}), True)]
    cudnn, cutlass = gate(3, 0, frozenset({10}), True), gate(5, 1, frozenset({12}), False)
    assert not measure(opening, parent, [cudnn, cutlass]).still_excluding
    only = measure(opening, parent, [cudnn])  # nothing in the hunk admits it: not opened
    assert only.still_excluding and only.after_gate.startswith("tests/test_bmm.py:3")

