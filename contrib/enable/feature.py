"""Which gates ``contrib enable --feature`` opens: those of the feature's chain.

``contrib why`` reads a feature's chain (:func:`~contrib.audit.feature.chain.chain_of`)
and, when it is gate-only, prints the gates to open per upstream
(:func:`~contrib.audit.feature.chain.to_open`).  Enable reads the same chain through
the same audit (its cache answers both) and opens exactly those gates of the upstream
it drafts for, in one patchset: not the wider chain a gate's own draft would add
(flashinfer's ``gen_moe_utils_module`` at fb28d7242b is also loaded by a CuTe DSL
finalize-fusion path that needs kernel work, which the feature's way never meets).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field

from contrib.audit.feature.chain import to_open
from contrib.audit.feature.show import VERDICT_TEXT, drafts_name, find
from contrib.audit.model import AuditGate, Chain, Feature, Verdict
from contrib.enable.select import Skipped


def picker(wanted: list[str], seen: list[str]) -> Callable[[list[Feature]], list[Feature]]:
    """The audit's choice of features: those ``wanted`` names (as ``contrib why`` finds
    them); ``seen`` gets every feature's name, for a did-you-mean."""
    def choose(features: list[Feature]) -> list[Feature]:
        seen[:] = [f.name for f in features]
        found: list[Feature] = []
        for one in wanted:
            found += [f for f in find(features, one) if f not in found]
        return found
    return choose


@dataclass
class FeatureGates:
    """This upstream's gates that the features' chains open, in the order met, the
    drafts' default name, and why nothing is drafted (``skipped``: a chain that is not
    gate-only, or one opening no gate here)."""

    gates: list[AuditGate] = field(default_factory=list)
    name: str = ""
    skipped: list[Skipped] = field(default_factory=list)


def feature_gates(upstream: str, gates: list[AuditGate], chains: list[Chain],
                  arch: str) -> FeatureGates:
    """What drafting ``chains`` (the chosen features of ``upstream``) opens here."""
    out = FeatureGates(name=drafts_name([c.feature for c in chains]))
    by_place = {(g.file, g.line): g for g in gates}
    for chain in chains:
        if chain.verdict != Verdict.GATE_ONLY:
            out.skipped.append(Skipped(chain.feature.name, _not_gate_only(chain, arch)))
            continue
        spots = to_open(chain)
        here = spots.get(upstream, [])
        if not here:
            elsewhere = ", ".join(spots) or "no upstream"
            out.skipped.append(Skipped(chain.feature.name, f"opens no gate of {upstream}: its "
                                       f"gates are in {elsewhere} (`contrib why` prints the "
                                       "command for each)"))
            continue
        for link in chain.links:
            gate = by_place.get((link.file, link.line))
            if (link.upstream == upstream and link.spot in here and gate is not None
                    and gate not in out.gates):
                out.gates.append(gate)
    if out.skipped:  # one feature is one fix: none of it drafted when a part cannot be
        out.gates = []
    return out


def _not_gate_only(chain: Chain, arch: str) -> str:
    """Why a feature's chain drafts nothing: its verdict, and where it stops."""
    if chain.verdict == Verdict.ON:
        return f"on for {arch} already: nothing to open"
    return f"{VERDICT_TEXT[chain.verdict]} for {arch}: {chain.reason}"


def no_feature(upstream: str, ref: str, wanted: list[str], seen: list[str]) -> str:
    """One line for features ``upstream`` does not declare, with the close names."""
    close = [c for one in wanted for c in difflib.get_close_matches(one, seen, n=3, cutoff=0.75)]
    hint = (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else
            f"; `contrib audit {upstream}` lists its features")
    return f"{upstream} at {ref} declares no feature {' or '.join(map(repr, wanted))}{hint}"
