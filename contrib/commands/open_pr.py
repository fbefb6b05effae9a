"""``contrib open-pr [TARGET...] [--dry-run] [--force] [--reopen] [--allow-hook-failures]
[--json]``."""

from __future__ import annotations

from typing import Any

from contrib.forge.api import ForgeFactory
from contrib.pr.open import open_pr
from contrib.ui import UI
from contrib.workspace.model import Workspace


def open_pr_command(ws: Workspace, ui: UI, targets: list[str], *, dry_run: bool, force: bool,
                    reopen: bool, github_factory: ForgeFactory | None = None,
                    allow_hook_failures: bool = False) -> int:
    """Run open-pr and report: a human summary, or one JSON document."""
    code, results = open_pr(ws, targets, dry_run=dry_run, force=force, reopen=reopen,
                            github_factory=github_factory, progress=ui.progress,
                            allow_hook_failures=allow_hook_failures)
    ui.done()
    for r in results:
        _report(ui, r, dry_run)
    if not results:
        ui.info(ws.empty_message(targets))
    document = {"dry_run": dry_run, "results": results, "exit_code": code}
    if not results:
        document["message"] = ws.empty_message(targets)
    ui.emit(document)
    return code


def _report(ui: UI, r: dict[str, Any], dry_run: bool) -> None:
    if r["result"] == "error":
        ui.warn(f"{r['patchset']}: {r['error']}")
        return
    if r["result"] == "upstreamed":
        ui.info(f"{r['patchset']}: {r['message']}")
        return
    pr = r.get("pr") or {}
    link = f" #{pr['number']} {pr['url']}" if pr.get("number") else ""
    result = f"dry run, would be {r['would']}" if r.get("would") else r["result"]
    ui.info(f"{r['patchset']}: {result}{link} (push: {r.get('push')}, branch "
            f"{r['head']} at {r['tip'][:12]}{', validation forced' if r['forced'] else ''})")
    if r.get("error"):
        ui.warn(f"{r['patchset']}: {r['error']}")
    if dry_run:
        for c in r["commits"]:
            ui.info(f"  commit {c['sha'][:12]} {c['subject']}")
        ui.info(f"  title: {r['title']}")
        ui.info("  would call:")
        for action in r["actions"]:
            ui.info(f"    {action}")
        if r.get("unchecked"):
            ui.info("  not checked (a dry run is offline; open-pr without --dry-run reads them):")
            for what in r["unchecked"]:
                ui.info(f"    {what}")
        ui.info("  body:\n" + "\n".join("    " + line for line in r["body"].splitlines()))

