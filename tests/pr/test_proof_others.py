"""A draft is proposed only when the ``others`` stage showed the archs the upstream ships
unchanged; the PR body says what that stage found, in one line."""

from __future__ import annotations

from contrib.arch import parse_arch
from contrib.pr.body import BodyInput, CommitLine, render_body
from contrib.pr.proof import prove
from contrib.record import Record, Standing, arch_verdicts
from contrib.record.finding import Finding
from contrib.validate.report import StageResult, host_facts
from contrib.workspace.validation import Settings
from testing.recordutil import run_of

SM120 = parse_arch("sm_120a")
GATES = StageResult("gates", "passed", "1 touched gate admits sm_120a")
PTX = StageResult("ptx", "not-applicable", "no CUDA unit at stake")
SAME = StageResult("others", "passed", "unchanged for sm_90a, sm_100a: 2 kernels identical on "
                   "each (1 unit)", details={"archs": ["sm_90a", "sm_100a"], "identical": 4})
LAMPORT = {"arch": "sm_90a", "unit": "csrc/ar.cu", "name": "ar::lamport_kernel", "how": "changed",
           "kernel": True, "text": "kernel ar::lamport_kernel (csrc/ar.cu): changed, 18 -> 1 "
           "instructions (-1 st.global.f32)"}
MOVED = StageResult("others", "failed", "changed elsewhere: sm_90a: kernel ar::lamport_kernel",
                    [Finding("other-arch-changed", "error", "include/ar.cuh", 9, "sm_90a: ...")],
                    details={"archs": ["sm_90a", "sm_100a"], "differences": [LAMPORT]})


def _standing(*stages: StageResult) -> Standing:
    run = run_of(list(stages), host={**host_facts([]), "hostname": "box"}).run()
    record = Record("mini", "enable-norm", "a" * 40, "sha256:" + "0" * 64, (run,))
    return Standing(record, "", tuple(arch_verdicts(record.runs, Settings().required())))


def _body(standing: Standing) -> str:
    return render_body(BodyInput(
        target="mini/enable-norm", version="a" * 40, base_branch="main", summary="Drafted.",
        commits=[CommitLine("b" * 40, "0001-x.patch", "Enable norm", "Dev")],
        validation=standing, proof=prove(standing, SM120, None, {})))


def test_a_draft_is_proven_only_where_others_passed_or_had_nothing_to_compare() -> None:
    same = prove(_standing(GATES, PTX, SAME), SM120, [])
    assert same.proven and same.others is not None and same.others.name == "others"
    nothing = StageResult("others", "not-applicable", "the patch touches no CUDA unit and no "
                          "architecture gate")
    assert prove(_standing(GATES, PTX, nothing), SM120, []).proven
    older = prove(_standing(GATES, PTX), SM120, [])  # a record from before the stage
    assert older.held == ["no others stage in the record (whether other archs change is not "
                          "shown): run contrib validate again"]
    skipped = StageResult("others", "skipped", "nvcc not found on PATH or in /usr/local/cuda/bin")
    assert prove(_standing(GATES, PTX, skipped), SM120, []).held == [
        "others skipped: nvcc not found on PATH or in /usr/local/cuda/bin"]
    moved = prove(_standing(GATES, PTX, MOVED), SM120, [])
    assert moved.held == ["others failed: changed elsewhere: sm_90a: kernel ar::lamport_kernel"]


def test_the_body_says_in_one_line_what_others_found() -> None:
    same = _body(_standing(GATES, PTX, SAME))
    assert "\n\n**Other architectures:** unchanged for sm_90a, sm_100a: 2 kernels identical on " \
           "each (1 unit) (`contrib validate`, others stage).\n\n" in same
    moved = _body(_standing(GATES, PTX, MOVED))
    assert "**Other architectures change:** sm_90a: kernel ar::lamport_kernel (csrc/ar.cu): " \
           "changed, 18 -> 1 instructions (-1 st.global.f32) (`contrib validate`, others " \
           "stage)." in moved
    assert "Other architectures" not in _body(_standing(GATES, PTX))
