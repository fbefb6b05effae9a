"""The autopilot's drafts: ``[autopilot] enable = ["sm_120a"]``.

Before the loop, each run drafts (``contrib enable`` with no GATE, at each
upstream's tip) a patchset for every uncovered gate-only runtime gate, and
validates it with every stage that can run here.  The loop then treats a draft
like any patchset, except that its PR step opens a draft PR for it whatever
``[autopilot] prs`` says (``never`` aside), and only when no stage failed.  A
gate a draft covers is not drafted again, so a run with nothing new drafts
nothing; the dashboard's "Drafted" section is made from the workspace (its
Draft patchsets) and this run's held-back gates, so it reads the same then.
"""

from __future__ import annotations

from contrib.arch import parse_arch
from contrib.autopilot.state import Need, Run
from contrib.enable.draft import enable
from contrib.errors import ContribError
from contrib.pr.open import validation_problem
from contrib.record import Verdict, version_standing
from contrib.secrets import scrub
from contrib.ui import UI
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.schema import UpstreamStatus


def ready(run: Run) -> set[str]:
    """The patchsets this run drafted whose validation failed no stage."""
    return {d.patchset for _, one in run.drafts for d in one.drafted
            if d.verdict != str(Verdict.FAILED) and not d.verdict.startswith("not ")}


class _Silent(UI):
    def __init__(self) -> None:
        super().__init__(json_mode=True)

    def emit(self, document: object) -> None:
        return None


def draft_all(ws: Workspace, run: Run) -> None:
    """Draft for every ``[autopilot] enable`` arch and upstream (into ``run.drafts``);
    a failure is a Need."""
    for arch in ws.config.autopilot.enable:
        for name in sorted(ws.config.upstreams):
            fetch = run.fetch and name not in run.fetched
            run.fetched.add(name)
            try:
                one = enable(ws, name, parse_arch(arch), at=None, specs=[], name=None,
                             fetch=fetch, check=_Silent())  # fmt: skip
            except ContribError as exc:
                run.problems.append(Need("enable", f"enable {name} for {arch}: "
                                         f"{scrub(str(exc)).splitlines()[0]}",
                                         {"upstream": name, "arch": arch}))  # fmt: skip
                continue
            run.drafts.append((arch, one))


def section(ws: Workspace, run: Run) -> str:
    """The dashboard's "Drafted": each Draft patchset with its gates and PR, then what
    was held back and why."""
    if not ws.config.autopilot.enable:
        return ""
    lines = ["## Drafted", ""]
    mine = [ps for ps in ws.patchsets() if ps.upstream_status == UpstreamStatus.DRAFT]
    lines += [_line(ps) for ps in mine]
    lines += [f"- held back `{s.gate}` ({arch}): {s.why}" for arch, one in run.drafts
              for s in one.skipped]  # fmt: skip
    if len(lines) == 2:
        lines.append("No gate-only gate left to draft.")
    return "\n".join(lines) + "\n"


def _line(ps: Patchset) -> str:
    gates = ", ".join(f"`{g}`" for g in ps.info.decisions) or "no gate recorded"
    if ps.pr is not None and ps.pr.number:
        return f"- `{ps.target}` ({ps.arch}): {gates}; draft PR [#{ps.pr.number}]({ps.pr.url})"
    standing = version_standing(ps.current)
    why = validation_problem(ps, standing) or "no PR opened yet"
    return f"- `{ps.target}` ({ps.arch}): {gates}; held back: {why}"
