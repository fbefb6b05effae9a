"""The reliability suite's fixtures: the planted token and its session-wide audit
(:mod:`testing.audit` says what is audited and how), and the figures' summary."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import testing.workspace as harness
from testing.audit import AUDIT, FIGURES, PLANTED, Audit
from testing.fake_github import FakeGitHub


@pytest.fixture(scope="session")
def token_audit() -> Iterator[Audit]:
    """Session teardown: zero hits in every recorded output and every byte written."""
    yield AUDIT
    hits = [hit for root in sorted(AUDIT.roots) for hit in AUDIT.scan_tree(root)]
    output_hits = AUDIT.scan_outputs()
    FIGURES["token audit: files searched"] = AUDIT.files
    FIGURES["token audit: bytes searched"] = AUDIT.bytes
    FIGURES["token audit: outputs searched"] = len(AUDIT.outputs)
    FIGURES["token audit: hits"] = len(hits) + output_hits
    assert not hits, f"planted token found in: {hits[:10]}"
    assert output_hits == 0, "planted token found in a recorded output"


@pytest.fixture(autouse=True)
def planted_token(isolated: Path, tmp_path: Path, token_audit: Audit,
                  monkeypatch: pytest.MonkeyPatch) -> str:
    """GITHUB_TOKEN = the planted token; TMPDIR and every CLI output under audit."""
    monkeypatch.setenv("GITHUB_TOKEN", PLANTED)
    tmp = tmp_path / "TMPDIR"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    token_audit.roots.update({isolated, tmp_path})
    real = harness.run_contrib

    def recorded(*args: str, cwd: Path | None = None) -> harness.Result:
        result = real(*args, cwd=cwd)
        token_audit.record(result.out, result.err)
        return result

    monkeypatch.setattr(harness, "run_contrib", recorded)
    return PLANTED


@pytest.fixture
def planted_github() -> Iterator[FakeGitHub]:
    """A running fake GitHub that accepts exactly the planted token."""
    fake = FakeGitHub(PLANTED)
    fake.start()
    yield fake
    fake.stop()
