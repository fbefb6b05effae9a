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
  entry), where the patch's change differs from the same patch (by subject) in the
  version it replaces: the lines it removes and adds, file by file, not where they
  sit nor the context around them, so a rebase that only moves a patch keeps its date;
* ``Signed-off-by: <the user>`` where the upstream's files at the version's base ask
  for it (:mod:`contrib.carry.signoff`), next to any sign-off already there.

The fields are written by git (``git interpret-trailers`` on each message, then the
same apply and ``format-patch`` as ``new``): a field already right leaves the file's
bytes alone.  Patch files written before these fields existed have none; the next
version written gets them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from contrib.carry.series import (
    EXPORT_ENV,
    MailPatch,
    apply_series,
    export_series,
    parse_hunks,
    split_mail,
)
from contrib.carry.signoff import asks_for_signoff, required_signer
from contrib.git.repo import Git
from contrib.workspace.model import Patchset
from contrib.workspace.schema import UpstreamStatus

Files = list[tuple[str, bytes]]
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
    previous: Sequence[tuple[str, bytes]] = ()  # the version this one replaces


def vendor(target: str) -> Origin:
    """The Origin of a patch made here, for patchset ``target`` (``UPSTREAM/NAME``)."""
    return Origin(Kind.VENDOR, f"contrib patchset {target}")


def stamp_for(git: Git, ps: Patchset, base: str, at: str, *,
              previous: Sequence[tuple[str, bytes]] | None = None) -> Stamp:
    """The stamp of a version of ``ps`` at ``base`` written at ``at`` (ISO), replacing
    ``previous`` (the current version's files when None).  UsageError when the upstream
    asks for a sign-off and git has no identity."""
    pr = ps.pr
    return Stamp(at[:10], forwarded(pr.url if pr else None, ps.upstream_status),
                 vendor(f"{ps.upstream}/{ps.name}"),
                 signoff_at(git, ps.workspace.root, base, ps.upstream),
                 ps.current.patch_texts() if previous is None else previous)


def signoff_at(git: Git, workspace: Path, base: str, upstream: str) -> str | None:
    """The user's sign-off where the upstream's files at ``base`` ask for one, else None."""
    asked = asks_for_signoff(git, base)
    return required_signer(git, workspace, asked, upstream) if asked is not None else None


def stamped(git: Git, base: str, files: Files, stamp: Stamp) -> Files:
    """``files`` (a version at ``base``, in series order) with their fields brought up to
    date; the same list when every field already is."""
    if not files:
        return files
    mails = [split_mail(git, name, raw) for name, raw in files]
    earlier = _by_subject([split_mail(git, n, raw) for n, raw in stamp.previous])
    messages = [_message(git, mail, stamp, earlier) for mail in mails]
    if all(m == mail.message for m, mail in zip(messages, mails, strict=True)):
        return files
    rewritten = [replace(mail, body=m.partition("\n\n")[2].strip())
                 for mail, m in zip(mails, messages, strict=True)]
    return export_series(git, base, apply_series(git, base, rewritten)[-1].commit)


def without_fields(git: Git, mail: MailPatch) -> MailPatch:
    """``mail`` without contrib's DEP-3 bookkeeping (Origin, Forwarded, Last-Update): the
    commit a PR pushes; a sign-off stays."""
    if not any(key in FIELDS for key, _ in trailers(git, mail.message)):
        return mail
    args = ["interpret-trailers", "--no-divider", "--trim-empty", "--if-missing", "doNothing",
            "--if-exists", "replace"]
    for key in FIELDS:
        args += ["--trailer", f"{key}: "]
    message = git.run(*args, input=mail.message, env=EXPORT_ENV)
    return replace(mail, body=message.partition("\n\n")[2].strip())


def trailers(git: Git, message: str) -> list[tuple[str, str]]:
    """The trailers of a commit message as git reads them (``interpret-trailers --parse``)."""
    out = git.run("interpret-trailers", "--parse", "--no-divider", input=message, env=EXPORT_ENV)
    return [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in
                                                     out.splitlines()) if k.strip()]


def _message(git: Git, mail: MailPatch, stamp: Stamp, earlier: dict[str, list[MailPatch]]
             ) -> str:
    """The message of ``mail`` with its fields as ``stamp`` wants them; the fields of the
    earlier version's patch of the same subject (``earlier``) stand where this one's
    message lacks them (a branch edited before they existed)."""
    have = trailers(git, mail.message)
    before = _match(earlier, mail)
    old = dict(trailers(git, before.message)) if before is not None else {}
    values = {**old, **dict(have)}
    want: list[tuple[str, str, str]] = []  # (if-exists, key, value)
    if ORIGIN not in dict(have):
        want.append(("doNothing", ORIGIN, values.get(ORIGIN) or stamp.origin.text()))
    link = values.get(FORWARDED, "")
    value = link if _is_url(link) and not _is_url(stamp.forwarded) else stamp.forwarded
    if dict(have).get(FORWARDED) != value:
        want.append(("replace", FORWARDED, value))
    same = before is not None and _change(mail) == _change(before)
    date = (old.get(LAST_UPDATE) if same else None) or stamp.date
    if dict(have).get(LAST_UPDATE) != date:
        want.append(("replace", LAST_UPDATE, date))
    if stamp.signoff and (SIGNED_OFF, stamp.signoff) not in have:
        want.append(("add", SIGNED_OFF, stamp.signoff))
    if not want:
        return mail.message
    args = ["interpret-trailers", "--no-divider", "--where", "end", "--if-missing", "add"]
    for how, key, text in want:
        args += ["--if-exists", how, "--trailer", f"{key}: {text}"]
    return git.run(*args, input=mail.message, env=EXPORT_ENV).rstrip() + "\n"


def _is_url(value: str) -> bool:
    return value.startswith(("https://", "http://"))


def _by_subject(mails: list[MailPatch]) -> dict[str, list[MailPatch]]:
    out: dict[str, list[MailPatch]] = {}
    for mail in mails:
        out.setdefault(mail.subject, []).append(mail)
    return out


def _match(earlier: dict[str, list[MailPatch]], mail: MailPatch) -> MailPatch | None:
    """The earlier version's patch of the same subject (the first not yet matched)."""
    same = earlier.get(mail.subject)
    return same.pop(0) if same else None


_MODE = re.compile(r"^(?:new file mode|deleted file mode|old mode|new mode|rename from|"
                   r"rename to|copy from|copy to) .*$", re.M)


def _change(mail: MailPatch) -> tuple[object, ...]:
    """What a patch changes, wherever it sits: per file, the lines it removes and adds
    (unidiff), and its mode, rename and copy lines."""
    per_file: dict[str, tuple[list[str], list[str]]] = {}
    for hunk in parse_hunks(mail.diff, mail.name):
        removed, added = per_file.setdefault(hunk.path, ([], []))
        removed += hunk.removed
        added += hunk.added
    return (tuple(_MODE.findall(mail.diff)),
            tuple(sorted((p, tuple(r), tuple(a)) for p, (r, a) in per_file.items())))
