"""The sync engine: carry patchsets onto a new upstream commit and record the outcome.

Fetches each upstream once, carries every selected patchset's current version
onto the target commit (the branch tip, or ``--to``), and records the result:
a new version directory plus ``patchset.toml`` in one transaction, or a
conflict worktree to resolve.  With ``--commit`` all changed patchsets go into
exactly one commit of the workspace repository (one subject line for a single
patchset, a list in the body for several).

A patchset already at the target is decided from the workspace's own files and
one ref lookup per upstream branch; the carry engine (probes, landing detection,
conflicts, the record) loads only when a patchset moves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from contrib.carry.report import (
    CONFLICT,
    ERROR,
    OK_RESULTS,
    PARTIAL,
    UNCHANGED,
    UPSTREAMED,
    Report,
)
from contrib.carry.syncstate import Pending, load_state, pending_dict
from contrib.errors import ContribError, UpstreamUnreachable, UsageError
from contrib.git.cache import Mirror
from contrib.git.repo import Git, Sha, enclosing_repo
from contrib.ui import UI, Task, counted
from contrib.workspace.model import Patchset, Workspace

# A patch that makes or changes a symlink (its mode line, or its index line's mode).
_LINK_MODE = re.compile(r"^(?:new file mode|new mode|index \S+) 120000$", re.M)


@dataclass
class Outcome:
    """What one ``sync`` did: a report per patchset, and the workspace commit it made."""

    reports: list[Report]
    committed: str | None = None
    message: str | None = None  # when nothing was selected: what to do instead
    aborted: list[Pending] | None = None  # --abort: the conflicts dropped
    unreachable: dict[str, str] = field(default_factory=dict)  # upstream -> git's reason

    @property
    def ok(self) -> bool:
        """Every patchset is carried or upstreamed: nothing needs the user."""
        return all(r.result in OK_RESULTS for r in self.reports)


def sync(ws: Workspace, ui: UI, targets: list[str], *, to: str | None, commit: bool,
         continue_: bool, abort: bool, fetch: bool) -> Outcome:
    """Carry the selected patchsets onto their upstream's new commit."""
    if continue_ and abort:
        raise UsageError("give either --continue or --abort, not both")
    if to and (continue_ or abort):
        raise UsageError("--to cannot be combined with --continue/--abort: the target was "
                         "fixed when the conflict was found")
    repo = workspace_repo(ws) if commit else None
    if repo is not None:
        check_identity(repo)  # before anything is written: no versions made, then git refusing
    state = load_state(ws.state_dir)
    _repair_worktrees(ws, state)
    if abort:
        from contrib.carry.resume import abort_conflicts, pending_for

        chosen = pending_for(ws, targets, state, "--abort")
        return Outcome([], aborted=abort_conflicts(ws, chosen, state))
    unreachable: dict[str, str] = {}
    if continue_:
        from contrib.carry.resume import pending_for, resume

        chosen = pending_for(ws, targets, state, "--continue")
        mirrors = _mirrors(ws, ui, sorted({p.patchset.split("/")[0] for p in chosen}), False)
        reports = [resume(ws, mirrors[p.patchset.split("/")[0]], p, state) for p in chosen]
    else:
        patchsets = ws.patchsets(targets)
        if not patchsets:
            return Outcome([], message=ws.empty_message(targets))
        reports, unreachable = _carry(ws, ui, patchsets, to=to, fetch=fetch, state=state)
        for name, reason in sorted(unreachable.items()):
            ui.warn(f"upstream {name} is unreachable: {reason}; its patchsets were not synced "
                    "(fix url in contrib.toml or the network, then run `contrib sync` again)")
    committed = commit_changes(repo, ws, reports) if repo is not None else None
    return Outcome(reports, committed, unreachable=unreachable)


def _repair_worktrees(ws: Workspace, state: dict[str, Pending]) -> None:
    """Re-attach every pending conflict's worktree to its upstream cache, before any of
    them is touched: after an ``mv`` of the workspace the cache still names the old
    place, and removing one worktree (--abort, --continue, a new conflict) prunes the
    others away, resolutions and all.  One git run per pending conflict, none without."""
    if not state:
        return
    from contrib.carry import conflict

    for pending in state.values():
        try:
            git = Mirror(ws.config.upstream(pending.patchset.split("/")[0])).git
        except ContribError:  # no longer configured, or no cache: nothing to re-attach to
            continue
        conflict.repair(git, pending)


