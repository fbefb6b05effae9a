"""The reliability suite's planted token and its session-wide audit.

Every test under tests/reliability/ runs with one session token exported as
``GITHUB_TOKEN`` (the fake GitHub servers accept exactly it), and with
``TMPDIR`` inside its own tmp folder, so every byte contrib writes -- the
workspace, the cache, forks, temp files of killed runs, contrib-error.log --
lands under a folder this audit knows.  Every CLI output (in-process runs
through testing.workspace.run_contrib, subprocess runs through
testing.crash) is recorded too.  When the session ends, every
recorded output and every byte of every folder is searched for the token and
its Basic-auth encodings: the audit fails on any hit.

The figures the issue asks for (trials, kills, inputs rejected, fuzz
examples, faults, token hits) are collected in :data:`FIGURES` and printed
in the terminal summary.
"""

from __future__ import annotations

import base64
import secrets
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from testing.fake_github import FAKE_TOKEN_PREFIX

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
