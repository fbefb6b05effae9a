"""``contrib why UPSTREAM FEATURE --arch ARCH [--at REF]``: one feature's chain and verdict.

Options in, outcome out: the chain is :mod:`contrib.audit.feature`.  Exit 0 when the
feature is on for the target, 1 when it is off or crashes (or cannot be decided), 2
on bad input (an unknown upstream, ref or feature).
"""

from __future__ import annotations

import difflib

from contrib.arch import parse_arch
from contrib.audit.feature.chain import Verdict
from contrib.audit.feature.declared import Feature
from contrib.audit.feature.show import chain_lines, find
from contrib.audit.report import stack_line
from contrib.audit.run import audit_upstream
from contrib.errors import UsageError
from contrib.ui import UI
from contrib.workspace.model import Workspace


def why(ws: Workspace, ui: UI, upstream: str, feature: str, *, arch: str | None,
        at: str | None, fetch: bool) -> int:
    """Follow ``feature`` of ``upstream`` across the stack; say its chain and verdict."""
    target = parse_arch(ws.config.default_arch(arch, "why"))
    ws.config.upstream(upstream)  # an unknown name fails before any work
    names: list[str] = []

    def choose(features: list[Feature]) -> list[Feature]:
        names.extend(f.name for f in features)
        return find(features, feature)

    with ui.task(f"auditing {upstream}") as task:
        audit = audit_upstream(ws, upstream, target, at=at, since=None, fetch=fetch,
                               progress=ui.progress, step=task.step, features=choose)
    if not audit.features:
        close = difflib.get_close_matches(feature, names, n=3, cutoff=0.75)
        hint = (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else
                f"; `contrib audit {upstream}` lists its features")
        raise UsageError(f"{upstream} at {audit.ref} declares no feature {feature!r}{hint}")
    places = {audit.name: audit.commit[:10]} | {s["upstream"]: s["tag"] for s in audit.stack}
    ui.info(f"{upstream} at {audit.ref} ({audit.commit[:10]})")
    if audit.stack:
        ui.info(stack_line(audit))
    for chain in audit.features:
        ui.info("")
        for line in chain_lines(chain, target.name, places):
            ui.info(line)
    for note in audit.notes:
        ui.warn(note)
    ui.emit({"arch": target.name, "upstream": upstream, "commit": audit.commit,
             "ref": audit.ref, "stack": audit.stack,
             "features": [c.to_dict() for c in audit.features]})
    return 0 if all(c.verdict == Verdict.ON for c in audit.features) else 1