def carry(ws: Workspace, ui: UI, patchsets: list[Patchset], *, to: str | None = None,
          fetch: bool, state: dict[str, Pending] | None = None) -> list[Report]:
    """Carry ``patchsets`` onto their upstream's tip (or ``to``), each upstream fetched once;
    one Report per patchset, each result already recorded in the workspace.  The
    patchsets of an unreachable upstream are reported as errors (UpstreamUnreachable
    when no upstream could be reached at all)."""
    return _carry(ws, ui, patchsets, to=to, fetch=fetch, state=state)[0]


def _carry(ws: Workspace, ui: UI, patchsets: list[Patchset], *, to: str | None, fetch: bool,
           state: dict[str, Pending] | None) -> tuple[list[Report], dict[str, str]]:
    """:func:`carry`, and the unreachable upstreams with git's reason."""
    state = load_state(ws.state_dir) if state is None else state
    mirrors, cut_off = _reachable(ws, ui, sorted({ps.upstream for ps in patchsets}), fetch)
    pinned = {name: m.resolve(to) for name, m in mirrors.items()} if to else {}
    tips: dict[tuple[str, str], Sha] = {}  # one ref lookup per upstream branch
    for ps in patchsets:
        if ps.upstream in mirrors and (ps.upstream, ps.branch) not in tips:
            tips[ps.upstream, ps.branch] = pinned.get(ps.upstream) or mirrors[ps.upstream].tip(
                ps.branch, named_at=ps.targets_at)
    reports = []
    with ui.task("sync", total=len(patchsets)) as task:
        for ps in patchsets:
            task.update(ps.target)
            if ps.upstream in cut_off:
                reports.append(Report(ps.target, ERROR, ps.current.base,
                                      error=str(cut_off[ps.upstream])))
            else:
                reports.append(_sync_one(ws, ps, mirrors[ps.upstream],
                                         tips[ps.upstream, ps.branch],
                                         state, task))
            task.advance(ps.target)
    return reports, {name: exc.reason for name, exc in cut_off.items()}


def _reachable(ws: Workspace, ui: UI, names: list[str], fetch: bool
               ) -> tuple[dict[str, Mirror], dict[str, UpstreamUnreachable]]:
    """The caches of the upstreams that could be cloned or fetched (each fetched once),
    and the failure of each that could not.  One unreachable upstream does not stop
    the others; when none was reached, its failure is the error of the run (exit 2)."""
    mirrors: dict[str, Mirror] = {}
    cut_off: dict[str, UpstreamUnreachable] = {}
    for name in names:
        try:
            mirrors[name] = _mirrors(ws, ui, [name], fetch)[name]
        except UpstreamUnreachable as exc:
            cut_off[name] = exc
    if cut_off and not mirrors:
        raise next(iter(cut_off.values()))
    return mirrors, cut_off


def _mirrors(ws: Workspace, ui: UI, names: list[str], fetch: bool) -> dict[str, Mirror]:
    """One cache per upstream, fetched once."""
    out = {}
    for name in names:
        mirror = Mirror(ws.config.upstream(name))
        if fetch:
            ui.step(f"fetching {name} ...")
        out[name] = mirror.ensure(fetch_now=fetch, progress=ui.progress)
    return out


# -- a plain sync -------------------------------------------------------------

def _sync_one(ws: Workspace, ps: Patchset, mirror: Mirror, target: Sha,
              state: dict[str, Pending], task: Task | None = None) -> Report:
    base = ps.current.base
    pending = state.get(ps.target) or state.get(ps.legacy_target)
    if pending is not None:
        return Report(ps.target, CONFLICT, base, pending.target, conflict=pending_dict(pending),
                      notes=[f"a conflict is waiting in {pending.worktree}: resolve it and run "
                             f"`contrib sync --continue {ps.target}`, or `--abort`"])
    git = mirror.git
    if base == target:
        return Report(ps.target, UNCHANGED, base, target, patches=ps.current.series())
    known = _known_upstream(ps, git, target)
    if known is not None:
        return known
    return _carry_one(ws, ps, git, target, state, task)


