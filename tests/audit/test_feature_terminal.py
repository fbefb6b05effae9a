"""The feature table on a terminal 80 columns wide, and the pager when it is long."""

from __future__ import annotations

from pathlib import Path

from testing.featureupstreams import feature_lower, feature_upstream
from testing.terminal import on_terminal
from testing.workspace import Workspace


def _server(root: Path) -> Workspace:
    top = feature_upstream(root / "top")
    (root / "ws").mkdir()
    ws = Workspace(root / "ws", {"top": top, "lower": feature_lower(root / "lower")})
    ws.write_config()
    return ws


def test_the_feature_table_fits_80_columns_worst_first(short_tmp: Path) -> None:
    ws = _server(short_tmp)
    shown = on_terminal(ws.root, 80, "audit", "top", "--arch", "sm_120a", "--no-color",
                        PAGER="cat")
    lines = shown.rstrip("\n").splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    header = next(n for n, line in enumerate(lines) if line.startswith("verdict"))
    assert lines[header + 1].startswith("crash")
    assert any(line.startswith("off, gate-only") for line in lines)
    # the gate-only row's next step: the commands, whole, the lower upstream's first
    text = " ".join(shown.split())
    assert ("contrib enable lower lowerlib/jit.py:gen_comm_module --only --arch sm_120a --at "
            "v1.0 --name enable-fusion" in text)
    assert text.index("contrib enable lower ") < text.index("contrib enable top --feature=")
    last = [line for line in lines if not line.startswith(" ")][-1]
    assert last.startswith("top at main tip")  # the summary again, last


def test_long_output_goes_through_the_pager_short_output_does_not(short_tmp: Path) -> None:
    ws = _server(short_tmp)
    paged = short_tmp / "paged.txt"
    shown = on_terminal(ws.root, 80, "audit", "top", "--arch", "sm_120a", "--no-color",
                        rows=8, PAGER=f"cat > {paged}")
    assert "verdict" in paged.read_text(encoding="utf-8")  # what the pager was given
    assert "verdict" not in shown
    paged.unlink()
    shown = on_terminal(ws.root, 80, "audit", "top", "--arch", "sm_120a", "--no-color",
                        "--no-fetch", rows=60, PAGER=f"cat > {paged}")
    assert "verdict" in shown and not paged.exists()  # it fits: no pager


def test_a_family_side_by_side_fits_80_columns(short_tmp: Path) -> None:
    ws = _server(short_tmp)
    shown = on_terminal(ws.root, 80, "audit", "top", "--arch", "sm_100a,sm_120a",
                        "--no-color", PAGER="cat")
    lines = shown.rstrip("\n").splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    header = next(n for n, line in enumerate(lines) if line.startswith("feature"))
    assert lines[header].split() == ["feature", "sm_100a", "sm_120a"]
    assert lines[header + 1].split()[1:] == ["on", "crash"]  # those that differ, worst first
    assert "differ between sm_100a and sm_120a" in " ".join(shown.split())
