"""Statistics for repeated measurements, honest about noise.

One headline statistic everywhere: the **median** of the repeats (``headline``).
Every table cell and every "vs" difference is a median, because one disturbed
run (a checkpoint, a neighbour's burst) moves a mean of 3 runs by a third of
its excursion and the median not at all.

Welch's t-test (unequal variances) over the repeats decides whether two targets
differ. When there is nothing to test - fewer than two runs on a side, or every
run on both sides gave the same value - the comparison says so instead of
inventing a p-value (and no NaN reaches a report). A difference is *called*
(marked a win or a loss) only from ``MIN_RUNS`` runs a side on, and only when it
survives the Benjamini-Hochberg correction over every comparison of its table
(``adjust``): 36 tests at p < 0.05 call about 2 differences by chance alone.
The t distribution and the correction come from SciPy.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

ALPHA = 0.05
HEADLINE = "median"  # the statistic of every headline cell and every "vs"
# Fewer runs a side are tested but never called a win or a loss: with 2 runs the
# test rests on one degree of freedom per side, and two samples of one
# distribution come out "p < 0.05" far more often than 5% of the time when
# their spreads happen to be small.
MIN_RUNS = 3

BETTER = "better"
WORSE = "worse"
NOISE = "noise"  # tested, not called (within noise, or too few runs)
UNTESTED = "untested"


def headline(values: Sequence[float]) -> float:
    """The one statistic of repeated runs that every table shows: their median."""
    if not values:
        raise ValueError("headline() of no values")
    return float(statistics.median(values))


def _scipy() -> tuple[ModuleType, ModuleType]:
    """SciPy's special functions and statistics, imported on first use: importing
    them takes seconds on a busy machine, and ``pgrig --version`` never needs them."""
    from scipy import special
    from scipy import stats as sps

    return special, sps


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    special, _ = _scipy()
    return float(special.betainc(a, b, min(max(x, 0.0), 1.0)))


def _check_df(df: float) -> None:
    # A programming error, not a user's: callers derive df from sample sizes.
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, not {df}")


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    _check_df(df)
    _, sps = _scipy()
    return float(2.0 * sps.t.sf(abs(t), df))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` (may be ``math.inf``) degrees of freedom."""
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, not {p}")
    _, sps = _scipy()
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
    """Other vs baseline: the difference of the medians in %, Welch's test over the
    repeats, and - once ``adjust`` ran over the table - the corrected p-value."""

    diff_pct: float | None  # None: the baseline's median is 0, a % of it means nothing
    p_value: float | None  # None: no test was possible, ``no_test`` says why
    n: tuple[int, int]  # (baseline, other)
    t: float | None = None  # Welch's t statistic (other - baseline)
    df: float | None = None  # Welch-Satterthwaite degrees of freedom
    no_test: str | None = None
    q_value: float | None = None  # Benjamini-Hochberg adjusted p, set by ``adjust``
    higher_is_better: bool = True  # tps, MB/s; False for seconds, latencies
    # The means' difference points the other way than the medians': a call on
    # the means would contradict the number shown.
    disagree: bool = False

    @property
    def significant(self) -> bool:
        """p < 0.05 before any correction (the raw test)."""
        return self.p_value is not None and self.p_value < ALPHA

    @property
    def too_few(self) -> bool:
        return min(self.n) < MIN_RUNS

    @property
    def called(self) -> bool:
        """A difference worth marking: significant after the correction (when one
        ran), from ``MIN_RUNS`` runs a side, medians and means agreeing."""
        p = self.q_value if self.q_value is not None else self.p_value
        return (
            p is not None
            and p < ALPHA
            and not self.too_few
            and not self.disagree
            and self.diff_pct is not None
        )

    @property
    def verdict(self) -> str:
        if self.p_value is None:
            return UNTESTED
        if not self.called:
            return NOISE
        up = (self.diff_pct or 0.0) > 0
        return BETTER if up == self.higher_is_better else WORSE

    def _p_text(self) -> str:
        assert self.p_value is not None
        text = f"p{_p(self.p_value)}"
        if self.q_value is not None and self.q_value != self.p_value:
            text += f", q{_p(self.q_value)}"
        return text

    def describe(self) -> str:
        """'▲ +31.8% (p=0.002, q=0.013)', '≈ +1.0%, within noise (p=0.41)', ..."""
        sign = "n/a (baseline median is 0)" if self.diff_pct is None else f"{self.diff_pct:+.1f}%"
        if self.p_value is None:
            return f"{sign} ({self.no_test or 'no test'})"
        verdict = self.verdict
        if verdict == BETTER:
            return f"▲ {sign} ({self._p_text()})"
        if verdict == WORSE:
            return f"▼ {sign} ({self._p_text()})"
        if self.significant and self.too_few:
            return (
                f"≈ {sign}, not called: {self.n[1]} vs {self.n[0]} runs "
                f"({self._p_text()}; a call needs ≥ {MIN_RUNS} runs a side)"
            )
        if self.significant and self.disagree:
            return f"≈ {sign}, not called: the means differ the other way ({self._p_text()})"
        if self.significant:
            return f"≈ {sign}, within noise after the correction ({self._p_text()})"
        return f"≈ {sign}, within noise ({self._p_text()})"


