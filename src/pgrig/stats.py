"""Statistics for repeated measurements, honest about noise.

Welch's t-test (unequal variances) decides whether two targets differ; with
fewer than two runs on a side there is no test and we say so. The Student t
distribution is computed here (regularized incomplete beta by continued
fraction) to avoid a SciPy dependency for two functions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile_975(df: float) -> float:
    """The 97.5% quantile of Student's t (for 95% confidence intervals), by bisection."""
    lo, hi = 0.0, 1000.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if t_two_sided_p(mid, df) > ALPHA:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def ci95_half_width(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        return math.inf
    return t_quantile_975(n - 1) * statistics.stdev(values) / math.sqrt(n)


@dataclass(frozen=True)
class Comparison:
    """Target vs baseline: the difference of means in %, and whether it is real."""

    diff_pct: float
    p_value: float | None  # None: not enough repeats for a test
    n: tuple[int, int]

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < ALPHA

    def describe(self) -> str:
        sign = f"{self.diff_pct:+.1f}%"
        if self.p_value is None:
            return f"{sign} (n={self.n[1]} vs {self.n[0]}: repeat >= 2 for a test)"
        if self.significant:
            return f"{sign} (p={self.p_value:.3f})"
        return f"{sign}, within noise (p={self.p_value:.2f})"


def welch(baseline: Sequence[float], other: Sequence[float]) -> Comparison:
    mb, mo = statistics.fmean(baseline), statistics.fmean(other)
    diff = (mo - mb) / mb * 100 if mb else math.inf
    n = (len(baseline), len(other))
    if min(n) < 2:
        return Comparison(diff, None, n)
    vb, vo = statistics.variance(baseline) / n[0], statistics.variance(other) / n[1]
    if vb + vo == 0:
        return Comparison(diff, 0.0 if mb != mo else 1.0, n)
    t = (mo - mb) / math.sqrt(vb + vo)
    df = (vb + vo) ** 2 / (vb**2 / (n[0] - 1) + vo**2 / (n[1] - 1))
    return Comparison(diff, t_two_sided_p(t, df), n)
