"""Whether an upstream asks for ``Signed-off-by``, read from its own files at a commit.

A project that takes the Developer Certificate of Origin says so in its contributing
guide (vLLM's CONTRIBUTING.md: "Commits must include a ``Signed-off-by:`` header
which certifies agreement with the terms of the DCO"; the kernel's "Sign your work -
the Developer's Certificate of Origin"), or runs the DCO GitHub App, configured by
``.github/dco.yml``.  The guide is read where GitHub looks for it (the root,
``docs/``, ``.github/``); nothing is written per upstream.  flashinfer's
CONTRIBUTING.md and sglang's docs/CONTRIBUTING.md name none of it: their patches carry
no sign-off.

The sign-off is the user's: ``user.name`` and ``user.email`` as git has them for the
workspace's repository (the upstream cache's settings and the global ones when the
workspace is in none).  An identity git would guess from the host is no sign-off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from contrib.errors import UsageError
from contrib.git.repo import Git, enclosing_repo

# Where GitHub finds a repository's contributing guide (and links it on a new PR).
GUIDES = tuple(f"{folder}{stem}{suffix}" for folder in ("", "docs/", ".github/")
               for stem in ("CONTRIBUTING", "contributing", "Contributing")
               for suffix in ("", ".md", ".rst", ".txt", ".adoc"))
_ASKS = re.compile(r"Signed-off-by|Developer'?s? Certificate of Origin|\bDCO\b|--signoff\b"
                   r"|\bgit commit -s\b", re.I)
DCO_APP = ".github/dco.yml"  # the DCO GitHub App's settings: the app checks every commit


@dataclass(frozen=True)
class Asked:
    """Where the upstream asks for the sign-off: a file, its line, and the words there."""

    path: str
    line: int  # 0: the file itself says it (the DCO app's settings)
    words: str

    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


def asks_for_signoff(git: Git, commit: str) -> Asked | None:
    """The first place the upstream's files at ``commit`` ask for ``Signed-off-by`` (its
    contributing guide where GitHub looks for one, then the DCO app's settings), or None.
    One request to the blob reader, no process."""
    found = git.read_blobs(commit, [*GUIDES, DCO_APP])
    for path in GUIDES:
        text = (found.get(path) or b"").decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), 1):
            match = _ASKS.search(line)
            if match:
                return Asked(path, number, match.group(0))
    if found.get(DCO_APP) is not None:
        return Asked(DCO_APP, 0, "the DCO app's settings")
    return None


def signer(git: Git, workspace: Path) -> str | None:
    """``Name <email>`` from git's ``user.name`` and ``user.email`` (the workspace's
    repository's settings where it is in one, else ``git``'s, the upstream cache's and
    the global ones); None when either is unset."""
    top = enclosing_repo(workspace)
    repo = Git(top) if top is not None else git
    values = []
    for key in ("user.name", "user.email"):
        status, out, _ = repo.try_run("config", key)
        if status != 0 or not out.strip():
            return None
        values.append(out.strip())
    return f"{values[0]} <{values[1]}>"


def required_signer(git: Git, workspace: Path, asked: Asked, upstream: str) -> str:
    """The user's sign-off for an upstream that asks for one; UsageError (exit 2) when git
    has no identity to sign with."""
    who = signer(git, workspace)
    if who is None:
        raise UsageError(f"{upstream}: {asked.where()} asks for Signed-off-by "
                         f"({asked.words!r}), and git has no user.name/user.email to sign "
                         "with; set them (`git config user.name \"Your Name\"`, `git config "
                         "user.email you@example.com`) and run again. Nothing was written")
    return who
