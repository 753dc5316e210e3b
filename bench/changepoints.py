"""Measure change-point methods on short, noisy series (docs/history.md).

Synthetic series (seeded): a study's median tps with a given coefficient of
variation, a step of ``step`` at ``at``; and series without a change.

pgrig's own (``pgrig.history.changes``: E-Divisive with Student's test, then
Welch's confirmation) always runs; the others run when installed beside it,
none of them a dependency of pgrig:

    pip install apache-otava        # Otava alone, and pgrig's confirmation over Otava
    pip install ruptures            # PELT (l2 cost) with a BIC penalty, then the same confirmation
    pip install signal-processing-algorithms   # MongoDB's E-Divisive (permutation test)
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from unittest import mock

from pgrig.history import changes as own
from pgrig.history.series import Observation

Finder = Callable[[list[float]], list[int]]


def series(n: int, at: int | None, step: float, cv: float, seed: int) -> list[float]:
    rnd = random.Random(seed)
    return [
        1000.0 * (1 - step if at is not None and i >= at else 1) * rnd.gauss(1, cv)
        for i in range(n)
    ]


def confirmed(propose: Callable[[Sequence[float]], list[int]]) -> Finder:
    """pgrig's confirmation (Welch, corrected for the places) over ``propose``'s
    candidates."""

    def find(xs: list[float]) -> list[int]:
        seen = [Observation(str(i), (x,) * 3) for i, x in enumerate(xs)]
        with mock.patch.object(own, "candidates", propose):
            return [c.index for c in own.changes(seen)]

    return find


def methods() -> list[tuple[str, Finder]]:
    found: list[tuple[str, Finder]] = [("pgrig", confirmed(own.candidates))]
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        print("apache-otava is not installed: Otava's rows are left out", file=sys.stderr)
    else:

        def otava(xs: Sequence[float], window: int = own.WINDOW, p: float = 0.01) -> list[int]:
            if len(xs) < 2 * own.MIN_RUNS:
                return []
            cps = compute_change_points(list(xs), window_len=window, max_pvalue=p)[0]
            return sorted({int(cp.index) for cp in cps})

        found.append(("otava-0.001", lambda xs: otava(xs, 30, 0.001)))
        found.append(("pgrig-otava", confirmed(otava)))
    try:
        import numpy as np
        import ruptures
    except ImportError:
        print("ruptures is not installed: its row is left out", file=sys.stderr)
    else:

        def pelt(xs: Sequence[float]) -> list[int]:
            # The noise from successive differences (a step moves one of them
            # only); BIC's penalty 2 sigma^2 log n for an l2 cost.
            sigma = statistics.median(abs(b - a) for a, b in itertools.pairwise(xs)) / 0.954
            if len(xs) < 2 * own.MIN_RUNS or sigma == 0:
                return []
            algo = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(np.asarray(xs))
            return [int(b) for b in algo.predict(pen=2 * sigma**2 * math.log(len(xs)))[:-1]]

        found.append(("pgrig-pelt", confirmed(pelt)))
    try:  # requires Python 3.11 exactly, numpy < 2 and setuptools < 71
        from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
    except ImportError:
        pass
    else:
        found.append(("e-divisive", lambda xs: list(e_divisive(xs, pvalue=0.01, permutations=100))))
    return found


def main() -> None:
    for name, find in methods():
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
                f"{name:12s} n={n:2d} step at {at:2d} cv {cv:.0%}: found {hit}/20, "
                f"false change points {false} in 40 series, {took * 1000:.1f} ms a series"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
