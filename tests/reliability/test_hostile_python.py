"""Hostile upstream Python: validate's stages and the audit give a finding, never exit 3.

CPython's parser raises MemoryError on 100,000 unary minus signs and
RecursionError on a long operator chain; contrib must read such a file as
unparsable, at its path, and go on."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from contrib.analysis.pyparse import Unparsable, compile_python, parse_python
from contrib.analysis.tree import DictTree, GitTree
from contrib.arch import parse_arch
from contrib.audit.engine import audit_commit
from contrib.git.repo import Git
from contrib.validate.stages import Inputs, run_pipeline
from contrib.workspace.validation import Settings
from testing import miniupstream as mu
from testing.gitutil import Repo

HOSTILE = {
    "unary-minus": "x = " + "-" * 100_000 + "1\n",
    "not-chain": "x = " + "not " * 100_000 + "1\n",
    "plus-chain": "x = 1" + " + 1" * 200_000 + "\n",
    "parentheses": "x = " + "(" * 100_000 + ")" * 100_000 + "\n",
    "nul-bytes": "x = 1\0\n",
    "lists": "x = " + "[" * 5000 + "]" * 5000 + "\n",
    "gate-then-minus": "def gen(major):\n    if major >= 9:\n        return " + "-" * 100_000 + "1\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_shared_parser_turns_hostile_python_into_a_reason(name: str) -> None:
    parsed = parse_python("flashinfer/jit/comm.py", HOSTILE[name])
    compiled = compile_python("flashinfer/jit/comm.py", HOSTILE[name])
    assert isinstance(parsed, Unparsable) and isinstance(compiled, Unparsable)
    assert str(compiled).startswith("flashinfer/jit/comm.py:") and compiled.why


def _diff(tmp_path: Path, after: dict[str, str]) -> str:
    repo = Repo(tmp_path / "up")
    base = repo.commit("base", mu.files("base"))
    head = repo.commit("hostile", after)
    return subprocess.run(["git", "-C", str(repo.path), "diff", base, head], capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.parametrize("name", ["unary-minus", "plus-chain", "gate-then-minus"])
def test_validate_reads_hostile_python_as_a_syntax_finding(tmp_path: Path, name: str) -> None:
    gate = next(p for p in mu.files("base") if p.endswith(".py"))
    after = {**mu.files("base"), gate: HOSTILE[name]}
    work = tmp_path / "work"
    work.mkdir()
    results = {r.name: r for r in run_pipeline(Inputs(
        parse_arch("sm_120a"), DictTree(mu.files("base")), DictTree(after), _diff(tmp_path, after),
        "1 patch applied", settings=Settings(), workdir=work, gpus=None))}
    syntax = results["syntax"]
    assert syntax.status == "failed" and gate in syntax.reason
    assert any("nested too deeply" in f.message or "does not compile" in f.message
               for f in syntax.findings)


@pytest.mark.parametrize("name", ["unary-minus", "plus-chain", "gate-then-minus"])
def test_the_audit_notes_hostile_python_and_audits_the_rest(tmp_path: Path, name: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))
    repo = Repo(tmp_path / "up")
    files = {**mu.files("base"), "pkg/hostile.py": "major = 9  # may gate\n" + HOSTILE[name]}
    commit = repo.commit("hostile", files)
    result = audit_commit(Git(repo.path), commit, parse_arch("sm_120a"))
    noted = any("pkg/hostile.py" in note and "not audited" in note for note in result.notes)
    assert noted, result.notes  # RecursionError of a long chain too: never dropped silently
    assert result.gates  # the mini upstream's own gate is still found
    assert isinstance(GitTree(Git(repo.path), commit).read_text("pkg/hostile.py"), str)
