"""Who owns the paths a patchset touches, by the upstream's CODEOWNERS at the base.

GitHub reads the first of ``.github/CODEOWNERS``, ``CODEOWNERS`` and
``docs/CODEOWNERS`` on the PR's base branch; each line is a pattern and its owners,
and the *last* pattern that matches a path decides it (a pattern with no owners
leaves the path unowned).  Patterns follow gitignore's rules as GitHub documents
them: a slash at the start or in the middle anchors a pattern at the root, one that
ends in a slash names a folder, ``*`` stays within a folder and ``**`` crosses them.
flashinfer's file opens with a catch-all ``*`` and ends with per-folder teams
(``flashinfer/comm/ @aleozlx ...``); sglang's anchors each line at the root
(``/python/sglang/srt/layers @...``) and names ``.github`` unanchored.

The body names the owners without ``@`` mentions and no reviewer is requested: a
draft notifies nobody until its author says it is ready.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contrib.git.repo import Git

PLACES = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")


@dataclass(frozen=True)
class Rule:
    """One CODEOWNERS line: its pattern, compiled, and its owners."""

    line: int
    pattern: str
    regex: re.Pattern[str]
    owners: tuple[str, ...]


@dataclass(frozen=True)
class Owned:
    """The owners of one touched path, and the line that decided them (None: no line
    matched)."""

    path: str
    owners: tuple[str, ...]
    rule: Rule | None


@dataclass(frozen=True)
class CodeOwners:
    """The CODEOWNERS file GitHub would read at a commit."""

    path: str
    rules: tuple[Rule, ...]

    def owner_of(self, path: str) -> Owned:
        """``path``'s owners: the last rule matching it wins."""
        rule = next((r for r in reversed(self.rules) if r.regex.fullmatch(path)), None)
        return Owned(path, rule.owners if rule is not None else (), rule)

    def owners_of(self, paths: Sequence[str]) -> list[Owned]:
        return [self.owner_of(p) for p in paths]


def read_codeowners(git: Git, rev: str) -> CodeOwners | None:
    """The CODEOWNERS GitHub uses at ``rev`` (the first of :data:`PLACES`), or None."""
    found = git.read_blobs(rev, list(PLACES))
    for place in PLACES:
        data = found.get(place)
        if data is not None:
            return CodeOwners(place, parse(data.decode("utf-8", errors="replace")))
    return None


def parse(text: str) -> tuple[Rule, ...]:
    """The rules of a CODEOWNERS file, in file order; comments and blank lines dropped."""
    rules = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = _uncomment(raw).strip()
        if not line:
            continue
        pattern, *owners = line.split()
        rules.append(Rule(number, pattern, _compile(pattern), tuple(owners)))
    return tuple(rules)


def _uncomment(line: str) -> str:
    """The line without its ``#`` comment (``\\#`` is a literal hash)."""
    out, escaped = [], False
    for ch in line:
        if ch == "#" and not escaped:
            break
        out.append(ch)
        escaped = ch == "\\" and not escaped
    return "".join(out)


def _compile(pattern: str) -> re.Pattern[str]:
    """A pattern as a regex over repository paths (no leading slash)."""
    folder = pattern.endswith("/")
    body = pattern.strip("/")
    anchored = pattern.startswith("/") or "/" in body
    out, i = [], 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        elif body[i] == "\\" and i + 1 < len(body):
            out.append(re.escape(body[i + 1]))
            i += 2
        else:
            out.append(re.escape(body[i]))
            i += 1
    head = "" if anchored else "(?:.*/)?"
    tail = "/.+" if folder else "(?:/.+)?"  # a folder's pattern owns what lies below it
    return re.compile(head + "".join(out) + tail)
