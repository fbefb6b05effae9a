"""The arithmetic of the bench stage: medians, the ratio patched/base, its interval, the verdict.

A/B pairs run interleaved, so a machine that slows down slows both sides of a
pair.  The ratio is median(patched) / median(base); its 95% interval is
bootstrapped over the pairs (resampling whole pairs, a fixed seed so a record
can be recomputed).  A change is only a failure when the whole interval lies
beyond the threshold on the worse side: noise widens the interval, never fails.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from statistics import median

ROUNDS = 2000
SEED = 20240601


@dataclass(frozen=True)
class Comparison:
    """One metric, patched against base (or the baseline command)."""

    ratio: float  # median(patched) / median(base)
    low: float  # the 95% interval of the ratio
    high: float
    verdict: str  # "failed", "passed" or "better"
    note: str  # e.g. "faster by 12.0% (CI 9.1% to 14.3%)", or "" when within noise


def interval(base: list[float], patched: list[float], *, rounds: int = ROUNDS,
             seed: int = SEED) -> tuple[float, float]:
    """The bootstrapped 95% interval of median(patched)/median(base) over the pairs."""
    pairs = list(zip(base, patched, strict=True))
    rng = random.Random(seed)
    ratios = []
    for _ in range(rounds):
        sample = rng.choices(pairs, k=len(pairs))
        denominator = median(b for b, _ in sample)
        if denominator > 0:
            ratios.append(median(p for _, p in sample) / denominator)
    if not ratios:
        return float("nan"), float("nan")
    ratios.sort()
    return ratios[int(0.025 * (len(ratios) - 1))], ratios[int(0.975 * (len(ratios) - 1))]


def compare(base: list[float], patched: list[float], better: str, threshold: float) -> Comparison:
    """The ratio, its interval and the verdict for ``better`` ("lower" or "higher")."""
    low, high = interval(base, patched)
    b = median(base)
    ratio = median(patched) / b if b > 0 else float("nan")
    lower = better == "lower"
    worse = low > 1 + threshold if lower else high < 1 - threshold
    gain = high < 1 - threshold if lower else low > 1 + threshold
    if worse:
        return Comparison(ratio, low, high, "failed", _change("slower", ratio, low, high))
    if gain:
        return Comparison(ratio, low, high, "better", _change("faster", ratio, low, high))
    return Comparison(ratio, low, high, "passed", "")


def _change(word: str, ratio: float, low: float, high: float) -> str:
    """"faster by 12.0% (CI 9.1% to 14.3%)": the change as a share of the base."""
    ends = sorted((abs(low - 1) * 100, abs(high - 1) * 100))
    return f"{word} by {abs(ratio - 1) * 100:.1f}% (CI {ends[0]:.1f}% to {ends[1]:.1f}%)"
