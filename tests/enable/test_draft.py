"""A draft's decisions as values: the commit message says the edits, never a gate left."""

from __future__ import annotations

from contrib.analysis.archvalues import Capabilities
from contrib.audit.model import AuditGate, GateKind
from contrib.enable.draft import _message
from contrib.workspace.schema import Decided, Done


def _gate(file: str, line: int, function: str) -> AuditGate:
    return AuditGate(file=file, line=line, function=function, kind=GateKind.JIT,
                     admits=Capabilities.of_majors({9, 10}), excludes_target=True)


JIT, API, NORM = (_gate("pkg/jit.py", 5, "gen_norm_module"), _gate("pkg/api.py", 30, "api"),
                  _gate("pkg/norm.py", 7, "norm"))
DECISIONS = {d.gate: d for d in (
    Decided("pkg/jit.py:5 gen_norm_module", Done.WIDENED,
            "pkg/jit.py:5: majors [9, 10] -> [9, 10, 12] (gen_norm_module)",
            "the JIT list omits 12; class gate-only"),
    Decided("pkg/api.py:30 api", Done.LEFT, why="pkg/api.py:30: names sm_120a's family"),
    Decided("pkg/norm.py:7 norm", Done.WIDENED, "pkg/norm.py:7: the condition gains `x` (norm)",
            "the target skips this code"))}


def test_a_commit_message_lists_the_edits_of_its_files_and_no_gate_left() -> None:
    files = {"pkg/jit.py": b"", "pkg/api.py": b""}
    assert _message("feat(jit): enable gen_norm_module on SM120", files, [JIT, API, NORM],
                    DECISIONS) == ("feat(jit): enable gen_norm_module on SM120\n\n"
                                   "- pkg/jit.py:5: majors [9, 10] -> [9, 10, 12] "
                                   "(gen_norm_module)\n")
