"""``sync --continue`` and ``--abort``: turn a resolved conflict worktree into a
version at the breaking commit and carry on, or drop the conflict and restore the
[sync] record."""

from __future__ import annotations

import shutil
from pathlib import Path

import tomlkit

from contrib.carry import conflict
from contrib.carry.carrier import MOVED, Carrier, Carry
from contrib.carry.landed import LANDED_SHARE, measure
from contrib.carry.landing import Landing
from contrib.carry.outcome import record_plan
from contrib.carry.plan import Plan, carry_dropping, plan_sync
from contrib.carry.report import (
    CONFLICT,
    OK_RESULTS,
    PARTIAL,
    REBASED,
    UNCHANGED,
    UPSTREAMED,
    Report,
)
from contrib.carry.series import MailPatch, export_series, load_patches
from contrib.carry.syncstate import Pending, check_index, pending_dict, save_state
from contrib.errors import ContribError, NeedsAttention, UsageError
from contrib.git.cache import Mirror
from contrib.git.repo import Git, Sha
from contrib.workspace.model import Patchset, Workspace, parse_target
from contrib.workspace.schema import read_meta


def pending_for(ws: Workspace, targets: list[str], state: dict[str, Pending],
                flag: str) -> list[Pending]:
    """The pending conflicts ``targets`` name (every one when none is named)."""
    for target in targets:
        parse_target(target)
    if not state:
        raise UsageError(f"{flag}: no conflict is pending in {ws.root}")
    if not targets:
        return [state[k] for k in sorted(state)]
    chosen = []
    for target in targets:
        wanted = target.strip("/")
        hits = [p for k, p in sorted(state.items())  # UP, UP/NAME (every target), or one
                if wanted in (k, k.split("/")[0], k.partition("@")[0])]
        if not hits:
            raise UsageError(f"{flag} {target}: no conflict pending for it (pending: "
                             f"{', '.join(sorted(state))})")
        chosen += [p for p in hits if p not in chosen]
    return chosen


def resume(ws: Workspace, mirror: Mirror, pending: Pending,
              state: dict[str, Pending]) -> Report:
    """Turn the resolved worktree into a version at the breaking commit, then carry on."""
    ps = ws.patchset(pending.patchset)
    git = mirror.git
    last = ps.sync
    if last is not None and last.target == pending.target and last.result in OK_RESULTS:
        # A --continue killed after recording this resolution, before cleaning up.
        conflict.remove(git, pending)
        del state[pending.patchset]
        save_state(ws.state_dir, state)
        return Report(ps.target, UNCHANGED, ps.current.base, pending.target,
                      patches=ps.current.series(),
                      notes=["already recorded by an interrupted --continue; removed its "
                             f"worktree {pending.worktree}"])
    patches = load_patches(git, ps.version(pending.base).patch_texts())
    check_index(ws.state_dir, pending, len(patches))
    if not conflict.ready(pending):
        return _reprepare(ws, ps, git, pending, patches, state)
    resolution = _resolution(git, pending, patches[pending.index])
    have_base = git.try_rev_parse(pending.base) is not None
    carrier = Carrier(git, patches, Sha(pending.base) if have_base else None)
    # A later patch that no longer carries, and that upstream landed in its own form at
    # or before the breaking commit, is skipped, as the sync that stopped here would.
    # One that still carries is dropped only when every place it changes holds
    # upstream's version (a 3-way merge would keep both copies).
    dropped: dict[str, str] = {}

    def landed(index: int) -> str | None:
        sha = pending.landed.get(patches[index].name)
        return sha if sha and git.is_ancestor(sha, pending.breaking) else None

    def landed_at(index: int) -> int | None:
        sha = landed(index)
        if sha is None:
            return None
        dropped[patches[index].name] = sha
        return 0

    share = ps.info.sync_rules.landed_share or LANDED_SHARE
    for index, patch in enumerate(patches[pending.index + 1:], pending.index + 1):
        if landed(index) and measure(git, patch.diff, patch.name, pending.base,
                                     pending.target, share).whole:
            landed_at(index)
            carrier.drop(index, [], 0)
    rest = carry_dropping(carrier, [], landed_at, start=pending.index + 1, onto=resolution)
    tip = carrier.commit(rest)
    if rest.failed is not None:
        return _conflict_again(ws, ps, git, pending, patches, rest, tip, state)
    report = _record_resolution(ws, ps, git, pending, patches, tip, state, dropped)
    # Only once the resolution is recorded may the worktree holding it go: a run
    # killed before this point leaves it (and the pending state) for the next
    # --continue.  A further conflict has already replaced both.
    if state.get(pending.patchset) is pending:
        conflict.remove(git, pending)
        del state[pending.patchset]
        save_state(ws.state_dir, state)
    return report


