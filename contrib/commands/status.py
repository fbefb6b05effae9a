"""``contrib status [TARGET...] [--no-fetch]``: where every patchset stands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contrib.errors import ContribError
from contrib.forge import ForgeFactory
from contrib.git import Sha
from contrib.mirror import Mirror
from contrib.patchset import Patchset, Workspace
from contrib.pr_status import add_live_prs, pr_cells
from contrib.record import standing_dict, version_standing
from contrib.ui import UI


def status(ws: Workspace, ui: UI, targets: list[str], *, fetch: bool,
           forge_factory: ForgeFactory | None = None) -> int:
    """One row per patchset: base, tip, commits behind, sync, validation, PR with its
    CI checks and review state (read from GitHub unless offline or without a token)."""
    mirrors: dict[str, Mirror] = {}
    patchsets = ws.patchsets(targets)
    for ps in patchsets:
        if ps.upstream not in mirrors:
            mirror = Mirror(ws.config.upstream(ps.upstream))
            if fetch:
                ui.step(f"fetching {ps.upstream} ...")
            mirrors[ps.upstream] = mirror.ensure(fetch_now=fetch, progress=ui.progress)
    facts = {name: upstream_facts(mirror, [ps.current.base for ps in patchsets
                                           if ps.upstream == name])
             for name, mirror in mirrors.items()}
    rows = [describe(ps, mirrors[ps.upstream], facts[ps.upstream]) for ps in patchsets]
    github, code = add_live_prs(ws, patchsets, rows, online=fetch, factory=forge_factory)
    ui.table("patchsets", ["patchset", "base", "tip", "behind", "sync", "validation", "PR",
                           "CI", "review"],
             [[r["patchset"], f"{r['base'][:10]} {r['base_date'][:10]}",
               (r["tip"] or "?")[:10], "?" if r["behind"] is None else r["behind"],
               r["sync"] or "-", _validation_cell(r["validation"]), *pr_cells(r)] for r in rows])
    if not rows:
        ui.info("no patchsets yet: create one with `contrib new`")
    for r in rows:
        if "error" in (r["pr_live"] or {}):
            ui.warn(f"{r['patchset']}: {r['pr_live']['error']}")
    ui.emit({"patchsets": rows, "github": github})
    return code


@dataclass(frozen=True)
class UpstreamFacts:
    """What status needs from one upstream cache, read for all its patchsets at once."""

    tip: Sha | None
    base_dates: dict[str, str]
    behind: dict[str, int]


def upstream_facts(mirror: Mirror, bases: list[str]) -> UpstreamFacts:
    """The tip, and each base's date and distance from it: four git runs per upstream,
    however many patchsets (one each would cost ~0.4 s for 50)."""
    git = mirror.git
    dates = git.commit_dates(bases)
    try:
        tip = mirror.tip()
    except ContribError:
        return UpstreamFacts(None, dates, {})
    return UpstreamFacts(tip, dates, git.behind_counts(tip, list(dates)))


def describe(ps: Patchset, mirror: Mirror, facts: UpstreamFacts | None = None) -> dict[str, Any]:
    """The status facts of one patchset as a JSON-able dict."""
    base = ps.current.base
    facts = facts or upstream_facts(mirror, [base])
    validation = standing_dict(version_standing(ps.current))
    pr = {k: ps.get("pr", k) for k in ("number", "url", "state")} if "pr" in ps.data else None
    return {
        "patchset": ps.target,
        "title": str(ps.data.get("title", "")),
        "upstream_status": str(ps.data.get("upstream_status", "Pending")),
        "base": base,
        "base_date": facts.base_dates.get(base, ""),
        "tip": facts.tip,
        "behind": facts.behind.get(base),
        "patches": ps.current.series(),
        "versions": len(ps.versions()),
        "sync": ps.get("sync", "result"),
        "validation": validation,
        "pr": pr,
    }



def _validation_cell(validation: dict[str, Any]) -> str:
    """``sm_120a: incomplete (skipped: tests) [vm, no GPU]`` or ``not validated (why)``."""
    where = "; ".join(dict.fromkeys(r["host"] for r in validation["runs"]))
    return str(validation["summary"]) + (f" [{where}]" if where else "")
