"""Where a workspace keeps what, and how a command finds the workspace it runs in.

The layout (the README's "Workspace format" says what each file holds)::

    contrib.toml
    patchsets/<upstream>/<name>/patchset.toml
    patchsets/<upstream>/<name>/<40-hex base sha>/{series, 0001-*.patch, validation.json}
    .contrib/            # contrib's private state: lock, transactions (git-ignored)

Only :mod:`os` loads here: shell completion uses it on every key press.
"""

from __future__ import annotations

import os

CONFIG_NAME = "contrib.toml"
STATE_DIR = ".contrib"
META_NAME = "patchset.toml"
SERIES_NAME = "series"
SYNC_STATE_NAME = "sync-state.json"  # the conflicts sync has open (contrib.carry.syncstate)


def find_root(start: str | os.PathLike[str] | None = None) -> str | None:
    """The folder holding contrib.toml at or above ``start`` (default: the current
    folder), with symlinks resolved; None when there is none."""
    here = os.path.realpath(os.getcwd() if start is None else start)
    while True:
        if os.path.isfile(os.path.join(here, CONFIG_NAME)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
