"""The bench stage: does the patch make the paths it touches faster or slower?

``[validation.bench]`` names a command that prints a JSON object of metrics last.
On each run of the tests stage's plan (the target arch, and each arch a touched
gate admitted before, on that arch's GPUs) the command runs on the base tree and
on the patched tree in interleaved A/B pairs, each tree in its own checkout with
its own JIT cache.  Per metric the record keeps both medians, the ratio
patched/base and its bootstrapped 95% interval (:mod:`contrib.validate.benchstats`).

When the base cannot run the command (the gate rejects the arch), or prints
``null`` for a metric (a path that crashes there, with ``"errors": {metric:
why}`` saying so), the patched figures are recorded with that reason, and are
compared with the ``baseline`` command's where one is given.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from contrib.analysis.profiles import Profile
from contrib.arch import Arch
from contrib.errors import ConfigError
from contrib.ui import counted
from contrib.validate import buildcache
from contrib.validate.benchstats import INCONCLUSIVE, compare, cv
from contrib.validate.gputests import PlannedRun
from contrib.validate.report import FAILED, PASSED, SKIPPED, StageResult
from contrib.workspace.validation import BenchSettings

BASE, PATCHED, BASELINE = "base", "patched", "baseline"


@dataclass
class Sample:
    """One run of the command: the metrics it printed, or why it gave none."""

    values: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # metric -> why it is null
    failure: str | None = None  # the command failed or printed no JSON object
    not_json: bool = False
    invalid: bool = False  # it printed a figure no timing can be: fails the stage


@dataclass
class BenchSetup:
    """What every planned run of one bench stage shares."""

    bench: BenchSettings
    python: str
    base: Callable[[], Path] | None  # checkouts, made on first use
    patched: Callable[[], Path]
    profile: Profile
    workdir: Path
    patchset_dir: Path | None = None
    gpus: int = 1  # GPUs one run of the command needs (needed_gpus)
    deadline: float = math.inf  # time.monotonic() by which the whole stage must be done


# Literals naming how many processes (GPUs) a bench script starts: ``WORLD = 2``.
_WORLD_RE = re.compile(r"\b(?:WORLD|WORLD_SIZE|world_size|NUM_GPUS|num_gpus|nprocs|tp_size)"
                       r"\s*=\s*(\d{1,4})\b")


def needed_gpus(bench: BenchSettings, words: list[str], read: Callable[[str], str | None]) -> int:
    """The GPUs one run of the command needs: ``gpus``, else the largest world size
    the scripts it names (``.py`` words, read through ``read``) set, else 1."""
    if bench.gpus is not None:
        return bench.gpus
    sizes = [int(n) for word in words if word.endswith(".py")
             for n in _WORLD_RE.findall(read(word) or "")]
    return max([1, *sizes])


class HostileOutput(ValueError):
    """JSON no honest bench prints: NaN or Infinity, nesting deeper than Python
    recurses, an integer longer than Python converts."""


def _refuse_constant(name: str) -> float:
    raise HostileOutput(f"printed {name}, which is no figure")


def _loads(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity and survives hostile nesting."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise HostileOutput("printed JSON nested too deeply to read") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string"
        raise HostileOutput(f"printed JSON Python cannot read ({exc})") from None


def last_json(stdout: str) -> dict[str, Any] | None:
    """The JSON object the command printed last (its last such line, or all of stdout)."""
    for line in reversed(stdout.strip().splitlines()):
        if line.strip().startswith("{"):
            try:
                value = _loads(line)
            except json.JSONDecodeError:
                continue
            return value if isinstance(value, dict) else None
    try:
        value = _loads(stdout)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _figure(value: object) -> float | None:
    """A timing or throughput: a finite number above 0, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # a 400-digit integer
        return None
    return number if math.isfinite(number) and number > 0 else None


