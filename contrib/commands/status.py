"""``contrib status [TARGET...] [--no-fetch]``: where every patchset stands.

An upstream that cannot be cloned or fetched does not hide the others: its
rows are shown from what is known (the cache, if any), marked
``unreachable: <git's reason>``, and the exit code is 1.  ``--no-fetch`` never
clones: an upstream with no cache yet is said so, its rows marked
``not cached``, exit 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contrib.errors import ConfigError, ContribError, UpstreamUnreachable
from contrib.forge.api import ForgeFactory
from contrib.git.cache import Mirror
from contrib.git.repo import Sha
from contrib.pr.prepare import holdback
from contrib.pr.status import add_live_prs, pr_cells
from contrib.record import standing_dict, version_standing
from contrib.ui import UI
from contrib.workspace.model import Patchset, Workspace


def status(ws: Workspace, ui: UI, targets: list[str], *, fetch: bool,
           forge_factory: ForgeFactory | None = None) -> int:
    """One row per patchset: base, tip, commits behind, sync, validation, PR with its
    CI checks and review state (read from GitHub unless offline or without a token)."""
    mirrors: dict[str, tuple[Mirror | None, str | None]] = {}
    rows: list[dict[str, Any]] = []
    patchsets = ws.patchsets(targets)
    for ps in patchsets:
        if ps.upstream not in mirrors:
            mirrors[ps.upstream] = _mirror(ws, ui, ps.upstream, fetch)
    lines = sorted({(ps.upstream, ps.branch) for ps in patchsets})
    named = {(ps.upstream, ps.branch): ps.targets_at for ps in patchsets
             if fetch and mirrors[ps.upstream][1] is None}  # a stale cache proves nothing
    facts = {(name, branch): upstream_facts(
        mirrors[name][0], [ps.current.base for ps in patchsets
                           if (ps.upstream, ps.branch) == (name, branch)], branch,
        named.get((name, branch), ""))
        for name, branch in lines}
    for ps in patchsets:
        mirror, unreachable = mirrors[ps.upstream]
        rows.append(describe(ps, mirror, facts[(ps.upstream, ps.branch)])
                    | {"unreachable": unreachable})
    github, code = add_live_prs(ws, patchsets, rows, online=fetch, factory=forge_factory)
    ui.table("patchsets", ["patchset", "base", "tip", "behind", "sync", "validation", "PR",
                           "CI", "review"],
             [[r["patchset"], f"{r['base'][:10]} {r['base_date'][:10]}",
               (r["tip"] or "?")[:10], "?" if r["behind"] is None else r["behind"],
               _sync_cell(r), _validation_cell(r["validation"]), *pr_cells(r)] for r in rows],
             wrap=("sync", "validation", "PR", "CI", "review"))
    document: dict[str, Any] = {"patchsets": rows, "github": github}
    if not rows:
        ui.info(ws.empty_message(targets))
        document["message"] = ws.empty_message(targets)
    for r in rows:
        if r.get("proposal") and r["proposal"]["held_back"]:
            ui.info(f"{r['patchset']}: {r['proposal']['sentence']}")
        if "error" in (r["pr_live"] or {}):
            ui.warn(f"{r['patchset']}: {r['pr_live']['error']}")
    cut_off = sorted({r["patchset"].split("/")[0] for r in rows if r["unreachable"]})
    for name in cut_off:
        if mirrors[name][1] == EMPTY_CACHE:
            ui.warn(f"upstream {name}: {EMPTY_CACHE}; its rows show only the patchset files "
                    "(run `contrib status` without --no-fetch to clone it)")
            continue
        ui.warn(f"upstream {name} is unreachable: {mirrors[name][1]}; its rows show the cache "
                "as last fetched (fix url in contrib.toml or the network)")
    ui.emit(document)
    return max(code, 1 if cut_off else 0)


EMPTY_CACHE = "the cache is empty and --no-fetch never clones"


def _mirror(ws: Workspace, ui: UI, name: str, fetch: bool) -> tuple[Mirror | None, str | None]:
    """The upstream's cache and None, or (the cache if any, git's reason) when unreachable."""
    mirror = Mirror(ws.config.upstream(name))
    if not fetch and not mirror.path.is_dir():  # offline means offline: never a first clone
        return None, EMPTY_CACHE
    if fetch:
        ui.step(f"fetching {name} ...")
    try:
        return mirror.ensure(fetch_now=fetch, progress=ui.progress), None
    except UpstreamUnreachable as exc:
        return (mirror if mirror.path.is_dir() else None), exc.reason


@dataclass(frozen=True)
class UpstreamFacts:
    """What status needs from one upstream cache, read for all its patchsets at once."""

    tip: Sha | None = None
    base_dates: dict[str, str] = field(default_factory=dict)
    behind: dict[str, int] = field(default_factory=dict)


def upstream_facts(mirror: Mirror | None, bases: list[str],
                   branch: str | None = None, named_at: str = "") -> UpstreamFacts:
    """The tip of ``branch`` (default: the upstream's), and each base's date and distance
    from it: four git runs per upstream branch, however many patchsets (four each cost
    ~0.4 s for 50); nothing without a cache.  ``named_at`` (``patchset.toml:LINE`` of
    ``targets``) makes a branch the upstream lacks a ConfigError there."""
    if mirror is None:
        return UpstreamFacts()
    git = mirror.git
    dates = git.commit_dates(bases)
    try:
        tip = mirror.tip(branch, named_at=named_at)
    except ConfigError:
        raise
    except ContribError:
        return UpstreamFacts(None, dates)
    return UpstreamFacts(tip, dates, git.behind_counts(tip, list(dates)))


def describe(ps: Patchset, mirror: Mirror | None,
             facts: UpstreamFacts | None = None) -> dict[str, Any]:
    """The status facts of one patchset as a JSON-able dict (no cache: what the files say)."""
    base = ps.current.base
    facts = facts or upstream_facts(mirror, [base], ps.branch)
    base_date, tip, behind = facts.base_dates.get(base, ""), facts.tip, facts.behind.get(base)
    standing = version_standing(ps.current)
    validation = standing_dict(standing)
    pr = ps.pr
    # A draft with no PR: what its record proves, and whether open-pr would propose it
    # (one rule: holdback; the autopilot adds the audit's view of what lies below the
    # chain on the dashboard).
    held = holdback(ps, standing)
    proposal = None if held.proof is None else held.proof.to_dict() | {
        "held_back": list(held.held), "sentence": held.sentence()}
    return {
        "patchset": ps.target,
        "branch": ps.branch,
        "selector": ps.target,  # names one target (with @BRANCH where there are several)
        "title": ps.title,
        "arch": ps.arch,
        "upstream_status": str(ps.upstream_status),
        "base": base,
        "base_date": base_date,
        "tip": tip,
        "behind": behind,
        "patches": ps.current.series(),
        "versions": len(ps.versions()),
        "sync": str(ps.sync.result) if ps.sync else None,
        "validation": validation,
        "pr": {"number": pr.number, "url": pr.url, "state": pr.state} if pr else None,
        "proposal": proposal,
    }


def _sync_cell(row: dict[str, Any]) -> str:
    if row["unreachable"] == EMPTY_CACHE:
        return "not cached"
    if row["unreachable"]:
        return f"unreachable: {row['unreachable']}"
    return str(row["sync"] or "-")


def _validation_cell(validation: dict[str, Any]) -> str:
    """``sm_120a: incomplete (skipped: tests) [vm, no GPU]`` or ``not validated (why)``."""
    where = "; ".join(dict.fromkeys(r["host"] for r in validation["runs"]))
    return str(validation["summary"]) + (f" [{where}]" if where else "")
