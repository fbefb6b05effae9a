"""``contrib diff UPSTREAM/NAME [V1 [V2]]``: what changed between two versions.

A ``git range-diff`` of the two versions built as commits on their bases (the
same one ``open-pr`` puts in PR bodies and ``refresh`` prints).  Without
versions: the previous and the current (a patchset with one version: that version
against its base, as ``git diff``); with one: that one and the current.
Versions are named by a sha (a unique prefix of 4+ hex digits) or ``current``.

A version replaced in place (``refresh`` of a branch still on the same base)
came after the series it replaced, which the transaction kept under
``.contrib/superseded/``: without V1 that kept series is the previous one.
"""

from __future__ import annotations

from contrib.carry.rangediff import between, build
from contrib.carry.retention import pruned_versions
from contrib.carry.versions import (
    How,
    Superseded,
    chronological,
    find_version,
    read_history,
    superseded,
)
from contrib.git.cache import Mirror
from contrib.git.repo import Git
from contrib.ui import UI
from contrib.workspace.model import Patchset, Version, Workspace


def diff(ws: Workspace, ui: UI, target: str, old: str | None, new: str | None) -> int:
    """Print the range-diff between two versions of ``target``."""
    ps = ws.patchset(target)
    mirror = Mirror(ws.config.upstream(ps.upstream)).ensure(fetch_now=False,
                                                            progress=ui.progress)
    versions = chronological(ps, mirror.git, pruned_versions(ps))
    picked = _pick(ps, versions, old, new)
    if picked is None:  # the first version: nothing came before it but its base
        only = find_version(ps, versions, new) if new else ps.current
        mirror.resolve(only.base)
        return _against_base(ui, ps, mirror.git, only)
    first, second = picked
    for version in (first, second):
        mirror.resolve(version.base)  # fetches once if the cache lacks a base
    text = between(mirror.git, build(mirror.git, first), build(mirror.git, second),
                   colour=ui.colour_on_stdout)
    kept = first.dir if isinstance(first, Superseded) else None
    old_name = f"{first.base[:12]} (superseded, kept in {kept})" if kept else first.base[:12]
    ui.info(f"{ps.target}: {old_name} -> {second.base[:12]}")
    if text:
        ui.info(text.rstrip("\n"), as_is=True)  # git's own layout and colours
    else:
        ui.info("  the two versions hold the same patches")
    ui.emit({"patchset": ps.target, "old": first.base, "new": second.base,
             "superseded": str(kept) if kept else None, "range_diff": text})
    return 0


def _against_base(ui: UI, ps: Patchset, git: Git, version: Version) -> int:
    """A patchset's first version against its base: what its patches change, as
    ``git diff BASE TIP`` of the series built on it."""
    built = build(git, version)
    text = git.run("diff", "--color" if ui.colour_on_stdout else "--no-color", "--stat",
                   "--patch", built.base, built.tip)
    ui.info(f"{ps.target}: {version.base[:12]} is its first version; its patches against "
            f"that base:")
    ui.info(text.rstrip("\n"), as_is=True)
    ui.emit({"patchset": ps.target, "old": None, "new": version.base, "superseded": None,
             "range_diff": None, "diff": text})
    return 0


def _pick(ps: Patchset, versions: list[Version], old: str | None,
          new: str | None) -> tuple[Version, Version] | None:
    """(old, new): as named, else the version before the current and the current;
    None when that is the first version (it is shown against its base)."""
    second = find_version(ps, versions, new) if new else ps.current
    if old:
        return find_version(ps, versions, old), second
    bases = [v.base for v in versions]
    at = bases.index(second.base)
    replaced = _replaced(ps, second, first=at == 0)
    if replaced is not None:
        return replaced, second
    if at == 0:
        return None
    return versions[at - 1], second


def _replaced(ps: Patchset, version: Version, *, first: bool) -> Version | None:
    """The series ``version`` replaced in place, when that is what came just before it:
    the last event that made it was a same-base replace (``refresh``), or it is the
    first version and a replaced series of it was kept."""
    kept = superseded(ps, version.base)
    if not kept:
        return None
    made = [e for e in read_history(ps) if e.version == version.base and e.how != How.PUSH]
    if first or (made and made[-1].previous == version.base):
        return kept[-1]
    return None
