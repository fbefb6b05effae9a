"""Shell completion of upstreams, ``UPSTREAM/NAME[@BRANCH]`` targets and ``--arch``.

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
    """(upstream names, ``UPSTREAM/NAME`` and ``UPSTREAM/NAME@BRANCH`` of every patchset)
    in the workspace at ``root``."""
    import tomllib

    from contrib.workspace.layout import CONFIG_NAME

    try:
        with (root / CONFIG_NAME).open("rb") as handle:
            tables = tomllib.load(handle).get("upstreams", {})
        tables = tables if isinstance(tables, dict) else {}
    except (OSError, ValueError):
        tables = {}
    patchsets: list[str] = []
    for meta in sorted((root / "patchsets").glob("*/*/patchset.toml")):
        target = f"{meta.parent.parent.name}/{meta.parent.name}"
        patchsets += [target, *(f"{target}@{b}" for b in _branches(meta))]
    return sorted(tables), patchsets


def _branches(meta: Path) -> list[str]:
    """The target branches of a patchset carried on several (``targets``); none for one
    branch, where ``UPSTREAM/NAME`` already names it."""
    import tomllib

    try:
        with meta.open("rb") as handle:
            targets = tomllib.load(handle).get("targets")
    except (OSError, ValueError):
        return []
    return [str(t) for t in targets] if isinstance(targets, list) and len(targets) > 1 else []


def complete_arch(_ctx: click.Context, _: click.Parameter,
                  incomplete: str) -> list[CompletionItem]:
    """The architectures contrib knows, as ``sm_120a`` (``--arch`` also reads ``sm120``,
    ``120`` and ``12.0``; see :func:`contrib.arch.parse_arch`)."""
    from click.shell_completion import CompletionItem

    from contrib.arch import KNOWN

    names = [f"sm_{major}{minor}{suffix}" for major, minor in KNOWN
             for suffix in ("", "a") if not suffix or major >= 9]  # "a": Hopper on
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def complete_targets(ctx: click.Context, _: click.Parameter,
                     incomplete: str) -> list[CompletionItem]:
    """Upstreams and ``UPSTREAM/NAME[@BRANCH]`` targets starting with what was typed."""
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