def _reprepare(ws: Workspace, ps: Patchset, git: Git, pending: Pending,
               patches: list[MailPatch], state: dict[str, Pending]) -> Report:
    """The worktree is missing or half-made (a run killed while preparing it): make it
    again from the recorded state, which holds every earlier resolution in its head."""
    failing = patches[pending.index]
    raw = (ps.version(pending.base).dir / failing.name).read_bytes()
    marked = conflict.prepare(git, pending, failing, raw)
    save_state(ws.state_dir, state)
    info = pending_dict(pending)
    info.update(commit=Landing.of(git, pending.breaking).as_dict(), marked=marked)
    return Report(ps.target, CONFLICT, pending.base, pending.target, conflict=info,
                  notes=[f"{pending.worktree} was missing or half-made (an interrupted run); "
                         f"re-created it: resolve {failing.name} there and run `contrib sync "
                         f"--continue {ps.target}`"])


def _resolution(git: Git, pending: Pending, failing: MailPatch) -> Sha:
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


def _record_resolution(ws: Workspace, ps: Patchset, git: Git, pending: Pending,
                       patches: list[MailPatch], tip: Sha,
                       state: dict[str, Pending], dropped: dict[str, str]) -> Report:
    """Record the version at the breaking commit and carry it on to the target;
    ``dropped`` (patch -> commit) were skipped as landed upstream in their own form."""
    breaking = Sha(pending.breaking)
    share = ps.info.sync_rules.landed_share or LANDED_SHARE
    files = export_series(git, breaking, tip) if tip != breaking else []
    if not files:
        plan = Plan(UPSTREAMED, Sha(pending.base), Sha(pending.target),
                    landed=[(p.name, Landing.of(git, dropped.get(p.name, breaking)),
                             "landed" if p.name in dropped else "resolved") for p in patches])
        _landed_evidence_of(git, pending, patches, dropped, plan, share)
        return record_plan(ws, ps, git, plan, patches, state)
    new_patches = load_patches(git, files)
    plan = plan_sync(git, new_patches, breaking, Sha(pending.target), landed_share=share)
    if dropped:
        plan.landed[:0] = [(name, Landing.of(git, sha), "landed") for name, sha in dropped.items()]
        _landed_evidence_of(git, pending, patches, dropped, plan, share)
        if plan.result == REBASED:
            plan.result = PARTIAL
    note = f"resolved {pending.patch} at {breaking[:12]}"
    if plan.result == CONFLICT:
        # Record the resolution on its own first: an --abort of the next
        # conflict must keep it.
        record_plan(ws, ps, git, Plan(UNCHANGED, Sha(pending.base), breaking), patches, state,
                resolved=(breaking, files))
        report = record_plan(ws, ps, git, plan, new_patches, state)
        report.notes[:0] = [note, f"recorded the resolved version at {breaking[:12]}"]
        return report
    report = record_plan(ws, ps, git, plan, new_patches, state, resolved=(breaking, files))
    report.notes.insert(0, note)
    return report


def _landed_evidence_of(git: Git, pending: Pending, patches: list[MailPatch],
                        dropped: dict[str, str], plan: Plan, threshold: float) -> None:
    """The evidence of the patches --continue skipped, measured again (base..target)."""
    for patch in patches:
        if patch.name in dropped:
            plan.evidence[patch.name] = measure(git, patch.diff, patch.name, pending.base,
                                                pending.target, threshold)


def _conflict_again(ws: Workspace, ps: Patchset, git: Git, pending: Pending,
                    patches: list[MailPatch], rest: Carry, tip: Sha,
                    state: dict[str, Pending]) -> Report:
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
    state[pending.patchset] = pending
    save_state(ws.state_dir, state)
    marked = conflict.prepare(git, pending, failing, raw)
    info = pending_dict(pending)
    info.update(commit=Landing.of(git, pending.breaking).as_dict(), hunks=failed.hunks,
                marked=marked)
    return Report(ps.target, CONFLICT, pending.base, pending.target, conflict=info,
                  notes=[f"resolved {patches[index - 1].name}; {failing.name} conflicts next"])


def abort_conflicts(ws: Workspace, chosen: list[Pending],
                    state: dict[str, Pending]) -> list[Pending]:
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
        save_state(ws.state_dir, state)
    return chosen


def _restore_sync(ps: Patchset, previous_text: str | None) -> None:
    """Put back the [sync] record from before the conflict; the file verbatim if nothing
    else in it changed since."""
    try:
        before = tomlkit.parse(previous_text or "")
        previous = read_meta(ps.meta_path, previous_text, before.unwrap()) if previous_text else None
    except (ValueError, TypeError, ContribError):  # a hand-edited file: drop the record, not guess
        before, previous, previous_text = tomlkit.document(), None, None
    ps.set_sync(previous.sync if previous else None)
    same = previous_text and before.unwrap() == ps.meta.unwrap()
    ps.workspace.write_file(ps.meta_path, previous_text if same and previous_text else ps.meta_text())
