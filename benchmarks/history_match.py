"""Pair each mined opening with the gate the audit reports for it, before and after.

At the parent, the opened gate is the audited gate of the same file whose lines
meet the opening's changed lines; failing that, one inside the changed hunk;
failing that, one of the same function.  A ``cuda-guard`` opening (device code)
is matched by the gates whose evidence or units name the header or unit.  When
the change sits in a predicate helper (``def is_blackwell(): return major ==
10``) or a module-level name (``_is_sm100 = is_sm100_supported()``), the gates
it opened are where other code tests that name: when none of the gates on the
lines excludes, the gates of the tree whose text calls or names it are taken
(``via`` says which way the gate was found).  At the opening commit, the same
gate is found by the audit's own pairing key (file, function, parser kind,
ordinal), else inside the hunk at the commit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from history_mine import Opening

from contrib.audit.model import AuditGate


@dataclass
class Row:
    """What the audit made of one opening: at the parent, and at the opening commit."""

    opening: Opening
    found: bool
    excluding: bool
    got_class: str | None
    gate: str  # "file:line function (kind)" of the gate read, or ""
    effect: str
    reason: str
    still_excluding: bool  # at the opening commit: the opened gate is still read as excluding
    after_gate: str
    via: str = ""  # how the gate was found: lines, hunk, function, units, users

    @property
    def class_agrees(self) -> bool:
        return self.excluding and self.got_class == self.opening.expected

    @property
    def got(self) -> str:
        if not self.found:
            return "not found"
        return self.got_class or "not excluding"

    def why(self) -> str:
        """The one-line reason of a miss: where the audit's reading went another way."""
        if not self.found:
            return "no audited gate on the changed lines, hunk or function"
        if not self.excluding:
            return self.effect or "read as not excluding"
        return self.reason or self.effect

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["opening"] = self.opening.to_dict()
        data["class_agrees"] = self.class_agrees
        return data


def matching(opening: Opening, gates: Sequence[AuditGate],
             names: Sequence[str] = ()) -> tuple[list[AuditGate], str]:
    """The gates of a parent's audit that are the gate ``opening`` opened, and how they
    were found; ``names``: what the changed code defines (see ``defined_names``)."""
    if opening.mechanism == "cuda-guard":
        return [g for g in gates if _names_file(g, opening.file)], "units"
    direct, via = _direct(opening, gates)
    if any(g.excludes_target for g in direct) or not names:
        return direct, via
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, names)) + r")\b")
    users = [g for g in gates if g.excludes_target and pattern.search(g.text)]
    # a name tested in the opening's own file is that file's (`_NVFP4_SUPPORTED` is set
    # and tested in each of three benchmarks): users elsewhere count only without one
    users = [g for g in users if g.file == opening.file] or users
    return (users, "users") if users else (direct, via)


def _direct(opening: Opening, gates: Sequence[AuditGate]) -> tuple[list[AuditGate], str]:
    same_file = [g for g in gates if g.file == opening.file]
    changed = set(opening.lines)
    on_lines = [g for g in same_file if changed & set(_span(g))]
    if on_lines:
        return on_lines, "lines"
    first, last = opening.hunk
    in_hunk = [g for g in same_file if first <= g.line <= last]
    if in_hunk:
        return in_hunk, "hunk"
    same = [g for g in same_file if g.function == opening.function]
    return same, "function" if same else ""


def after(opening: Opening, opened: Sequence[AuditGate],
          gates: Sequence[AuditGate]) -> list[AuditGate]:
    """The gates of the opening commit's audit that are the ones ``opened``."""
    if opening.mechanism == "cuda-guard":
        return [g for g in gates if _names_file(g, opening.file)]
    keys = {g.key for g in opened}
    paired = [g for g in gates if g.key in keys]
    if paired:
        return paired
    first, last = opening.new_lines or opening.hunk
    return [g for g in gates if g.file == opening.file and g.function == opening.function
            and first <= g.line <= last]


def measure(opening: Opening, parent: Sequence[AuditGate], commit: Sequence[AuditGate],
            names: Sequence[str] = ()) -> Row:
    """The row of one opening from the audits of its parent and of its commit."""
    opened, via = matching(opening, parent, names)
    pick = next((g for g in opened if g.excludes_target), opened[0] if opened else None)
    later = after(opening, opened, commit)
    still = None if _opens(opening, commit) else next((g for g in later if g.excludes_target), None)
    return Row(
        opening=opening, found=pick is not None,
        excluding=bool(pick and pick.excludes_target),
        got_class=pick.class_ if pick and pick.excludes_target else None,
        gate=_where(pick), effect=pick.effect.why if pick else "",
        reason=pick.reason if pick else "",
        still_excluding=still is not None, after_gate=_where(still), via=via,
    )


def _opens(opening: Opening, gates: Sequence[AuditGate]) -> bool:
    """Whether the opening commit's own hunk holds a gate of the function that admits
    the target: flashinfer's test_bmm_mxfp8 kept ``cap[0] != 10`` for its cudnn backend
    and added ``cap[0] != 12`` for cutlass.  The first still excludes the target, rightly
    (cudnn has nothing for it); the opening is the second.  A partial opening is read
    as opened, its gate left for the other configuration as excluding."""
    if opening.mechanism == "cuda-guard" or not opening.new_lines:
        return False
    first, last = opening.new_lines
    return any(g.file == opening.file and g.function == opening.function
               and first <= g.line <= last and not g.excludes_target
               and g.admits is not None for g in gates)


def _span(gate: AuditGate) -> range:
    return range(gate.line, max(gate.end_line, gate.line) + 1)


def _names_file(gate: AuditGate, path: str) -> bool:
    return path in gate.units or any(e.path == path and not e.upstream for e in gate.evidence)


def _where(gate: AuditGate | None) -> str:
    return "" if gate is None else f"{gate.file}:{gate.line} {gate.function} ({gate.kind})"
