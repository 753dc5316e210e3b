"""Measure the two change-point libraries on short, noisy series (docs/history.md).

Synthetic series (seeded): a study's median tps with a given coefficient of
variation, a step of ``step`` at ``at``; and series without a change."""

from __future__ import annotations

import random
import sys
import time

from otava.analysis import compute_change_points

from pgrig.history.changes import changes
from pgrig.history.series import Observation

try:  # MongoDB's, measured beside Otava; not a dependency of pgrig (docs/history.md)
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
except ImportError:
    e_divisive = None


def series(n: int, at: int | None, step: float, cv: float, seed: int) -> list[float]:
    rnd = random.Random(seed)
    return [
        1000.0 * (1 - step if at is not None and i >= at else 1) * rnd.gauss(1, cv)
        for i in range(n)
    ]


def otava(xs: list[float]) -> list[int]:
    return [cp.index for cp in compute_change_points(xs, window_len=30, max_pvalue=0.001)[0]]


def edm(xs: list[float]) -> list[int]:
    return list(e_divisive(xs, pvalue=0.01, permutations=100))


def pgrig(xs: list[float]) -> list[int]:
    """Otava's candidates confirmed by Welch's test (pgrig.history.changes)."""
    return [c.index for c in changes([Observation(str(i), (x,) * 3) for i, x in enumerate(xs)])]


def main() -> None:
    methods = [("otava", otava), ("pgrig", pgrig)]
    if e_divisive is not None:
        methods.append(("e-divisive", edm))
    for name, find in methods:
        for n, at, cv in ((30, 15, 0.03), (8, 4, 0.03), (6, 3, 0.02), (30, 15, 0.06)):
            hit = false = 0
            start = time.perf_counter()
            for seed in range(20):
                found = find(series(n, at, 0.10, cv, seed))
                hit += any(abs(i - at) <= 1 for i in found)
                false += sum(abs(i - at) > 1 for i in found)
                false_flat = find(series(n, None, 0.10, cv, 1000 + seed))
                false += len(false_flat)
            took = (time.perf_counter() - start) / 40
            print(
                f"{name:10s} n={n:2d} step at {at:2d} cv {cv:.0%}: found {hit}/20, "
                f"false change points {false} in 40 series, {took * 1000:.0f} ms a series"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
