"""``contrib status [TARGET...] [--no-fetch]``: where every patchset stands."""

from __future__ import annotations

from typing import Any

from contrib.errors import ContribError
from contrib.forge import ForgeFactory
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
    rows: list[dict[str, Any]] = []
    patchsets = ws.patchsets(targets)
    for ps in patchsets:
        if ps.upstream not in mirrors:
            mirror = Mirror(ws.config.upstream(ps.upstream))
            if fetch:
                ui.step(f"fetching {ps.upstream} ...")
            mirrors[ps.upstream] = mirror.ensure(fetch_now=fetch, progress=ui.progress)
        rows.append(describe(ps, mirrors[ps.upstream]))
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


def describe(ps: Patchset, mirror: Mirror) -> dict[str, Any]:
    """The status facts of one patchset as a JSON-able dict."""
    base = ps.current.base
    git = mirror.git
    base_date, tip, behind = "", None, None
    if git.try_rev_parse(base):
        base_date = git.commit_info(base).committer_date
    try:
        tip = mirror.tip()
        if base_date:
            behind = git.count(f"{base}..{tip}")
    except ContribError:
        pass
    validation = standing_dict(version_standing(ps.current))
    pr = {k: ps.get("pr", k) for k in ("number", "url", "state")} if "pr" in ps.meta else None
    return {
        "patchset": ps.target,
        "title": str(ps.meta.get("title", "")),
        "upstream_status": str(ps.meta.get("upstream_status", "Pending")),
        "base": base,
        "base_date": base_date,
        "tip": tip,
        "behind": behind,
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
