"""What changed between two versions of a patchset: ``git range-diff``.

One implementation for ``contrib diff``, ``contrib refresh`` and the PR body
``open-pr`` writes.  A version becomes commits by applying its patches on its
base with their authors and dates (committer = author), so the same version
always gives the same commits and the range-diff compares patches, not
timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass

from contrib.carry.series import Applied, apply_series, split_mail
from contrib.git.repo import Git, Sha
from contrib.workspace.model import Version


@dataclass(frozen=True)
class Built:
    """A version as commits: ``base..tip``."""

    base: Sha
    tip: Sha
    commits: list[Applied]


def build(git: Git, version: Version) -> Built:
    """The patches of ``version`` applied on its base as commits (PatchError if they fail)."""
    mails = [split_mail(git, name, raw) for name, raw in version.patch_texts()]
    applied = apply_series(git, version.base, mails)
    return Built(git.rev_parse(version.base), applied[-1].commit, applied)


def range_diff(git: Git, old_base: str, old_tip: str, new_base: str, new_tip: str, *,
               colour: bool = False) -> str | None:
    """``git range-diff old_base..old_tip new_base..new_tip`` (coloured as git colours it
    with ``colour``); None when git cannot or the two are the same."""
    if (old_base, old_tip) == (new_base, new_tip):
        return None
    status, out, _ = git.try_run("range-diff", "--color" if colour else "--no-color",
                                 f"{old_base}..{old_tip}", f"{new_base}..{new_tip}")
    return out if status == 0 and out.strip() else None


def between(git: Git, old: Built, new: Built, *, colour: bool = False) -> str | None:
    """The range-diff from ``old`` to ``new``."""
    return range_diff(git, old.base, old.tip, new.base, new.tip, colour=colour)
