"""The bench stage knows its GPUs, its deadline and its checkouts."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from contrib.analysis.tree import FsTree
from contrib.arch import parse_arch
from contrib.validate.report import StageResult
from contrib.validate.stages import Context, Inputs, stage_bench
from contrib.validate.testrun import Gpu
from contrib.workspace.validation import BenchSettings, Settings

SM120 = parse_arch("sm_120a")
ONE_RTX = [Gpu("NVIDIA RTX PRO 6000 Blackwell", "12.0")]
FIGURE = 'import json\nprint(json.dumps({"latency_ms": 2.0}))\n'


def _stage(tmp_path: Path, script: str, here: list[Gpu] | None, **settings: object) -> tuple[StageResult, list[str]]:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "bench.py").write_text(script)
    made: list[str] = []

    def checkout() -> Path:
        made.append("checkout")
        return tree

    bench = BenchSettings(**{"command": "{python} bench.py", "metrics": ("latency_ms",),
                             "repeat": 3, **settings})  # type: ignore[arg-type]
    inputs = Inputs(SM120, FsTree(tree), FsTree(tree), "", "applied", settings=Settings(bench=bench),
                    workdir=tmp_path / "work", worktree=checkout, base_worktree=checkout,
                    python=sys.executable, gpus=here)
    return stage_bench(Context(inputs, workdir=tmp_path / "work")), made


def test_a_bench_of_world_size_2_on_one_gpu_skips_and_checks_nothing_out(tmp_path: Path) -> None:
    script = "WORLD = 2\n" + FIGURE
    result, made = _stage(tmp_path, script, ONE_RTX)
    assert result.status == "skipped"
    assert result.reason.startswith("fewer GPUs than the bench needs (2)"), result.reason
    assert made == []  # nothing checked out, so nothing built


def test_gpus_in_patchset_toml_wins_over_the_script(tmp_path: Path) -> None:
    result, made = _stage(tmp_path, FIGURE, ONE_RTX, gpus=4)
    assert result.reason.startswith("fewer GPUs than the bench needs (4)") and made == []
    result, _ = _stage(tmp_path, "WORLD = 2\n" + FIGURE, ONE_RTX, gpus=1)
    assert result.status != "skipped" or "fewer GPUs" not in result.reason


def test_the_stage_stops_at_its_deadline(tmp_path: Path) -> None:
    slow = "import time\ntime.sleep(30)\n" + FIGURE
    started = time.monotonic()
    result, _ = _stage(tmp_path, slow, None, needs_gpu=False, deadline=2, timeout=600)
    assert time.monotonic() - started < 20
    assert result.status == "failed" and "deadline of 2s" in result.reason, result.reason


def test_each_run_gets_the_checkout_back_as_the_tree_has_it(tmp_path: Path) -> None:
    # The command edits a file of its checkout; the next run must see the original again.
    script = ("import json, pathlib\np = pathlib.Path('data.txt')\nseen = p.read_text()\n"
              "p.write_text('changed')\nprint(json.dumps({'latency_ms': 2.0 if seen == 'orig' else -1}))\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "data.txt").write_text("orig")

    restored: list[str] = []
    def put_back() -> None:
        (tree / "data.txt").write_text("orig")
        restored.append("x")
    bench = BenchSettings("{python} bench.py", ("latency_ms",), repeat=3, needs_gpu=False)
    (tree / "bench.py").write_text(script)
    inputs = Inputs(SM120, FsTree(tree), FsTree(tree), "", "applied", settings=Settings(bench=bench),
                    workdir=tmp_path / "work", worktree=lambda: (put_back(), tree)[1],
                    base_worktree=lambda: (put_back(), tree)[1], python=sys.executable, gpus=None)
    result = stage_bench(Context(inputs, workdir=tmp_path / "work"))
    assert result.status == "passed", result.reason
    assert len(restored) >= 6  # before every run of every side
