"""Shell completion of upstream names and ``UPSTREAM/NAME`` patchsets.

click generates the bash, zsh and fish scripts and completes commands and
options itself (``eval "$(_CONTRIB_COMPLETE=bash_source contrib)"``); these
callbacks add the names from the workspace.  They run on every <TAB>, so they
read the folder names and contrib.toml's table headers with the standard
library only, and answer nothing rather than fail on a broken workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click
    from click.shell_completion import CompletionItem


def _workspace_root(ctx: click.Context) -> Path | None:
    """The workspace the command line points at (``-C DIR`` or the current folder)."""
    from contrib.workspace.layout import find_root

    root = find_root(ctx.find_root().params.get("directory"))
    return None if root is None else Path(root)


def workspace_names(root: Path) -> tuple[list[str], list[str]]:
    """(upstream names, ``UPSTREAM/NAME`` of every patchset) in the workspace at ``root``."""
    import tomllib

    from contrib.workspace.layout import CONFIG_NAME

    try:
        with (root / CONFIG_NAME).open("rb") as handle:
            tables = tomllib.load(handle).get("upstreams", {})
        upstreams = sorted(tables) if isinstance(tables, dict) else []
    except (OSError, ValueError):
        upstreams = []
    patchsets = sorted(f"{meta.parent.parent.name}/{meta.parent.name}"
                       for meta in (root / "patchsets").glob("*/*/patchset.toml"))
    return upstreams, patchsets


def complete_targets(ctx: click.Context, _: click.Parameter,
                     incomplete: str) -> list[CompletionItem]:
    """Upstreams and ``UPSTREAM/NAME`` patchsets starting with what was typed."""
    from click.shell_completion import CompletionItem

    root = _workspace_root(ctx)
    if root is None:
        return []
    upstreams, patchsets = workspace_names(root)
    return [CompletionItem(name) for name in (*upstreams, *patchsets)
            if name.startswith(incomplete)]


def complete_upstreams(ctx: click.Context, _: click.Parameter,
                       incomplete: str) -> list[CompletionItem]:
    """Upstream names starting with what was typed."""
    from click.shell_completion import CompletionItem

    root = _workspace_root(ctx)
    if root is None:
        return []
    return [CompletionItem(name) for name in workspace_names(root)[0]
            if name.startswith(incomplete)]
