"""One sync decision: what carrying a series from its base to a target comes to.

The carry at the target is one probe (:mod:`contrib.carry.carrier`); the
commit that breaks the series, and the one that landed each patch upstream,
are found by bisection (:mod:`contrib.carry.bisection`); a patch upstream
wrote in its own form is found by :mod:`contrib.carry.landed`.  Nothing is
written: :mod:`contrib.carry.outcome` records the :class:`Plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from contrib.carry.bisection import FirstParents, first_parent_path, first_true
from contrib.carry.carrier import UPSTREAM, Carrier, Carry, PatchCarry
from contrib.carry.landed import FLOOR, LANDED_SHARE, Evidence, Look
from contrib.carry.landing import Landing
from contrib.carry.report import PARTIAL, REBASED, UNCHANGED, UPSTREAMED
from contrib.carry.series import MailPatch
from contrib.git.repo import Git, Sha
from contrib.workspace.schema import SyncResult


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
