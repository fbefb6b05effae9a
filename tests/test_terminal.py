"""What a person sees in a real terminal: every line fits its width, verdicts in colour.

The demo workspace is made, its upstream moved so that sync conflicts, and
status, sync, validate and audit run on a pseudo-terminal (the pty module) of
80 and 120 columns.  No line, nor any redraw of the status line, is wider.
"""

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

import pytest

from contrib.termtable import render_table, widths_for
from testing.gitutil import git
from testing.workspace import run_contrib

ROOT = Path(__file__).resolve().parent.parent
ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def on_terminal(cwd: Path, columns: int, *args: str, stdout: Path | None = None,
                **extra: str) -> str:
    """Run contrib on a pseudo-terminal ``columns`` wide (stdout into the file ``stdout``
    when given); everything the terminal showed."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
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
    assert proc.wait(timeout=60) in (0, 1), shown
    return shown.decode("utf-8", errors="replace").replace("\r\n", "\n")


def widest(shown: str) -> int:
    """The widest line as the terminal shows it: colour codes take no room, and each
    redraw of the status line (after a carriage return) is a line of its own."""
    return max(len(ESCAPE.sub("", part)) for line in shown.split("\n")
               for part in line.split("\r"))


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """The demo's workspace, its upstream moved on by a commit that breaks both patchsets."""
    assert run_contrib("demo", str(tmp_path / "demo")).code == 0
    upstream = tmp_path / "demo" / "upstream"
    gate = upstream / "flashinfer" / "jit" / "comm.py"
    gate.write_text(gate.read_text().replace("supported_major_versions=[9, 10]",
                                             "supported_major_versions=[9, 10, 11]"))
    git(upstream, "-c", "user.name=Up Stream", "-c", "user.email=up@example.com",
        "commit", "-qam", "jit: admit SM110 in the comm gate (#1030)")
    return tmp_path / "demo" / "workspace"


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_status_sync_validate_and_audit_fit_the_terminal(demo: Path, columns: int) -> None:
    status = on_terminal(demo, columns, "status")  # its first clone, of the local upstream
    validate = on_terminal(demo, columns, "validate", "minifer/sm120-gate-only")
    audit = on_terminal(demo, columns, "audit", "--arch", "120", "--no-fetch")
    sync = on_terminal(demo, columns, "sync")
    for name, shown in (("status", status), ("validate", validate), ("audit", audit),
                        ("sync", sync)):
        assert widest(shown) <= columns, f"{name} at {columns}:\n{shown}"
    assert "minifer/sm120-gate-only" in ESCAPE.sub("", status)
    assert "\x1b[31mfailed\x1b[0m" in status and "\x1b[33mincomplete\x1b[0m" in status
    assert "\x1b[31mconflict\x1b[0m" in sync and "breaks at" in sync
    assert "needs-kernel-work" in ESCAPE.sub("", audit)


@pytest.mark.slow
def test_no_color_and_no_color_flag_leave_out_every_colour(demo: Path) -> None:
    for shown in (on_terminal(demo, 80, "status", "--no-fetch", NO_COLOR="1"),
                  on_terminal(demo, 80, "status", "--no-fetch", "--no-color")):
        assert "\x1b[" not in shown and "minifer/sm120-gate-only" in shown
        assert widest(shown) <= 80


def test_a_pipe_gets_the_plain_table_one_row_a_line(demo: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "contrib", "status"], cwd=demo,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, check=False)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and "\x1b[" not in proc.stdout
    assert len(lines) == 3 and "sm_120a: failed (failed: arch-guards" in lines[1]


def test_free_text_wraps_under_its_row_and_identifiers_are_cut() -> None:
    columns = ["patchset", "base", "sync", "validation"]
    rows = [["up/a-long-patchset-name", "0123456789abcdef", "rebased", " ".join(["word"] * 30)]]
    narrow = render_table(columns, rows, width=40, colour=False, wrap=["validation"])
    assert widest(narrow) <= 40
    assert "    validation: word word" in narrow and "…" in narrow
    wide = render_table(columns, rows, width=250, colour=False, wrap=["validation"])
    assert len(wide.splitlines()) == 2 and "up/a-long-patchset-name" in wide
    assert widths_for(columns, rows, 1000, [False] * 4)[0] == len("up/a-long-patchset-name")


@pytest.mark.slow
def test_audit_into_a_file_still_shows_its_progress_on_the_terminal(demo: Path,
                                                                    tmp_path: Path) -> None:
    report = tmp_path / "gates.txt"
    shown = on_terminal(demo, 80, "audit", "--arch", "sm_120a", stdout=report)
    assert re.search(r"\r[|/\\-] minifer: ", shown) or re.search(r"\r[|/\\-] auditing", shown)
    assert re.search(r"  \d+s", shown)  # the time the step has taken
    text = report.read_text()
    assert "needs-kernel-work" in text and "\r" not in text and "\x1b[" not in text


@pytest.mark.slow
def test_the_range_diff_is_coloured_by_git_on_a_terminal_only(demo: Path) -> None:
    shown = on_terminal(demo, 80, "diff", "minifer/sm120-gate-only")
    assert "\x1b[" in shown and "1:  " in ESCAPE.sub("", shown)
    piped = subprocess.run([sys.executable, "-m", "contrib", "diff", "minifer/sm120-gate-only"],
                           cwd=demo, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, check=False)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout and "1:  " in piped.stdout


def test_counts_are_said_in_words() -> None:
    from contrib.ui import counted

    assert [counted(1, "patch"), counted(3, "patch"), counted(2, "kernel entry"),
            counted(0, "unit"), counted(2, "key"), counted(2, "person", "people")] == [
        "1 patch", "3 patches", "2 kernel entries", "0 units", "2 keys", "2 people"]
