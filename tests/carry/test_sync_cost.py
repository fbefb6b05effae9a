"""What a carry costs in git processes: the figure a warm sync's time follows.

What a carry adds to a no-op sync is its own git runs and the carry engine a no-op
does not load (``benchmarks/sync_bench.py`` prints ``carry - no-op``).  Counted from
the ``-v`` trace, one line per git command, so the guard is exact, not a timing.
"""

from __future__ import annotations

from pathlib import Path

from testing.gitutil import Repo
from testing.synchelp import F3_PATCH, add_patchset, commit_workspace
from testing.workspace import Workspace


def _git_runs(ws: Workspace) -> list[str]:
    result = ws.run("sync", "-v", "--no-fetch")
    assert result.code == 0, result.err
    return [line.split(" ", 4)[-1] for line in result.err.splitlines()
            if line.startswith("+ git ")]


def test_a_one_patch_carry_asks_git_only_what_it_needs(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    commit_workspace(workspace)
    upstream.commit("docs: a note", {"docs/note.md": "note\n"})
    assert workspace.run("sync", "--no-fetch").code == 0  # the cache sees the new commit
    upstream.commit("docs: another", {"docs/other.md": "other\n"})
    assert workspace.run("status").code == 0  # fetched, so the sync below is warm
    runs = _git_runs(workspace)
    # Two versions and keep = 5: nothing can be pruned, so no dates or tags are asked.
    assert not [r for r in runs if r.startswith(("for-each-ref", "log --no-walk"))], runs
    # A probe's index starts as no file, never a `read-tree --empty`.
    assert not [r for r in runs if r.startswith("read-tree --empty")], runs
    # Trees, their entries and a commit's tree come through the batch reader, the cache's
    # base and its distance from one rev-list, and the first-parent line is never listed
    # when the patch carries at the target.
    asked = [r.split()[0] for r in runs]
    for name in ("ls-tree", "diff-tree", "rev-parse --verify --quiet --end-of-options "
                 f"{upstream.head()}"):
        assert not [r for r in runs if r.startswith(name)], (name, runs)
    assert not [r for r in runs if r.startswith("rev-list --first-parent")], runs
    assert asked.count("rev-list") == 1, runs
    # Upstream did not touch the patch's file: the probe at the target is the base's
    # application again, answered without applying anything (25 processes before).
    assert not [r for r in runs if r.startswith("apply --cached --whitespace=nowarn --3way")]
    # The version written keeps its DEP-3 fields as they were: one interpret-trailers
    # run reads them all (contrib.carry.dep3), nothing is rewritten.
    assert asked.count("interpret-trailers") == 1 and asked.count("mailinfo") == 1, runs
    assert len(runs) <= 13, "\n".join(runs)


def test_a_carry_onto_a_changed_file_still_applies_it_three_way(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    upstream.commit("core: a header", {"pkg/core.py": "# core\n" + F3_PATCH.replace(
        "    return 33\n", "    return 3\n")})
    assert workspace.run("status").code == 0
    runs = _git_runs(workspace)
    assert [r for r in runs if r.startswith("apply --cached --whitespace=nowarn --3way")], runs
    assert len([r for r in runs if r.startswith("mktree")]) == 1, runs
