"""``contrib why UPSTREAM FEATURE --arch ARCH [--at REF]``: one feature's chain and verdict.

Options in, outcome out: the chain is :mod:`contrib.audit.feature`.  Exit 0 when the
feature is on for the target, 1 when it is off or crashes (or cannot be decided), 2
on bad input (an unknown upstream, ref or feature).
"""

from __future__ import annotations

import difflib

from contrib.analysis.archtoolkit import parse_cuda
from contrib.arch import parse_archs
from contrib.audit.chains import Feature, Verdict
from contrib.audit.feature.show import VERDICT_TEXT, chain_lines, find, read_at
from contrib.audit.report import stack_line
from contrib.audit.run import audit_upstream, cuda_here
from contrib.audit.serial import chain_json
from contrib.errors import UsageError
from contrib.ui import UI
from contrib.workspace.model import Workspace


def why(ws: Workspace, ui: UI, upstream: str, feature: str, *, arch: str | None,
        at: str | None, fetch: bool, cuda: str | None = None) -> int:
    """Follow ``feature`` of ``upstream`` across the stack for each GPU of ``arch``
    (``sm_120a,sm_121a``: a family side by side); say each chain and verdict.  ``cuda``:
    the release JIT modules are built with (default: this machine's nvcc's)."""
    targets = parse_archs(ws.config.default_arch(arch, "why"))
    given = parse_cuda(cuda) if cuda is not None else None
    ws.config.upstream(upstream)  # an unknown name fails before any work
    toolkit = given or cuda_here()
    names: list[str] = []

    def choose(features: list[Feature]) -> list[Feature]:
        names[:] = [f.name for f in features]
        return find(features, feature)

    results = []
    for target in dict.fromkeys(targets):
        with ui.task(f"auditing {upstream} for {target.name}") as task:
            audit = audit_upstream(ws, upstream, target, at=at, since=None, fetch=fetch,
                                   progress=ui.progress, step=task.step, features=choose,
                                   cuda=toolkit)
        if not audit.features:
            close = difflib.get_close_matches(feature, names, n=3, cutoff=0.75)
            hint = (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else
                    f"; `contrib audit {upstream}` lists its features")
            raise UsageError(f"{upstream} at {audit.ref} declares no feature {feature!r}{hint}")
        results.append((target.name, audit))
    first = results[0][1]
    ui.info(f"{upstream} at {first.ref} ({first.commit[:10]})")
    if first.stack:
        ui.info(stack_line(first))
    for name, audit in results:
        for chain in audit.features:
            ui.info("")
            for line in chain_lines(chain, name, read_at(audit)):
                ui.info(line)
    if len(results) > 1:  # the family side by side: one row per feature
        ui.info("")
        rows = [[chain.feature.name, *(VERDICT_TEXT[a.features[n].verdict] for _, a in results)]
                for n, chain in enumerate(first.features)]
        ui.table("the family side by side", ["feature", *(n for n, _ in results)], rows)
    for note in dict.fromkeys(n for _, a in results for n in a.notes):
        ui.warn(note)
    documents = [{"arch": name, "upstream": upstream, "commit": audit.commit,
                  "ref": audit.ref, "stack": audit.stack,
                  "cuda": toolkit.name, "cuda_from": toolkit.source.value,
                  "features": [chain_json(c) for c in audit.features]} for name, audit in results]
    ui.emit(documents[0] if len(documents) == 1 else {"archs": documents})
    return 0 if all(c.verdict == Verdict.ON for _, a in results for c in a.features) else 1
