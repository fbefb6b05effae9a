"""``contrib log UPSTREAM/NAME``: the versions, oldest first, and how each was made.

Per version: the events of ``[[history]]`` that made it (``new``, a ``sync``
with its result and probes, a conflict ``resolved`` by hand, a ``refresh``),
its validation verdict and the PR pushes of it.  Versions made before
contrib kept history say so.
"""

from __future__ import annotations

from typing import Any

from contrib.carry.retention import Pruned, pruned_versions
from contrib.carry.versions import Event, How, chronological, read_history
from contrib.errors import ContribError
from contrib.git.cache import Mirror
from contrib.record import standing_dict, version_standing
from contrib.ui import UI, counted
from contrib.workspace.model import Patchset, Version, Workspace


def log(ws: Workspace, ui: UI, target: str) -> int:
    """Show the versions of ``target`` with their history."""
    ps = ws.patchset(target)
    mirror = Mirror(ws.config.upstream(ps.upstream)).ensure(fetch_now=False,
                                                            progress=ui.progress)
    events = read_history(ps)
    rows = [_describe(ps, v, [e for e in events if e.version == v.base], mirror)
            for v in chronological(ps, mirror.git, pruned_versions(ps))]
    for row in rows:
        _show(ui, row)
    ui.emit({"patchset": ps.target, "current": ps.current.base, "versions": rows})
    return 0


def _describe(ps: Patchset, version: Version, events: list[Event],
              mirror: Mirror) -> dict[str, Any]:
    made = [e.as_dict() for e in events if e.how != How.PUSH]
    pushes = [e.as_dict() for e in events if e.how == How.PUSH]
    date = ""
    if mirror.git.try_rev_parse(version.base):
        date = mirror.git.commit_info(version.base).committer_date
    try:
        patches = version.series()
    except ContribError:  # a broken folder is still listed; validate/sync name the fault
        patches = []
    pr = None
    if ps.pr is not None and ps.pr.version == version.base and ps.pr.number:
        pr = {"number": ps.pr.number, "url": ps.pr.url, "state": ps.pr.state}
    where = (f"git {version.kept_in[:12]}:{version.patchset.dir.name}/{version.base}"
             if isinstance(version, Pruned) else "workspace")
    return {"version": version.base, "base_date": date, "current": version == ps.current,
            "patches": patches, "made": made,
            "validation": standing_dict(version_standing(version)),
            "pushes": pushes, "pr": pr, "pruned": isinstance(version, Pruned),
            "where": where, "kept_in": version.kept_in if isinstance(version, Pruned) else None}


def _show(ui: UI, row: dict[str, Any]) -> None:
    mark = " (current)" if row["current"] else ""
    if row["pruned"]:
        mark = f" (pruned; in the workspace's git history at {row['kept_in'][:12]})"
    ui.info(f"{row['version'][:12]} {row['base_date'][:10]}{mark}: "
            f"{counted(len(row['patches']), 'patch')}; {row['validation']['summary']}")
    if not row["made"]:
        ui.info("  made before contrib kept history")
    for event in row["made"]:
        what = event["how"] + (f" ({event['result']})" if event.get("result") else "")
        since = f" from {event['previous'][:12]}" if event.get("previous") else ""
        detail = f": {event['detail']}" if event.get("detail") else ""
        ui.info(f"  {event.get('at', '')[:19]} {what}{since}{detail}")
    for push in row["pushes"]:
        ui.info(f"  {push.get('at', '')[:19]} push: {push.get('detail', '')}")
    if row["pr"]:
        ui.info(f"  PR #{row['pr']['number']} {row['pr']['state'] or ''}: {row['pr']['url']}")
