"""The sync engine: carry patchsets onto a new upstream commit and record the outcome.

Fetches each upstream once, carries every selected patchset's current version
onto the target commit (the branch tip, or ``--to``), and records the result:
a new version directory plus ``patchset.toml`` in one transaction, or a
conflict worktree to resolve.  With ``--commit`` all changed patchsets go into
exactly one commit of the workspace repository (one subject line for a single
patchset, a list in the body for several).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from contrib.carry import conflict, retention
from contrib.carry.engine import (
    ERROR,
    MOVED,
    PARTIAL,
    REBASED,
    UNCHANGED,
    UPSTREAMED,
    Carrier,
    Carry,
    Landing,
    Plan,
    evidence_dict,
    load_patches,
    plan_sync,
)
from contrib.carry.landed import LANDED_SHARE, Evidence
from contrib.carry.report import Report
from contrib.carry.series import MailPatch, apply_series, export_series
from contrib.carry.versions import Event, Files, How, add_event, write_version
from contrib.clock import now_iso
from contrib.errors import ContribError, NeedsAttention, UpstreamUnreachable, UsageError
from contrib.git.cache import Mirror
from contrib.git.repo import Git, Sha
from contrib.ui import UI, Task
from contrib.workspace.model import Patchset, Workspace, parse_target
from contrib.workspace.schema import (
    Landed,
    SyncDetails,
    SyncRecord,
    SyncResult,
    UpstreamStatus,
    read_meta,
)

CONFLICT = SyncResult.CONFLICT
# A patch that makes or changes a symlink (its mode line, or its index line's mode).
_LINK_MODE = re.compile(r"^(?:new file mode|new mode|index \S+) 120000$", re.M)
OK_RESULTS = {UNCHANGED, REBASED, UPSTREAMED, PARTIAL}


@dataclass
class Outcome:
    """What one ``sync`` did: a report per patchset, and the workspace commit it made."""

    reports: list[Report]
    committed: str | None = None
    message: str | None = None  # when nothing was selected: what to do instead
    aborted: list[conflict.Pending] | None = None  # --abort: the conflicts dropped
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
    state = conflict.load_state(ws.state_dir)
    if abort:
        return Outcome([], aborted=_abort(ws, _pending_for(ws, targets, state, "--abort"), state))
    unreachable: dict[str, str] = {}
    if continue_:
        chosen = _pending_for(ws, targets, state, "--continue")
        mirrors = _mirrors(ws, ui, sorted({p.patchset.split("/")[0] for p in chosen}), False)
        reports = [_continue(ws, mirrors[p.patchset.split("/")[0]], p, state) for p in chosen]
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


def carry(ws: Workspace, ui: UI, patchsets: list[Patchset], *, to: str | None = None,
          fetch: bool, state: dict[str, conflict.Pending] | None = None) -> list[Report]:
    """Carry ``patchsets`` onto their upstream's tip (or ``to``), each upstream fetched once;
    one Report per patchset, each result already recorded in the workspace.  The
    patchsets of an unreachable upstream are reported as errors (UpstreamUnreachable
    when no upstream could be reached at all)."""
    return _carry(ws, ui, patchsets, to=to, fetch=fetch, state=state)[0]


def _carry(ws: Workspace, ui: UI, patchsets: list[Patchset], *, to: str | None, fetch: bool,
           state: dict[str, conflict.Pending] | None) -> tuple[list[Report], dict[str, str]]:
    """:func:`carry`, and the unreachable upstreams with git's reason."""
    state = conflict.load_state(ws.state_dir) if state is None else state
    mirrors, cut_off = _reachable(ws, ui, sorted({ps.upstream for ps in patchsets}), fetch)
    pinned = {name: m.resolve(to) for name, m in mirrors.items()} if to else {}
    tips = {ps.target: pinned.get(ps.upstream) or mirrors[ps.upstream].tip(
        ps.branch, named_at=ps.targets_at) for ps in patchsets if ps.upstream in mirrors}
    reports = []
    with ui.task("sync", total=len(patchsets)) as task:
        for ps in patchsets:
            task.update(ps.target)
            if ps.upstream in cut_off:
                reports.append(Report(ps.target, ERROR, ps.current.base,
                                      error=str(cut_off[ps.upstream])))
            else:
                reports.append(_sync_one(ws, ps, mirrors[ps.upstream], tips[ps.target],
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
              state: dict[str, conflict.Pending], task: Task | None = None) -> Report:
    base = ps.current.base
    pending = state.get(ps.target)
    if pending is not None:
        return Report(ps.target, CONFLICT, base, pending.target, conflict=_pending_dict(pending),
                      notes=[f"a conflict is waiting in {pending.worktree}: resolve it and run "
                             f"`contrib sync --continue {ps.target}`, or `--abort`"])
    git = mirror.git
    if base == target:
        return Report(ps.target, UNCHANGED, base, target, patches=ps.current.series())
    known = _known_upstream(ps, git, target)
    if known is not None:
        return known
    try:
        patches = load_patches(git, ps.current.patch_texts())
        if any(_LINK_MODE.search(p.diff) for p in patches) and git.try_rev_parse(base):
            apply_series(git, base, patches)  # checks where the version's symlinks lead
        plan = plan_sync(git, patches, Sha(base), target, on_probe=None if task is None else (
            lambda n, at: task.update(f"{ps.target}: apply probe {n} at {at[:10]}")),
            landed_share=ps.info.sync_rules.landed_share or LANDED_SHARE)
    except ContribError as exc:
        return Report(ps.target, ERROR, base, target, error=str(exc))
    return _record(ws, ps, git, plan, patches, state)


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


def _record(ws: Workspace, ps: Patchset, git: Git, plan: Plan, patches: list[MailPatch],
            state: dict[str, conflict.Pending],
            resolved: tuple[Sha, list[tuple[str, bytes]]] | None = None) -> Report:
    """Write what ``plan`` decided (one transaction) and describe it.

    ``resolved`` is a version made by --continue at the breaking commit; it is
    written in the same transaction.
    """
    report = Report(ps.target, plan.result, plan.base, plan.target, commits=plan.commits,
                    probes=plan.probes, notes=list(plan.notes))
    report.upstreamed = [{"patch": name, "how": how,
                          "commit": landing.as_dict() if landing else None}
                         | _landed_evidence(git, plan.evidence.get(name) if how == "landed" else None)
                         for name, landing, how in plan.landed]
    report.notes += _partial_notes(plan)
    if plan.result == UNCHANGED and resolved is None:
        report.patches = ps.current.series()
        return report
    previous = ps.meta_text()
    if plan.result == CONFLICT:
        report.conflict = _open_conflict(ws, ps, git, plan, patches, state, previous)
    versions: list[tuple[str, Files, Event]] = []
    previous_current = ps.current.base
    if resolved is not None:
        versions.append((resolved[0], resolved[1], Event(
            How.RESOLVED, resolved[0], previous=previous_current,
            detail=f"conflict resolved by hand at {resolved[0][:12]}")))
        report.version, report.patches = resolved[0], [n for n, _ in resolved[1]]
        if plan.result == UNCHANGED:
            report.result = REBASED
    if plan.result in (REBASED, PARTIAL):
        versions.append((plan.target, plan.files, Event(
            How.SYNC, plan.target, previous=plan.base, result=plan.result,
            detail=f"{plan.commits} upstream commit(s), {plan.probes} probe(s)"
                   + _landed_detail(plan))))
        report.version, report.patches = plan.target, [n for n, _ in plan.files]
    if plan.result == UPSTREAMED:
        ps.set_upstream_status(UpstreamStatus.UPSTREAMED)
        add_event(ps.meta, Event(How.SYNC, plan.base, result=UPSTREAMED,
                                 detail=f"every patch is in {plan.target[:12]}"
                                        + _landed_detail(plan)))
    ps.set_sync(_sync_record(report))
    with ws.transaction() as txn:
        for sha, files, event in versions:
            write_version(txn, ps, sha, files, event)
        if versions:
            pruned = retention.apply(txn, ps, git).pruned
            if pruned:
                report.notes.append(f"{len(pruned)} older version folder(s) left the working "
                                    "tree; the workspace's git history keeps them")
        ps.save_meta(txn)
    report.changed = report.result != CONFLICT
    return report


def _landed_detail(plan: Plan) -> str:
    """For the history (and `contrib log`): each patch upstream landed in its own form."""
    parts = []
    for name, landing, how in plan.landed:
        ev = plan.evidence.get(name)
        if how != "landed" or landing is None or ev is None:
            continue
        changed = f", then changed by {', '.join(c[:10] for c in ev.changed_by)}" \
            if ev.changed_by else ""
        parts.append(f"{name} landed in {landing.short()} ({ev.share:.0%} of its added "
                     f"lines{changed})")
    return "".join(f"; {p}" for p in parts)


def _partial_notes(plan: Plan) -> list[str]:
    """A line for each patch that is partly upstream already (and so not dropped)."""
    found = dict(plan.evidence)
    if plan.breakage is not None and plan.breakage.evidence is not None:
        found[plan.breakage.patch.name] = plan.breakage.evidence
    return [f"{name}: {ev.summary()} (below the landed_share of {ev.threshold:.0%}: not "
            "taken as upstreamed; check the result for a duplicate)"
            for name, ev in found.items() if ev.landed_by is None and ev.by]


def _landed_evidence(git: Git, evidence: Evidence | None) -> dict[str, Any]:
    """A "landed" patch's report keys: ``share``, ``landed_by``, ``changed_by``."""
    if evidence is None:
        return {}
    info = evidence_dict(git, evidence)
    return {k: info[k] for k in ("share", "landed_by", "changed_by")}


def _sync_record(report: Report) -> SyncRecord:
    """The [sync] record of patchset.toml for ``report``."""
    upstreamed = tuple(Landed(u["patch"], u["how"], **_drop_none(u["commit"] or {}),
                              share=u.get("share"),
                              changed_by=tuple(c["sha"] for c in u.get("changed_by", ())))
                       for u in report.upstreamed)
    conflict = None
    if report.conflict:
        conflict = _drop_none({k: v for k, v in report.conflict.items() if k != "commit"} | {
            "commit": _drop_none(report.conflict["commit"])})
        if "evidence" in conflict:
            conflict["evidence"] = _toml_safe(conflict["evidence"])
    details = SyncDetails(report.version, tuple(report.patches) if report.version else (),
                          upstreamed, conflict, tuple(report.notes))
    return SyncRecord(SyncResult(report.result), report.base, report.target, now_iso(),
                      report.commits, report.probes, details)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None and v != [] and v != {}}


