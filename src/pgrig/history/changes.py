"""Where a point's figure changed over a series: change points proposed by
Apache Otava (E-Divisive means with a t-test, Fleming et al. 2023) on the
studies' medians, then each one decided by the one procedure
(``stats.decide_studies``) over the runs of the studies on either side, the
spread between studies counted, its interval at ``ALPHA`` divided by the number
of places a step could have been put (the candidate's place was chosen to make
the two sides differ most: an uncorrected test would confirm one in twenty
steps of pure noise). A candidate whose interval holds no change is not claimed
(docs/history.md has the measurements behind these choices)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pgrig.errors import BinaryNotFound
from pgrig.history.series import Observation
from pgrig.stats import ALPHA, MIN_RUNS, Comparison, decide_studies

# Otava's first pass; its windows are longer than any series we expect, so the
# whole series is one window (the original E-Divisive with a t-test). Otava only
# proposes: 0.01, not 0.001, because the decision over the studies' runs on
# either side, corrected for the places a step could be, decides what is claimed
# (bench/changepoints.py: a step at the 4th of 8 studies found 15 times in 20
# instead of 11, no false one in the 40 short series; docs/history.md). At 0.001
# a live 26% step at the 4th of 7 studies was never proposed.
MAX_PVALUE = 0.01
WINDOW = 50


@dataclass(frozen=True)
class Change:
    """A confirmed step in one point's series: from study ``index`` on."""

    index: int  # the first study after the step
    comparison: Comparison  # the runs after against the runs before

    @property
    def diff_pct(self) -> float:
        return self.comparison.diff_pct or 0.0

    @property
    def low_pct(self) -> float:
        iv = self.comparison.interval
        return iv.low if iv is not None else math.nan

    @property
    def high_pct(self) -> float:
        iv = self.comparison.interval
        return iv.high if iv is not None else math.nan

    @property
    def p_value(self) -> float:
        p = self.comparison.p_value
        return p if p is not None else 1.0


def candidates(medians: Sequence[float]) -> list[int]:
    """Otava's change points in ``medians`` (indices of the first value after)."""
    if len(medians) < 2 * MIN_RUNS:
        return []
    # Imported here, as pgrig.stats imports SciPy: Otava brings NumPy and SciPy,
    # which `pgrig --help` and every other command must not wait for.
    try:
        from otava.analysis import compute_change_points
    except ImportError as exc:
        raise BinaryNotFound(
            "finding change points in a series needs Apache Otava, which is not installed",
            hint="pip install 'pgrig[history]' (or pip install apache-otava)",
        ) from exc

    with warnings.catch_warnings():
        # Otava divides by a zero spread on constant stretches; those are no change.
        warnings.simplefilter("ignore", RuntimeWarning)
        found, _ = compute_change_points(list(medians), window_len=WINDOW, max_pvalue=MAX_PVALUE)
    return sorted({int(cp.index) for cp in found})


def changes(observations: Sequence[Observation]) -> list[Change]:
    """The confirmed changes of one point's series (its studies in order)."""
    medians = [o.median for o in observations]
    found = candidates(medians)
    bounds = [0, *found, len(medians)]
    out = []
    for i, at in enumerate(found):
        before, after = observations[bounds[i] : at], observations[at : bounds[i + 2]]
        if min(len(before), len(after)) < MIN_RUNS:
            continue  # fewer studies than a call needs on one side
        test = decide_studies([o.values for o in before], [o.values for o in after])
        # no stronger than the best of the places a step could be: Bonferroni
        test = replace(test, alpha=ALPHA / (len(medians) - 1))
        if test.called:
            out.append(Change(at, test))
    return out
