"""Landing is decided where the patch makes its change: a line upstream wrote in the
function next door lands nothing, and a patch that still carries is never dropped."""

from __future__ import annotations

from pathlib import Path

from contrib.carry.landed import measure
from contrib.git.repo import Git
from testing.gitutil import Repo
from testing.histories import Change, fast_import, filler
from testing.synchelp import TWIN_GATES, add_patchset, applied_file, sync_json, version_dir
from testing.workspace import Workspace

GATES = TWIN_GATES
WIDE = "supported_major_versions=[9, 10, 12]"
MIXED = GATES.replace("[9, 10]", "[9, 10, 12]", 1)  # the patch: the first spec
TRTLLM = GATES[::-1].replace("[9, 10]"[::-1], "[9, 10, 12]"[::-1], 1)[::-1]  # upstream: the second


def test_the_same_line_written_in_the_next_function_lands_nothing(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    upstream.commit("jit: comm specs", {"pkg/comm.py": GATES})
    base = add_patchset(workspace, upstream, tmp_path, "mixed",
                        [("jit: admit SM120 in gen_mixed_comm_module", {"pkg/comm.py": MIXED})])
    assert TRTLLM.count(WIDE) == 1 and TRTLLM.index(WIDE) > TRTLLM.index("gen_trtllm")
    shas = fast_import(upstream, [*filler(3), Change("comm: extend trtllm to SM12x (#3903)",
                                                     {"pkg/comm.py": TRTLLM}), *filler(2, start=3)])
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "rebased", res
    assert not res["upstreamed"]
    text = applied_file(upstream, workspace, "mixed", res["version"], "pkg/comm.py", tmp_path)
    assert text.count(WIDE) == 2, "both specs are widened: upstream's and the patch's"
    patch = next(version_dir(workspace, "mixed", base).glob("*.patch")).read_text()
    evidence = measure(Git(upstream.path), patch, "p", base, shas[-1])
    assert (evidence.lines, evidence.present, evidence.removed, evidence.gone) == (1, 0, 1, 0)
    assert evidence.landed_by is None
    assert evidence.missing == ("pkg/comm.py (gen_mixed_comm_module)",)
    assert "gen_mixed_comm_module" in evidence.why_not()


F = ('def f(values):\n'
     '    a = 1\n'
     '    x = old(values)\n'
     '    b = 2\n'
     '    return x + a + b\n')
OURS = F.replace("    x = old(values)\n", "    x = new(values)\n    y = extra(values)\n")
# Upstream writes the patch's lines in f, and keeps the line the patch removes.
THEIRS = F.replace("a = 1", "a = 11").replace("b = 2", "b = 22").replace(
    "    return", "    x = new(values)\n    y = extra(values)\n    return")


def test_removed_lines_that_still_stand_at_their_place_keep_it_a_conflict(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    upstream.commit("core: f", {"pkg/f.py": F})
    base = add_patchset(workspace, upstream, tmp_path, "f", [("f: new", {"pkg/f.py": OURS})])
    shas = fast_import(upstream, [*filler(2), Change("f: new and tidy (#8)",
                                                     {"pkg/f.py": THEIRS}), *filler(2, start=2)])
    code, res = sync_json(workspace)
    assert code == 1 and res["result"] == "conflict", res
    evidence = res["conflict"]["evidence"]
    assert (evidence["present"], evidence["lines"]) == (2, 2)
    assert (evidence["gone"], evidence["removed"]) == (0, 1)
    assert evidence["landed_by"] is None
    patch = next(version_dir(workspace, "f", base).glob("*.patch")).read_text()
    measured = measure(Git(upstream.path), patch, "p", base, shas[-1])
    assert measured.why_not() == "only 0 of its 1 removed line are gone"
