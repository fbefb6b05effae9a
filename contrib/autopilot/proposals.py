"""Which drafts the autopilot proposes upstream: proven ones, in order, a few at a time,
never one that somebody has proposed already.

A draft (``upstream_status = "Draft"``, written by ``[autopilot] enable``) with no PR
is a candidate.  Per upstream, each run:

1. **proof** (:mod:`contrib.pr.proof`): every stage that can prove the target's
   kernels passed here, the ``others`` stage showed the archs the upstream already
   builds unchanged, and nothing below the chain runs kernels no stage here
   builds (the audit's ``reached`` and ``units`` of each gate at the draft's base);
   otherwise the draft is *held back*, with why;
2. **order**: runtime features first (a chain that holds a runtime predicate or
   capability check), then the fewest gates to open, then the oldest gate (the
   author time of its line, ``git blame``), then the name;
3. **ceiling**: at most ``[autopilot] max_open_drafts`` of the drafts' PRs are open
   upstream at once; the rest *wait*, in that order;
4. **look first**: before one is opened or queued, the upstream's open PRs are
   searched (the
   chain's function names; the target's spellings ``SM120``, ``sm_120``, ``sm120``,
   ``SM12x``) and each hit's files are read: a PR that changes a gate of the chain
   (its file, at the gate's line or naming its function) is *proposed elsewhere*;
   no PR is opened, the dashboard links it, and the draft is carried as usual
   until sync finds it upstream.

Every answer is a :class:`~contrib.autopilot.state.Proposal` in ``run.proposals``; the
dashboard's "Drafted" section and ``--json`` show them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from contrib.arch import Arch, parse_arch
from contrib.audit.engine import audit_commit
from contrib.audit.model import CAPABILITY, PREDICATE
from contrib.autopilot import pr as autopilot_pr
from contrib.autopilot.state import ELSEWHERE, HELD, PROPOSED, WAITING, Outcome, Proposal, Run
from contrib.carry.report import UPSTREAMED
from contrib.errors import ContribError
from contrib.forge.api import Forge, FoundPr, PrFile
from contrib.git.cache import Mirror
from contrib.pr.proof import ChainGate, prove
from contrib.record import version_standing
from contrib.secrets import scrub
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.schema import GateAt, UpstreamStatus

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ", re.MULTILINE)


def is_candidate(ws: Workspace, ps: Patchset, outcome: Outcome) -> bool:
    """A draft of ``[autopilot] enable`` with no PR recorded, still to be carried."""
    return bool(ws.config.autopilot.enable) and ps.upstream_status == UpstreamStatus.DRAFT \
        and not (ps.pr is not None and ps.pr.number) \
        and not (outcome.sync and outcome.sync["result"] == UPSTREAMED)


def propose(ws: Workspace, run: Run, drafts: Sequence[tuple[Patchset, Outcome]],
            outcomes: dict[str, Outcome]) -> None:
    """Hold back, queue, link or open a draft PR for each of ``drafts``."""
    looked = _Look(run, ws)
    for upstream in sorted({ps.upstream for ps, _ in drafts}):
        mine = [(ps, o) for ps, o in drafts if ps.upstream == upstream]
        plans = sorted((_plan(ws, ps) for ps, _ in mine), key=lambda p: p.order)
        slots = ws.config.autopilot.max_open_drafts - open_drafts(ws, upstream, outcomes)
        for plan in plans:
            ps, outcome = next((p, o) for p, o in mine if p.target == plan.target)
            slots -= _decide(ws, run, looked, plan, ps, outcome, slots)
            run.proposals.append(plan)


def open_drafts(ws: Workspace, upstream: str, outcomes: dict[str, Outcome]) -> int:
    """The drafts' PRs open upstream now (this run's reading where it read one)."""
    count = 0
    for ps in ws.patchsets([upstream]):
        outcome = outcomes.get(ps.target)
        state = (outcome.pr or {}).get("state") if outcome and outcome.pr else \
            (ps.pr.state if ps.pr is not None and ps.pr.number else None)
        count += ps.upstream_status == UpstreamStatus.DRAFT and state == "open"
    return count


def _plan(ws: Workspace, ps: Patchset) -> Proposal:
    arch = parse_arch(ps.arch)
    chain = chain_of(ws, ps, arch)
    proof = prove(version_standing(ps.current), arch, chain)
    plan = Proposal(ps.target, arch.name, ps.upstream, list(ps.info.decisions), proof=proof,
                    chain=chain)
    if not proof.proven:
        plan.state, plan.why = HELD, proof.why()
    feature = any(g.kind in (PREDICATE, CAPABILITY) for g in chain or ())
    plan.order = (not proof.proven, not feature, len(plan.gates), _age(ws, ps, chain),
                  ps.target)
    return plan


def _decide(ws: Workspace, run: Run, looked: _Look, plan: Proposal, ps: Patchset,
            outcome: Outcome, slots: int) -> int:
    """Act on one plan; 1 when it took a slot (a PR opened, or would be)."""
    if plan.state == HELD:
        outcome.act("pr", HELD, reason=plan.why)
        return 0
    if run.policy == "never":
        plan.why = '`[autopilot] prs = "never"`'
        outcome.act("pr", WAITING, reason=plan.why)
        return 0
    try:
        found = looked.elsewhere(ps, plan.chain)
    except ContribError as exc:
        plan.why = f"could not look for an upstream PR first: {scrub(str(exc))}"
        outcome.fail("pr", plan.why, kind="github")
        return 0
    if found is not None:
        plan.state, plan.elsewhere = ELSEWHERE, found
        plan.why = f"already proposed upstream as #{found.number} by @{found.user}"
        outcome.act("pr", ELSEWHERE, number=found.number, url=found.url, user=found.user)
        return 0
    if slots <= 0:
        limit = ws.config.autopilot.max_open_drafts
        plan.why = f"{limit} draft PR{'s' if limit != 1 else ''} of drafts open upstream already"
        outcome.act("pr", WAITING, reason=plan.why)
        return 0
    autopilot_pr.pr_step(ws, ps, outcome, replace(run, policy="create"), proof=plan.proof)
    last: dict[str, Any] = next((a for a in reversed(outcome.actions) if a["step"] == "pr"), {})
    if (outcome.pr or {}).get("number") is not None or str(last.get("result")).startswith(
            "would"):
        plan.state = PROPOSED
        return 1
    plan.why = str(last.get("reason") or last.get("error") or "no PR opened")
    return 0


# -- the chain, as the audit sees it at the draft's base ---------------------------------

def chain_of(ws: Workspace, ps: Patchset, arch: Arch) -> list[ChainGate] | None:
    """The audit's facts on each gate the draft opens (``[decisions]``, in order), at the
    commit its current version applies to; None when the audit cannot say."""
    try:
        git = Mirror(ws.config.upstream(ps.upstream)).ensure(fetch_now=False).git
        gates = audit_commit(git, ps.current.base, arch).gates
    except ContribError:
        return None
    chain = []
    for decided in ps.info.decisions.values():
        at = decided.at
        gate = next((g for g in gates if at is not None and g.file == at.path
                     and g.function == at.function), None)
        if gate is None:
            return None
        chain.append(ChainGate(GateAt(gate.file, gate.line, gate.function), gate.kind,
                               tuple(gate.units), tuple(gate.reached)))
    return chain or None


def _age(ws: Workspace, ps: Patchset, chain: Sequence[ChainGate] | None) -> int:
    """When the oldest gate of the chain was written (seconds; later for none known)."""
    try:
        git = Mirror(ws.config.upstream(ps.upstream)).ensure(fetch_now=False).git
    except ContribError:
        return 2**62
    times = []
    for gate in chain or ():
        when = git.line_time(ps.current.base, gate.at.path, gate.at.line)
        times.append(when if when is not None else 2**62)
    return min(times, default=2**62)


# -- looking for the same change upstream --------------------------------------------------

class _Look:
    """The upstream's open PRs that change a gate of a chain, read once per run."""

    def __init__(self, run: Run, ws: Workspace) -> None:
        self.run, self.ws = run, ws
        self._found: dict[tuple[str, str], list[FoundPr]] = {}
        self._files: dict[tuple[str, int], list[PrFile]] = {}

    def elsewhere(self, ps: Patchset, chain: Sequence[ChainGate] | None) -> FoundPr | None:
        forge = self.run.forges.upstream(self.ws)
        repo = self.ws.config.upstream(ps.upstream).github
        if forge is None or not repo or not chain:
            return None
        ours = {p.pr.number for p in self.ws.patchsets([ps.upstream]) if p.pr is not None}
        names = [g.at.function.rsplit(".", 1)[-1] for g in chain]
        hits = self._search(forge, repo, " OR ".join(dict.fromkeys(names)))
        hits += self._search(forge, repo, arch_words(parse_arch(ps.arch)))
        for hit in sorted({h.number: h for h in hits}.values(), key=lambda h: h.number):
            if hit.number not in ours and any(changes(f, g) for f in self._pr_files(
                    forge, repo, hit.number) for g in chain):
                return hit
        return None

    def _search(self, forge: Forge, repo: str, words: str) -> list[FoundPr]:
        if (repo, words) not in self._found:
            self._found[(repo, words)] = forge.search_prs(repo, words)
        return self._found[(repo, words)]

    def _pr_files(self, forge: Forge, repo: str, number: int) -> list[PrFile]:
        if (repo, number) not in self._files:
            self._files[(repo, number)] = forge.pr_files(repo, number)
        return self._files[(repo, number)]


def arch_words(arch: Arch) -> str:
    """How PRs spell the target: ``SM120 OR sm_120 OR sm120 OR SM12x OR sm_120a``."""
    number = arch.major * 10 + arch.minor
    words = [f"SM{number}", f"sm_{number}", f"sm{number}", f"SM{arch.major}x", arch.name]
    return " OR ".join(dict.fromkeys(words))


def changes(file: PrFile, gate: ChainGate) -> bool:
    """Whether a PR's change to ``file`` changes ``gate``: the gate's file, with a hunk
    over the gate's line or naming its function (a hunk header names the def)."""
    path, line, function = gate.at
    if file.filename != path or not file.patch:
        return False
    name = function.rsplit(".", 1)[-1]
    if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", file.patch):
        return True
    return any(int(m.group(1)) <= line < int(m.group(1)) + int(m.group(2) or 1)
               for m in _HUNK.finditer(file.patch))
