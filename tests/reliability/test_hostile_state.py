"""Hand-edited state: refused with exit 2 naming the file, never a traceback or exit 3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testing.gitutil import Repo
from testing.histories import Change, fast_import, filler
from testing.synchelp import CORE, F3_PATCH, add_patchset, sync_json
from testing.workspace import Workspace


def _conflict(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Path:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    fast_import(upstream, [*filler(2), Change("core: f3 returns 3 + 0",
                                              {"pkg/core.py": CORE.replace("    return 3\n",
                                                                           "    return 3 + 0\n")})])
    code, res = sync_json(workspace)
    assert code == 1 and res["result"] == "conflict"
    return workspace.root / ".contrib" / "sync-state.json"


EDITS: dict[str, Any] = {
    "index past the series": lambda p: p.update(index=7),
    "index far past the series": lambda p: p.update(index=10**30),
}


@pytest.mark.parametrize("name", sorted(EDITS))
@pytest.mark.parametrize("how", ["--continue", "--abort"])
def test_a_pending_conflict_edited_by_hand_is_refused_naming_the_file(
        workspace: Workspace, upstream: Repo, tmp_path: Path, name: str, how: str) -> None:
    state = _conflict(workspace, upstream, tmp_path)
    doc = json.loads(state.read_text())
    (pending,) = doc["pending"].values()
    EDITS[name](pending)
    state.write_text(json.dumps(doc))
    result = workspace.run("sync", how)
    if how == "--abort" and result.code == 0:
        return  # dropping the conflict needs no patch of the series: nothing to refuse
    assert result.code == 2, (result.code, result.err)
    assert str(state) in result.err and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000,
                                  '{"state_version": 1, "pending": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  '{"state_version": 1, "pending": {"a/b": ' + "{\"x\": " * 50_000 + "1" + "}" * 50_001 + "}"])
def test_state_nested_100000_deep_is_refused_naming_the_file(workspace: Workspace, text: str) -> None:
    state = workspace.root / ".contrib" / "sync-state.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(text)
    for args in (("sync", "--continue"), ("sync", "--abort")):
        result = workspace.run(*args)
        assert result.code == 2, (args, result.code, result.err[-500:])
        assert str(state) in result.err and "Traceback" not in result.err


SHA = "b" * 40
MEMORIES = {
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "not JSON": "{",
    "a list": "[1]",
    "commit a number": '{"commit": 1, "since": null}',
    "commit not a sha": '{"commit": "HEAD~1", "since": null}',
    "commit with a NUL": '{"commit": "\\u0000", "since": null}',
    "since an option": '{"commit": "' + SHA + '", "since": "--output=/tmp/x"}',
    "an extra key": '{"commit": "' + SHA + '", "since": null, "x": 1}',
}


@pytest.mark.parametrize("name", sorted(MEMORIES))
def test_a_damaged_audit_memory_is_refused_naming_the_file(tmp_path: Path, name: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from contrib.autopilot import audits
    from contrib.workspace.model import Workspace as Model
    from testing.auditupstream import audit_upstream, audit_workspace

    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))
    mini = audit_upstream(tmp_path / "mini")
    root = audit_workspace(tmp_path, mini, "http://127.0.0.1:9", "me/ws")
    ws = Model(root)
    first = audits.audit_one(ws, "mini", "sm_120a", fetch=True, remember=True)
    assert first.error is None or first.error == "", first.error
    (memory,) = (tmp_path / "cache" / "audit" / "last").iterdir()
    memory.write_text(MEMORIES[name])
    view = audits.audit_one(ws, "mini", "sm_120a", fetch=False, remember=True)
    assert view.error and str(memory) in view.error and "damaged" in view.error, view.error
    assert "a bug in contrib" not in view.error
