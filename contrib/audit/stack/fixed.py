"""The first release of the upstream below that admits what the pinned one refuses.

A feature that crashes is admitted by the upper tree and refused by the version of the
lower one it pins (sglang at 1ab9b8e0a, on flashinfer 0.5.3, whose
``gen_trtllm_comm_module`` lists majors 9 and 10).  Where a later release of the
lower upstream admits the target at that place (flashinfer 2deed6c15, #3903, added
12), the next step is to bump the pin, not to patch: :func:`first_admitting` finds
that release and the commit that opened it, reading the refusing gate's own file at
each release (bisected: a gate opened stays open) and then at each commit between the
last release that refused and the first that admits.

Only a Python gate is followed so (a JIT list, a capability decorator, a refusal in
code): its file read alone says whether it admits the target.  Whether the kernels
behind it are there is the audit's question at the new pin (``contrib why ... --at``
the commit that bumps it), and the step says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from packaging.version import InvalidVersion, Version

from contrib.analysis.pyparse import PARSE_ERRORS
from contrib.arch import Arch
from contrib.audit.chains import Fix
from contrib.audit.finding.gates import gates_of_file
from contrib.carry.bisection import first_true
from contrib.git.repo import Git

_PR = re.compile(r"\(#(\d+)\)\s*$|#(\d+)")


def first_admitting(git: Git, upstream: str, pinned: str, file: str, function: str,
                    arch: Arch) -> Fix | None:
    """The first release after ``pinned`` (a tag of ``git``) whose ``file`` lets ``arch``
    through ``function``'s gates, and the commit that opened it; None when no release
    does, when the gate is not a Python one, or when ``pinned`` is no release."""
    if not file.endswith(".py"):
        return None
    try:
        since = Version(pinned.removeprefix("v"))
    except InvalidVersion:
        return None
    admits = _Admits(git, file, function, arch)
    later = [tag for version, tag in _releases(git) if version > since]
    first = _first(later, admits)
    if first is None:
        return None
    previous = pinned if first == 0 else later[first - 1]
    status, log, _ = git.try_run("log", "--reverse", "--format=%H%x09%s",
                                 f"{previous}..{later[first]}", "--", file)
    if status != 0:  # a cache missing the range: the step is a hint, never the answer's end
        return None
    shas = [line.split("\t", 1) for line in log.splitlines() if "\t" in line]
    opened = _first([sha for sha, _ in shas], admits)
    if opened is None:
        return None
    sha, subject = shas[opened]
    found = _PR.search(subject)
    pr = f"#{found.group(1) or found.group(2)}" if found else ""
    return Fix(upstream, later[first], sha, subject.strip(), pr)


def _releases(git: Git) -> list[tuple[Version, str]]:
    """The tags of ``git`` that name versions (``v0.6.17``, ``0.2.0``), oldest first;
    pre-releases and development builds left out."""
    out: list[tuple[Version, str]] = []
    status, tags, _ = git.try_run("tag", "--list")
    for tag in tags.split() if status == 0 else ():
        try:
            version = Version(tag.removeprefix("v"))
        except InvalidVersion:
            continue
        if not version.is_prerelease and not version.is_devrelease:
            out.append((version, tag))
    return sorted(out)


def _first(revs: Sequence[str], admits: Callable[[str], bool]) -> int | None:
    """The index of the first of ``revs`` that admits (a gate opened stays open: the
    revisions are bisected, as sync bisects the commit breaking a patch), or None
    when the last does not."""
    if not revs or not admits(revs[-1]):
        return None
    return first_true(revs, admits)


class _Admits:
    """Whether ``function`` of ``file`` at a revision lets the target through its gates:
    it is there, and no gate of it turns the target away with a refusal."""

    def __init__(self, git: Git, file: str, function: str, arch: Arch) -> None:
        self.git, self.file, self.arch = git, file, arch
        self.name = function.rsplit(".", 1)[-1]
        self._seen: dict[str, bool] = {}

    def __call__(self, rev: str) -> bool:
        if rev not in self._seen:
            self._seen[rev] = self._read(rev)
        return self._seen[rev]

    def _read(self, rev: str) -> bool:
        status, text, _ = self.git.try_run("show", f"{rev}:{self.file}")
        if status != 0 or not re.search(rf"def {re.escape(self.name)}\b", text):
            return False
        try:
            gates = gates_of_file(self.file, text, self.arch)
        except PARSE_ERRORS:
            return False
        return not any(g.function.rsplit(".", 1)[-1] == self.name and g.excludes_target
                       and g.effect.kind.refuses for g in gates)
