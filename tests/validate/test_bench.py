"""The bench stage on a mini upstream whose bench prints a JSON metric: base against patched."""

from __future__ import annotations

import json
import multiprocessing
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contrib.analysis.tree import FsTree
from contrib.arch import parse_arch
from contrib.pr.body import bench_table
from contrib.record import read_record
from contrib.validate.benchstats import compare
from contrib.validate.report import StageResult
from contrib.validate.stages import Context, Inputs, stage_bench
from contrib.workspace.validation import BenchSettings, Settings
from testing.workspace import Workspace, make_patch

SM120 = parse_arch("sm_120a")

# A few milliseconds of pure-Python work, timed: the best of five, as a careful bench reports.
TIMED = """\
import json, sys, time
from work import WORK

def spin(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

best = min(_timed for _timed in (
    (lambda t0: (spin(WORK), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(5)))
print("warming up done")
print(json.dumps({"latency_ms": best * 1000, "items_per_s": WORK / best}))
"""
# The same figures as the work they stand for, with +-3% of noise each run: the tests of
# the stage's arithmetic and verdicts do not depend on how loaded the machine is.
BENCH = """\
import json, os, random, time
from work import WORK

random.seed(os.getpid() ^ time.perf_counter_ns())
latency_ms = WORK / 10_000 * random.uniform(0.97, 1.03)
print("warming up done")
print(json.dumps({"latency_ms": latency_ms, "items_per_s": WORK / latency_ms * 1000}))
"""
GATED = "import sys\nsys.exit('RuntimeError: trtllm_comm is not supported on this GPU')\n"


def _tree(root: Path, work: int, bench: str = BENCH) -> Path:
    root.mkdir(parents=True)
    (root / "work.py").write_text(f"WORK = {work}\n")
    (root / "bench.py").write_text(bench)
    return root


def _bench(tmp_path: Path, base: Path, patched: Path, **settings: object) -> StageResult:
    bench = BenchSettings(**{"command": "{python} bench.py", "metrics": ("latency_ms",),
                             "needs_gpu": False, "repeat": 5, **settings})  # type: ignore[arg-type]
    inputs = Inputs(SM120, FsTree(base), FsTree(patched), "", "applied",
                    settings=Settings(bench=bench), workdir=tmp_path / "work",
                    worktree=lambda: patched, base_worktree=lambda: base,
                    python=sys.executable, gpus=None)
    return stage_bench(Context(inputs, workdir=tmp_path / "work"))


def test_a_patch_that_adds_40_percent_work_fails_showing_ratio_and_interval(tmp_path: Path) -> None:
    result = _bench(tmp_path, _tree(tmp_path / "a", 20_000), _tree(tmp_path / "b", 28_000))
    assert result.status == "failed", result.reason
    (figure,) = result.details["metrics"]
    assert 1.2 < figure["ratio"] < 1.7 and figure["ci95"][0] > 1.05
    assert figure["compared_with"] == "base" and len(figure["base"]) == len(figure["patched"]) == 5
    assert figure["base_median"] < figure["patched_median"]
    assert "latency_ms" in result.reason and "95% CI" in result.reason and "slower by" in result.reason


def test_higher_is_better_reads_the_ratio_the_other_way(tmp_path: Path) -> None:
    base, faster = _tree(tmp_path / "a", 28_000), _tree(tmp_path / "b", 14_000)
    result = _bench(tmp_path, base, faster, metrics=("items_per_s",), better="higher")
    # same work per item, so items/s barely moves: within noise, never a failure
    assert result.status == "passed", result.reason
    result = _bench(tmp_path / "2", base, faster, metrics=("latency_ms",), better="higher")
    assert result.status == "failed"  # half the latency, read as "higher is better": worse
    result = _bench(tmp_path / "3", base, faster)
    assert result.status == "passed" and "faster by" in result.reason, result.reason


def test_a_base_that_cannot_run_records_the_patched_figures_with_the_reason(tmp_path: Path) -> None:
    base, patched = _tree(tmp_path / "a", 20_000, GATED), _tree(tmp_path / "b", 20_000)
    result = _bench(tmp_path, base, patched)
    assert result.status == "skipped"
    (figure,) = result.details["metrics"]
    assert figure["verdict"] == "not-compared" and len(figure["patched"]) == 5
    assert "not supported on this GPU" in figure["base_error"] and figure["patched_median"] > 0
    assert "nothing to compare with: the base cannot run the bench" in result.reason


def test_a_baseline_stands_in_for_a_base_that_cannot_run(tmp_path: Path) -> None:
    base = _tree(tmp_path / "a", 20_000, GATED)
    (base / "replaced.py").write_text(BENCH)  # the path the patch replaces, slower
    (base / "work.py").write_text("WORK = 40_000\n")
    result = _bench(tmp_path, base, _tree(tmp_path / "b", 20_000), baseline="{python} replaced.py")
    (figure,) = result.details["metrics"]
    assert figure["compared_with"] == "baseline" and figure["ratio"] < 0.8
    assert result.status == "passed" and "vs baseline" in result.reason and "faster by" in result.reason


def test_a_path_the_base_crashes_on_says_so_instead_of_a_number(tmp_path: Path) -> None:
    crashes = ('import json\nprint(json.dumps({"latency_ms": 1.0, "lamport_us": None, '
               '"errors": {"lamport_us": "illegal memory access"}}))\n')
    base = _tree(tmp_path / "a", 1, crashes)
    patched = _tree(tmp_path / "b", 1, 'print(\'{"latency_ms": 1.0, "lamport_us": 5.0}\')\n')
    result = _bench(tmp_path, base, patched, metrics=("latency_ms", "lamport_us"))
    latency, lamport = result.details["metrics"]
    assert latency["ratio"] == 1.0 and result.status == "passed"
    assert lamport["base_error"] == "illegal memory access" and lamport.get("ratio") is None
    assert "lamport_us patched 5, base: illegal memory access" in result.reason


@pytest.fixture
def loaded() -> Iterator[None]:
    """Every core busy with something else while the bench runs."""
    workers = [multiprocessing.Process(target=_burn, daemon=True)
               for _ in range(multiprocessing.cpu_count())]
    for worker in workers:
        worker.start()
    yield
    for worker in workers:
        worker.terminate()
        worker.join()


def _burn() -> None:
    while True:
        sum(i * i for i in range(10_000))


@pytest.mark.slow
def test_an_unchanged_tree_does_not_fail_on_a_loaded_machine(tmp_path: Path, loaded: None) -> None:
    base, patched = _tree(tmp_path / "a", 20_000, TIMED), _tree(tmp_path / "b", 20_000, TIMED)
    result = _bench(tmp_path, base, patched, repeat=10)
    assert result.status == "passed", result.reason
    (figure,) = result.details["metrics"]
    assert figure["ci95"][0] <= 1.05 and len(figure["patched"]) == figure["pairs"] >= 10


def test_the_verdict_needs_the_whole_interval_beyond_the_threshold() -> None:
    noisy = compare([1.0, 1.3, 0.9, 1.2, 1.0], [1.1, 1.0, 1.25, 1.0, 1.3], "lower", 0.05)
    assert noisy.verdict == "inconclusive" and noisy.low < 1.05 < noisy.high
    assert "straddles the threshold (1.050x)" in noisy.note
    slower = compare([1.0] * 5, [1.4, 1.41, 1.39, 1.4, 1.42], "lower", 0.05)
    assert slower.verdict == "failed" and slower.note.startswith("slower by 40.0% (CI")
    assert compare([1.0] * 5, [1.4] * 5, "higher", 0.05).verdict == "better"


# -- end to end: bad [validation.bench] is exit 2 naming patchset.toml:LINE ---------------------


def _with_bench(fi: Workspace, tmp_path: Path, table: str) -> Path:
    repo = fi.upstreams["flashinfer"]
    repo.commit("a bench", {"bench.py": BENCH, "work.py": "WORK = 2000\n"})
    patches = make_patch(repo, tmp_path, {"work.py": "WORK = 2100\n"}, "less work", name="b")
    assert fi.run("new", "flashinfer", "b", "--base", "main", "--patch", *map(str, patches)).code == 0
    meta = fi.root / "patchsets" / "flashinfer" / "b" / "patchset.toml"
    meta.write_text(meta.read_text() + "\n[validation.bench]\n" + table)
    return meta


def _line(meta: Path, key: str) -> int:
    return next(n for n, line in enumerate(meta.read_text().splitlines(), 1) if line.startswith(key))


def test_a_good_bench_is_recorded_with_its_figures(fi: Workspace, tmp_path: Path) -> None:
    _with_bench(fi, tmp_path, 'command = "{python} bench.py"\nmetrics = ["latency_ms"]\n'
                              "needs_gpu = false\nrepeat = 3\nthreshold = 0.5\n")
    result = fi.run("validate", "flashinfer/b", "--json")
    bench = next(s for s in result.json["validations"][0]["run"]["stages"] if s["name"] == "bench")
    assert bench["status"] == "passed", bench["reason"]
    assert bench["details"]["metrics"][0]["compared_with"] == "base"
    path = next((fi.root / "patchsets" / "flashinfer" / "b").glob("*/validation.json"))
    (stage,) = [s for s in json.loads(path.read_text())["runs"][0]["stages"] if s["name"] == "bench"]
    assert len(stage["details"]["metrics"][0]["ci95"]) == 2
    record = read_record(path)
    assert record is not None
    table = bench_table(record.runs)  # the PR body's table
    assert table[3].startswith("| run | metric | base median | patched median | patched/base | 95% CI")
    assert table[5].startswith("| sm_120a (target) | latency_ms (lower is better) | ")


@pytest.mark.parametrize(("table", "key", "says"), [
    ('command = "{python} bench.py"\nmetrics = ["nope"]\nneeds_gpu = false\nrepeat = 3\n',
     "metrics", "'nope', which the command's JSON on the patched tree does not have"),
    ('command = "{python} -c \'print(42)\'"\nmetrics = ["x"]\nneeds_gpu = false\nrepeat = 3\n',
     "command", "printed no JSON object last"),
    ('command = "{python} bench.py"\nmetrics = ["latency_ms"]\nrepeat = 2\n',
     "repeat", "must be between 3 and 1000"),
])
def test_bad_bench_config_exits_2_naming_the_line(fi: Workspace, tmp_path: Path, table: str,
                                                  key: str, says: str) -> None:
    meta = _with_bench(fi, tmp_path, table)
    result = fi.run("validate", "flashinfer/b")
    assert result.code == 2, result.err
    assert f"{meta}:{_line(meta, key)}: " in result.err and says in result.err
    assert "Traceback" not in result.err



def test_the_threshold_decides_close_to_it() -> None:
    """10% slower, tightly measured: beyond a 5% threshold (failed), within a 15% one."""
    base = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0]
    patched = [1.10, 1.11, 1.09, 1.10, 1.105, 1.095, 1.1]
    assert compare(base, patched, "lower", 0.05).verdict == "failed"
    assert compare(base, patched, "lower", 0.15).verdict == "passed"
    assert compare(base, [b * 1.03 for b in base], "lower", 0.05).verdict == "passed"
    assert compare(base, [b * 1.03 for b in base], "lower", 0.01).verdict == "failed"
    assert compare(patched, base, "higher", 0.05).verdict == "failed"


def test_a_12_percent_slowdown_fails_a_5_percent_threshold(tmp_path: Path) -> None:
    result = _bench(tmp_path, _tree(tmp_path / "a", 20_000), _tree(tmp_path / "b", 22_400))
    assert result.status == "failed", result.reason
    (figure,) = result.details["metrics"]
    # Each run is +-3% off its work, drawn anew: the ratio of 1.12 lies anywhere the
    # noise can move it (a bound of 1.16 failed CI at 1.1696), the interval beyond 5%.
    assert 1.12 * 0.97 / 1.03 < figure["ratio"] < 1.12 * 1.03 / 0.97
    assert figure["ci95"][0] > 1.05


# Heavy noise: each run's figure is the work times a factor from e^-3 to e^3, the n-th
# run of a tree taking the n-th draw of a seeded sequence (a count kept in the tree).
# Seeds 3 (base) and 10003 (patched) are ones whose interval straddles the threshold for
# every run of 5 to 400 pairs, whatever the first pair read (checked with
# `benchstats.compare` over every prefix): a deadline that lets a faster machine run
# more pairs gives the same verdict, and no unlucky draw decides "failed" from five.
NOISY = BENCH.replace("random.uniform(0.97, 1.03)", "_noise()").replace(
    "from work import WORK\n", """from work import WORK


def _noise():
    done = int(open("runs").read()) if os.path.exists("runs") else 0
    with open("runs", "w") as out:
        out.write(str(done + 1))
    draws = random.Random(3 if WORK == 20_000 else 10_003)
    return __import__("math").exp([draws.uniform(-3, 3) for _ in range(done + 1)][-1])
""")
# Some noise: +-40% a run, which five pairs cannot see through and fifty can.
SOME = BENCH.replace("random.uniform(0.97, 1.03)", "random.uniform(0.6, 1.4)")


def test_a_40_percent_slowdown_hidden_in_noise_is_inconclusive_never_passed(
        tmp_path: Path) -> None:
    result = _bench(tmp_path, _tree(tmp_path / "a", 20_000, NOISY),
                    _tree(tmp_path / "b", 28_000, NOISY), deadline=3)
    assert result.status == "skipped", result.reason
    (figure,) = result.details["metrics"]
    assert figure["verdict"] == "inconclusive" and figure["ci95"][0] < 1.05 < figure["ci95"][1]
    assert figure["pairs"] == result.details["pairs"] >= 5 and figure["rounds_dropped"] == 0
    assert figure["cv"]["base"] > 0.5 and figure["cv"]["patched"] > 0.5
    assert result.reason.startswith(f"inconclusive after {figure['pairs']} pairs (latency_ms cv ")
    assert "straddles the threshold" in result.reason


def test_more_pairs_decide_what_five_could_not(tmp_path: Path) -> None:
    result = _bench(tmp_path, _tree(tmp_path / "a", 20_000, SOME), _tree(tmp_path / "b", 28_000, SOME))
    assert result.status == "failed", result.reason
    (figure,) = result.details["metrics"]
    assert figure["verdict"] == "failed" and figure["pairs"] % 5 == 0
    assert figure["ci95"][0] > 1.05 and len(figure["base"]) == figure["pairs"]
