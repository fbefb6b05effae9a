"""Verdicts: stages combined across runs, per arch, and whether a version is validated.

See :mod:`contrib.record` for the rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrib.errors import ConfigError
from contrib.record.reader import OldFormat, read_record
from contrib.record.schema import _RERUN, Record, Run, StageStatus, Verdict, version_digest
from contrib.ui import counted

if TYPE_CHECKING:
    from contrib.workspace.model import Version



def combine(runs: Iterable[Run]) -> dict[str, StageStatus]:
    """Each stage's status across runs of one arch.

    A stage passed where some run passed it and none failed it; it failed where
    any run failed it; it is not-applicable only where every run said so; else skipped.
    """
    seen: dict[str, set[StageStatus]] = {}
    for run in runs:
        for stage in run.stages:
            seen.setdefault(stage.name, set()).add(stage.status)
    out = {}
    for name, statuses in seen.items():
        if StageStatus.FAILED in statuses:
            out[name] = StageStatus.FAILED
        elif StageStatus.PASSED in statuses:
            out[name] = StageStatus.PASSED
        elif statuses == {StageStatus.NOT_APPLICABLE}:
            out[name] = StageStatus.NOT_APPLICABLE
        else:
            out[name] = StageStatus.SKIPPED
    return out


@dataclass(frozen=True)
class ArchVerdict:
    """The verdict of one arch across its runs, and what open-pr needs of it."""

    arch: str
    verdict: Verdict
    stages: Mapping[str, StageStatus]
    runs: tuple[Run, ...]
    unmet: tuple[str, ...] = ()  # required stages that did not pass (failed, skipped, absent)
    waived: int = 0

    @property
    def skipped(self) -> list[str]:
        return [n for n, s in self.stages.items() if s == StageStatus.SKIPPED]

    @property
    def failed(self) -> list[str]:
        return [n for n, s in self.stages.items() if s == StageStatus.FAILED]

    def line(self) -> str:
        """``sm_120a: incomplete (skipped: tests)`` -- the verdict as it is."""
        notes = []
        if self.failed:
            notes.append("failed: " + ", ".join(self.failed))
        if self.skipped:
            notes.append("skipped: " + ", ".join(self.skipped))
        if self.waived:
            notes.append(f"{counted(self.waived, 'finding')} waived")
        return f"{self.arch}: {self.verdict}" + (f" ({'; '.join(notes)})" if notes else "")


def verdict_of(stages: Mapping[str, StageStatus]) -> Verdict:
    """failed if any stage failed; incomplete if any was skipped; else passed."""
    if not stages:
        return Verdict.INCOMPLETE
    values = set(stages.values())
    if StageStatus.FAILED in values:
        return Verdict.FAILED
    return Verdict.INCOMPLETE if StageStatus.SKIPPED in values else Verdict.PASSED


def unmet(stages: Mapping[str, StageStatus], require: Iterable[str]) -> tuple[str, ...]:
    """Required stages that did not pass (not-applicable counts as nothing to do)."""
    ok = (StageStatus.PASSED, StageStatus.NOT_APPLICABLE)
    return tuple(n for n in require if stages.get(n) not in ok)


def arch_verdicts(runs: Iterable[Run], require: Iterable[str]) -> list[ArchVerdict]:
    """One ArchVerdict per arch of ``runs``, in first-run order."""
    runs, require = list(runs), tuple(require)
    out = []
    for arch in dict.fromkeys(r.arch for r in runs):
        mine = tuple(r for r in runs if r.arch == arch)
        stages = combine(mine)
        waived = sum(1 for r in mine for s in r.stages for f in s.findings if f.waived is not None)
        out.append(ArchVerdict(arch, verdict_of(stages), stages, mine, unmet(stages, require),
                               waived))
    return out


@dataclass(frozen=True)
class Standing:
    """Whether a version is validated, as status and open-pr need to know it."""

    record: Record | None  # None when not validated
    cause: str  # why not validated ("" when it is bound)
    verdicts: tuple[ArchVerdict, ...] = ()
    advice: str = ""  # what to do about it

    @property
    def reason(self) -> str:
        """Why not validated, and what to do about it ("" when it is bound)."""
        return f"{self.cause}; {self.advice}" if self.advice else self.cause

    @property
    def bound(self) -> bool:
        return self.record is not None

    def for_arch(self, arch: str) -> ArchVerdict | None:
        return next((v for v in self.verdicts if v.arch == arch), None)

    def summary(self) -> str:
        """``sm_120a: incomplete (skipped: tests); sm_90a: passed`` or ``not validated (why)``."""
        if self.record is None:
            return f"not validated ({self.reason})"
        return "; ".join(v.line() for v in self.verdicts) or "not validated (no runs)"


def mismatch(record: Record, upstream: str, patchset: str, base: str,
             dig: str) -> str:
    """What differs between a record and the version it is checked against ("" if bound)."""
    if (record.upstream, record.patchset) != (upstream, patchset):
        return f"foreign: recorded for {record.upstream}/{record.patchset}"
    if record.base != base:
        return f"foreign: recorded for base {record.base[:12]}, this version is {base[:12]}"
    if record.digest != dig:
        return ("stale: the series, a patch or the [validation] settings changed since it "
                "was validated")
    return ""


def standing(path: Path, upstream: str, patchset: str, base: str, dig: str,
             require: Iterable[str], target: str = "") -> Standing:
    """Read ``path`` and check it is bound to this version; never raises for its content.
    ``target`` is how the command line names the patchset (``UPSTREAM/NAME[@BRANCH]``)."""
    try:
        record = read_record(path)
    except OldFormat:
        return Standing(None, "old format", advice=_RERUN)
    except ConfigError as exc:
        return Standing(None, str(exc))
    if record is None:
        return Standing(None, f"no {path.name}", advice=f"run `contrib validate "
                                                         f"{target or upstream + '/' + patchset}`")
    why = mismatch(record, upstream, patchset, base, dig)
    if why:
        return Standing(None, why, advice=_RERUN)
    if not record.runs:
        return Standing(None, f"{path}: no runs", advice=_RERUN)
    return Standing(record, "", tuple(arch_verdicts(record.runs, require)))


_RAN = (StageStatus.PASSED, StageStatus.FAILED, StageStatus.NOT_APPLICABLE)


def missing_evidence(new: Run, old: Run) -> list[str]:
    """The stages ``old`` settled (passed, failed, not-applicable) that ``new`` did not:
    where ``new`` is weaker.  Empty when ``new`` knows at least what ``old`` knew."""
    settled = {s.name for s in new.stages if s.status in _RAN}
    return [s.name for s in old.stages if s.status in _RAN and s.name not in settled]


def superseded(record: Record, run: Run) -> tuple[list[Run], list[tuple[Run, list[str]]]]:
    """The runs of ``run``'s arch and kind that ``run`` replaces, and those it may not
    replace because they hold evidence it lacks (with the stages it lacks).

    A run's identity is not its hostname (every VM may be called ``vm``): a fresh run
    supersedes an earlier one of the same arch and kind when it settled every stage
    the earlier one settled.  A weaker run (ptx skipped for missing headers where the
    earlier one compiled it) is added beside the stronger one, which keeps counting."""
    replaced, kept = [], []
    for old in record.runs:
        if old.arch != run.arch or old.kind != run.kind or old.id == run.id:
            continue
        lacking = missing_evidence(run, old)
        if lacking:
            kept.append((old, lacking))
        else:
            replaced.append(old)
    return replaced, kept


def add_run(record: Record, run: Run, *, supersede: bool) -> Record:
    """``record`` with ``run`` added; idempotent for a run already there (same id).

    With ``supersede`` (a fresh validate in the workspace) the earlier runs of the
    same arch and kind that ``run`` has all the evidence of are dropped first
    (:func:`superseded`); a stronger earlier run stays.
    """
    if any(r.id == run.id for r in record.runs):
        return record
    gone = {r.id for r in superseded(record, run)[0]} if supersede else set()
    return replace(record, runs=(*(r for r in record.runs if r.id not in gone), run))


def drop_runs(record: Record, ids: Iterable[str]) -> Record:
    """``record`` without the runs ``ids`` names (a prefix of 8 or more characters of an
    id, with or without ``run-``, names the one run it starts)."""
    wanted = [i.removeprefix("run-") for i in ids]
    return replace(record, runs=tuple(r for r in record.runs
                                      if not any(_names(w, r.id) for w in wanted)))


def _names(wanted: str, run_id: str) -> bool:
    return len(wanted) >= 8 and run_id.removeprefix("run-").startswith(wanted)


def version_standing(version: Version) -> Standing:
    """Whether ``version`` (a workspace Version) is validated exactly as it is on disk now.

    A bad validation.json, a broken series or a record made for something else is
    "not validated" with the reason; a bad ``[validation]`` table is a ConfigError.
    """
    from contrib.errors import ContribError

    ps = version.patchset
    try:
        dig = version_digest(version)
    except ContribError as exc:
        return Standing(None, f"the version cannot be read ({exc})")
    return standing(version.validation_path, ps.upstream, ps.name, version.base, dig,
                    ps.validation.required(), ps.target)


def standing_dict(standing: Standing) -> dict[str, Any]:
    """The JSON status and open-pr show: verdict per arch, each run and where it ran."""
    return {
        "validated": standing.bound,
        "reason": standing.reason or None,
        "summary": standing.summary(),
        "archs": [{"arch": v.arch, "verdict": str(v.verdict), "skipped": v.skipped,
                   "failed": v.failed, "unmet": list(v.unmet), "waived": v.waived}
                  for v in standing.verdicts],
        "runs": [{"id": r.id, "arch": r.arch, "kind": str(r.kind), "compute": r.compute,
                  "host": r.host.describe(), "finished_at": r.finished_at,
                  "verdict": str(verdict_of({s.name: s.status for s in r.stages}))}
                 for r in (standing.record.runs if standing.record else ())],
    }
