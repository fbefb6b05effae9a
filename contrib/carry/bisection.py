"""The commits a sync bisects over, and the bisection: base..target's first-parent
line, listed only when asked, and :func:`first_true`, which finds the first commit
where a predicate holds in ceil(log2 N) probes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import overload

from contrib.git.repo import Git, Sha


def first_parent_path(git: Git, base: str, target: str) -> list[Sha]:
    """Commits on target's first-parent line that base lacks, oldest first."""
    out = git.run("rev-list", "--first-parent", "--reverse", f"{base}..{target}")
    return [Sha(s) for s in out.split()]


class FirstParents(Sequence[Sha]):
    """base..target's first-parent line (``base`` an ancestor, at least one commit
    behind), listed only when more than its end is asked for: a carry that applies
    at the target never needs the rest (one git process fewer)."""

    def __init__(self, git: Git, base: str, target: str) -> None:
        self._git, self._base, self._target = git, base, target
        self._shas: list[Sha] | None = None

    def _all(self) -> list[Sha]:
        if self._shas is None:
            self._shas = first_parent_path(self._git, self._base, self._target)
        return self._shas

    @overload
    def __getitem__(self, index: int) -> Sha: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Sha]: ...

    def __getitem__(self, index: int | slice) -> Sha | Sequence[Sha]:
        if isinstance(index, int) and index == -1 and self._shas is None:
            return Sha(self._target)
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __bool__(self) -> bool:
        return True  # at least the target itself


def first_true(items: Sequence[str], pred: Callable[[str], bool]) -> int:
    """Index of the first item where ``pred`` holds, by bisection.

    ``pred`` is known to hold for the last item and assumed monotone (false,
    then true); it is probed at most ceil(log2 len(items)) times.
    """
    lo, hi = 0, len(items) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(items[mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo
