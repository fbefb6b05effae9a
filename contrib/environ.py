"""Every environment variable contrib reads, parsed in one place.

A bad value is bad input: one line naming the variable, the value and what to
set instead (exit 2), found before a command changes anything.  ``check``
runs all of them at the start of every command.
"""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING

from contrib.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_LOCK_TIMEOUT = 30.0
MAX_LOCK_TIMEOUT = 24 * 3600.0
# datetime handles years 1..9999; SOURCE_DATE_EPOCH is "seconds since 1970".
MAX_EPOCH = 253402300799  # 9999-12-31T23:59:59Z


def lock_timeout() -> float:
    """Seconds a second contrib waits for the workspace lock (CONTRIB_LOCK_TIMEOUT)."""
    raw = os.environ.get("CONTRIB_LOCK_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (0 <= value <= MAX_LOCK_TIMEOUT):  # also false for nan
        raise UsageError(f"CONTRIB_LOCK_TIMEOUT={raw!r}: must be a number of seconds from 0 to "
                         f"{MAX_LOCK_TIMEOUT:g} (e.g. 30); fix or unset it")
    return value


def source_date_epoch() -> int | None:
    """SOURCE_DATE_EPOCH (reproducible timestamps), or None when unset."""
    raw = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not raw:
        return None
    if not raw.isascii() or not raw.isdigit() or int(raw) > MAX_EPOCH:
        raise UsageError(f"SOURCE_DATE_EPOCH={raw[:40]!r}: must be whole seconds since "
                         f"1970-01-01 UTC, from 0 to {MAX_EPOCH} (see "
                         "reproducible-builds.org/specs/source-date-epoch); fix or unset it")
    return int(raw)


def _user_cache_dir() -> str:
    if sys.platform.startswith("linux"):
        # platformdirs' rule for Linux, without importing it on every start.
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        return os.path.join(xdg or os.path.join(os.path.expanduser("~"), ".cache"), "contrib")
    import platformdirs

    return str(platformdirs.user_cache_dir("contrib"))


def pip_cache_dir() -> Path:
    """pip's cache folder, where a wheel pip fetched once may still lie: $PIP_CACHE_DIR,
    else pip's default on Linux ($XDG_CACHE_HOME/pip, ~/.cache/pip).  A ``cache-dir`` in
    pip's own config files is not read: set PIP_CACHE_DIR to the same folder."""
    from pathlib import Path

    override = os.environ.get("PIP_CACHE_DIR", "").strip()
    if override:
        return Path(os.path.expanduser(override))
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return Path(xdg or os.path.join(os.path.expanduser("~"), ".cache")) / "pip"


def find_links() -> list[Path]:
    """The folders ``why`` and ``audit`` look in for the wheels an upstream pins
    (CONTRIB_FIND_LINKS, separated by ``:``), besides pip's cache; read offline only."""
    from pathlib import Path

    raw = os.environ.get("CONTRIB_FIND_LINKS", "")
    return [Path(os.path.expanduser(p.strip())) for p in raw.split(os.pathsep) if p.strip()]


def cache_root() -> Path:
    """Where upstream clones live: $CONTRIB_CACHE or the user cache dir, checked usable."""
    from pathlib import Path

    return Path(_cache_root_text())


def _cache_root_text() -> str:
    override = os.environ.get("CONTRIB_CACHE", "")
    what = f"CONTRIB_CACHE={override!r}" if override else "the user cache folder"
    path = override or _user_cache_dir()
    if "\0" in path:
        raise UsageError(f"{what}: contains a NUL byte; set it to a folder path")
    path = os.path.abspath(path)
    existing = path
    while (not os.path.exists(existing) and not os.path.islink(existing)
           and existing != os.path.dirname(existing)):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        where = "is" if existing == path else f"is below {existing}, which is"
        raise UsageError(f"{what} ({path}) {where} not a folder; point CONTRIB_CACHE at a "
                         "folder (or one that can be created)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what} ({existing}) is not writable; point CONTRIB_CACHE at a "
                         "folder you can write to")
    return path


def check() -> None:
    """Parse every variable contrib reads; UsageError on the first bad one."""
    lock_timeout()
    source_date_epoch()
    _cache_root_text()
