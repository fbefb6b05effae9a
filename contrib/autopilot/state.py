"""What one autopilot run found and did: per patchset an :class:`Outcome`, for the
run a :class:`Run`; both become the ``--json`` document and the dashboard.

A :class:`Need` is one thing a person must do (the dashboard's "Needs you"):
a conflict to resolve, a failed validation, a PR a human closed, a GPU leg
with no runner, a failure of GitHub or of the push.  A :class:`Proposal` is what
the run made of one draft without a PR (:mod:`contrib.autopilot.proposals` decides).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrib.audit.model import AuditGate, Mismatch
from contrib.audit.serial import blame_json, mismatch_json
from contrib.autopilot.forges import Forges
from contrib.carry.report import CONFLICT, ERROR, PARTIAL, REBASED, UNCHANGED, UPSTREAMED
from contrib.carry.syncstate import folder_for
from contrib.enable.draft import EnableRun
from contrib.forge.api import FoundPr
from contrib.pr.proof import ChainGate, Proof
from contrib.record import StageStatus, Standing, Verdict
from contrib.workspace.model import Workspace

OK_SYNC = (UNCHANGED, REBASED, PARTIAL, UPSTREAMED)


@dataclass
class Need:
    """One thing a person must do; ``details`` carries what the dashboard links."""

    kind: str  # conflict | validation | pr-closed | gpu-runner | github | push | audit | error
    text: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **self.details}

    @classmethod
    def conflict(cls, ws: Workspace, target: str, info: dict[str, Any]) -> Need:
        """A sync conflict: the breaking commit, the files, the commands that finish it.

        The commands work in any clone of the workspace: on a CI runner the
        conflict worktree is gone with the runner, and ``contrib sync`` makes it
        again (a no-op where it is still waiting).
        """
        commit = info.get("commit") or {}
        sha = str(commit.get("sha", ""))
        files = [str(f) for f in info.get("files") or []]
        subject = f" {commit['subject']!r}" if commit.get("subject") else ""
        pr = f" (#{commit['pr']})" if commit.get("pr") and f"#{commit['pr']}" not in subject \
            else ""
        text = (f"{target}: {info.get('patch')} breaks at upstream commit {sha[:12]}{subject}"
                f"{pr} ({info.get('reason')})")
        worktree = _relative(ws, str(folder_for(ws.state_dir, target) / "worktree"))
        commands = [f"contrib sync {target}",
                    f"# resolve the conflict markers in {worktree}/: "
                    + (", ".join(files) or "the files named above"),
                    f"contrib sync --continue --commit {target}", "git push"]
        return cls(CONFLICT, text, {"patchset": target, "commit": commit, "files": files,
                                    "patch": info.get("patch"), "worktree": worktree,
                                    "commands": commands})

    @classmethod
    def failed_validation(cls, view: ValidationView) -> Need:
        findings = view.failing
        text = f"{view.target}: validation {view.summary}"
        return cls("validation", text, {"patchset": view.target, "findings": findings})


@dataclass
class ValidationView:
    """What autopilot reports of one version's validation record."""

    target: str
    verdict: str  # the worst arch verdict, or "not validated"
    summary: str
    archs: list[dict[str, Any]] = field(default_factory=list)
    failing: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "summary": self.summary, "archs": self.archs,
                "failing": self.failing}


def validation_view(target: str, standing: Standing) -> ValidationView:
    """The verdict per arch, where each run ran, and every unwaived failing finding."""
    if standing.record is None:
        return ValidationView(target, "not validated", standing.summary())
    order = [Verdict.FAILED, Verdict.INCOMPLETE, Verdict.PASSED]
    worst = min((v.verdict for v in standing.verdicts),
                key=lambda v: order.index(v) if v in order else 0, default=Verdict.INCOMPLETE)
    archs = [{"arch": v.arch, "verdict": str(v.verdict), "line": v.line(),
              "unmet": list(v.unmet), "where": [r.host.describe() for r in v.runs]}
             for v in standing.verdicts]
    failing = [{"arch": run.arch, "stage": stage.name, "location": f.location,
                "text": f"{run.arch} {stage.name}: {f.location}: {f.message}"}
               for run in standing.record.runs for stage in run.stages
               if stage.status == StageStatus.FAILED for f in stage.findings if f.blocking]
    failing += [{"arch": run.arch, "stage": stage.name, "location": "",
                 "text": f"{run.arch} {stage.name}: {stage.reason}"}
                for run in standing.record.runs for stage in run.stages
                if stage.status == StageStatus.FAILED and not any(f.blocking
                                                                   for f in stage.findings)]
    return ValidationView(target, str(worst), standing.summary(), archs, failing)


def _relative(ws: Workspace, path: str) -> str:
    try:
        return str(Path(path).relative_to(ws.root))
    except ValueError:
        return path


