"""The one way to write a version of a patchset, and the history of how each was made.

``new``, ``sync``, ``sync --continue`` and ``refresh`` all end the same way:
a version folder (its patch files and ``series``) staged in a workspace
transaction, ``current`` pointed at it, and one ``[[history]]`` entry saying
how it was made -- then ``patchset.toml`` written in the same transaction.
A folder that already holds exactly these files is left alone; one holding
other files is replaced, and the old folder (its ``validation.json`` too,
which described the old patches) is kept under ``.contrib/superseded/``.

``[[history]]`` entries hold scalars only (strings and numbers), so a person
can read and extend them; :func:`read_history` turns them into typed
:class:`Event` objects for ``contrib log``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit import TOMLDocument

from contrib.carry.series import series_file
from contrib.clock import now_iso
from contrib.errors import UsageError
from contrib.git.repo import Git
from contrib.workspace.layout import SERIES_NAME
from contrib.workspace.model import Patchset, Version
from contrib.workspace.txn import Transaction

Files = list[tuple[str, bytes]]  # (patch file name, canonical bytes), in series order


class How(StrEnum):
    """How a version came to be (``how`` of a ``[[history]]`` entry)."""

    NEW = "new"
    SYNC = "sync"
    RESOLVED = "resolved"  # a conflict resolved by hand, recorded by sync --continue
    REFRESH = "refresh"
    PUSH = "push"  # not a new version: open-pr pushed this one
    ENABLE = "enable"  # drafted by `contrib enable` from the audit


@dataclass(frozen=True)
class Event:
    """One ``[[history]]`` entry: what happened to which version, when."""

    how: str
    version: str
    at: str = ""
    previous: str = ""  # the version that was current before
    result: str = ""  # sync's result, refresh's "rebased"/"replaced"
    detail: str = ""  # one human line: probes, the source PR, the pushed tip...

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


def version_files(files: Files) -> dict[str, bytes | str]:
    """The folder content of a version: its patches plus ``series``."""
    return {**dict(files), SERIES_NAME: series_file([n for n, _ in files])}


def same_version(folder: Path, files: Files) -> bool:
    """Whether ``folder`` already holds exactly these patches and series."""
    if not folder.is_dir():
        return False
    want = {name: data if isinstance(data, bytes) else data.encode()
            for name, data in version_files(files).items()}
    have = {p.name: p.read_bytes() for p in folder.iterdir()
            if p.is_file() and (p.name in want or p.suffix == ".patch")}
    return have == want


def stage_version(txn: Transaction, patchset_dir: Path, base: str, files: Files) -> bool:
    """Stage the version folder ``patchset_dir/base`` in ``txn``; False if already so."""
    folder = patchset_dir / base
    if same_version(folder, files):
        return False
    txn.write_dir(folder, version_files(files))
    return True


def superseded_path(txn: Transaction, patchset_dir: Path, base: str) -> Path:
    """Where ``txn`` keeps the folder it replaces at ``base`` (see contrib.workspace.txn)."""
    return txn.state_dir / "superseded" / f"{patchset_dir.name}-{base}-{txn.id}"


@dataclass
class Superseded(Version):
    """What once was the version at ``base``, replaced in place (a same-base ``refresh``)
    and kept by the transaction under ``.contrib/superseded/`` (see :func:`superseded_path`)."""

    folder: Path = Path()

    @property
    def dir(self) -> Path:
        return self.folder


def superseded(ps: Patchset, base: str) -> list[Superseded]:
    """The kept folders that were ``ps``'s version at ``base`` before it was replaced,
    oldest first (a transaction's id starts with its time).  The folder names hold the
    patchset's name, not its upstream: one of another upstream's patchset of the same
    name at the same commit would be listed too."""
    prefix = f"{ps.dir.name}-{base}-"
    folders = [f for f in (ps.workspace.state_dir / "superseded").glob(prefix + "*")
               if f.is_dir() and not f.is_symlink() and (f / SERIES_NAME).is_file()]

    def made(folder: Path) -> tuple[str, int]:
        return folder.name[len(prefix):].partition("-")[0], folder.stat().st_mtime_ns

    return [Superseded(ps, base, f) for f in sorted(folders, key=made)]


def add_event(meta: TOMLDocument, event: Event) -> None:
    """Append ``event`` to ``[[history]]`` of a patchset.toml document."""
    history = meta.get("history")
    if not isinstance(history, list):
        history = tomlkit.aot()
        meta["history"] = history
    entry = tomlkit.table()
    entry.update({"at": event.at or now_iso(), **event.as_dict()})
    history.append(entry)


def write_version(txn: Transaction, ps: Patchset, base: str, files: Files,
                  event: Event) -> bool:
    """Record ``files`` as the version at ``base``, make it current, log ``event``.

    Stages the folder in ``txn`` and changes ``ps.meta``; the caller stages
    ``patchset.toml`` once, after its own changes (``ps.save_meta(txn)``).
    Returns whether the folder changed.
    """
    changed = stage_version(txn, ps.dir, base, files)
    ps.set_current(base)
    add_event(ps.meta, event)
    return changed


def read_history(ps: Patchset) -> list[Event]:
    """The ``[[history]]`` entries of ``ps`` that name a version, in file order (as
    contrib.workspace.schema read and checked them when the patchset was loaded)."""
    out = []
    for entry in ps.info.history:
        if not entry.get("version"):
            continue  # a note a person wrote
        out.append(Event(**{k: _text(entry.get(k)) for k in Event.__dataclass_fields__}))
    return out


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def chronological(ps: Patchset, git: Git, extra: Sequence[Version] = ()) -> list[Version]:
    """The version folders of ``ps`` (and ``extra`` ones, e.g. pruned), oldest first.

    Versions named in ``[[history]]`` come in the order they were first made;
    older ones (made before contrib kept history) come before them, by the
    date of their upstream commit.
    """
    first: dict[str, int] = {}
    for index, event in enumerate(read_history(ps)):
        if event.how != How.PUSH:
            first.setdefault(event.version, index)

    def key(version: Version) -> tuple[int, int]:
        if version.base in first:
            return (1, first[version.base])
        status, out, _ = git.try_run("show", "-s", "--format=%ct", version.base)
        return (0, int(out.strip()) if status == 0 and out.strip().isdigit() else 0)

    return sorted([*ps.versions(), *extra], key=key)


def find_version(ps: Patchset, versions: list[Version], name: str) -> Version:
    """The version named by a sha or a unique prefix of at least 4 hex digits, or
    ``current``; UsageError listing the versions otherwise."""
    if name == "current":
        return ps.current
    hits = [v for v in versions if len(name) >= 4 and v.base.startswith(name.lower())]
    if len(hits) == 1:
        return hits[0]
    have = ", ".join(v.base[:12] for v in versions)
    what = "is ambiguous" if hits else "names no version"
    raise UsageError(f"{ps.target}: {name!r} {what} (versions, oldest first: {have})")
