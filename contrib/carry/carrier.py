"""Carry a patch series onto one upstream commit: a probe.

Everything here runs on plumbing in the upstream cache: a temporary index
holding the touched paths of the target tree (:mod:`contrib.carry.trees`),
``git apply --cached --3way`` (git >= 2.32 tries the 3-way merge *first*,
using the pre-image blobs named in each patch's ``index`` line, and falls
back to a plain no-fuzz apply only when those blobs are missing),
``write-tree``, and ``commit-tree`` once a real commit is needed.  Nothing is
checked out.

Two checks keep a probe honest (the third, bisection, is
:mod:`contrib.carry.bisection`):

* **the moved guard** (:mod:`contrib.carry.scope`) -- every change must still sit in
  the same enclosing function/class as at the base; a plain apply may land a
  hunk at an offset in a look-alike block (GNU patch's fuzz disaster), which is
  reported ``moved``, never carried;
* **already upstream** -- a patch that applies to no effect (tree unchanged),
  or that conflicts while its effect is already present at the target (added
  lines in the same file and definition, removed lines gone) is ``upstream``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from contrib.carry.scope import (
    contains_block,
    diff_hunks,
    effect_present,
    moved_hunks,
    scoped_hunks,
)
from contrib.carry.series import Hunk, MailPatch, apply_one, parse_hunks
from contrib.carry.trees import changes, graft, listing, small_index, touched_paths
from contrib.errors import PatchError
from contrib.git.repo import Git, Sha, Tree

APPLIED, UPSTREAM, CONFLICT, MOVED = "applied", "upstream", "conflict", "moved"


@dataclass
class PatchCarry:
    """What happened to one patch at one upstream commit.

    ``before``/``after`` are the small trees (only the touched paths) around
    the patch; :meth:`Carrier.commit` turns applied ones into real commits.
    """

    index: int
    name: str
    state: str  # APPLIED, UPSTREAM, CONFLICT or MOVED
    how: str = ""  # UPSTREAM by: "empty" (no effect), "reverse" (reverse applies), "present",
    # "landed" (upstream wrote its lines in its own form: :mod:`contrib.carry.landed`)
    files: list[str] = field(default_factory=list)
    hunks: list[str] = field(default_factory=list)
    before: Tree | None = None
    after: Tree | None = None


@dataclass
class Carry:
    """The series carried onto one upstream commit (stops at the first failure)."""

    onto: Sha
    start: int
    patches: list[PatchCarry]

    @property
    def failed(self) -> PatchCarry | None:
        return next((p for p in self.patches if p.state in (CONFLICT, MOVED)), None)

    def state_of(self, index: int) -> str | None:
        """The state of series patch ``index`` (None: not reached)."""
        return next((p.state for p in self.patches if p.index == index), None)


class Carrier:
    """Carries one series onto upstream commits, remembering every probe.

    ``base`` is the commit the series was made against; when it is in the
    cache the series is first applied there exactly (this also writes every
    pre-image blob the later 3-way merges need) and each change is scoped from
    there.  Without it, the hunks of the patch files are the reference.
    """

    def __init__(self, git: Git, patches: list[MailPatch], base: Sha | None,
                 on_probe: Callable[[int, str], None] | None = None) -> None:
        self.git = git
        self.patches = patches
        self.base = base
        self.probes = 0
        self.on_probe = on_probe  # (probe number, commit) as each probe starts: progress
        self.paths = touched_paths(patches)
        self._seen: dict[tuple[str, int], Carry] = {}
        self._commits: dict[tuple[str, int], Sha] = {}
        self._dropped: dict[int, int] = {}  # patch index -> path position where it landed
        self._position: dict[str, int] = {}  # commit -> its position on the bisected path
        self.before: list[Tree] = []  # per patch, the small tree it applies to at the base
        self.after: list[Tree] = []  # and the one it makes there
        self._base_entries: str | None = None  # the base's entries of its files
        self.reference = (self._at_base(base) if base is not None
                          else [parse_hunks(p.diff, p.name) for p in patches])

    def _at_base(self, base: Sha) -> list[list[Hunk]]:
        git, out = self.git, []
        self._base_entries = listing(git, base, self.paths) if self.paths else None
        with small_index(git, base, self.paths, self._base_entries) as env:
            tree = git.write_tree(env)
            for patch in self.patches:
                self.before.append(tree)
                ok, err = apply_one(git, env, patch)
                if not ok:
                    raise PatchError(f"{patch.name}: does not apply without fuzz at its own base "
                                     f"{base[:12]}; the version is damaged:\n  {err[:400]}")
                new = git.write_tree(env)
                out.append(scoped_hunks(git, tree, new))
                self.after.append(new)
                tree = new
        return out

    def _as_at_base(self, onto: Sha) -> Carry | None:
        """The carry at ``onto`` when its files are the base's, entry for entry: each
        patch then does there what it did at the base, and nothing need be asked of git
        (upstream moved on without touching them, the common case)."""
        if self._base_entries is None or self._dropped \
                or listing(self.git, onto, self.paths or []) != self._base_entries:
            return None
        results = []
        for index, patch in enumerate(self.patches):
            before, after = self.before[index], self.after[index]
            results.append(PatchCarry(index, patch.name, UPSTREAM, how="empty") if after == before
                           else PatchCarry(index, patch.name, APPLIED, before=before, after=after))
        return Carry(onto, 0, results)

    def carry(self, onto: str, *, start: int = 0) -> Carry:
        """Apply patches[start:] on ``onto`` (a commit); cached per commit."""
        key = (onto, start)
        if key not in self._seen:
            self.probes += 1
            if self.on_probe is not None:
                self.on_probe(self.probes, onto)
            self._seen[key] = self._carry(Sha(onto), start)
        return self._seen[key]

    def drop(self, index: int, path: Sequence[str], at: int) -> None:
        """Treat patch ``index`` as landed upstream from ``path[at]`` on: it is skipped
        (state UPSTREAM, how "landed") at that commit and every later one of ``path``."""
        self._position = {sha: n for n, sha in enumerate(path)}
        self._dropped[index] = at
        self._seen.clear()
        self._commits.clear()

    def _landed(self, index: int, onto: str) -> bool:
        at = self._dropped.get(index)
        return at is not None and self._position.get(onto, len(self._position)) >= at

    def commit(self, carry: Carry) -> Sha:
        """The applied patches of ``carry`` as real commits on ``onto``; the last one."""
        key = (carry.onto, carry.start)
        if key not in self._commits:
            git, parent = self.git, carry.onto
            tree = git.tree_of(parent)
            for done in carry.patches:
                if done.state == APPLIED and done.before and done.after:
                    patch = self.patches[done.index]
                    tree = graft(git, tree, changes(git, done.before, done.after))
                    parent = git.commit_tree(tree, [parent], patch.message, patch.author)
            self._commits[key] = parent
        return self._commits[key]

    def _carry(self, onto: Sha, start: int) -> Carry:
        git = self.git
        known = self._as_at_base(onto) if start == 0 else None
        if known is not None:
            return known
        results: list[PatchCarry] = []
        with small_index(git, onto, self.paths) as env:
            tree = git.write_tree(env)
            for index in range(start, len(self.patches)):
                if self._landed(index, onto):
                    results.append(PatchCarry(index, self.patches[index].name, UPSTREAM,
                                              how="landed"))
                    continue
                outcome = self._one(env, index, tree)
                results.append(outcome)
                if outcome.state in (CONFLICT, MOVED):
                    break
                if outcome.state == APPLIED and outcome.after is not None:
                    tree = outcome.after
        return Carry(onto, start, results)

    def _one(self, env: dict[str, str], index: int, tree: Tree) -> PatchCarry:
        git, patch = self.git, self.patches[index]
        ok, err = apply_one(git, env, patch, three_way=True)
        if not ok:
            files = _unmerged(git, env) or _failed_files(err)
            git.run("read-tree", tree, env=env)  # drop the conflict stages
            if self._reverse_applies(env, index, tree):
                return PatchCarry(index, patch.name, UPSTREAM, how="reverse")
            before = self.before[index] if self.before else None
            if effect_present(git, tree, self.reference[index], before):
                return PatchCarry(index, patch.name, UPSTREAM, how="present")
            hunks = _stale_hunks(git, tree, patch, files, self.reference[index])
            return PatchCarry(index, patch.name, CONFLICT, files=files, hunks=hunks)
        new_tree = git.write_tree(env)
        if new_tree == tree:
            return PatchCarry(index, patch.name, UPSTREAM, how="empty")
        carried = (scoped_hunks(git, tree, new_tree) if self.base is not None
                   else diff_hunks(git, tree, new_tree, context=3))
        moved = moved_hunks(self.reference[index], carried)
        if moved:
            git.run("read-tree", tree, env=env)
            return PatchCarry(index, patch.name, MOVED, hunks=moved,
                              files=sorted({m.split(":")[0] for m in moved}))
        return PatchCarry(index, patch.name, APPLIED, before=tree, after=new_tree)


    def _reverse_applies(self, env: dict[str, str], index: int, tree: Tree) -> bool:
        """Does the patch apply in reverse, exactly, in the same definitions?

        Then its post-image is already at this commit: upstream has the change.
        """
        git, patch = self.git, self.patches[index]
        status, _, _ = git.try_run("apply", "--cached", "--reverse", "--whitespace=nowarn", "-",
                                   env=env, input=patch.diff)
        if status != 0:
            return False
        undone = git.write_tree(env)
        git.run("read-tree", tree, env=env)
        forward = (scoped_hunks(git, undone, tree) if self.base is not None
                   else diff_hunks(git, undone, tree, context=3))
        keys = {(h.path, h.removed, h.added) for h in self.reference[index]}
        return bool(forward) and all((h.path, h.removed, h.added) in keys for h in forward) \
            and not moved_hunks(self.reference[index], forward)


def _unmerged(git: Git, env: dict[str, str]) -> list[str]:
    out = git.run("ls-files", "-u", "-z", env=env, strip=False)
    return sorted({entry.split("\t", 1)[1] for entry in out.split("\0") if "\t" in entry})


_FAILED = re.compile(r"^error: (?:patch failed: |)([^:\n]+?)(?::\d+| does not exist in index"
                     r"|: does not exist in index|: already exists in index)", re.M)


def _failed_files(err: str) -> list[str]:
    return sorted({m.group(1).strip() for m in _FAILED.finditer(err)})


def _stale_hunks(git: Git, tree: str, patch: MailPatch, files: list[str],
                 scoped: list[Hunk]) -> list[str]:
    """The patch's hunks in ``files`` whose pre-image text is no longer in ``tree``.

    Each is named by its header and, from ``scoped`` (the changes at the
    base), the definition its change sits in: git's header names the line
    above the hunk's context, which is often the previous function.
    """
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    out: list[str] = []
    try:
        parsed = PatchSet(patch.diff)
    except UnidiffParseError:  # split_mail parsed it already; a description only
        return out
    for pfile in parsed:
        if files and pfile.path not in files:
            continue
        blob = git.read_blob(tree, pfile.path)
        text = blob.decode("utf-8", "replace").splitlines() if blob is not None else []
        for hunk in pfile:
            pre = [line.value.rstrip("\n") for line in hunk if line.is_context or line.is_removed]
            if blob is not None and contains_block(pre, text):
                continue
            end = hunk.source_start + hunk.source_length
            scope = next((h.section for h in scoped if h.path == pfile.path
                          and hunk.source_start <= h.source_start <= end), "")
            where = f" (in {scope})" if scope and scope != hunk.section_header.strip() else ""
            out.append(f"{pfile.path} @@ -{hunk.source_start},{hunk.source_length} "
                       f"+{hunk.target_start},{hunk.target_length} @@ "
                       f"{hunk.section_header.strip()}{where}".rstrip())
    return out