def run_once(args: list[str], cwd: Path, env: dict[str, str], metrics: tuple[str, ...],
             timeout: float) -> Sample:
    """Run the command once and read its metrics."""
    try:
        done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return Sample(failure=f"timed out after {timeout:.0f}s")
    except OSError as exc:
        return Sample(failure=f"cannot run {args[0]}: {exc.strerror or exc}")
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["(no output)"]
        return Sample(failure=f"exit {done.returncode}: {tail[0][:300]}")
    try:
        found = last_json(done.stdout)
    except HostileOutput as exc:
        return Sample(failure=str(exc), invalid=True)
    if found is None:
        last = (done.stdout.strip().splitlines() or ["(nothing)"])[-1][:200]
        return Sample(failure=f"printed no JSON object last (last line: {last!r})", not_json=True)
    raw = found.get("errors")
    errors: dict[str, Any] = raw if isinstance(raw, dict) else {}
    values: dict[str, float | None] = {}
    for metric in metrics:
        value = found.get(metric)
        if metric in found and value is None:
            values[metric] = None
        elif metric in found and _figure(value) is None:
            shown = _short(value, 40)
            return Sample(failure=f"printed {shown} for {metric}, which is no figure (a finite "
                          "number above 0)", invalid=True)
        elif metric in found:
            values[metric] = _figure(value)
    return Sample(values, {str(k)[:200]: _short(v, 300) for k, v in errors.items()})


def _short(value: object, width: int) -> str:
    """``repr`` (``str`` for text) cut to ``width``; deep nesting cannot crash it."""
    try:
        text = value if isinstance(value, str) else repr(value)
    except (RecursionError, ValueError):
        return "(too deeply nested to show)"
    return text if len(text) <= width else text[:width - 3] + "..."


def command_words(setup: BenchSetup, command: str, arch: Arch) -> list[str]:
    """The command's words with ``{python}``, ``{arch}`` and ``{patchset}`` filled in."""
    subst = {"{python}": setup.python, "{arch}": arch.name,
             "{patchset}": str(setup.patchset_dir or "")}
    words = []
    for word in shlex.split(command):
        for key, value in subst.items():
            word = word.replace(key, value)
        words.append(word)
    return words


def _env(setup: BenchSetup, plan: PlannedRun, tree: Path) -> dict[str, str]:
    arch_env = setup.profile.arch_env(plan.arch)
    env = {**os.environ, **arch_env}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if plan.gpus:
        env["CUDA_VISIBLE_DEVICES"] = plan.visible
    if setup.profile.jit_cache_env:
        env[setup.profile.jit_cache_env] = str(buildcache.jit_folder(
            tree, arch_env, setup.python, setup.workdir / f"bench-{plan.arch.name}-{tree.name}"))
    return env


def run_planned(setup: BenchSetup, plan: PlannedRun) -> StageResult:
    """A/B pairs for one planned run; the result carries every metric's figures."""
    bench, arch = setup.bench, plan.arch
    details: dict[str, Any] = {"kind": plan.kind, "arch": arch.name, "compute": setup.profile.compute(arch),
                               "settings": bench.to_dict(),
                               "gpus": [f"{g.index}: {g.name} ({g.capability})" for g in plan.gpus]}
    if bench.needs_gpu and not plan.gpus:
        return StageResult("bench", SKIPPED, f"no GPU of compute capability {arch.capability} "
                           f"({arch.name}) here", details=details)
    if bench.needs_gpu and len(plan.gpus) < setup.gpus:
        return StageResult("bench", SKIPPED, f"fewer GPUs than the bench needs ({setup.gpus}): "
                           f"{len(plan.gpus)} of {arch.name} here; nothing built", details=details)
    if time.monotonic() >= setup.deadline:
        return StageResult("bench", FAILED, f"not started: the stage's deadline of "
                           f"{bench.deadline}s had passed", details=details)
    samples, why = _pairs(setup, plan)
    details["pairs"] = len(samples[PATCHED])
    invalid = next((s.failure for side in samples.values() for s in side if s.invalid), None)
    if invalid:
        return StageResult("bench", FAILED, f"the bench command {invalid}", details=details)
    patched_failure = next((s.failure for s in samples[PATCHED] if s.failure), None)
    if patched_failure:
        return StageResult("bench", FAILED, f"the bench command fails on the patched tree: "
                           f"{patched_failure}", details=details)
    figures = [_metric(bench, m, samples, why) for m in bench.metrics]
    details["metrics"] = figures
    return StageResult("bench", *_status(figures, why.get(BASE)), details=details)


def _pairs(setup: BenchSetup, plan: PlannedRun) -> tuple[dict[str, list[Sample]], dict[str, str]]:
    """Run the pairs: A (base, or the baseline where the base cannot) then B (patched)."""
    bench, arch = setup.bench, plan.arch
    patched_tree = setup.patched()
    sides = {PATCHED: (command_words(setup, bench.command, arch), patched_tree)}
    why: dict[str, str] = {}
    if setup.base is None:
        why[BASE] = "no checkout of the base tree here"
    else:
        base_tree = setup.base()
        sides[BASE] = (command_words(setup, bench.command, arch), base_tree)
        if bench.baseline:
            sides[BASELINE] = (command_words(setup, bench.baseline, arch), base_tree)
    envs = {name: _env(setup, plan, tree) for name, (_, tree) in sides.items()}
    samples: dict[str, list[Sample]] = {BASE: [], PATCHED: [], BASELINE: []}
    run = _Rounds(setup, sides, envs, samples, why)
    for _ in range(bench.repeat):
        if not run.one(extra=False):
            return samples, why
    # An interval that straddles the threshold decides nothing: more pairs, a batch of
    # ``repeat`` at a time, until it decides, the deadline comes or MAX_PAIRS are run.
    while len(samples[PATCHED]) < MAX_PAIRS and not _decided(bench, samples, why):
        for _ in range(bench.repeat):
            if not run.one(extra=True):
                return samples, why
    return samples, why


MAX_PAIRS = 1000  # the most pairs a stage runs to decide (as many as `repeat` may ask)


@dataclass
class _Rounds:
    """Runs one A/B round at a time: A (base, or the baseline where the base cannot),
    then B (patched)."""

    setup: BenchSetup
    sides: dict[str, tuple[list[str], Path]]
    envs: dict[str, dict[str, str]]
    samples: dict[str, list[Sample]]
    why: dict[str, str]
    longest: float = 0.0  # seconds the longest round took

    def one(self, extra: bool) -> bool:
        """Run one round; False when the stage must stop (an invalid figure, a failure
        of the patched tree, the deadline).  An ``extra`` round (past ``repeat``) is not
        started when the deadline could come during it: it stops quietly instead."""
        setup, bench, samples = self.setup, self.setup.bench, self.samples
        if extra and time.monotonic() + 2 * self.longest >= setup.deadline:
            return False
        started = time.monotonic()
        remake = {PATCHED: setup.patched, BASE: setup.base, BASELINE: setup.base}
        for side in (BASE, BASELINE, PATCHED):
            if side not in self.sides or side in self.why or \
                    side == BASELINE and not _gaps(bench, samples, self.why):
                continue
            args, tree = self.sides[side]
            left = setup.deadline - time.monotonic()
            if left <= 0:
                samples[side].append(Sample(failure=f"was stopped: the stage ran past its "
                                            f"deadline of {bench.deadline}s", invalid=True))
                return False
            remade = remake[side]
            if remade is not None:
                remade()  # puts back what the last run changed in the checkout
            sample = run_once(args, tree, self.envs[side], bench.metrics, min(bench.timeout, left))
            samples[side].append(sample)
            if sample.invalid:
                return False
            if sample.failure and side != PATCHED:
                self.why[side] = sample.failure
            elif sample.failure:
                _check_config(bench, sample)
                return False
        _check_metrics(bench, samples[PATCHED][-1])
        self.longest = max(self.longest, time.monotonic() - started)
        return True


def _decided(bench: BenchSettings, samples: dict[str, list[Sample]], why: dict[str, str]) -> bool:
    """Whether no metric's interval straddles the threshold any more."""
    return all(_metric(bench, m, samples, why)["verdict"] != INCONCLUSIVE for m in bench.metrics)


def _gaps(bench: BenchSettings, samples: dict[str, list[Sample]], why: dict[str, str]) -> bool:
    """Whether the base leaves a metric without a value, so the baseline must run."""
    if BASE in why:
        return True
    first = samples[BASE][:1]
    return any(s.values.get(m) is None for s in first for m in bench.metrics)


def _check_config(bench: BenchSettings, sample: Sample) -> None:
    if sample.not_json:
        raise ConfigError(f"{bench.where.get('command', 'patchset.toml')}: validation.bench.command "
                          f"{sample.failure} on the patched tree; it must print a JSON object of "
                          "metrics as its last line")


def _check_metrics(bench: BenchSettings, sample: Sample) -> None:
    """A metric the patched tree's output lacks is a mistake in patchset.toml: exit 2."""
    missing = [m for m in bench.metrics if m not in sample.values and m not in sample.errors]
    if missing:
        raise ConfigError(f"{bench.where.get('metrics', 'patchset.toml')}: validation.bench.metrics "
                          f"names {', '.join(map(repr, missing))}, which the command's JSON on the "
                          "patched tree does not have (a number or null per metric)")


