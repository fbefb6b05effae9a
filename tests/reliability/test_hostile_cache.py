"""Hand-edited, damaged or symlinked audit cache entries: discarded, never trusted,
never written through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contrib import environ
from contrib.arch import parse_arch
from contrib.audit.engine import audit_commit, cache_file
from contrib.git.repo import Git
from testing import miniupstream as mu
from testing.gitutil import Repo

SM120 = parse_arch("sm_120a")


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Git, str]:
    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))
    repo = Repo(tmp_path / "up")
    return Git(repo.path), repo.commit("base", mu.files("base"))


def _first_gate(doc: dict[str, Any]) -> dict[str, Any]:
    gate: dict[str, Any] = doc["gates"][0]
    return gate


DAMAGE = {
    "line is text": lambda d: _first_gate(d).update(line="12"),
    "line is a bool": lambda d: _first_gate(d).update(line=True),
    "file is null": lambda d: _first_gate(d).update(file=None),
    "class is a number": lambda d: _first_gate(d).update({"class": 5}),
    "units hold numbers": lambda d: _first_gate(d).update(units=[1, 2]),
    "opened_by is a list": lambda d: _first_gate(d).update(opened_by=[]),
    "an unknown field": lambda d: _first_gate(d).update(surprise=1),
    "a gate is a list": lambda d: d.update(gates=[[1, 2]]),
    "gates is a dict": lambda d: d.update(gates={"a": 1}),
    "notes is a number": lambda d: d.update(notes=3),
    "no gates": lambda d: d.pop("gates"),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_a_damaged_cache_entry_is_discarded_and_the_audit_redone(upstream: tuple[Git, str],
                                                                  name: str) -> None:
    git, commit = upstream
    first = audit_commit(git, commit, SM120)
    assert not first.cached and first.gates
    path = cache_file(first.tree, SM120)
    doc = json.loads(path.read_text())
    DAMAGE[name](doc)
    path.write_text(json.dumps(doc))
    again = audit_commit(git, commit, SM120)
    assert not again.cached and again.gates == first.gates
    assert audit_commit(git, commit, SM120).cached  # and the entry is whole again


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "\0\0", "", "null", '{"gates": 1}'])
def test_unreadable_cache_text_is_discarded(upstream: tuple[Git, str], text: str) -> None:
    git, commit = upstream
    first = audit_commit(git, commit, SM120)
    cache_file(first.tree, SM120).write_text(text)
    assert audit_commit(git, commit, SM120).gates == first.gates


def test_a_symlinked_audit_cache_folder_is_never_written_through(upstream: tuple[Git, str],
                                                                 tmp_path: Path) -> None:
    git, commit = upstream
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    environ.cache_root().mkdir(parents=True)
    (environ.cache_root() / "audit").symlink_to(elsewhere, target_is_directory=True)
    result = audit_commit(git, commit, SM120)
    assert result.gates and list(elsewhere.iterdir()) == []


def test_a_symlinked_cache_entry_is_neither_read_nor_written_through(upstream: tuple[Git, str],
                                                                      tmp_path: Path) -> None:
    git, commit = upstream
    first = audit_commit(git, commit, SM120)
    path = cache_file(first.tree, SM120)
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({"gates": [], "notes": []}))
    path.unlink()
    path.symlink_to(planted)
    again = audit_commit(git, commit, SM120)
    assert not again.cached and again.gates == first.gates  # the planted answer is not believed
    assert json.loads(planted.read_text()) == {"gates": [], "notes": []}
