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

Intervals fit the statistic they surround. A median carries a distribution-free
interval from order statistics (``median_interval``): with n runs, [min, max]
holds the true median with probability 1 - 2 * 0.5^n (75% at 3 runs), and from 6
runs on the narrowest interval at 95% or more is taken. A difference of medians
carries a bootstrap interval (``difference_interval``, SciPy's percentile
bootstrap, seeded so a report renders the same twice): in % of the baseline's
median for rates, as a ratio for latencies and durations. An interval wider than
+-100% says nothing a reader can use: ``too_noisy`` says so instead.

How much a study can tell: ``detectable_pct`` is the smallest difference Welch's
test would call with 80% power at these repeats and this spread, and
``runs_needed`` how many runs a side a given difference would need.
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

    import numpy as np
    from numpy.typing import NDArray

ALPHA = 0.05
CONFIDENCE = 1.0 - ALPHA  # of every interval a report prints
POWER = 0.8  # of the minimum detectable difference
# An interval whose half-width exceeds this share of its centre (in %) is not
# printed: "too noisy for an interval" (an interval of the mean this wide implied
# negative ops/s beside a positive median).
TOO_NOISY_PCT = 100.0
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261127  # fixed: the same records render the same report
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
class Interval:
    """A confidence interval [low, high] and the probability it holds the true value."""

    low: float
    high: float
    confidence: float

    def half_width_pct(self, centre: float) -> float:
        """Half the interval's width in % of ``centre`` (inf when the centre is 0)."""
        if centre == 0:
            return math.inf
        return (self.high - self.low) / 2 / abs(centre) * 100

    def too_noisy(self, centre: float) -> bool:
        """Wider than +-``TOO_NOISY_PCT`` % of its centre: not worth printing."""
        return self.half_width_pct(centre) > TOO_NOISY_PCT


def order_coverage(n: int, k: int = 1) -> float:
    """Probability that [x(k), x(n-k+1)] of ``n`` sorted runs holds the true median,
    whatever the distribution: 1 - 2 * P(Binomial(n, 1/2) < k)."""
    _, sps = _scipy()
    return float(1.0 - 2.0 * sps.binom.cdf(k - 1, n, 0.5))


def median_interval(values: Sequence[float]) -> Interval | None:
    """The distribution-free (order-statistic) interval of the median: the narrowest
    [x(k), x(n-k+1)] holding it with at least ``CONFIDENCE``; below 6 runs no such
    interval exists and [min, max] comes with its own, lower, confidence (75% at 3
    runs). None below 2 values."""
    n = len(values)
    if n < 2:
        return None
    ordered = sorted(values)
    k = 1
    while k + 1 <= n // 2 and order_coverage(n, k + 1) >= CONFIDENCE:
        k += 1
    return Interval(ordered[k - 1], ordered[n - k], order_coverage(n, k))


