"""DEP-3 fields in a version's patch files: where each patch came from, whether it went
upstream, when its change last changed, and the sign-off an upstream asks for.

Debian's DEP-3 (https://dep-team.pages.debian.net/deps/dep3/) lets a ``git
format-patch`` file carry its fields as trailers at the end of the message, as
``gbp pq`` writes them; so they are part of each patch's commit message and survive
every ``git am``/``format-patch`` round trip of ``new``, ``sync`` and ``refresh``.
Whenever a version is written, :func:`stamped` brings them up to date:

* ``Origin`` is set once, when the patch enters the patchset (``upstream, <PR>`` for
  ``new --from-pr``, ``other, <branch>`` for ``--from-branch``, else ``vendor``), and
  kept after, a person's edit included;
* ``Forwarded`` is the patchset's PR once ``open-pr`` recorded one, else a URL already
  there, else what ``upstream_status`` says (``not-needed`` for a backport, ``no``
  while pending);
* ``Last-Update`` is the date of the record being written (the ``[[history]]``
  entry), where the patch's change differs from the same patch in the version it
  replaces (the file of the same name, its number aside: ``format-patch`` names it by
  its subject): the lines it removes and adds, file by file, not where they sit nor
  the context around them, so a rebase that only moves a patch keeps its date;
* ``Signed-off-by: <the user>`` where the upstream's files at the version's base ask
  for it (:mod:`contrib.carry.signoff`), next to any sign-off already there.

The fields are written by git (``git interpret-trailers`` on each message, then the
same apply and ``format-patch`` as ``new``): a field already right leaves the file's
bytes alone.  Patch files written before these fields existed have none; the next
version written gets them.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from contrib.carry.series import (
    EXPORT_ENV,
    MailPatch,
    apply_series,
    decode,
    export_series,
    parse_hunks,
    split_mail,
)
from contrib.carry.signoff import asks_for_signoff, required_signer
from contrib.git.repo import Git
from contrib.workspace.model import Patchset
from contrib.workspace.schema import UpstreamStatus

Files = list[tuple[str, bytes]]
Trailers = list[tuple[str, str]]
Change = tuple[object, ...]  # what a patch changes, wherever it sits (:func:`_change`)
ORIGIN, FORWARDED, LAST_UPDATE, SIGNED_OFF = "Origin", "Forwarded", "Last-Update", "Signed-off-by"
FIELDS = (ORIGIN, FORWARDED, LAST_UPDATE)  # contrib's bookkeeping; no upstream commit needs it


class Kind(StrEnum):
    """DEP-3's Origin categories."""

    UPSTREAM = "upstream"  # taken from the upstream's repository (a PR of it)
    BACKPORT = "backport"
    VENDOR = "vendor"  # made here, for the patchset
    OTHER = "other"  # taken from elsewhere (a fork's branch)


@dataclass(frozen=True)
class Origin:
    """Where a patch came from: a DEP-3 category and, where known, a URL or a place."""

    kind: Kind
    where: str = ""

    def text(self) -> str:
        return f"{self.kind}, {self.where}" if self.where else str(self.kind)


class Forward(StrEnum):
    """DEP-3's Forwarded values other than a URL."""

    NO = "no"  # not yet
    NOT_NEEDED = "not-needed"  # upstream's own change, or not for upstream
    YES = "yes"  # forwarded, where is not recorded


_NOT_NEEDED = {UpstreamStatus.BACKPORT, UpstreamStatus.INAPPROPRIATE, UpstreamStatus.UPSTREAMED}
_SENT = {UpstreamStatus.SUBMITTED, UpstreamStatus.ACCEPTED, UpstreamStatus.DENIED}


def forwarded(pr_url: str | None, status: UpstreamStatus) -> str:
    """The Forwarded value a patchset's state gives (a URL already in a patch is kept
    over a status; :func:`stamped` sees to that)."""
    if pr_url:
        return pr_url
    if status in _NOT_NEEDED:
        return Forward.NOT_NEEDED
    return Forward.YES if status in _SENT else Forward.NO


