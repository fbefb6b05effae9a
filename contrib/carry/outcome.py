"""Write down what a carry decided: versions, the [sync] record, the report, and
the conflict handed to the user (its worktree and pending state)."""

from __future__ import annotations

from typing import Any

from contrib.carry import conflict, retention
from contrib.carry.dep3 import stamp_for, stamped
from contrib.carry.landed import Evidence, same_subject
from contrib.carry.landing import Landing, evidence_dict
from contrib.carry.plan import Plan
from contrib.carry.report import (
    CONFLICT,
    ERROR,
    PARTIAL,
    REBASED,
    UNCHANGED,
    UPSTREAMED,
    Report,
)
from contrib.carry.series import MailPatch, split_mail
from contrib.carry.syncstate import Pending, folder_for, pending_dict, save_state
from contrib.carry.versions import Event, Files, How, add_event, write_version
from contrib.clock import now_iso
from contrib.errors import ContribError
from contrib.git.repo import Git, Sha
from contrib.ui import counted
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.schema import Landed, SyncDetails, SyncRecord, SyncResult, UpstreamStatus


def record_plan(ws: Workspace, ps: Patchset, git: Git, plan: Plan, patches: list[MailPatch],
                state: dict[str, Pending],
                resolved: tuple[Sha, list[tuple[str, bytes]]] | None = None) -> Report:
    """Write what ``plan`` decided (one transaction) and describe it.

    ``resolved`` is a version made by --continue at the breaking commit; it is
    written in the same transaction.
    """
    report = Report(ps.target, plan.result, plan.base, plan.target, commits=plan.commits,
                    probes=plan.probes, notes=list(plan.notes))
    subjects = {p.name: p.subject for p in patches}
    report.upstreamed = [{"patch": name, "how": how,
                          "commit": landing.as_dict() if landing else None}
                         | _landed_evidence(git, plan.evidence.get(name) if how == "landed" else None)
                         | _subject_match(how, landing, subjects.get(name))
                         for name, landing, how in plan.landed]
    report.notes += _partial_notes(plan)
    if plan.result == UNCHANGED and resolved is None:
        report.patches = ps.current.series()
        return report
    versions: list[tuple[str, Files, Event]] = []
    previous_current = ps.current.base
    at = now_iso()
    if resolved is not None:
        versions.append((resolved[0], resolved[1], Event(
            How.RESOLVED, resolved[0], at, previous=previous_current,
            detail=f"conflict resolved by hand at {resolved[0][:12]}")))
        report.version, report.patches = resolved[0], [n for n, _ in resolved[1]]
        if plan.result == UNCHANGED:
            report.result = REBASED
    if plan.result in (REBASED, PARTIAL):
        versions.append((plan.target, plan.files, Event(
            How.SYNC, plan.target, at, previous=plan.base, result=plan.result,
            detail=f"{counted(plan.commits, 'upstream commit')}, {counted(plan.probes, 'probe')}"
                   + _landed_detail(plan))))
        report.version, report.patches = plan.target, [n for n, _ in plan.files]
    try:
        versions = _stamped(ps, git, versions, patches, resolved is not None)
    except ContribError as exc:  # the upstream asks for a sign-off git cannot give
        return Report(ps.target, ERROR, plan.base, plan.target, error=str(exc))
    if plan.result == CONFLICT:
        report.conflict = open_conflict(ws, ps, git, plan, patches, state,
                                        ps.meta_text())
        report.notes += _skipped_notes(plan, patches)
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
                report.notes.append(f"{counted(len(pruned), 'older version folder')} left the working "
                                    "tree; the workspace's git history keeps them")
        ps.save_meta(txn)
    report.changed = report.result != CONFLICT
    return report


def _stamped(ps: Patchset, git: Git, versions: list[tuple[str, Files, Event]],
             patches: list[MailPatch], resolved: bool) -> list[tuple[str, Files, Event]]:
    """Each version's files with their DEP-3 fields up to date (:mod:`contrib.carry.dep3`),
    each against the one it follows: ``patches`` (what the plan carried) for a plain
    carry; the current version for one resolved by hand, and that one (as written) for
    the version carried on from it."""
    out: list[tuple[str, Files, Event]] = []
    for sha, files, event in versions:
        previous = (None if resolved else patches) if not out else \
            [split_mail(git, name, raw) for name, raw in out[-1][1]]
        files = stamped(git, sha, files, stamp_for(git, ps, sha, event.at, previous=previous))
        out.append((sha, files, event))
    return out


def _subject_match(how: str, landing: Landing | None, subject: str | None) -> dict[str, Any]:
    """For a "landed" patch: whether the landing commit's subject tells of the same change."""
    if how != "landed" or landing is None or subject is None:
        return {}
    return {"subject_match": same_subject(subject, landing.subject)}


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


def _skipped_notes(plan: Plan, patches: list[MailPatch]) -> list[str]:
    """At a conflict: the later patches upstream landed in their own form."""
    assert plan.breakage is not None
    later = {p.name for p in patches[plan.breakage.index + 1:]}
    return [f"{name}: landed upstream in {ev.landed_by[:10]} ({ev.summary()}); "
            "`sync --continue` leaves it out"
            for name, ev in plan.evidence.items() if name in later and ev.landed_by]


def _partial_notes(plan: Plan) -> list[str]:
    """A line for each patch that is partly upstream already (and so not dropped)."""
    found = dict(plan.evidence)
    if plan.breakage is not None and plan.breakage.evidence is not None:
        found[plan.breakage.patch.name] = plan.breakage.evidence
    return [f"{name}: {ev.summary()} ({ev.why_not()}: not taken as upstreamed; check "
            "the result for a duplicate)"
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

def open_conflict(ws: Workspace, ps: Patchset, git: Git, plan: Plan, patches: list[MailPatch],
                  state: dict[str, Pending], previous: str) -> dict[str, Any]:
    """Hand the breakage to the user: worktree, state entry, description."""
    broken = plan.breakage
    assert broken is not None
    failing = patches[broken.index]
    pending = Pending(
        patchset=ps.target, base=plan.base, target=plan.target, breaking=broken.commit.sha,
        head=broken.head, index=broken.index, patch=failing.name, reason=broken.reason,
        folder=str(folder_for(ws.state_dir, ps.target)), files=broken.patch.files,
        previous_meta=previous, landed={name: ev.landed_by for name, ev in plan.evidence.items()
                                        if ev.landed_by is not None})
    raw = (ps.version(plan.base).dir / failing.name).read_bytes() \
        if (ps.version(plan.base).dir / failing.name).is_file() else failing.diff.encode()
    marked = conflict.prepare(git, pending, failing, raw)
    state[ps.target] = pending
    save_state(ws.state_dir, state)
    info = pending_dict(pending)
    info.update(commit=broken.commit.as_dict(), hunks=broken.patch.hunks, marked=marked,
                probes=broken.probes, upstream_before=broken.upstream_before)
    if broken.evidence is not None:
        info["evidence"] = evidence_dict(git, broken.evidence)
    return info

