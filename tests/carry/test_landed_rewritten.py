"""A patch upstream landed, reverted, relanded and then rewrote in place is still found
landed, by the commit whose own diff brought its lines; what several commits wrote
between them is never called upstreamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.gitutil import Repo
from testing.histories import Change, fast_import, filler
from testing.synchelp import AFTER_F3, CORE, HELPER, OURS, REVIEWED, add_patchset, sync_json
from testing.workspace import Workspace


def _reindent(text: str, lines: list[str]) -> str:
    """``text`` with each of ``lines`` indented two spaces less (a reformat)."""
    for line in lines:
        assert line in text
        text = text.replace(line, line.replace("    ", "  ", 1))
    return text


def _patchset(ws: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(ws, upstream, tmp_path, "scaled", [("core: add scaled()", {"pkg/core.py": OURS})])


def test_landed_reverted_relanded_then_rewritten_in_place_is_upstream(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    _patchset(workspace, upstream, tmp_path)
    first = _reindent(REVIEWED, ['    """Scale every value by factor."""\n',
                                 '    if factor == 0:\n', '    out = []\n'])
    second = _reindent(first, ["    for value in values:\n", "    return out\n"])
    shas = fast_import(upstream, [
        *filler(3), Change("core: add scaled() (#4100)", {"pkg/core.py": REVIEWED}),
        *filler(2, start=3), Change('Revert "core: add scaled() (#4100)"', {"pkg/core.py": CORE}),
        *filler(2, start=5), Change("core: add scaled() again (#4280)", {"pkg/core.py": REVIEWED}),
        *filler(2, start=7), Change("style: indent scaled", {"pkg/core.py": first}),
        Change("style: indent the loop", {"pkg/core.py": second}), *filler(2, start=9)])
    reland, later = shas[9], [shas[12], shas[13]]
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "upstreamed", res
    [up] = res["upstreamed"]
    assert up["how"] == "landed" and up["commit"]["sha"] == reland and up["commit"]["pr"] == 4280
    assert [c["sha"] for c in up["changed_by"]] == later
    assert up["share"] == pytest.approx(7 / 8, abs=0.001)


BIG = ('def scaled(values, factor, offset=0):\n'
       '    """Scale every value by factor, then shift it by offset."""\n'
       '    if factor == 0:\n'
       '        raise ValueError("factor must not be zero")\n'
       '    if not values:\n'
       '        return []\n'
       '    out = []\n'
       '    for value in values:\n'
       '        scaled_value = value * factor\n'
       '        out.append(scaled_value + offset)\n'
       '    return out\n\n\n')


def test_the_squash_that_wrote_most_lines_is_named_when_a_later_one_adds_one_more(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    ours = CORE.replace(AFTER_F3, BIG + AFTER_F3)
    add_patchset(workspace, upstream, tmp_path, "scaled", [("core: add scaled()",
                                                            {"pkg/core.py": ours})])
    reviewed = ours.replace('"factor must not be zero"', '"factor is zero"')
    empty = "        return []\n"
    shas = fast_import(upstream, [
        *filler(2), Change("core: add scaled() (#51)", {"pkg/core.py": reviewed.replace(empty, "")}),
        *filler(2, start=2), Change("core: scaled() of nothing", {"pkg/core.py": reviewed}),
        *filler(1, start=4)])
    squash, later = shas[2], shas[5]
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "upstreamed", res
    [up] = res["upstreamed"]
    assert up["how"] == "landed", up
    assert up["commit"]["sha"] == squash and [c["sha"] for c in up["changed_by"]] == [later]
    assert up["share"] == pytest.approx(10 / 11, abs=0.001)  # all but the reworded raise


def test_all_lines_upstream_from_two_commits_is_not_upstreamed_and_says_why(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    _patchset(workspace, upstream, tmp_path)
    head, tail = HELPER.split("    out = []\n")
    half = CORE.replace(AFTER_F3, head + "    return list(values)\n\n\n" + AFTER_F3)
    # every line of ours, but not in our order: not the patch's effect, nor its landing
    whole = CORE.replace(AFTER_F3, head + tail.replace("    return out\n",
                                                       "    out = []\n    return out\n") + AFTER_F3)
    fast_import(upstream, [Change("core: validate factors", {"pkg/core.py": half}), *filler(3),
                           Change("core: scale for real", {"pkg/core.py": whole})])
    code, res = sync_json(workspace)
    assert res["result"] != "upstreamed" and not res.get("upstreamed"), res.get("upstreamed")
    notes = " ".join(res["notes"])
    assert "100% of its added lines are upstream" in notes, notes
    assert "below the landed_share" not in notes  # 100% is not below 80%
    assert "no single upstream commit brought more than half of them" in notes
