"""The arithmetic of the bench stage: medians, the ratio patched/base, its interval, the verdict.

A/B pairs run interleaved, so a machine that slows down slows both sides of a
pair.  The ratio is median(patched) / median(base); its 95% interval is
bootstrapped over the pairs (resampling whole pairs, a fixed seed so a record
can be recomputed).  A change is only a failure when the whole interval lies
beyond the threshold on the worse side, and only passes when the whole interval lies
within it: an interval that straddles the threshold is ``inconclusive`` (noise widens
the interval; it neither fails nor passes a change it hides).  The stage then runs
more pairs, as pyperf does, until the interval decides or its deadline comes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from statistics import mean, median, pstdev

ROUNDS = 2000
SEED = 20240601
PASSED, FAILED, BETTER, INCONCLUSIVE = "passed", "failed", "better", "inconclusive"


@dataclass(frozen=True)
class Comparison:
    """One metric, patched against base (or the baseline command)."""

    ratio: float  # median(patched) / median(base)
    low: float  # the 95% interval of the ratio
    high: float
    verdict: str  # FAILED, PASSED, BETTER or INCONCLUSIVE
    note: str  # e.g. "faster by 12.0% (CI 9.1% to 14.3%)", or "" when within noise
    dropped: int = 0  # bootstrap rounds dropped (a resample whose base median was 0)


def interval(base: list[float], patched: list[float], *, rounds: int = ROUNDS,
             seed: int = SEED) -> tuple[float, float]:
    """The bootstrapped 95% interval of median(patched)/median(base) over the pairs."""
    low, high, _ = _bootstrap(base, patched, rounds, seed)
    return low, high


def _bootstrap(base: list[float], patched: list[float], rounds: int,
               seed: int) -> tuple[float, float, int]:
    """The interval, and how many of the ``rounds`` were dropped (no ratio to take)."""
    pairs = list(zip(base, patched, strict=True))
    rng = random.Random(seed)
    ratios = []
    for _ in range(rounds):
        sample = rng.choices(pairs, k=len(pairs))
        denominator = median(b for b, _ in sample)
        if denominator > 0:
            ratios.append(median(p for _, p in sample) / denominator)
    if not ratios:
        return float("nan"), float("nan"), rounds
    ratios.sort()
    return (ratios[int(0.025 * (len(ratios) - 1))], ratios[int(0.975 * (len(ratios) - 1))],
            rounds - len(ratios))


def compare(base: list[float], patched: list[float], better: str, threshold: float) -> Comparison:
    """The ratio, its interval and the verdict for ``better`` ("lower" or "higher"):
    failed when the whole interval is worse than the threshold, passed (or better)
    when the whole interval is within it, else inconclusive."""
    low, high, dropped = _bootstrap(base, patched, ROUNDS, SEED)
    b = median(base)
    ratio = median(patched) / b if b > 0 else float("nan")
    lower = better == "lower"
    worse = low > 1 + threshold if lower else high < 1 - threshold
    within = high <= 1 + threshold if lower else low >= 1 - threshold
    gain = high < 1 - threshold if lower else low > 1 + threshold
    if worse:
        return Comparison(ratio, low, high, FAILED, _change("slower", ratio, low, high), dropped)
    if gain:
        return Comparison(ratio, low, high, BETTER, _change("faster", ratio, low, high), dropped)
    if within:
        return Comparison(ratio, low, high, PASSED, "", dropped)
    side = f"{1 + threshold:.3f}x" if lower else f"{1 - threshold:.3f}x"
    return Comparison(ratio, low, high, INCONCLUSIVE,
                      f"inconclusive: the interval straddles the threshold ({side})", dropped)


def cv(values: list[float]) -> float | None:
    """The coefficient of variation (standard deviation / mean) of one side's figures."""
    if len(values) < 2 or mean(values) <= 0:
        return None
    return pstdev(values) / mean(values)


def _change(word: str, ratio: float, low: float, high: float) -> str:
    """"faster by 12.0% (CI 9.1% to 14.3%)": the change as a share of the base."""
    ends = sorted((abs(low - 1) * 100, abs(high - 1) * 100))
    return f"{word} by {abs(ratio - 1) * 100:.1f}% (CI {ends[0]:.1f}% to {ends[1]:.1f}%)"
