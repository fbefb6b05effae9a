"""Ctrl-C while contrib is still loading: exit 130, one line, no traceback.

A real SIGINT, sent by the process to itself at the moment a chosen module is
about to be imported: the KeyboardInterrupt is raised inside that import, as a
user's Ctrl-C in the first tenth of a second is.  The process starts as the
installed ``contrib`` script does (pip's launcher calls ``contrib.__main__:main``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LAUNCHER = """\
import importlib.abc, os, signal, sys

# A process started with SIGINT ignored (a pytest-xdist worker's child) gets no
# KeyboardInterrupt: a terminal's Ctrl-C is the question.
signal.signal(signal.SIGINT, signal.default_int_handler)


class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == {module!r} and self in sys.meta_path:  # once: the user pressed it once
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None


sys.meta_path.insert(0, CtrlC())
sys.argv = ["contrib", *{args!r}]
from contrib.__main__ import main
sys.exit(main())
"""


@pytest.mark.parametrize("module", [
    "contrib.cli",  # the command line itself
    "click",  # a library the command line loads
    "contrib.runner",  # the one place that turns outcomes into exit codes
    "contrib.commands.status",  # the command, once click runs it
])
@pytest.mark.parametrize("args", [["status"], ["status", "--json"]])
def test_ctrl_c_while_loading_exits_130_quietly(tmp_path: Path, module: str,
                                                args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", LAUNCHER.format(module=module, args=args)],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    # click starts a new line after the terminal's ^C once it runs; the line is the same
    assert proc.stderr.lstrip("\n") == "contrib: error: interrupted\n"
    if "--json" in args:
        assert proc.stdout == '{"error": "interrupted", "exit_code": 130}\n'
    else:
        assert proc.stdout == ""