def _toml_safe(value: Any) -> Any:
    """``value`` with every None (and empty list/table) left out, all the way down."""
    if isinstance(value, dict):
        return _drop_none({k: _toml_safe(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_toml_safe(v) for v in value]
    return value


# -- conflicts -----------------------------------------------------------------

def _open_conflict(ws: Workspace, ps: Patchset, git: Git, plan: Plan, patches: list[MailPatch],
                   state: dict[str, conflict.Pending], previous: str) -> dict[str, Any]:
    """Hand the breakage to the user: worktree, state entry, description."""
    broken = plan.breakage
    assert broken is not None
    failing = patches[broken.index]
    pending = conflict.Pending(
        patchset=ps.target, base=plan.base, target=plan.target, breaking=broken.commit.sha,
        head=broken.head, index=broken.index, patch=failing.name, reason=broken.reason,
        folder=str(conflict.folder_for(ws.state_dir, ps.target)), files=broken.patch.files,
        previous_meta=previous)
    raw = (ps.version(plan.base).dir / failing.name).read_bytes() \
        if (ps.version(plan.base).dir / failing.name).is_file() else failing.diff.encode()
    marked = conflict.prepare(git, pending, failing, raw)
    state[ps.target] = pending
    conflict.save_state(ws.state_dir, state)
    info = _pending_dict(pending)
    info.update(commit=broken.commit.as_dict(), hunks=broken.patch.hunks, marked=marked,
                probes=broken.probes, upstream_before=broken.upstream_before)
    if broken.evidence is not None:
        info["evidence"] = evidence_dict(git, broken.evidence)
    return info


def _pending_dict(pending: conflict.Pending) -> dict[str, Any]:
    return {"commit": {"sha": pending.breaking}, "patch": pending.patch,
            "reason": pending.reason, "files": pending.files,
            "worktree": str(pending.worktree),
            "breaking_diff": str(Path(pending.folder) / "BREAKING.diff")}


def _pending_for(ws: Workspace, targets: list[str], state: dict[str, conflict.Pending],
                 flag: str) -> list[conflict.Pending]:
    for target in targets:
        parse_target(target)
    if not state:
        raise UsageError(f"{flag}: no conflict is pending in {ws.root}")
    if not targets:
        return [state[k] for k in sorted(state)]
    chosen = []
    for target in targets:
        hits = [p for k, p in sorted(state.items())
                if k == target.strip("/") or k.split("/")[0] == target.strip("/")]
        if not hits:
            raise UsageError(f"{flag} {target}: no conflict pending for it (pending: "
                             f"{', '.join(sorted(state))})")
        chosen += [p for p in hits if p not in chosen]
    return chosen


def _continue(ws: Workspace, mirror: Mirror, pending: conflict.Pending,
              state: dict[str, conflict.Pending]) -> Report:
    """Turn the resolved worktree into a version at the breaking commit, then carry on."""
    ps = ws.patchset(pending.patchset)
    git = mirror.git
    last = ps.sync
    if last is not None and last.target == pending.target and last.result in OK_RESULTS:
        # A --continue killed after recording this resolution, before cleaning up.
        conflict.remove(git, pending)
        del state[ps.target]
        conflict.save_state(ws.state_dir, state)
        return Report(ps.target, UNCHANGED, ps.current.base, pending.target,
                      patches=ps.current.series(),
                      notes=["already recorded by an interrupted --continue; removed its "
                             f"worktree {pending.worktree}"])
    patches = load_patches(git, ps.version(pending.base).patch_texts())
    if not conflict.ready(pending):
        return _reprepare(ws, ps, git, pending, patches, state)
    resolution = _resolution(git, pending, patches[pending.index])
    have_base = git.try_rev_parse(pending.base) is not None
    carrier = Carrier(git, patches, Sha(pending.base) if have_base else None)
    rest = carrier.carry(resolution, start=pending.index + 1)
    tip = carrier.commit(rest)
    if rest.failed is not None:
        return _conflict_again(ws, ps, git, pending, patches, rest, tip, state)
    report = _record_resolution(ws, ps, git, pending, patches, tip, state)
    # Only once the resolution is recorded may the worktree holding it go: a run
    # killed before this point leaves it (and the pending state) for the next
    # --continue.  A further conflict has already replaced both.
    if state.get(ps.target) is pending:
        conflict.remove(git, pending)
        del state[ps.target]
        conflict.save_state(ws.state_dir, state)
    return report


def _reprepare(ws: Workspace, ps: Patchset, git: Git, pending: conflict.Pending,
               patches: list[MailPatch], state: dict[str, conflict.Pending]) -> Report:
    """The worktree is missing or half-made (a run killed while preparing it): make it
    again from the recorded state, which holds every earlier resolution in its head."""
    failing = patches[pending.index]
    raw = (ps.version(pending.base).dir / failing.name).read_bytes()
    marked = conflict.prepare(git, pending, failing, raw)
    conflict.save_state(ws.state_dir, state)
    info = _pending_dict(pending)
    info.update(commit=Landing.of(git, pending.breaking).as_dict(), marked=marked)
    return Report(ps.target, CONFLICT, pending.base, pending.target, conflict=info,
                  notes=[f"{pending.worktree} was missing or half-made (an interrupted run); "
                         f"re-created it: resolve {failing.name} there and run `contrib sync "
                         f"--continue {ps.target}`"])


def _resolution(git: Git, pending: conflict.Pending, failing: MailPatch) -> Sha:
    """The failing patch as resolved in the worktree: a commit on ``pending.head``."""
    left = conflict.unresolved(pending, failing)
    if left:
        raise NeedsAttention(f"{pending.worktree}: unresolved conflicts in {', '.join(left)}; "
                             "edit them (remove every <<<<<<< / >>>>>>> marker, delete .rej "
                             f"files), then run `contrib sync --continue {pending.patchset}` "
                             "again")
    tree = conflict.resolved_tree(pending, failing)
    head = Sha(pending.head)
    if tree != git.run("rev-parse", f"{head}^{{tree}}"):
        return git.commit_tree(tree, [head], failing.message, failing.author)
    if pending.reason == MOVED:
        raise NeedsAttention(f"{pending.worktree}: nothing changed; apply "
                             f"{Path(pending.folder) / pending.patch} by hand where it belongs "
                             f"(it landed in the wrong function), or run --abort")
    return head  # resolved to nothing: the patch is dropped


def _record_resolution(ws: Workspace, ps: Patchset, git: Git, pending: conflict.Pending,
                       patches: list[MailPatch], tip: Sha,
                       state: dict[str, conflict.Pending]) -> Report:
    """Record the version at the breaking commit and carry it on to the target."""
    breaking = Sha(pending.breaking)
    files = export_series(git, breaking, tip) if tip != breaking else []
    if not files:
        plan = Plan(UPSTREAMED, Sha(pending.base), Sha(pending.target),
                    landed=[(p.name, Landing.of(git, breaking), "resolved") for p in patches])
        return _record(ws, ps, git, plan, patches, state)
    new_patches = load_patches(git, files)
    plan = plan_sync(git, new_patches, breaking, Sha(pending.target))
    note = f"resolved {pending.patch} at {breaking[:12]}"
    if plan.result == CONFLICT:
        # Record the resolution on its own first: an --abort of the next
        # conflict must keep it.
        _record(ws, ps, git, Plan(UNCHANGED, Sha(pending.base), breaking), patches, state,
                resolved=(breaking, files))
        report = _record(ws, ps, git, plan, new_patches, state)
        report.notes[:0] = [note, f"recorded the resolved version at {breaking[:12]}"]
        return report
    report = _record(ws, ps, git, plan, new_patches, state, resolved=(breaking, files))
    report.notes.insert(0, note)
    return report


def _conflict_again(ws: Workspace, ps: Patchset, git: Git, pending: conflict.Pending,
                    patches: list[MailPatch], rest: Carry, tip: Sha,
                    state: dict[str, conflict.Pending]) -> Report:
    """A later patch of the series conflicts on top of the resolution: hand it over too."""
    failed = rest.failed
    assert failed is not None
    index = failed.index
    failing = patches[index]
    pending.head, pending.index, pending.patch = tip, index, failing.name
    pending.reason, pending.files = failed.state, failed.files
    raw = (ps.version(pending.base).dir / failing.name).read_bytes()
    # The state first: its head holds the resolution just made, so a run killed
    # while the worktree is re-made leaves a state --continue can prepare again.
    state[ps.target] = pending
    conflict.save_state(ws.state_dir, state)
    marked = conflict.prepare(git, pending, failing, raw)
    info = _pending_dict(pending)
    info.update(commit=Landing.of(git, pending.breaking).as_dict(), hunks=failed.hunks,
                marked=marked)
    return Report(ps.target, CONFLICT, pending.base, pending.target, conflict=info,
                  notes=[f"resolved {patches[index - 1].name}; {failing.name} conflicts next"])


def _abort(ws: Workspace, chosen: list[conflict.Pending],
           state: dict[str, conflict.Pending]) -> list[conflict.Pending]:
    """Remove the worktrees and state; restore each patchset's [sync] record."""
    for pending in chosen:
        ps = ws.patchset(pending.patchset)
        try:
            git = Mirror(ws.config.upstream(ps.upstream)).git
            conflict.remove(git, pending)
        except ContribError:
            shutil.rmtree(pending.folder, ignore_errors=True)
        _restore_sync(ps, pending.previous_meta)
        del state[pending.patchset]
        conflict.save_state(ws.state_dir, state)
    return chosen


def _restore_sync(ps: Patchset, previous_text: str | None) -> None:
    """Put back the [sync] record from before the conflict; the file verbatim if nothing
    else in it changed since."""
    try:
        before = tomlkit.parse(previous_text or "")
        previous = read_meta(ps.meta_path, previous_text, before.unwrap()) if previous_text else None
    except Exception:  # a hand-edited state file: drop the record rather than guess at it
        before, previous, previous_text = tomlkit.document(), None, None
    ps.set_sync(previous.sync if previous else None)
    same = previous_text and before.unwrap() == ps.meta.unwrap()
    ps.workspace.write_file(ps.meta_path, previous_text if same and previous_text else ps.meta_text())


# -- --commit -------------------------------------------------------------------

def workspace_repo(ws: Workspace) -> Git:
    """The git repository holding the workspace (for --commit)."""
    for folder in (ws.root, *ws.root.parents):
        if (folder / ".git").exists():
            return Git(folder)
    raise UsageError(f"{ws.root}: --commit needs the workspace in a git repository; run "
                     "`git init` there (and commit contrib.toml), or drop --commit")


def _summary(report: Report) -> str:
    target = (report.version or report.target or "")[:7]
    if report.result == UPSTREAMED:
        landings = [u["commit"] for u in report.upstreamed if u["commit"]]
        first = landings[-1] if landings else None
        pr = f" (#{first['pr']})" if first and first.get("pr") else ""
        return f"upstreamed in {first['sha'][:7]}{pr}" if first else "upstreamed"
    text = f"rebase onto {target} (+{report.commits} commits)"
    if report.result == PARTIAL:
        text += f", drop {len(report.upstreamed)} upstreamed patch(es)"
    return text


def commit_changes(repo: Git, ws: Workspace, reports: list[Report]) -> str | None:
    """Commit every changed patchset folder in one commit; its sha, or None if nothing."""
    changed = [r for r in reports if r.changed]
    top = Path(repo.run("rev-parse", "--show-toplevel"))
    rels = [str((ws.root / "patchsets" / r.patchset).relative_to(top)) for r in changed]
    if not rels or not repo.run("status", "--porcelain", "--", *rels):
        return None
    if len(changed) == 1:
        message = f"{changed[0].patchset}: {_summary(changed[0])}\n"
    else:
        body = "".join(f"- {r.patchset}: {_summary(r)}\n" for r in changed)
        message = f"sync {len(changed)} patchsets onto upstream\n\n{body}"
    return repo.commit_paths(rels, message)
