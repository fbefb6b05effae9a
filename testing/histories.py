"""Small builders of the upstream histories the sync tests need.

Long histories are written with ``git fast-import`` (hundreds of commits in
milliseconds, instead of one ``git commit`` process each), with the same
deterministic clock as :class:`testing.gitutil.Repo`, so SHAs are stable.
All content is our own synthetic text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from testing.gitutil import BASE_EPOCH, Repo, git


@dataclass
class Change:
    """One upstream commit to write: message, files (None deletes), optional merge parent."""

    message: str
    files: Mapping[str, str | None] = field(default_factory=dict)
    merge: str | None = None
    who: str | None = None


def _data(text: str) -> str:
    raw = text.encode("utf-8")
    return f"data {len(raw)}\n{text}\n"


def fast_import(repo: Repo, changes: Iterable[Change], *, branch: str = "main") -> list[str]:
    """Append ``changes`` to ``branch`` of ``repo``; returns the new shas in order.

    The checkout is reset to the new tip when ``branch`` is checked out.
    """
    start = git(repo.path, "rev-parse", f"refs/heads/{branch}")
    parts: list[str] = []
    count = 0
    for mark, change in enumerate(changes, 1):
        count = mark
        repo.tick += 1
        who = change.who or repo.who
        email = who.lower().replace(" ", ".") + "@example.com"
        stamp = f"{BASE_EPOCH + repo.tick * 60} +0000"
        parts.append(f"commit refs/heads/{branch}\nmark :{mark}\n"
                     f"author {who} <{email}> {stamp}\ncommitter {who} <{email}> {stamp}\n")
        parts.append(_data(change.message))
        if mark == 1:
            parts.append(f"from {start}\n")
        if change.merge:
            parts.append(f"merge {change.merge}\n")
        for path, content in change.files.items():
            if content is None:
                parts.append(f"D {path}\n")
            else:
                parts.append(f"M 100644 inline {path}\n" + _data(content))
        parts.append("\n")
    marks = repo.path / ".git" / "contrib-test-marks"
    git(repo.path, "fast-import", "--quiet", f"--export-marks={marks}", input="".join(parts))
    by_mark = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    if git(repo.path, "symbolic-ref", "--short", "HEAD") == branch:
        git(repo.path, "reset", "-q", "--hard", branch)
    return [by_mark[f":{i}"] for i in range(1, count + 1)]


def filler(count: int, *, start: int = 0, prefix: str = "notes") -> list[Change]:
    """``count`` harmless commits, each touching its own small file."""
    return [Change(f"{prefix}: entry {i}", {f"{prefix}/n{i % 37}.txt": f"entry {i}\n"})
            for i in range(start, start + count)]


def module(functions: Mapping[str, str]) -> str:
    """A Python module of top-level functions (name -> body lines, already indented)."""
    return "".join(f"def {name}():\n{body}\n\n" for name, body in functions.items())


LOOKALIKE_BODY = "".join(f"    {v} = {i}\n" for i, v in enumerate("abcdefg", 1)) + "    return a\n"


def lookalike() -> str:
    """Two functions whose bodies are identical, line for line."""
    return module({"alpha": LOOKALIKE_BODY, "beta": LOOKALIKE_BODY})


def replace_in(text: str, section: str, old: str, new: str) -> str:
    """Replace ``old`` by ``new`` only inside ``def section():`` of ``text``."""
    head = f"def {section}():\n"
    start = text.index(head)
    end = text.find("\ndef ", start + len(head))
    end = len(text) if end < 0 else end
    body = text[start:end]
    assert old in body, (old, section)
    return text[:start] + body.replace(old, new, 1) + text[end:]


def rewrite_history(repo: Repo, files: Mapping[str, str], message: str) -> str:
    """Replace ``main`` by a fresh root commit holding ``files`` (a force-push upstream)
    and drop the old objects, as a server would after a rewrite and gc."""
    git(repo.path, "checkout", "-q", "--orphan", "rewritten")
    git(repo.path, "rm", "-rq", "--cached", ".")
    for stale in repo.path.iterdir():
        if stale.name != ".git":
            _remove(stale)
    sha = repo.commit(message, dict(files))
    git(repo.path, "branch", "-M", "rewritten", "main")
    git(repo.path, "reflog", "expire", "--expire=now", "--all")
    git(repo.path, "gc", "-q", "--prune=now")
    return sha


def _remove(path: Path) -> None:
    if path.is_dir():
        for child in path.iterdir():
            _remove(child)
        path.rmdir()
    else:
        path.unlink()
