"""Hostile bench settings and bench output: exit 2 naming the line, or a failed stage.

Never a traceback and never exit 3: a figure no timing can be fails the stage, a
setting no run can use is refused where patchset.toml sets it."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from contrib.analysis.tree import FsTree
from contrib.arch import parse_arch
from contrib.errors import ConfigError
from contrib.validate.stages import Context, Inputs, stage_bench
from contrib.workspace.validation import BenchSettings, Settings

HEAD = '[validation.bench]\nmetrics = ["latency_ms"]\n'


@pytest.mark.parametrize(("line", "words"), [
    ('command = "{python} \'bench.py --json"', "balance its quotes"),
    ('command = "   "', "must start with a program name"),
    ('command = "\\"\\""', "must start with a program name"),
    ('command = "{python} bench.py"\nbaseline = "nccl \\"x"', "balance its quotes"),
    ('command = "{python} bench.py"\ntimeout = 100000000000000000', "at most 86400"),
    ('command = "{python} bench.py"\ndeadline = 0', "integer >= 1"),
    ('command = "{python} bench.py"\ngpus = 0', "integer >= 1"),
    ('command = "{python} bench.py"\ngpus = 100000', "at most 1024"),
])
def test_a_bench_setting_no_run_can_use_names_its_line(line: str, words: str) -> None:
    text = HEAD + line + "\n"
    key = line.splitlines()[-1].split(" =")[0]
    number = 1 + text.splitlines().index(next(x for x in text.splitlines() if x.startswith(key + " ")))
    with pytest.raises(ConfigError) as caught:
        Settings.from_meta(tomllib.loads(text), "patchset.toml", text)
    assert f"patchset.toml:{number}" in str(caught.value) and words in str(caught.value), caught.value


@pytest.mark.parametrize(("printed", "words"), [
    ('{"latency_ms": ' + "9" * 400 + "}", "which is no figure"),
    ('{"latency_ms": ' + "7" * 5000 + "}", "Python cannot read"),
    ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ('{"a": ' + "[" * 5000 + "]" * 5000 + ', "latency_ms": 1}', "nested too deeply"),
    ('{"latency_ms": NaN}', "NaN, which is no figure"),
    ('{"latency_ms": Infinity}', "Infinity"),
    ('{"latency_ms": -Infinity}', "Infinity"),
    ('{"latency_ms": 0}', "which is no figure"),
    ('{"latency_ms": -3.5}', "which is no figure"),
    ('{"latency_ms": 1e999}', "printed inf for latency_ms"),
    ('{"latency_ms": "fast"}', "which is no figure"),
    ('{"latency_ms": true}', "which is no figure"),
])
def test_hostile_bench_output_fails_the_stage(tmp_path: Path, printed: str, words: str) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "out.txt").write_text(printed + "\n")
    (tree / "bench.py").write_text("import sys\nsys.stdout.write(open('out.txt').read())\n")
    bench = BenchSettings("{python} bench.py", ("latency_ms",), repeat=3, needs_gpu=False)
    inputs = Inputs(parse_arch("sm_120a"), FsTree(tree), FsTree(tree), "", "applied",
                    settings=Settings(bench=bench), workdir=tmp_path / "work", worktree=lambda: tree,
                    base_worktree=lambda: tree, python=sys.executable, gpus=None)
    try:
        result = stage_bench(Context(inputs, workdir=tmp_path / "work"))
    except ConfigError as exc:  # output that holds no JSON object at all: the command is wrong
        assert words == "no JSON object" and "patchset.toml" in str(exc)
        return
    assert result.status == "failed", result.reason
    assert words in result.reason, result.reason


def test_hostile_error_texts_are_cut_short(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    deep = "[" * 900 + "]" * 900
    (tree / "bench.py").write_text(
        "import json\nprint('{\"latency_ms\": 2.0, \"errors\": {\"x\": " + deep + ", \"y\": \"" + "e" * 5000
        + "\"}}')\n")
    bench = BenchSettings("{python} bench.py", ("latency_ms",), repeat=3, needs_gpu=False)
    inputs = Inputs(parse_arch("sm_120a"), FsTree(tree), FsTree(tree), "", "applied",
                    settings=Settings(bench=bench), workdir=tmp_path / "work", worktree=lambda: tree,
                    base_worktree=lambda: tree, python=sys.executable, gpus=None)
    result = stage_bench(Context(inputs, workdir=tmp_path / "work"))
    assert result.status == "passed", result.reason