def _values(samples: list[Sample], metric: str) -> list[float] | None:
    values = [s.values.get(metric) for s in samples]
    return [v for v in values if v is not None] if samples and None not in values else None


def _why_missing(samples: list[Sample], metric: str, why: str | None) -> str:
    errors = [s.errors[metric] for s in samples if s.errors.get(metric)]
    return why or (errors[0] if errors else f"printed no value for {metric}")


def _metric(bench: BenchSettings, metric: str, samples: dict[str, list[Sample]],
            why: dict[str, str]) -> dict[str, Any]:
    """One metric's figures: medians, ratio, interval, verdict (or why it was not compared)."""
    patched = _values(samples[PATCHED], metric)
    figure: dict[str, Any] = {"metric": metric, "better": bench.better, "patched": patched,
                              "patched_median": median(patched) if patched else None}
    if patched is None:
        figure.update(verdict=FAILED, note="the patched tree gave no value: "
                      + _why_missing(samples[PATCHED], metric, None))
        return figure
    base = _values(samples[BASE], metric)
    against = BASE
    if base is None:
        figure["base_error"] = _why_missing(samples[BASE], metric, why.get(BASE))
        base, against = _values(samples[BASELINE], metric), BASELINE
        if bench.baseline and base is None:
            figure["baseline_error"] = _why_missing(samples[BASELINE], metric, why.get(BASELINE))
    if base is None or len(base) != len(patched):
        figure.update(verdict="not-compared", compared_with=None)
        return figure
    result = compare(base, patched, bench.better, bench.threshold)
    figure.update({f"{against}_median": median(base), against: base, "compared_with": against,
                   "ratio": _round(result.ratio), "ci95": [_round(result.low), _round(result.high)],
                   "verdict": result.verdict, "note": result.note, "pairs": len(patched),
                   "cv": {against: _rounded(cv(base)), PATCHED: _rounded(cv(patched))},
                   "rounds_dropped": result.dropped})
    return figure


def _rounded(value: float | None) -> float | None:
    return None if value is None else _round(value)


def _round(value: float) -> float:
    return round(value, 4)


def _status(figures: list[dict[str, Any]], base_why: str | None) -> tuple[str, str]:
    compared = [f for f in figures if f.get("compared_with")]
    failed = [f for f in figures if f["verdict"] == FAILED]
    parts = [line(f) for f in figures]
    text = "; ".join(parts[:4]) + (f"; ... ({len(parts)} metrics)" if len(parts) > 4 else "")
    if failed:
        return FAILED, f"{counted(len(failed), 'metric')} worse beyond the threshold: {text}"
    undecided = [f for f in figures if f["verdict"] == INCONCLUSIVE]
    if undecided:
        noise = ", ".join(f"{f['metric']} cv {_cv_text(f)}" for f in undecided[:4])
        return SKIPPED, (f"inconclusive after {counted(undecided[0]['pairs'], 'pair')} "
                         f"({noise}): the interval straddles the threshold, so the bench "
                         f"neither passes nor fails; {text}")
    if not compared:
        return SKIPPED, f"nothing to compare with: the base cannot run the bench ({base_why or 'see metrics'}); {text}"
    return PASSED, text


def _cv_text(figure: dict[str, Any]) -> str:
    """"5.1% / 31.0%": how noisy each side was."""
    values = [v for v in figure.get("cv", {}).values()]
    return " / ".join("?" if v is None else f"{v:.1%}" for v in values)


def line(figure: dict[str, Any]) -> str:
    """One metric on one line: ``latency_ms 1.40x (CI 1.38x to 1.42x) slower by 40.0% ...``."""
    name = figure["metric"]
    if figure.get("ratio") is None:
        median_ = figure.get("patched_median")
        value = f"patched {median_:.4g}" if isinstance(median_, float) else "patched: no value"
        missing = figure.get("base_error") or figure.get("note") or ""
        return f"{name} {value}, base: {missing}" if missing else f"{name} {value}"
    low, high = figure["ci95"]
    against = "" if figure["compared_with"] == BASE else " vs baseline"
    text = f"{name} {figure['ratio']:.3f}x{against} (95% CI {low:.3f}x to {high:.3f}x)"
    return f"{text} {figure['note']}" if figure.get("note") else text
