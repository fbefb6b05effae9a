"""A pseudo-terminal of a given width (the pty module), and what it showed."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def on_terminal(cwd: Path, columns: int, *args: str, stdout: Path | None = None,
                codes: tuple[int, ...] = (0, 1), rows: int = 40, **extra: str) -> str:
    """Run contrib on a pseudo-terminal ``columns`` wide and ``rows`` tall (stdout into
    the file ``stdout`` when given); everything the terminal showed."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "COLUMNS")}
    env |= {"PYTHONPATH": str(ROOT), "TERM": "xterm"} | extra
    out = stdout.open("w") if stdout is not None else None
    proc = subprocess.Popen([sys.executable, "-m", "contrib", *args], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=out or child, stderr=child)
    if out is not None:
        out.close()
    os.close(child)
    shown = b""
    while select.select([main], [], [], 60)[0]:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    assert proc.wait(timeout=60) in codes, shown
    return shown.decode("utf-8", errors="replace").replace("\r\n", "\n")


def widest(shown: str) -> int:
    """The widest line as the terminal shows it: colour codes take no room, and each
    redraw of the status line (after a carriage return) is a line of its own."""
    return max(len(ESCAPE.sub("", part)) for line in shown.split("\n")
               for part in line.split("\r"))