@dataclass(frozen=True)
class Stamp:
    """What a version write puts in its patches' fields."""

    date: str  # YYYY-MM-DD: the record being written
    forwarded: str  # a URL or a Forward value (:func:`forwarded`)
    origin: Origin  # for a patch that has no Origin yet
    signoff: str | None = None  # "Name <email>" where the upstream asks for it
    previous: Sequence[MailPatch] = ()  # the version this one replaces, as git am splits it


def vendor(target: str) -> Origin:
    """The Origin of a patch made here, for patchset ``target`` (``UPSTREAM/NAME``)."""
    return Origin(Kind.VENDOR, f"contrib patchset {target}")


def stamp_for(git: Git, ps: Patchset, base: str, at: str, *,
              previous: Sequence[MailPatch] | None = None) -> Stamp:
    """The stamp of a version of ``ps`` at ``base`` written at ``at`` (ISO), replacing
    ``previous`` (the current version's patches when None).  UsageError when the
    upstream asks for a sign-off and git has no identity."""
    pr = ps.pr
    if previous is None:
        previous = [split_mail(git, n, raw) for n, raw in ps.current.patch_texts()]
    return Stamp(at[:10], forwarded(pr.url if pr else None, ps.upstream_status),
                 vendor(f"{ps.upstream}/{ps.name}"),
                 signoff_at(git, ps.workspace.root, base, ps.upstream), previous)


def signoff_at(git: Git, workspace: Path, base: str, upstream: str) -> str | None:
    """The user's sign-off where the upstream's files at ``base`` ask for one, else None."""
    asked = asks_for_signoff(git, base)
    return required_signer(git, workspace, asked, upstream) if asked is not None else None


def stamped(git: Git, base: str, files: Files, stamp: Stamp) -> Files:
    """``files`` (a version at ``base``, in series order) with their fields brought up to
    date; the same list when every field already is (then one git run, reading every
    trailer: ``interpret-trailers`` reads a ``format-patch`` file's message as ``git am``
    would)."""
    if not files:
        return files
    texts = [decode(raw) for _, raw in files]
    read = trailers(git, [*texts, *(m.message for m in stamp.previous)])
    earlier: dict[str, list[tuple[Change, Trailers]]] = {}
    for before, found in zip(stamp.previous, read[len(files):], strict=True):
        earlier.setdefault(_key(before.name), []).append((_change(before.name, before.diff),
                                                          found))
    wants = [_wanted(_change(name, _diff(text)), have, stamp, earlier.get(_key(name)))
             for (name, _), text, have in zip(files, texts, read[:len(files)], strict=True)]
    if not any(wants):
        return files
    mails = [split_mail(git, name, raw) for name, raw in files]
    rewritten = [replace(mail, body=_rewrite(git, mail.message, want).partition("\n\n")[2]
                         .strip()) if want else mail for mail, want in zip(mails, wants,
                                                                             strict=True)]
    return export_series(git, base, apply_series(git, base, rewritten)[-1].commit)


def without_fields(git: Git, mails: Sequence[MailPatch]) -> list[MailPatch]:
    """``mails`` without contrib's DEP-3 bookkeeping (Origin, Forwarded, Last-Update): the
    commits a PR pushes; a sign-off stays.  One git run reads every message's trailers,
    and one more rewrites each message that has a field."""
    args = ["interpret-trailers", "--no-divider", "--trim-empty", "--if-missing", "doNothing",
            "--if-exists", "replace"]
    for key in FIELDS:
        args += ["--trailer", f"{key}: "]
    out = []
    for mail, found in zip(mails, trailers(git, [m.message for m in mails]), strict=True):
        if any(key in FIELDS for key, _ in found):
            message = git.run(*args, input=mail.message, env=EXPORT_ENV)
            mail = replace(mail, body=message.partition("\n\n")[2].strip())
        out.append(mail)
    return out


