"""A bug's traceback, kept off the terminal: ``$CONTRIB_CACHE/contrib-error.log``.

The command line reports an internal error in one line and names this file; the
autopilot's dashboard does the same for an audit that failed on a bug, and goes
on with the rest.  The text is scrubbed of tokens before it is written.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from contrib import __version__, environ
from contrib.errors import ContribError
from contrib.secrets import scrub


def log_bug(exc: BaseException) -> Path | None:
    """Write ``exc``'s traceback to the error log; its path, or None when it cannot be written."""
    try:
        log = environ.cache_root() / "contrib-error.log"
    except ContribError:  # no usable cache folder: the message alone must do
        return None
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(traceback.format_exception(exc))
        log.write_text(scrub(f"contrib {__version__}\n{' '.join(sys.argv)}\n{text}"),
                       encoding="utf-8")
        return log
    except OSError:
        return None