@dataclass
class Outcome:
    """Everything autopilot did for one patchset, step by step."""

    patchset: str
    actions: list[dict[str, Any]] = field(default_factory=list)
    sync: dict[str, Any] | None = None
    validation: dict[str, Any] | None = None
    pr: dict[str, Any] | None = None
    needs: list[Need] = field(default_factory=list)

    def act(self, step: str, result: str, **details: Any) -> None:
        """Record one action (``--json`` lists them in order)."""
        self.actions.append({"step": step, "result": result,
                             **{k: v for k, v in details.items() if v not in (None, [], {})}})

    def fail(self, step: str, message: str, kind: str = "error") -> None:
        self.act(step, "error", error=message)
        self.needs.append(Need(kind, f"{self.patchset}: {step}: {message}",
                               {"patchset": self.patchset}))

    @property
    def syncable(self) -> bool:
        """Sync ended in a state later steps can build on."""
        return self.sync is not None and self.sync["result"] in OK_SYNC

    def cell(self, step: str) -> str:
        results = [a["result"] for a in self.actions if a["step"] == step]
        return ", ".join(results) or "-"

    def summary(self) -> str:
        """One line for the commit message."""
        parts = [f"{a['step']} {a['result']}" for a in self.actions]
        return "; ".join(parts) or "nothing to do"

    def as_dict(self) -> dict[str, Any]:
        result = self.sync["result"] if self.sync else ERROR
        return {"patchset": self.patchset, "result": result, "actions": self.actions,
                "sync": self.sync, "validation": self.validation, "pr": self.pr,
                "needs": [n.as_dict() for n in self.needs]}


# What became of a draft: a Proposal's state, and the result of its "pr" action.
OPEN, PROPOSED, HELD, WAITING, ELSEWHERE = "open", "proposed", "held back", "waiting", \
    "proposed elsewhere"


@dataclass
class Proposal:
    """What the autopilot made of one draft without a PR of its own."""

    target: str
    arch: str
    upstream: str
    gates: list[str]
    state: str = WAITING
    why: str = ""
    elsewhere: FoundPr | None = None
    proof: Proof | None = None
    chain: list[ChainGate] | None = field(default=None, repr=False)
    order: tuple[Any, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"patchset": self.target, "arch": self.arch, "state": self.state,
                "why": self.why or None, "gates": self.gates,
                "elsewhere": self.elsewhere.to_json() if self.elsewhere else None,
                "proof": self.proof.to_dict() if self.proof else None}


@dataclass
class Run:
    """The run as a whole: options, the commit and push, the dashboard, run-wide problems."""

    dry_run: bool
    policy: str
    gpu_missing: list[str]
    forges: Forges
    fetch: bool = True
    commit: str | None = None
    push: str | None = None
    dashboard: dict[str, Any] | None = None
    problems: list[Need] = field(default_factory=list)
    would_commit: list[str] = field(default_factory=list)  # a dry run's commit
    audits: list[AuditView] = field(default_factory=list)  # [autopilot] audit_arch, per upstream
    fetched: set[str] = field(default_factory=set)  # upstreams this run fetched (or tried to)
    drafts: list[tuple[str, EnableRun]] = field(default_factory=list)  # [autopilot] enable
    proposals: list[Proposal] = field(default_factory=list)  # the drafts without a PR

    def needs(self, outcomes: list[Outcome]) -> list[Need]:
        """Every Need of the run, patchsets first."""
        gpu = [Need("gpu-runner", f"GPU leg {label}: no runner picked it up (no artifact); "
                    f"bring a self-hosted runner labelled [self-hosted, linux, gpu, {label}] "
                    "online, or drop the leg with `contrib init-ci`", {"label": label})
               for label in self.gpu_missing]
        return [n for o in outcomes for n in o.needs] + gpu + self.problems


@dataclass
class AuditView:
    """One upstream audited for one arch, as the dashboard shows it."""

    upstream: str
    arch: str
    github: str = ""
    commit: str = ""
    since: str | None = None  # the tip audited before, when there was one
    counts: dict[str, int] = field(default_factory=dict)
    excluding: int = 0
    uncovered: list[AuditGate] = field(default_factory=list)  # runtime, no patchset covers it
    opened: list[AuditGate] = field(default_factory=list)
    closed: list[AuditGate] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)  # admitted, refused below
    # The feature table: (verdict, feature, next) per row, the worst first; its summary.
    features: list[tuple[str, str, str]] = field(default_factory=list)
    feature_counts: dict[str, int] = field(default_factory=dict)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The autopilot ``--json`` form."""
        def where(gates: list[AuditGate]) -> list[dict[str, Any]]:
            return [{"file": g.file, "line": g.line, "function": g.function, "class": g.class_,
                     "opened_by": blame_json(g.opened_by),
                     "closed_by": blame_json(g.closed_by)} for g in gates]
        return {"upstream": self.upstream, "arch": self.arch, "commit": self.commit or None,
                "since": self.since, "counts": self.counts, "excluding": self.excluding,
                "mismatches": [mismatch_json(m) for m in self.mismatches],
                "feature_counts": self.feature_counts,
                "features": [{"verdict": v, "feature": f, "next": n}
                             for v, f, n in self.features],
                "uncovered_runtime": where(self.uncovered), "opened": where(self.opened),
                "closed": where(self.closed), "error": self.error or None}
