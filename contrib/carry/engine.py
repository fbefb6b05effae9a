"""Carry a patch series from its base onto another upstream commit.

Everything here runs on plumbing in the upstream cache: a temporary index
holding the touched paths of the target tree (:mod:`contrib.carry.trees`),
``git apply --cached --3way`` (git >= 2.32 tries the 3-way merge *first*,
using the pre-image blobs named in each patch's ``index`` line, and falls
back to a plain no-fuzz apply only when those blobs are missing),
``write-tree``, and ``commit-tree`` once a real commit is needed.  Nothing is
checked out.

Three checks keep a carry honest:

* **the moved guard** (:mod:`contrib.carry.scope`) -- every change must still sit in
  the same enclosing function/class as at the base; a plain apply may land a
  hunk at an offset in a look-alike block (GNU patch's fuzz disaster), which is
  reported ``moved``, never carried;
* **already upstream** -- a patch that applies to no effect (tree unchanged),
  or that conflicts while its effect is already present at the target (added
  lines in the same file and definition, removed lines gone) is ``upstream``;
* **bisection** -- :func:`first_true` finds the first commit of the
  first-parent path where a predicate holds, in ceil(log2 N) probes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, overload

from contrib.carry.landed import FLOOR, LANDED_SHARE, Evidence, Look
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
from contrib.workspace.schema import SyncResult

APPLIED, UPSTREAM, CONFLICT, MOVED = "applied", "upstream", "conflict", "moved"
_PR = re.compile(r"\(#(\d+)\)\s*$")


def pr_number(subject: str) -> int | None:
    """The PR number of a squash-merged subject like ``feat: x (#1234)``."""
    match = _PR.search(subject)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Landing:
    """An upstream commit named in a report: the one that broke or landed a patch."""

    sha: str
    subject: str
    pr: int | None
    author: str
    date: str

    @classmethod
    def of(cls, git: Git, rev: str) -> Landing:
        info = git.commit_info(rev)
        return cls(info.sha, info.subject, pr_number(info.subject),
                   f"{info.author_name} <{info.author_email}>", info.author_date)

    def as_dict(self) -> dict[str, object]:
        return {"sha": self.sha, "subject": self.subject, "pr": self.pr,
                "author": self.author, "date": self.date}

    def short(self) -> str:
        pr = f" (#{self.pr})" if self.pr and f"(#{self.pr})" not in self.subject else ""
        return f"{self.sha[:10]} {self.subject}{pr}"


def evidence_dict(git: Git, evidence: Evidence) -> dict[str, Any]:
    """The landed evidence for --json and the [sync] record: shares and named commits."""
    def named(sha: str) -> dict[str, object]:
        return Landing.of(git, sha).as_dict()

    return {"share": round(evidence.share, 3), "lines": evidence.lines,
            "present": evidence.present, "removed": evidence.removed, "gone": evidence.gone,
            "threshold": evidence.threshold,
            "landed_by": named(evidence.landed_by) if evidence.landed_by else None,
            "changed_by": [named(sha) for sha in evidence.changed_by],
            "by": [named(sha) | {"lines": n} for sha, n in evidence.by],
            "summary": evidence.summary()}


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


def load_patches(git: Git, files: list[tuple[str, bytes]]) -> list[MailPatch]:
    """Split stored patch files (name, bytes) as ``git am`` would."""
    from contrib.carry.series import split_mail

    if not files:
        raise PatchError("empty series: nothing to carry")
    return [split_mail(git, name, raw) for name, raw in files]


# -- one sync decision ------------------------------------------------------

UNCHANGED, REBASED, UPSTREAMED = SyncResult.UNCHANGED, SyncResult.REBASED, SyncResult.UPSTREAMED
PARTIAL, ERROR = SyncResult.PARTIAL, SyncResult.ERROR


@dataclass
class Breakage:
    """Where a series stops carrying: the first upstream commit that breaks it."""

    commit: Landing
    index: int  # position of the failing patch in the series
    patch: PatchCarry
    head: Sha  # the earlier patches carried onto ``commit``
    probes: int  # apply probes the search spent (the probe at the target included)
    upstream_before: list[str] = field(default_factory=list)  # emptied at ``commit``
    evidence: Evidence | None = None  # how much of the failing patch is upstream already

    @property
    def reason(self) -> str:
        return self.patch.state


@dataclass
class Plan:
    """What syncing one series from ``base`` to ``target`` comes to (nothing written)."""

    result: SyncResult
    base: Sha
    target: Sha
    commits: int = 0
    probes: int = 0
    files: list[tuple[str, bytes]] = field(default_factory=list)
    landed: list[tuple[str, Landing | None, str]] = field(default_factory=list)  # how
    breakage: Breakage | None = None
    notes: list[str] = field(default_factory=list)
    evidence: dict[str, Evidence] = field(default_factory=dict)  # patch name -> landed evidence


def plan_sync(git: Git, patches: list[MailPatch], base: Sha, target: Sha, *,
              on_probe: Callable[[int, str], None] | None = None,
              landed_share: float | None = LANDED_SHARE) -> Plan:
    """Carry ``patches`` (made at ``base``) onto ``target``; decide the result.

    Walks the first-parent path base..target only by bisection: the carry at
    the target is one probe, finding the breaking commit ceil(log2 N) more,
    and each already-upstream patch's landing commit its own bisection.  A
    patch failing at the target is first checked against the tip's lines
    (:mod:`contrib.carry.landed`, threshold ``landed_share``): one upstream
    landed in its own form is dropped, named by the commit that landed it.
    ``landed_share=None`` skips that look (``benchmarks/landed_cost.py``'s baseline).
    ``on_probe`` hears of each probe (for progress).
    """
    if base == target:
        return Plan(UNCHANGED, base, target)
    plan = Plan(REBASED, base, target)
    # One walk says both whether the cache has the base and how far it is behind.
    status, out, _ = git.try_run("rev-list", "--left-right", "--count", f"{base}...{target}")
    counts = tuple(map(int, out.split())) if status == 0 and len(out.split()) == 2 else None
    have_base = counts is not None
    path: Sequence[Sha] = _path(git, base, target, counts, plan)
    bisect = bool(path)
    path = path or [target]
    carrier = Carrier(git, patches, base if have_base else None, on_probe)
    # The conflicting patch's partial evidence (a `git blame` over base..target) is
    # gathered on a thread beside the bisection: git runs in its own process, so the
    # look costs the sync next to nothing on a second core.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="contrib-landed") as beside:
        final, partial = _drop_landed(git, carrier, path, plan,
                                      landed_share if have_base else None, beside)
        if final.failed is not None:
            index = first_true(path, lambda c: carrier.carry(c).failed is not None)
            at = carrier.carry(path[index])
            assert at.failed is not None
            if partial is not None:
                plan.evidence[final.failed.name] = partial.result()
            plan.breakage = Breakage(Landing.of(git, path[index]), at.failed.index, at.failed,
                                     carrier.commit(at), carrier.probes,
                                     [p.name for p in at.patches if p.state == UPSTREAM],
                                     plan.evidence.pop(at.failed.name, None))
            plan.result = SyncResult.CONFLICT
    for index, outcome in enumerate(final.patches):
        if outcome.state != UPSTREAM:
            continue
        landing = None
        if outcome.how == "landed":
            landing = Landing.of(git, plan.evidence[outcome.name].landed_by or target)
        elif bisect:
            landing = Landing.of(git, path[_landed_at(carrier, path, index)])
        plan.landed.append((outcome.name, landing, outcome.how))
    plan.probes = carrier.probes
    if plan.breakage is None:
        if len(plan.landed) == len(patches):
            plan.result = UPSTREAMED
        else:
            plan.result = PARTIAL if plan.landed else REBASED
            from contrib.carry.series import export_series

            plan.files = export_series(git, target, carrier.commit(final))
    return plan


def _drop_landed(git: Git, carrier: Carrier, path: Sequence[Sha], plan: Plan,
                 share: float | None, beside: Executor) -> tuple[Carry, Future[Evidence] | None]:
    """The carry at the target, with every patch that upstream landed in its own form
    dropped; the evidence of each patch goes into ``plan.evidence``.

    Patches the plain carry finds upstream (empty, reverse, present) keep that
    finding.  A patch that fails at the target is dropped when the rule lands it.  One
    that carries (3-way, no conflict) and still changes the tree is rebased, whatever
    lines stand elsewhere upstream; it is dropped only when every place it changes
    holds upstream's version of the change (:attr:`Evidence.whole`): a 3-way merge
    with upstream's reviewed version of it may "succeed" by keeping both copies.
    The look costs two batched blob reads for the whole series; the history walk
    runs only where the tip has a good share of its lines.  Needs the base: the
    evidence is which commit of base..target wrote the lines.  When a patch still
    fails, its partial evidence is asked for on ``beside``: the future is returned.
    """
    look = None
    if share is not None and carrier.base is not None:
        # The look reads its blobs (through the one reader, which takes a request at a
        # time) while the plain carry at the target runs: each is mostly waiting on git.
        looking = beside.submit(Look, git, [(p.name, p.diff) for p in carrier.patches],
                                carrier.base, path[-1], share)
        first = carrier.carry(path[-1])
        look = looking.result()
        for index, patch in enumerate(carrier.patches):
            evidence = plan.evidence[patch.name] = look.evidence(index)
            if evidence.landed_by is not None and evidence.whole \
                    and first.state_of(index) != UPSTREAM:
                carrier.drop(index, path, _position(git, path, evidence.landed_by))

    def landed_at(index: int) -> int | None:
        by = plan.evidence.get(carrier.patches[index].name)
        return None if by is None or by.landed_by is None \
            else _position(git, path, by.landed_by)

    final = carry_dropping(carrier, path, landed_at)
    failed = final.failed
    if failed is None or look is None:
        return final, None
    # The person resolving it should know how much of it upstream has, and whose.
    return final, beside.submit(look.evidence, failed.index, FLOOR)


def carry_dropping(carrier: Carrier, path: Sequence[str], landed_at: Callable[[int], int | None],
                   start: int = 0, onto: str | None = None) -> Carry:
    """The carry at ``onto`` (default: the end of ``path``) from patch ``start``; each
    patch that fails there is dropped when ``landed_at`` says where on ``path`` upstream
    landed it, until one fails that upstream did not land, or none fails.  A patch
    that carries is never asked about."""
    onto = onto or path[-1]
    while True:
        carry = carrier.carry(onto, start=start)
        failed = carry.failed
        at = None if failed is None else landed_at(failed.index)
        if failed is None or at is None:
            return carry
        carrier.drop(failed.index, path, at)


def _position(git: Git, path: Sequence[Sha], commit: str) -> int:
    """The first commit of ``path`` that holds ``commit`` (which may sit on a side branch)."""
    if commit in path:
        return path.index(Sha(commit))
    return first_true(path, lambda c: git.is_ancestor(commit, c))


def _landed_at(carrier: Carrier, path: Sequence[Sha], index: int) -> int:
    """First commit of ``path`` at which patch ``index`` is already upstream."""
    def upstream_at(commit: str) -> bool:
        return carrier.carry(commit).state_of(index) == UPSTREAM

    return first_true(path, upstream_at)


def _path(git: Git, base: str, target: str, counts: tuple[int, ...] | None,
          plan: Plan) -> Sequence[Sha]:
    """The commits to bisect over: target's first-parent line since the base (empty: none).

    When the base is not an ancestor of the target (a release branch, or a
    rewritten history) the line starts after their merge base; with no merge
    base at all there is nothing to bisect and the carry happens at the
    target only.
    """
    have_base = counts is not None
    only_base, only_target = counts if counts is not None else (1, 0)
    if only_base == 0:  # the base is an ancestor of the target
        plan.commits = only_target
        return FirstParents(git, base, target)
    status, out, _ = git.try_run("merge-base", base, target) if have_base else (1, "", "")
    if status == 0 and out.strip():
        fork = out.strip()
        path = first_parent_path(git, base, target)
        plan.commits = len(path)
        if path:
            plan.notes.append(f"base {base[:12]} is not an ancestor of {target[:12]} (upstream "
                              f"rewrote its history, or the base is on a release branch); "
                              f"carried 3-way, bisecting from their merge base {fork[:12]}")
            return path
        plan.notes.append(f"target {target[:12]} is behind base {base[:12]}; applied 3-way "
                          "directly at the target")
        return []
    if not have_base:
        plan.notes.append(f"base {base[:12]} is no longer in the upstream cache (history "
                          f"rewritten?); applied directly at {target[:12]}")
    else:
        plan.notes.append(f"base {base[:12]} is not an ancestor of {target[:12]} and shares "
                          "no history with it (upstream rewrote its history); applied 3-way "
                          "directly at the target, no bisection")
    return []
