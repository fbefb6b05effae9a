"""The autopilot's drafts: ``[autopilot] enable = ["sm_120a"]``.

Before the loop, each run drafts (``contrib enable`` with no GATE, at each
upstream's tip) a patchset for every uncovered gate-only runtime gate, and
validates it with every stage that can run here.  The loop then carries a draft
like any patchset; whether and when it gets a draft PR is
:mod:`contrib.autopilot.proposals`'s (proven, in order, a few at a time, none
proposed upstream already).  A gate a draft covers is not drafted again, so a run
with nothing new drafts nothing; the dashboard's "Drafted" section is made from
the workspace (its Draft patchsets), this run's proposals and its held-back gates,
so it reads the same then.
"""

from __future__ import annotations

from contrib.arch import parse_arch
from contrib.autopilot.state import WAITING, Need, Proposal, Run
from contrib.enable.draft import enable
from contrib.errors import ContribError
from contrib.pr.prepare import holdback
from contrib.record import version_standing
from contrib.secrets import scrub
from contrib.ui import UI
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.schema import UpstreamStatus


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
                             fetch=fetch, check=_Silent())
            except ContribError as exc:
                run.problems.append(Need("enable", f"enable {name} for {arch}: "
                                         f"{scrub(str(exc)).splitlines()[0]}",
                                         {"upstream": name, "arch": arch}))
                continue
            run.drafts.append((arch, one))


def section(ws: Workspace, run: Run) -> str:
    """The dashboard's "Drafted": each Draft patchset with its gates and PR (or why it is
    held back, or the upstream PR that proposes it already), those waiting in the order
    they would be proposed, then the gates drafting left alone and why."""
    if not ws.config.autopilot.enable:
        return ""
    plans = {p.target: p for p in run.proposals}
    mine = [ps for ps in ws.patchsets() if ps.upstream_status == UpstreamStatus.DRAFT]
    lines = ["## Drafted", ""]
    lines += [_line(ps, plans.get(ps.target)) for ps in mine
              if plans.get(ps.target) is None or plans[ps.target].state != WAITING]
    lines += [f"- held back `{s.gate}` ({arch}): {s.why}" for arch, one in run.drafts
              for s in one.skipped]
    if len(lines) == 2:
        lines.append("No gate-only gate left to draft.")
    return "\n".join(lines + _waiting(ws, run.proposals)) + "\n"


def _line(ps: Patchset, plan: Proposal | None) -> str:
    head = f"- `{ps.target}` ({ps.arch}): " + (", ".join(f"`{g}`" for g in ps.info.decisions)
                                               or "no gate recorded")
    if ps.pr is not None and ps.pr.number:
        return f"{head}; draft PR [#{ps.pr.number}]({ps.pr.url})"
    if plan is not None and plan.elsewhere is not None:
        found = plan.elsewhere
        return f"{head}; already proposed upstream as [#{found.number}]({found.url}) by " \
               f"@{found.user}"
    if plan is not None and plan.why:
        return f"{head}; {plan.state}: {plan.why}"
    why = "; ".join(holdback(ps, version_standing(ps.current)).held) or "no PR opened yet"
    return f"{head}; held back: {why}"


def _waiting(ws: Workspace, plans: list[Proposal]) -> list[str]:
    """The proven drafts no PR was opened for yet, per upstream in the order they would
    be proposed."""
    waiting = [p for p in plans if p.state == WAITING]
    if not waiting:
        return []
    limit = ws.config.autopilot.max_open_drafts
    out = ["", f"Waiting for a free place (at most {limit} draft PR{'s' if limit != 1 else ''} "
           "of drafts open per upstream, `[autopilot] max_open_drafts`), in the order they "
           "would be proposed; `contrib open-pr UPSTREAM/NAME` proposes one now:", ""]
    for number, plan in enumerate(waiting, 1):
        gates = ", ".join(f"`{g}`" for g in plan.gates)
        out.append(f"{number}. `{plan.target}` ({plan.arch}): {gates}")
    return out