def _carry_one(ws: Workspace, ps: Patchset, git: Git, target: Sha,
               state: dict[str, Pending], task: Task | None) -> Report:
    """Carry ``ps`` onto ``target`` and record the result.  The engine (probes, landing
    detection, conflicts, the record) is loaded here: only a patchset that moves needs it."""
    from contrib.carry.landed import LANDED_SHARE
    from contrib.carry.outcome import record_plan
    from contrib.carry.plan import plan_sync
    from contrib.carry.series import apply_series, load_patches

    base = ps.current.base
    try:
        patches = load_patches(git, ps.current.patch_texts())
        if any(_LINK_MODE.search(p.diff) for p in patches) and git.try_rev_parse(base):
            apply_series(git, base, patches)  # checks where the version's symlinks lead
        plan = plan_sync(git, patches, Sha(base), target, on_probe=None if task is None else (
            lambda n, at: task.update(f"{ps.target}: apply probe {n} at {at[:10]}")),
            landed_share=ps.info.sync_rules.landed_share or LANDED_SHARE)
    except ContribError as exc:
        return Report(ps.target, ERROR, base, target, error=str(exc))
    return record_plan(ws, ps, git, plan, patches, state)


def _known_upstream(ps: Patchset, git: Git, target: Sha) -> Report | None:
    """The recorded `upstreamed` result, while the tip only moves forward from it.

    Once every patch is upstream it stays upstream; re-probing on every run
    would only spend time.
    """
    base = ps.current.base
    last = ps.sync
    if last is None or last.result != UPSTREAMED or last.base != base or not last.target:
        return None
    recorded = last.target
    if not (recorded == target or git.try_rev_parse(recorded) and
            git.is_ancestor(recorded, target)):
        return None
    landed = [{"patch": u.patch, "how": u.how, "commit": u.commit()} | u.evidence()
              for u in last.details.upstreamed]
    return Report(ps.target, UPSTREAMED, base, target, upstreamed=landed,
                  notes=[f"found upstream by the sync of {last.at} "
                         f"(at {recorded[:12]}); nothing to carry"])


# -- --commit -------------------------------------------------------------------

def workspace_repo(ws: Workspace) -> Git:
    """The git repository holding the workspace (for --commit)."""
    top = enclosing_repo(ws.root)
    if top is not None:
        return Git(top)
    raise UsageError(f"{ws.root}: --commit needs the workspace in a git repository; run "
                     "`git init` there (and commit contrib.toml), or drop --commit")


def check_identity(repo: Git) -> None:
    """Refuse --commit (exit 2, one line) when git has no identity to commit as."""
    for who in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        status, _, _ = repo.try_run("var", who)
        if status != 0:
            raise UsageError(f"{repo.path}: --commit needs a git identity and git has none; set "
                             "one (`git config user.name \"Your Name\"` and `git config "
                             "user.email you@example.com`) or drop --commit. Nothing was written")


def _summary(report: Report) -> str:
    target = (report.version or report.target or "")[:7]
    if report.result == UPSTREAMED:
        landings = [u["commit"] for u in report.upstreamed if u["commit"]]
        first = landings[-1] if landings else None
        pr = f" (#{first['pr']})" if first and first.get("pr") else ""
        return f"upstreamed in {first['sha'][:7]}{pr}" if first else "upstreamed"
    text = f"rebase onto {target} (+{report.commits} commits)"
    if report.result == PARTIAL:
        text += f", drop {counted(len(report.upstreamed), 'upstreamed patch')}"
    return text


def commit_changes(repo: Git, ws: Workspace, reports: list[Report]) -> str | None:
    """Commit every changed patchset folder in one commit; its sha, or None if nothing."""
    changed = [r for r in reports if r.changed]
    top = Path(repo.run("rev-parse", "--show-toplevel"))
    rels = [str(ws.folder_of(r.patchset).relative_to(top)) for r in changed]
    if not rels or not repo.run("status", "--porcelain", "--", *rels):
        return None
    if len(changed) == 1:
        message = f"{changed[0].patchset}: {_summary(changed[0])}\n"
    else:
        body = "".join(f"- {r.patchset}: {_summary(r)}\n" for r in changed)
        message = f"sync {len(changed)} patchsets onto upstream\n\n{body}"
    return repo.commit_paths(rels, message)
