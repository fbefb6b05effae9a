"""What one autopilot run found and did: per patchset an :class:`Outcome`, for the
run a :class:`Run`; both become the ``--json`` document and the dashboard.

A :class:`Need` is one thing a person must do (the dashboard's "Needs you"):
a conflict to resolve, a failed validation, a PR a human closed, a GPU leg
with no runner, a failure of GitHub or of the push.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contrib.pr_body import overall
from contrib.rebase import CONFLICT, ERROR, PARTIAL, REBASED, UNCHANGED, UPSTREAMED

if TYPE_CHECKING:
    from contrib.autopilot_pr import Forges
    from contrib.patchset import Version

OK_SYNC = (UNCHANGED, REBASED, PARTIAL, UPSTREAMED)


@dataclass
class Need:
    """One thing a person must do; ``details`` carries what the dashboard links."""

    kind: str  # conflict | validation | pr-closed | gpu-runner | github | push | error
    text: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **self.details}

    @classmethod
    def conflict(cls, target: str, info: dict[str, Any]) -> Need:
        """A sync conflict: the breaking commit, the files, the commands that finish it."""
        commit = info.get("commit") or {}
        sha = str(commit.get("sha", ""))
        files = [str(f) for f in info.get("files") or []]
        subject = f" {commit['subject']!r}" if commit.get("subject") else ""
        text = (f"{target}: {info.get('patch')} breaks at upstream {sha[:12]}{subject} "
                f"({info.get('reason')}) in {', '.join(files) or '?'}")
        commands = [f"cd {info.get('worktree')}  # resolve the conflict markers there",
                    f"contrib sync --continue {target}",
                    f"contrib sync --abort {target}  # or drop it"]
        return cls(CONFLICT, text, {"patchset": target, "commit": commit, "files": files,
                                    "patch": info.get("patch"), "worktree": info.get("worktree"),
                                    "commands": commands})

    @classmethod
    def failed_validation(cls, view: ValidationView) -> Need:
        findings = view.failing
        text = f"{view.target}: validation failed for {view.arch}: " + (
            "; ".join(f["text"] for f in findings[:3]) or "see validation.json")
        return cls("validation", text, {"patchset": view.target, "findings": findings})


@dataclass
class ValidationView:
    """What the dashboard and autopilot need from one version's validation.json."""

    target: str
    fresh: bool  # made for exactly this version
    verdict: str  # passed | incomplete | failed | missing | stale
    arch: str = ""
    runs: list[dict[str, Any]] = field(default_factory=list)  # where each run ran, what ran
    skipped: list[str] = field(default_factory=list)
    failing: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "arch": self.arch, "runs": self.runs,
                "skipped": self.skipped, "failing": self.failing}


def validation_view(version: Version) -> ValidationView:
    """Read ``version``'s validation.json into a :class:`ValidationView`."""
    target = version.patchset.target
    data = version.read_validation()
    if data is None:
        return ValidationView(target, False, "missing")
    made_for = str(data.get("upstream_sha") or "")
    if made_for != version.base:
        return ValidationView(target, False, "stale", str(data.get("arch", "")))
    stages = [s for s in data.get("stages") or [] if isinstance(s, dict)]
    skipped = [str(s.get("name")) for s in stages if s.get("status") == "skipped"]
    verdict = str(overall(data) or "missing")
    if verdict == "passed" and skipped:
        verdict = "incomplete"
    host = data.get("host") if isinstance(data.get("host"), dict) else {}
    run = {"arch": str(data.get("arch", "")), "host": str(host.get("hostname", "?")),
           "gpus": [str(g.get("name")) for g in host.get("gpus") or [] if isinstance(g, dict)],
           "ran": [str(s.get("name")) for s in stages if s.get("status") in ("passed", "failed")],
           "skipped": skipped}
    failing = [_finding(s, f) for s in stages if s.get("status") == "failed"
               for f in (s.get("findings") or [{"message": s.get("reason", "")}])
               if isinstance(f, dict) and not f.get("waived")
               and f.get("severity", "error") != "info"]
    return ValidationView(target, True, verdict, run["arch"], [run], skipped, failing)


def _finding(stage: dict[str, Any], finding: dict[str, Any]) -> dict[str, Any]:
    where = finding.get("location") or ""
    text = f"{stage.get('name')}: {where + ': ' if where else ''}{finding.get('message', '')}"
    return {"stage": stage.get("name"), "location": where, "text": text}


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

    def needs(self, outcomes: list[Outcome]) -> list[Need]:
        """Every Need of the run, patchsets first."""
        gpu = [Need("gpu-runner", f"GPU leg {label}: no runner picked it up (no artifact); "
                    f"bring a self-hosted runner labelled [self-hosted, linux, gpu, {label}] "
                    "online, or drop the leg with `contrib init-ci`", {"label": label})
               for label in self.gpu_missing]
        return [n for o in outcomes for n in o.needs] + gpu + self.problems