def _p(value: float) -> str:
    """'=0.013', '<0.001', '=0.41': three decimals where they matter."""
    if value < 0.001:
        return "<0.001"
    return f"={value:.3f}" if value < ALPHA else f"={value:.2f}"


def welch(
    baseline: Sequence[float], other: Sequence[float], *, higher_is_better: bool = True
) -> Comparison:
    """Welch's two-sided t-test of ``other`` against ``baseline``; the difference
    shown is the medians' (``headline``)."""
    n = (len(baseline), len(other))
    if min(n) == 0:
        raise ValueError("welch() needs at least one value on each side")
    hb, ho = headline(baseline), headline(other)
    mb, mo = statistics.fmean(baseline), statistics.fmean(other)
    diff = (ho - hb) / hb * 100 if hb else None
    disagree = (ho - hb) * (mo - mb) < 0

    def made(
        p: float | None = None, t: float | None = None, df: float | None = None, why: str = ""
    ) -> Comparison:
        return Comparison(diff, p, n, t=t, df=df, no_test=why or None,
                          higher_is_better=higher_is_better, disagree=disagree)  # fmt: skip

    if min(n) < 2:
        return made(why=f"n={n[1]} vs {n[0]}: repeat ≥ {MIN_RUNS} for a test")
    # statistics.variance is exact on floats: identical runs give exactly 0.
    if statistics.variance(baseline) == 0 and statistics.variance(other) == 0:
        if mb == mo:
            return made(why="every run gave the same value on both sides: no spread to test")
        return made(why="no spread on either side, each side's runs are identical: no test")
    _, sps = _scipy()
    with warnings.catch_warnings():
        # SciPy warns when one side is constant (its variance is then exactly 0,
        # which is what we want); the other side's spread carries the test.
        warnings.filterwarnings("ignore", message="Precision loss", category=RuntimeWarning)
        res = sps.ttest_ind(other, baseline, equal_var=False)
    t, p, df = float(res.statistic), float(res.pvalue), float(res.df)
    if not (math.isfinite(t) and math.isfinite(p) and math.isfinite(df)):
        return made(why=f"the test is undefined (t={t}, df={df})")
    return made(p, t, df)


def adjust(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The same comparisons with Benjamini-Hochberg adjusted p-values (``q_value``)
    over every one that was tested: the expected share of false calls among the
    differences called stays at ``ALPHA``."""
    tested = [i for i, c in enumerate(comparisons) if c.p_value is not None]
    out = list(comparisons)
    if not tested:
        return out
    ps = [comparisons[i].p_value for i in tested]
    _, sps = _scipy()
    qs = sps.false_discovery_control(ps, method="bh")
    for i, q in zip(tested, qs, strict=True):
        out[i] = replace(out[i], q_value=float(q))
    return out


def family_note(comparisons: Sequence[Comparison]) -> str | None:
    """What the marks of one table rest on: how many tests, how many differences
    chance alone would call, how many were called. None without a test."""
    tested = [c for c in comparisons if c.p_value is not None]
    if not tested:
        return None
    m = len(tested)
    raw = sum(c.significant for c in tested)
    called = sum(c.called for c in tested)
    few = sum(c.too_few for c in tested)
    text = (
        f"{m} difference(s) tested at p < {ALPHA:g}: chance alone would call about "
        f"{m * ALPHA:.1f} of them; {raw} had p < {ALPHA:g}. Benjamini-Hochberg adjusted "
        f"p (q) keeps the expected share of false calls among those marked at "
        f"{ALPHA:.0%}: {called} marked ▲ (better) or ▼ (worse), the rest ≈ (within noise)."
    )
    if few:
        text += (
            f" {few} rest on fewer than {MIN_RUNS} runs a side and are never marked "
            f"(repeat ≥ {MIN_RUNS})."
        )
    return text
