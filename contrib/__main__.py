"""``python -m contrib`` and the ``contrib`` console script.

``contrib --version`` is answered before the command-line machinery loads:
scripts and package managers probe it, and loading click alone takes several
times the interpreter's own start.  Everything else goes to :func:`contrib.cli.main`.

A Ctrl-C that lands while the command line is still loading (the first tenth of
a second, before :func:`contrib.runner.guarded` is in place) ends the same way
as one later: exit 130, contrib's one line, no traceback.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run contrib with ``sys.argv``; return the exit code."""
    try:
        if sys.argv[1:] == ["--version"]:
            from contrib import __version__

            sys.stdout.write(f"contrib, version {__version__}\n")
            return 0
        from contrib.cli import main as cli_main

        return cli_main()
    except KeyboardInterrupt:
        from contrib.runner import interrupted

        return interrupted("--json" in sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
