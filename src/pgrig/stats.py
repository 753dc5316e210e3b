"""Statistics for repeated measurements, honest about noise.

Welch's t-test (unequal variances) decides whether two targets differ. When
there is nothing to test - fewer than two runs on a side, or every run on both
sides gave the same value - the comparison says so instead of inventing a
p-value (and no NaN reaches a report). The t distribution comes from SciPy.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import special
from scipy import stats as sps

ALPHA = 0.05


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    return float(special.betainc(a, b, min(max(x, 0.0), 1.0)))


def _check_df(df: float) -> None:
    # A programming error, not a user's: callers derive df from sample sizes.
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, not {df}")


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    _check_df(df)
    return float(2.0 * sps.t.sf(abs(t), df))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` (may be ``math.inf``) degrees of freedom."""
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, not {p}")
    return float(sps.t.ppf(p, df))


def t_quantile_975(df: float) -> float:
    """The 97.5% quantile of Student's t: the factor of a two-sided 95% confidence interval."""
    return t_quantile(1.0 - ALPHA / 2.0, df)


def ci95_half_width(values: Sequence[float]) -> float:
    """Half-width of the 95% confidence interval of the mean of ``values``.

    ``math.inf`` with fewer than two values (no spread is known), 0.0 when all
    values are equal."""
    n = len(values)
    if n < 2:
        return math.inf
    return t_quantile_975(n - 1) * statistics.stdev(values) / math.sqrt(n)


@dataclass(frozen=True)
class Comparison:
    """Target vs baseline: the difference of means in %, and whether it is real."""

    diff_pct: float | None  # None: the baseline's mean is 0, a % of it means nothing
    p_value: float | None  # None: no test was possible, ``no_test`` says why
    n: tuple[int, int]  # (baseline, other)
    t: float | None = None  # Welch's t statistic (other - baseline)
    df: float | None = None  # Welch-Satterthwaite degrees of freedom
    no_test: str | None = None

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < ALPHA

    def describe(self) -> str:
        sign = "n/a (baseline mean is 0)" if self.diff_pct is None else f"{self.diff_pct:+.1f}%"
        if self.p_value is None:
            return f"{sign} ({self.no_test or 'no test'})"
        if self.significant:
            return f"{sign} (p={self.p_value:.3f})"
        return f"{sign}, within noise (p={self.p_value:.2f})"


def welch(baseline: Sequence[float], other: Sequence[float]) -> Comparison:
    """Welch's two-sided t-test of ``other`` against ``baseline``."""
    n = (len(baseline), len(other))
    if min(n) == 0:
        raise ValueError("welch() needs at least one value on each side")
    mb, mo = statistics.fmean(baseline), statistics.fmean(other)
    diff = (mo - mb) / mb * 100 if mb else None
    if min(n) < 2:
        return Comparison(diff, None, n, no_test=f"n={n[1]} vs {n[0]}: repeat >= 2 for a test")
    # statistics.variance is exact on floats: identical runs give exactly 0.
    if statistics.variance(baseline) == 0 and statistics.variance(other) == 0:
        why = (
            "every run gave the same value on both sides: no spread to test"
            if mb == mo
            else "no spread on either side, each side's runs are identical: no test"
        )
        return Comparison(diff, None, n, no_test=why)
    with warnings.catch_warnings():
        # SciPy warns when one side is constant (its variance is then exactly 0,
        # which is what we want); the other side's spread carries the test.
        warnings.filterwarnings("ignore", message="Precision loss", category=RuntimeWarning)
        res = sps.ttest_ind(other, baseline, equal_var=False)
    t, p, df = float(res.statistic), float(res.pvalue), float(res.df)
    if not (math.isfinite(t) and math.isfinite(p) and math.isfinite(df)):
        return Comparison(diff, None, n, no_test=f"the test is undefined (t={t}, df={df})")
    return Comparison(diff, p, n, t=t, df=df)
