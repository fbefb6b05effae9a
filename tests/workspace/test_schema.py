"""patchset.toml's typed reader: objects in, the same objects out, file:line on faults."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import tomlkit

from contrib.errors import ConfigError
from contrib.workspace.model import Workspace as RealWorkspace
from contrib.workspace.schema import (
    Decided,
    Done,
    Landed,
    PrRecord,
    SyncDetails,
    SyncRecord,
    SyncResult,
    UpstreamStatus,
    decisions_table,
    read_meta,
)
from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch

SHA = "0123456789abcdef0123456789abcdef01234567"


def _read(text: str) -> object:
    return read_meta(Path("ps.toml"), text, tomlkit.parse(text).unwrap())


def test_sync_record_writes_back_what_it_read() -> None:
    record = SyncRecord(SyncResult.PARTIAL, SHA, SHA, "2024-01-01T00:00:00+00:00", 3, 2,
                        SyncDetails(SHA, ("0001-a.patch",), (Landed("0002-b.patch", "exact",
                                                                    SHA, "fix", 7, "A", "d"),),
                                    None, ("note",)))
    text = tomlkit.dumps({"current": SHA, "sync": record.to_table()})
    meta = _read(text)
    assert meta.sync == record  # type: ignore[attr-defined]
    assert "from = " in text and "partially-upstreamed" in text


@pytest.mark.parametrize(("text", "line", "says"), [
    (f"current = '{SHA}'\n\n[sync]\nresult = 'moved'\nfrom = '{SHA}'\n", 4, "sync.result"),
    (f"current = '{SHA}'\n[pr]\nurl = 'u'\nnumber = 0\n", 4, "pr.number must be an integer >= 1"),
    (f"current = '{SHA}'\n[[requires]]\nupstream = 'x'\n", 2, "requires.commit is required"),
    (f"current = '{SHA}'\nupstream_status = 'Merged'\n", 2, "upstream_status must be one of"),
    (f"current = '{SHA}'\n[decisions]\nwhy = 2\n", 3, "decisions.why must be a string"),
    (f"current = '{SHA}'\n\n[decisions.\"pkg/a.py:3 f\"]\ndone = 3\n", 4,
     'decisions."pkg/a.py:3 f".done must be a string'),
    (f"current = '{SHA}'\n\n[decisions.\"pkg/a.py:3 f\"]\ndone = 'tried'\n", 4,
     'decisions."pkg/a.py:3 f".done must be one of widened, left'),
    (f"current = '{SHA}'\n\n[decisions.\"pkg/a.py:3 f\"]\nwhat = 'x'\n", 3,
     'decisions."pkg/a.py:3 f".done is required'),
    (f"current = '{SHA}'\n\n[decisions.\"pkg/a.py:3 f\"]\ndone = 'left'\nhow = 1\n", 5,
     "unknown key 'how'"),
])
def test_a_fault_names_file_line_and_key(text: str, line: int, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _read(text)
    assert str(caught.value).startswith(f"ps.toml:{line}: ")
    assert says in str(caught.value)


def test_setters_keep_the_users_comments(workspace: Workspace, upstream: Repo,
                                         tmp_path: Path) -> None:
    patch = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")[0]
    assert workspace.run("new", "proj", "x", "--base", "main", "--patch", str(patch)).code == 0
    path = workspace.root / "patchsets" / "proj" / "x" / "patchset.toml"
    path.write_text(path.read_text() + "\n# reviewers: read this\n[pr]\nurl = 'u' # kept\n")
    ps = RealWorkspace(workspace.root).patchset("proj/x")
    assert ps.pr == PrRecord(url="u")
    ps.set_pr(replace(ps.pr, number=5, state="open", pushed_history=(SHA,)))
    ps.set_upstream_status(UpstreamStatus.SUBMITTED)
    ps.save_meta()
    text = path.read_text()
    assert "# reviewers: read this" in text and "# kept" in text
    again = RealWorkspace(workspace.root).patchset("proj/x")
    assert again.pr == PrRecord(url="u", number=5, state="open", pushed_history=(SHA,))
    assert again.upstream_status is UpstreamStatus.SUBMITTED


def test_a_drafts_requirement_names_its_patchset_alone() -> None:
    meta = _read(f"current = '{SHA}'\n[[requires]]\nupstream = 'lower'\n"
                 "patchset = 'lower/enable-fusion'\npin_file = 'pyproject.toml'\n"
                 "pin_package = 'lower_lib'\n")
    [req] = meta.requires  # type: ignore[attr-defined]
    assert (req.commit, req.patchset) == ("", "lower/enable-fusion")
    assert req.describe() == "lower patchset lower/enable-fusion"


DECIDED = (Decided("pkg/jit.py:5 gen_norm_module", Done.WIDENED,
                    "pkg/jit.py:5: majors [9, 10] -> [9, 10, 12] (gen_norm_module)",
                    "the JIT list omits 12; class gate-only"),
           Decided("pkg/api.py:30 api", Done.LEFT, why="pkg/api.py:30: names sm_120a's family"))


def test_decisions_write_back_what_they_read_in_order() -> None:
    doc = tomlkit.document()
    doc["current"] = SHA
    doc["decisions"] = decisions_table(DECIDED)
    text = tomlkit.dumps(doc)
    assert '[decisions."pkg/jit.py:5 gen_norm_module"]\ndone = "widened"\n' in text
    meta = _read(text)
    assert list(meta.decisions.values()) == list(DECIDED)  # type: ignore[attr-defined]
    assert [d.left for d in meta.decisions.values()] == [False, True]  # type: ignore[attr-defined]


def test_decisions_written_as_sentences_before_read_as_the_same_values() -> None:
    """A patchset.toml ``contrib enable`` wrote before its tables, and a person's note."""
    meta = _read(f"current = '{SHA}'\n[decisions]\n"
                 '"pkg/jit.py:5 gen_norm_module" = "pkg/jit.py:5: majors [9, 10] -> '
                 '[9, 10, 12] (gen_norm_module). Why: the JIT list omits 12; class gate-only"\n'
                 '"pkg/api.py:30 api" = "left as it is: pkg/api.py:30: names sm_120a\'s family"\n'
                 'left_out = "the help text still says SM90; text only"\n')
    decisions = meta.decisions  # type: ignore[attr-defined]
    assert list(decisions.values())[:2] == list(DECIDED)
    assert decisions["left_out"] == Decided("left_out", Done.NOTED,
                                             "the help text still says SM90; text only")
    # a note is written back as the string it was
    assert decisions_table([decisions["left_out"]]) == {
        "left_out": "the help text still says SM90; text only"}
