"""The reliability suite's planted token and its session-wide audit.

Every test under tests/reliability/ runs with one session token exported as
``GITHUB_TOKEN`` (the fake GitHub servers accept exactly it), and with
``TMPDIR`` inside its own tmp folder, so every byte contrib writes -- the
workspace, the cache, forks, temp files of killed runs, contrib-error.log --
lands under a folder this audit knows.  Every CLI output (in-process runs
through tests.conftest.run_contrib, subprocess runs through
tests.reliability.crash) is recorded too.  When the session ends, every
recorded output and every byte of every folder is searched for the token and
its Basic-auth encodings: the audit fails on any hit.

The figures the issue asks for (trials, kills, inputs rejected, fuzz
examples, faults, token hits) are collected in :data:`FIGURES` and printed
in the terminal summary.
"""

from __future__ import annotations

import base64
import secrets
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import tests.conftest as root_conftest
from tests.fake_github import FAKE_TOKEN_PREFIX, FakeGitHub

PLANTED = FAKE_TOKEN_PREFIX + "Planted" + secrets.token_hex(10)
FIGURES: Counter[str] = Counter()


def token_forms(token: str = PLANTED) -> list[bytes]:
    """The token and every encoding a leak could take (git's Basic auth header)."""
    forms = [token.encode()]
    for user in ("x-access-token", "oauth2", ""):
        forms.append(base64.b64encode(f"{user}:{token}".encode()))
    return forms


@dataclass
class Audit:
    """Outputs and folders to search for the planted token at the end of the session."""

    outputs: list[str] = field(default_factory=list)
    roots: set[Path] = field(default_factory=set)
    files: int = 0
    bytes: int = 0

    def record(self, *texts: str | bytes | None) -> None:
        for text in texts:
            if text:
                self.outputs.append(text.decode("utf-8", "replace")
                                    if isinstance(text, bytes) else text)

    def scan_tree(self, root: Path) -> list[str]:
        """Paths under ``root`` holding the token (symlinks not followed)."""
        hits = []
        if not root.exists():
            return hits
        for path in root.rglob("*"):
            if path.is_symlink() or not path.is_file():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            self.files += 1
            self.bytes += len(data)
            if any(form in data for form in token_forms()):
                hits.append(str(path))
        return hits

    def scan_outputs(self) -> int:
        forms = [f.decode() for f in token_forms()]
        return sum(1 for text in self.outputs for form in forms if form in text)


AUDIT = Audit()


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
    real = root_conftest.run_contrib

    def recorded(*args: str, cwd: Path | None = None) -> root_conftest.Result:
        result = real(*args, cwd=cwd)
        token_audit.record(result.out, result.err)
        return result

    monkeypatch.setattr(root_conftest, "run_contrib", recorded)
    return PLANTED


@pytest.fixture
def planted_github() -> Iterator[FakeGitHub]:
    """A running fake GitHub that accepts exactly the planted token."""
    fake = FakeGitHub(PLANTED)
    fake.start()
    yield fake
    fake.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("reliability figures")
        for key in sorted(FIGURES):
            terminalreporter.write_line(f"{key}: {FIGURES[key]}")
