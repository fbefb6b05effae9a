"""What a person sees in a real terminal: every line fits its width, verdicts in colour.

The demo workspace is made, its upstream moved so that sync conflicts, and
status, sync, validate and audit run on a pseudo-terminal (the pty module) of
80 and 120 columns.  No line, nor any redraw of the status line, is wider.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contrib.termtable import render_table, widths_for
from testing.gitutil import git
from testing.terminal import ESCAPE, on_terminal, widest
from testing.workspace import run_contrib

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def demo(short_tmp: Path) -> Path:
    """The demo's workspace, its upstream moved on by a commit that breaks both patchsets."""
    assert run_contrib("demo", str(short_tmp / "demo")).code == 0
    upstream = short_tmp / "demo" / "upstream"
    gate = upstream / "flashinfer" / "jit" / "comm.py"
    gate.write_text(gate.read_text().replace("supported_major_versions=[9, 10]",
                                             "supported_major_versions=[9, 10, 11]"))
    git(upstream, "-c", "user.name=Up Stream", "-c", "user.email=up@example.com",
        "commit", "-qam", "jit: admit SM110 in the comm gate (#1030)")
    return short_tmp / "demo" / "workspace"


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_status_sync_validate_and_audit_fit_the_terminal(demo: Path, columns: int) -> None:
    validate = on_terminal(demo, columns, "validate", "minifer/sm120-gate-only")  # first clone
    status = on_terminal(demo, columns, "status")
    audit = on_terminal(demo, columns, "audit", "--arch", "120", "--no-fetch")
    sync = on_terminal(demo, columns, "sync")
    for name, shown in (("status", status), ("validate", validate), ("audit", audit),
                        ("sync", sync)):
        assert widest(shown) <= columns, f"{name} at {columns}:\n{shown}"
    assert "minifer/sm120-gate-only" in ESCAPE.sub("", status)
    assert "\x1b[31mfailed\x1b[0m" in status and "\x1b[33mincomplete\x1b[0m" in status
    assert "\x1b[31mFAILED\x1b[0m" in validate
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
    # the header, a row a patchset, and why the drafted one (enable's) gets no PR yet
    assert len(lines) == 4 and "sm_120a: incomplete (skipped: tests)" in lines[2]
    assert lines[3].startswith("minifer/sm120-gate-only: held back from a draft PR: ")


def test_free_text_wraps_under_its_row_and_no_key_is_cut() -> None:
    columns = ["patchset", "base", "sync", "validation"]
    rows = [["up/a-long-patchset-name", "0123456789abcdef", "rebased", " ".join(["word"] * 30)]]
    narrow = render_table(columns, rows, width=40, colour=False, wrap=["validation"])
    assert widest(narrow) <= 40 and "…" not in narrow
    assert narrow.splitlines()[:2] == ["patchset", "up/a-long-patchset-name"]
    assert narrow.splitlines()[2] == "    base: 0123456789abcdef; sync:"
    assert narrow.splitlines()[3] == "      rebased; validation: word word"
    wide = render_table(columns, rows, width=250, colour=False, wrap=["validation"])
    assert len(wide.splitlines()) == 2 and "up/a-long-patchset-name" in wide
    assert widths_for(columns, rows, 1000, [False] * 4)[0] == len("up/a-long-patchset-name")
    # sync's key column, a patchset on a release branch, whole at 80 columns
    key = "flashinfer/sm120-trtllm-comm@release-v0.6.16"
    sync = render_table(["patchset", "result", "from", "to", "commits", "probes", "details"],
                        [[key, "partially-upstreamed", "0123456789", "abcdef0123", "233", "4",
                          "patches 1-3 landed in 2deed6c15 (#3903)"]], width=80, colour=False)
    assert widest(sync) <= 80 and sync.splitlines()[1].startswith(key + "  ")
    # the audit's key is its gate, typed back into `contrib enable`
    gate = "flashinfer/fused_moe/core/scaled_contiguous_gather_grouped_gemm_act_fusion.py:636"
    audit = render_table(["class", "scope", "gate", "why"], [["gate-only", "runtime", gate,
                                                              "nothing compiled out"]],
                         width=80, colour=False, keys=["gate"], wrap=["why"])
    assert audit.splitlines()[1] == gate
    assert "    class: gate-only; scope: runtime; why: nothing compiled out" in audit


def test_a_key_listing_choices_breaks_after_a_bar_and_nothing_else_is_split() -> None:
    # the feature table groups the choices of one setting that share a verdict
    key = ("--kv-cache-dtype=auto|bf16|bfloat16|fp4_e2m1|fp4_mx_block16|fp8_e4m3|"
           "fp8_e5m2|mxfp8|nvfp4")
    table = render_table(["verdict", "feature", "next"],
                         [["off, needs kernel work", key, "kernel work at sglang x.py:30 f"]],
                         width=80, colour=False, keys=["feature"], wrap=["next"])
    lines = table.splitlines()
    assert widest(table) <= 80
    assert lines[1:3] == [key[:key.index("mxfp8")], "  mxfp8|nvfp4"]
    assert "".join(line.strip() for line in lines[1:3]) == key  # each choice whole
    assert lines[3].startswith("    verdict: off, needs kernel work")
    # a key with no choices, or with a space, is never split even when too wide
    gate = "flashinfer/" + "a" * 90 + ".py:1"
    alone = render_table(["gate", "why"], [[gate, "w"]], width=80, colour=False,
                         keys=["gate"])
    assert alone.splitlines()[1] == gate


def test_prose_breaks_at_spaces_only_and_pipes_are_left_alone(tmp_path: Path) -> None:
    from contrib.termtable import render_line

    path = "/tmp/contrib-demo/workspace/patchsets/minifer/sm120-gate-only/0eb7949fb3dc6"
    line = f"contrib: error: {path}: not a patchset (known: flashinfer, sglang); run `contrib new`"
    shown = render_line(line, width=80, colour=False).splitlines()
    assert f"  {path}:" in shown and all(len(x) <= 80 for x in shown)
    assert " ".join(part.strip() for part in shown) == line  # nothing cut inside a word
    proc = subprocess.run([sys.executable, "-m", "contrib", "-C", str(tmp_path), "status"],
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "40"},
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1  # piped: one line


def test_an_error_on_a_terminal_is_wrapped_at_spaces(short_tmp: Path) -> None:
    (short_tmp / "contrib.toml").write_text(
        '[upstreams.flashinfer]\nurl = "https://github.com/flashinfer-ai/flashinfer.git"\n')
    shown = on_terminal(short_tmp, 80, "status", "flashnfer", "--no-fetch", codes=(2,))
    assert widest(shown) <= 80
    words = " ".join(ESCAPE.sub("", shown).split())
    assert "did you mean 'flashinfer'?" in words and "(known: flashinfer)" in words
    assert str(short_tmp / "contrib.toml") in words  # the path whole, on one line


def test_every_help_fits_80_columns() -> None:
    from click.testing import CliRunner

    from contrib.cli import cli

    for name in [None, *cli.commands]:
        shown = CliRunner().invoke(cli, [name, "--help"] if name else ["--help"],
                                   terminal_width=80).output
        assert "Usage:" in shown
        assert max(map(len, shown.splitlines())) <= 80, (name, shown)


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