def trailers(git: Git, messages: Sequence[str]) -> list[Trailers]:
    """The trailers of each commit message or ``format-patch`` file as git reads them
    (``interpret-trailers --parse``: a message ends at a ``---`` line), in one git run."""
    if not messages:
        return []
    with tempfile.TemporaryDirectory(prefix="contrib-trailers-") as tmp:
        paths = [Path(tmp) / f"{n}.msg" for n in range(len(messages))]
        for path, message in zip(paths, messages, strict=True):
            path.write_bytes(message.encode("utf-8", "surrogateescape"))
        git.run("interpret-trailers", "--in-place", "--parse", *map(str, paths),
                env=EXPORT_ENV)
        texts = [decode(path.read_bytes()) for path in paths]
    return [[(k.strip(), v.strip()) for k, _, v in (line.partition(":")
                                                    for line in text.splitlines()) if k.strip()]
            for text in texts]


def _wanted(change: Change, have: Trailers, stamp: Stamp,
            earlier: list[tuple[Change, Trailers]] | None) -> list[tuple[str, str, str]]:
    """The trailers to write into a patch that changes ``change`` and has ``have``:
    (git's --if-exists, key, value).  The fields of the earlier version's patch of the
    same name (``earlier``, the first not yet matched) stand where this one lacks them
    (a branch edited before they existed)."""
    before, old = earlier.pop(0) if earlier else (None, [])
    mine, values = dict(have), {**dict(old), **dict(have)}
    want: list[tuple[str, str, str]] = []
    if ORIGIN not in mine:
        want.append(("doNothing", ORIGIN, values.get(ORIGIN) or stamp.origin.text()))
    link = values.get(FORWARDED, "")
    value = link if _is_url(link) and not _is_url(stamp.forwarded) else stamp.forwarded
    if mine.get(FORWARDED) != value:
        want.append(("replace", FORWARDED, value))
    date = (dict(old).get(LAST_UPDATE) if before == change else None) or stamp.date
    if mine.get(LAST_UPDATE) != date:
        want.append(("replace", LAST_UPDATE, date))
    if stamp.signoff and (SIGNED_OFF, stamp.signoff) not in have:
        want.append(("addIfDifferent", SIGNED_OFF, stamp.signoff))
    return want


def _rewrite(git: Git, message: str, want: list[tuple[str, str, str]]) -> str:
    """``message`` with the trailers ``want`` asks for, written by git."""
    args = ["interpret-trailers", "--no-divider", "--where", "end", "--if-missing", "add"]
    for how, key, text in want:
        args += ["--if-exists", how, "--trailer", f"{key}: {text}"]
    return git.run(*args, input=message, env=EXPORT_ENV).rstrip() + "\n"


def _key(name: str) -> str:
    """A patch file's name without its number: ``format-patch`` names it by its subject."""
    return re.sub(r"^\d+-", "", name)


def _diff(text: str) -> str:
    """The diff of a ``format-patch`` file: from its first ``diff --git`` line, where
    ``git am`` (mailinfo) starts it too."""
    at = text.find("\ndiff --git ")
    return text[at + 1:] if at >= 0 else text


def _is_url(value: str) -> bool:
    return value.startswith(("https://", "http://"))


_MODE = re.compile(r"^(?:new file mode|deleted file mode|old mode|new mode|rename from|"
                   r"rename to|copy from|copy to) .*$", re.M)


def _change(name: str, diff: str) -> Change:
    """What a patch changes, wherever it sits: per file, the lines it removes and adds
    (unidiff), and its mode, rename and copy lines."""
    per_file: dict[str, tuple[list[str], list[str]]] = {}
    for hunk in parse_hunks(diff, name):
        removed, added = per_file.setdefault(hunk.path, ([], []))
        removed += hunk.removed
        added += hunk.added
    return (tuple(_MODE.findall(diff)),
            tuple(sorted((p, tuple(r), tuple(a)) for p, (r, a) in per_file.items())))
