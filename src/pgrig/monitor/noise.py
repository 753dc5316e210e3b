"""How steady a run was second by second, and what to do when it was not.

pgbench's ``-P 1`` gives one tps value a second. Their coefficient of
variation (standard deviation / mean) and their range say whether the run's
average stands for a steady state: a run that swings by a third from second
to second averages checkpoints, other processes or a warming cache, and the
advice says which of those the monitor saw.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pgrig.monitor import interference
from pgrig.monitor.model import MonitorResult, Noise

HIGH_CV = 0.10  # per-second tps varying more than this is a noisy run
MIN_SECONDS = 3  # fewer seconds say nothing about steadiness
LONG_RUN_S = 30  # runs this long average out per-second swings


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


def is_short(n: Noise) -> bool:
    """Shorter than LONG_RUN_S: pgbench -P 1 prints a line per whole second and
    often none for the last, so a 30 s run has 29 seconds (it is not short)."""
    return n.n + 1 < LONG_RUN_S


def describe(n: Noise) -> str:
    """'CV 4.2%, 11,020 to 12,310 tps over 60 s'."""
    return f"CV {100 * n.cv:.1f}%, {n.min:,.0f} to {n.max:,.0f} tps over {n.n} s"


def worst(items: Sequence[Noise | None]) -> Noise | None:
    """The least steady of several runs (the one with the highest CV)."""
    present = [n for n in items if n is not None]
    return max(present, key=lambda n: n.cv) if present else None


def advice(n: Noise) -> str | None:
    """A warning with what to do when per-second tps was noisy, for a run the
    monitor did not watch: 'tps varied 0–24,356 per second (CV 84%) over 10 s: ...'."""
    if not is_noisy(n):
        return None
    text = f"tps varied {n.min:,.0f}–{n.max:,.0f} per second (CV {100 * n.cv:.0f}%) over {n.n} s: "
    if is_short(n):
        return text + "raise the duration (30 s or more) or repeat the run; see TPS over time"
    return text + "repeat the run, and look at TPS over time for stalls, checkpoints or a trend"


def warning(mon: MonitorResult, high_cv: float = HIGH_CV) -> str | None:
    """A warning with advice when the run's per-second tps was noisy, else None.
    The advice follows what the monitor saw during the run."""
    n = mon.noise
    if n is None or n.cv < high_cv:
        return None
    advice = []
    if mon.disturbed is not None:
        advice.append(
            f"other processes were running ({interference.disturbance(mon)}): rerun on a quiet "
            "machine"
        )
    inside_ckpt = [c for c in mon.checkpoints if c.completed or c.end_s is None]
    if inside_ckpt:
        advice.append(
            f"{len(inside_ckpt)} checkpoint(s) fell inside the run: run longer than "
            "checkpoint_timeout so every run averages the same share of checkpoints, or "
            "checkpoint before each run"
        )
    if is_short(n):
        advice.append(f"the run lasted {n.n} s: run longer (30 s or more) to average the swings")
    if not advice:
        advice.append(
            "run longer or repeat the run (repeat = { until_ci_pct = 5 }), and look at the "
            "TPS plot for a trend (warm-up, cache filling) or periodic dips"
        )
    return f"noisy run: per-second tps {describe(n)} (CV above {100 * high_cv:.0f}%); " + "; ".join(
        advice
    )