def difference_interval(
    baseline: Sequence[float], other: Sequence[float], *, ratio: bool = False
) -> Interval | None:
    """The bootstrap interval (``CONFIDENCE``) of other against baseline: the
    difference of their medians in % of the baseline's, or with ``ratio`` the
    ratio of the medians (other / baseline). Each side is resampled on its own.
    None below ``MIN_RUNS`` runs a side or with a baseline median of 0."""
    if min(len(baseline), len(other)) < MIN_RUNS or headline(baseline) == 0:
        return None
    import numpy as np

    _, sps = _scipy()

    def statistic(
        b: NDArray[np.float64], o: NDArray[np.float64], axis: int = -1
    ) -> NDArray[np.float64]:
        mb, mo = np.median(b, axis=axis), np.median(o, axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            out: NDArray[np.float64] = mo / mb if ratio else (mo - mb) / np.abs(mb) * 100.0
        return out

    if len(set(baseline)) == 1 and len(set(other)) == 1:  # nothing to resample
        value = float(statistic(np.asarray(baseline), np.asarray(other)))
        return Interval(value, value, CONFIDENCE)
    with warnings.catch_warnings():
        # a resample of a side whose median is 0 gives inf: its quantile says so
        warnings.simplefilter("ignore", RuntimeWarning)
        res = sps.bootstrap(
            (np.asarray(baseline, dtype=float), np.asarray(other, dtype=float)),
            statistic,
            vectorized=True,
            paired=False,
            confidence_level=CONFIDENCE,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return Interval(low, high, CONFIDENCE)


def _detectable(sd_sum: float, n: int, m: int, centre: float) -> float:
    """The difference (% of ``centre``) Welch's test calls with ``POWER`` at n and m
    runs a side, ``sd_sum`` = s_b^2 + s_o^2 (equal runs a side assumed for df)."""
    se = math.sqrt(sd_sum / 2 * (1 / n + 1 / m))
    df = max(n + m - 2, 1)
    factor = t_quantile(1.0 - ALPHA / 2.0, df) + t_quantile(POWER, df)
    return factor * se / abs(centre) * 100


def _variances(baseline: Sequence[float], other: Sequence[float]) -> float | None:
    if min(len(baseline), len(other)) < 2 or headline(baseline) == 0:
        return None
    total = statistics.variance(baseline) + statistics.variance(other)
    return total if total > 0 else None


def detectable_pct(baseline: Sequence[float], other: Sequence[float]) -> float | None:
    """The minimum detectable difference: the smallest difference of the two sides
    (in % of the baseline's median) Welch's test at ``ALPHA`` would find with
    ``POWER`` at these repeats and this spread. For one point's own repeats (what
    another study of the same repeats could tell apart), pass them as both sides.
    None below 2 runs a side or without spread."""
    total = _variances(baseline, other)
    if total is None:
        return None
    return _detectable(total, len(baseline), len(other), headline(baseline))


NEEDED_LIMIT = 1000  # runs a side beyond which ``runs_needed`` stops counting


def runs_needed(
    baseline: Sequence[float], other: Sequence[float], diff_pct: float, limit: int = NEEDED_LIMIT
) -> int | None:
    """Runs a side for Welch's test to find a ``diff_pct`` % difference with
    ``POWER``, at the spread these repeats showed; None without spread, ``limit``
    when even that many would not do."""
    total = _variances(baseline, other)
    if total is None or diff_pct <= 0:
        return None
    centre = headline(baseline)
    if _detectable(total, limit, limit, centre) > diff_pct:
        return limit
    low, high = 2, limit  # the detectable difference shrinks as runs grow: bisect
    while low < high:
        mid = (low + high) // 2
        if _detectable(total, mid, mid, centre) > diff_pct:
            low = mid + 1
        else:
            high = mid
    return low


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
    ratio: float | None = None  # other's median / baseline's (None: baseline's is 0)
    # The bootstrap interval of diff_pct (rates) or of ratio (latencies, durations)
    interval: Interval | None = None
    detectable: float | None = None  # ``detectable_pct`` of these repeats
    needed_5pct: int | None = None  # ``runs_needed`` for a 5% difference

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

    def p_words(self) -> str:
        """'p=0.31, q=0.42': the raw and the study-corrected p ('' untested)."""
        return self._p_text() if self.p_value is not None else ""

    def _p_text(self) -> str:
        assert self.p_value is not None
        text = f"p{p_text(self.p_value)}"
        if self.q_value is not None and self.q_value != self.p_value:
            text += f", q{p_text(self.q_value)}"
        return text

    def size_text(self) -> str:
        """The difference in the unit that fits it: '+31.8%' for a rate, '7.3x
        slower' for a latency or a duration (``higher_is_better`` False)."""
        if self.diff_pct is None:
            return "n/a (baseline median is 0)"
        if not self.higher_is_better and self.ratio is not None:
            return ratio_text(self.ratio)
        return f"{self.diff_pct:+.1f}%"

    def interval_text(self) -> str:
        """'95% CI -13.5 to -3.1%', '95% CI 5.0-9.1x', 'too noisy for an interval',
        '' without one (fewer than ``MIN_RUNS`` runs a side)."""
        iv = self.interval
        if iv is None:
            return ""
        level = f"{100 * iv.confidence:.0f}% CI"
        if not self.higher_is_better and self.ratio is not None:
            if iv.too_noisy(self.ratio):
                return "too noisy for an interval"
            digits = 2 if iv.high < 10 else 1
            return f"{level} {iv.low:.{digits}f}–{iv.high:.{digits}f}x"
        if iv.high - iv.low > 2 * TOO_NOISY_PCT:
            return "too noisy for an interval"
        return f"{level} {iv.low:+.1f} to {iv.high:+.1f}%"

    def detectable_text(self) -> str:
        """'could detect ≥ 12%; 5% needs 20 runs a side' ('' without spread)."""
        if self.detectable is None:
            return ""
        text = (
            f"could detect ≥ {self.detectable:.0f}%"
            if self.detectable >= 1
            else (f"could detect ≥ {self.detectable:.1f}%")
        )
        if self.needed_5pct is not None and self.detectable > 5.0:
            runs = (
                f"{self.needed_5pct}"
                if self.needed_5pct < NEEDED_LIMIT
                else (f"over {NEEDED_LIMIT:,}")
            )
            text += f"; 5% needs {runs} runs a side"
        return text

    def describe(self) -> str:
        """'▲ +31.8% (95% CI +20.1 to +40.2%; p=0.002, q=0.013)', '≈ +1.0%, within
        noise (p=0.41; could detect ≥ 12%; ...)', '▼ 7.3x slower (...)'."""
        sign = self.size_text()
        ci = self.interval_text()
        if self.p_value is None:
            return f"{sign} ({self.no_test or 'no test'})"
        verdict = self.verdict
        if verdict in (BETTER, WORSE):
            mark = "▲" if verdict == BETTER else "▼"
            return f"{mark} {sign} ({'; '.join(filter(None, (ci, self._p_text())))})"
        if self.significant and self.too_few:
            return (
                f"≈ {sign}, not called: {self.n[1]} vs {self.n[0]} runs "
                f"({self._p_text()}; a call needs ≥ {MIN_RUNS} runs a side)"
            )
        sign = f"{sign} ({ci})" if ci else sign
        if self.significant and self.disagree:
            return f"≈ {sign}, not called: the means differ the other way ({self._p_text()})"
        tail = "; ".join(filter(None, (self._p_text(), self.detectable_text())))
        if self.significant:
            return f"≈ {sign}, within noise after the correction ({tail})"
        return f"≈ {sign}, within noise ({tail})"


def _x(value: float) -> str:
    """A ratio's digits: '7.3', '1.04'."""
    return f"{value:.2f}" if abs(value) < 1.1 else f"{value:.1f}"


def ratio_text(ratio: float, slower: str = "slower", faster: str = "faster") -> str:
    """A latency's or a duration's change as a ratio of the medians (other /
    baseline): '7.3x slower', '1.4x faster', 'same (1.00x)'."""
    if ratio <= 0 or not math.isfinite(ratio):
        return "n/a"
    if ratio >= 1.0:
        return f"{_x(ratio)}x {slower}" if ratio >= 1.005 else "same (1.00x)"
    return f"{_x(1.0 / ratio)}x {faster}" if ratio <= 1 / 1.005 else "same (1.00x)"


def p_text(value: float) -> str:
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

    ratio = ho / hb if hb else None
    interval = difference_interval(baseline, other, ratio=not higher_is_better)
    detectable = detectable_pct(baseline, other)
    needed = runs_needed(baseline, other, 5.0) if detectable is not None else None

    def made(
        p: float | None = None, t: float | None = None, df: float | None = None, why: str = ""
    ) -> Comparison:
        return Comparison(diff, p, n, t=t, df=df, no_test=why or None,
                          higher_is_better=higher_is_better, disagree=disagree, ratio=ratio,
                          interval=interval, detectable=detectable,
                          needed_5pct=needed)  # fmt: skip

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


def family_note(comparisons: Sequence[Comparison], study_total: int | None = None) -> str | None:
    """What the marks of one table rest on: how many tests, how many differences
    chance alone would call, how many were called; ``study_total``: the study's
    comparisons the correction ran over, when more than this table's. None
    without a test."""
    tested = [c for c in comparisons if c.p_value is not None]
    if not tested:
        return None
    m = len(tested)
    raw = sum(c.significant for c in tested)
    called = sum(c.called for c in tested)
    few = sum(c.too_few for c in tested)
    over = (
        f" over all {study_total} comparisons of the study (the same q wherever one appears)"
        if study_total is not None and study_total > m
        else ""
    )
    text = (
        f"{m} difference(s) tested at p < {ALPHA:g}: chance alone would call about "
        f"{m * ALPHA:.1f} of them; {raw} had p < {ALPHA:g}. Benjamini-Hochberg adjusted "
        f"p (q){over} keeps the expected share of false calls among those marked at "
        f"{ALPHA:.0%}: {called} marked ▲ (better) or ▼ (worse), the rest ≈ (within noise)."
    )
    if few:
        text += (
            f" {few} rest on fewer than {MIN_RUNS} runs a side and are never marked "
            f"(repeat ≥ {MIN_RUNS})."
        )
    detectable = [c.detectable for c in tested if c.detectable is not None and not c.called]
    if detectable:
        low, high = min(detectable), max(detectable)
        span = f"{low:.0f}%" if round(low) == round(high) else f"{low:.0f}–{high:.0f}%"
        needed = [c.needed_5pct for c in tested if c.needed_5pct is not None and not c.called]
        text += (
            f" What these repeats can tell: the smallest difference Welch's test would find "
            f"with {POWER:.0%} power ('could detect') was {span} where nothing was called"
        )
        if needed:
            lo, hi = min(needed), max(needed)
            top = f"over {NEEDED_LIMIT:,}" if hi >= NEEDED_LIMIT else str(hi)
            runs = top if lo == hi else f"{lo} to {top}" if hi >= NEEDED_LIMIT else f"{lo}–{hi}"
            text += f"; a 5% difference would need {runs} runs a side"
        text += "."
    return text


def pooled_stddev(parts: Sequence[tuple[float, float | None, int]]) -> float | None:
    """The standard deviation of all hosts' transactions together, from each host's
    mean, standard deviation and count (as pgbench computes its own, over every
    transaction): the hosts' spreads plus how far their means lie apart. None
    when a host did not print one (merged runs showed "n/a": issue 32)."""
    if not parts or any(sd is None for _, sd, _ in parts):
        return None
    total = sum(n for _, _, n in parts)
    if total <= 0:
        return None
    mean = sum(m * n for m, _, n in parts) / total
    spread = sum(n * ((sd or 0.0) ** 2 + (m - mean) ** 2) for m, sd, n in parts)
    return float((spread / total) ** 0.5)
