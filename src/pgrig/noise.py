"""How steady a run was second by second: the noise behind one average.

pgbench ``-P 1`` prints one tps value a second. Their coefficient of variation
(standard deviation / mean) and their range say whether the run's average
stands for a steady state: a run that swings from 0 to 24,000 tps averages
stalls, checkpoints, other processes or a warming cache, and its tps is not a
figure to compare.

The names and the shape are those of the monitor's per-run noise
(``pgrig.monitor``), so both speak of the same ``Noise``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

HIGH_CV = 0.10  # per-second tps varying more than this is a noisy run
MIN_SECONDS = 3  # fewer seconds say nothing about steadiness


@dataclass(frozen=True)
class Noise:
    """How steady a run's per-second throughput was (pgbench -P)."""

    n: int  # seconds
    mean: float
    cv: float  # standard deviation / mean
    min: float
    max: float


def noise(series: Sequence[float]) -> Noise | None:
    """Per-second throughput -> its spread; None for fewer than 3 values or a zero mean."""
    values = [float(v) for v in series]
    if len(values) < MIN_SECONDS:
        return None
    mean = statistics.fmean(values)
    if mean <= 0:
        return None
    return Noise(
        n=len(values),
        mean=mean,
        cv=statistics.stdev(values) / mean,
        min=min(values),
        max=max(values),
    )


def is_noisy(n: Noise | None, high_cv: float = HIGH_CV) -> bool:
    return n is not None and n.cv >= high_cv


def describe(n: Noise) -> str:
    """'CV 4.2%, 11,020 to 12,310 tps over 60 s'."""
    return f"CV {100 * n.cv:.1f}%, {n.min:,.0f} to {n.max:,.0f} tps over {n.n} s"


def worst(items: Sequence[Noise | None]) -> Noise | None:
    """The least steady of several runs (the one with the highest CV)."""
    present = [n for n in items if n is not None]
    return max(present, key=lambda n: n.cv) if present else None


def advice(n: Noise) -> str | None:
    """A warning with what to do when per-second tps was noisy, else None:
    'tps varied 0–24,356 per second (CV 84%) over 10 s: raise the duration ...'."""
    if not is_noisy(n):
        return None
    text = f"tps varied {n.min:,.0f}–{n.max:,.0f} per second (CV {100 * n.cv:.0f}%) over {n.n} s: "
    if n.n < 30:
        return text + "raise the duration (30 s or more) or repeat the run; see TPS over time"
    return text + "repeat the run, and look at TPS over time for stalls, checkpoints or a trend"
