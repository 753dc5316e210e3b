"""Statistics for repeated measurements, honest about noise.

One headline statistic for a side: the **median** of the repeats (``headline``),
because one disturbed run (a checkpoint, a neighbour's burst) moves a mean of 3
runs by a third of its excursion and the median not at all. A "vs" difference
is the decision procedure's own estimate (a ratio of geometric means), so the
number, its interval and its verdict cannot disagree.

One procedure decides every comparison (``decide``; ``Comparison`` says how
it is read): Welch's t over the runs' logarithms, so a difference is a ratio and
its interval, its p-value and its verdict are one computation. The interval is
read against no change and against a margin (``MARGIN_PCT``): better, worse,
the same within the margin (equivalence shown), or not yet, with the runs a side
that would decide it. A study's comparisons are decided together
(``adjust``: Benjamini-Hochberg, intervals at the matching false-coverage
level), a series' studies with the spread between studies counted
(``decide_studies``). docs/report.md says why this procedure and not another.

A median carries a distribution-free interval from order statistics
(``median_interval``): with n runs, [min, max] holds the true median with
probability 1 - 2 * 0.5^n (75% at 3 runs), and from 6 runs on the narrowest
interval at 95% or more is taken.

How much a study can tell: ``detectable_pct`` is the smallest change the
procedure would show with 80% power at these repeats and this spread, and
``runs_needed`` how many runs a side a given change would need.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from types import ModuleType


ALPHA = 0.05
CONFIDENCE = 1.0 - ALPHA  # of every interval a report prints
POWER = 0.8  # of the minimum detectable difference
# An interval whose half-width exceeds this share of its centre (in %) is not
# printed: "too noisy for an interval" (an interval of the mean this wide implied
# negative ops/s beside a positive median).
TOO_NOISY_PCT = 100.0
HEADLINE = "median"  # the statistic of every headline cell and every "vs"
# Fewer runs a side are tested but never called a win or a loss: with 2 runs the
# test rests on one degree of freedom per side, and two samples of one
# distribution come out "p < 0.05" far more often than 5% of the time when
# their spreads happen to be small.
MIN_RUNS = 3

BETTER = "better"
WORSE = "worse"
SAME = "same"
NOT_YET = "not yet"
MARGIN_PCT = 5.0  # "the same": the interval within +-this, when no margin is given


def headline(values: Sequence[float]) -> float:
    """The one statistic of repeated runs that every table shows: their median."""
    if not values:
        raise ValueError("headline() of no values")
    return float(statistics.median(values))


def _scipy() -> ModuleType:
    """SciPy's special functions, imported on first use. ``scipy.special`` alone:
    ``scipy.stats`` costs 0.95 s of CPU to import where ``scipy.special`` costs
    0.35 (NumPy included), in every pgrig process that computes an interval
    (docs/bench.md, "Starting a pgrig process"). What its t and binomial
    distributions compute is the special function called here, the same values
    to the bit (tests/test_stats.py holds them against ``scipy.stats``)."""
    from scipy import special

    return cast("ModuleType", special)


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    special = _scipy()
    return float(special.betainc(a, b, min(max(x, 0.0), 1.0)))


def _check_df(df: float) -> None:
    # A programming error, not a user's: callers derive df from sample sizes.
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, not {df}")


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    _check_df(df)
    # scipy.stats.t.sf(x, df) is stdtr(df, -x)
    return float(2.0 * _scipy().stdtr(df, -abs(t)))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` (may be ``math.inf``) degrees of freedom."""
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, not {p}")
    return _t_ppf(p, df)


# A report asks thousands of quantiles (2,340 for the stored quick study:
# runs_needed counts up the runs a side for every comparison), most of them of
# a new df. Cached when each cost scipy.stats' t.ppf, 120 us here; stdtrit costs
# 1.6 us, so the cache now saves about 4 ms of the report's 1.1 s of CPU
# (bench/startup.py --only report, 7 runs a tree: 1.09 s cached, 1.06 without,
# within the noise of a shared machine). Kept: it costs nothing either.
@lru_cache(maxsize=4096)
def _t_ppf(p: float, df: float) -> float:
    # scipy.stats.t.ppf(p, df) is stdtrit(df, p) plus its loc, 0.0 (-0.0 becomes 0.0)
    return float(_scipy().stdtrit(df, p)) + 0.0


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
    return 1.0 - 2.0 * _binom_cdf(k - 1, n, 0.5)


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k): 0 below the support, 1 from n on, else SciPy's
    public special function (``scipy.stats.binom.cdf`` calls another one,
    agreeing within 1e-13: tests/test_stats.py)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(_scipy().bdtr(k, n, p))


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


NEEDED_LIMIT = 1000  # runs a side beyond which ``runs_needed`` stops counting


def _power_factor(runs: int, alpha: float = ALPHA) -> float:
    """t_(1-alpha/2) + t_POWER at ``runs`` a side: how many standard errors a
    difference must span to be shown with ``POWER``."""
    df = max(2 * runs - 2, 1)
    return t_quantile(1.0 - alpha / 2.0, df) + t_quantile(POWER, df)


def _run_var(baseline: Sequence[float], other: Sequence[float]) -> float | None:
    """var(log) of both sides added, per run (None below 2 runs a side, without
    spread, or with a value <= 0)."""
    if min(len(baseline), len(other)) < 2 or min(min(baseline), min(other)) <= 0:
        return None
    total = _log_stats(baseline)[1] + _log_stats(other)[1]
    return total if total > 0 else None


def detectable_pct(baseline: Sequence[float], other: Sequence[float]) -> float | None:
    """The minimum detectable change: the smallest change (in %) ``decide`` would
    show with ``POWER`` at these runs and this spread. For one point's own
    repeats (what another study of as many could tell apart), pass them as both
    sides. None below 2 runs a side or without spread."""
    total = _run_var(baseline, other)
    if total is None:
        return None
    runs = min(len(baseline), len(other))
    return math.expm1(_power_factor(runs) * math.sqrt(total / runs)) * 100


def runs_needed(
    baseline: Sequence[float], other: Sequence[float], diff_pct: float, limit: int = NEEDED_LIMIT
) -> int | None:
    """Runs a side for ``decide`` to show a ``diff_pct`` % change with ``POWER``
    at the spread these runs showed; None without spread, ``limit`` when even
    that many would not do."""
    total = _run_var(baseline, other)
    if total is None or diff_pct <= 0:
        return None
    reach = math.log1p(diff_pct / 100)
    for runs in range(2, limit + 1):
        if _power_factor(runs) * math.sqrt(total / runs) <= reach:
            return runs
    return limit


def _log_stats(values: Sequence[float]) -> tuple[float, float]:
    """Mean and variance (0 for one value) of the logs of ``values``."""
    logs = [math.log(v) for v in values]
    return statistics.fmean(logs), (statistics.variance(logs) if len(logs) > 1 else 0.0)


@dataclass(frozen=True)
class Comparison:
    """Other vs baseline, decided by one procedure (``decide``): Welch's t on the
    logs of the runs, so the difference is a ratio (of geometric means) and its
    interval, its p-value and its verdict are one computation. The interval is
    read against 0 and against +-``margin_pct``:

    - better / worse: the interval excludes no change;
    - the same: it holds no change and lies within +-``margin_pct`` (equivalence
      shown, two one-sided tests at the interval's level);
    - not yet: neither; ``runs_needed`` says how many runs a side would decide it
      at this noise.

    ``adjust`` lowers ``alpha`` for a family of comparisons (Benjamini-Hochberg's
    calls, and intervals at 1 - R*alpha/m, Benjamini & Yekutieli's false coverage
    rate), so the interval excludes 0 exactly when the corrected test calls it."""

    n: tuple[int, int]  # runs (baseline, other) the decision used
    higher_is_better: bool = True  # tps, MB/s; False for seconds, latencies
    margin_pct: float = MARGIN_PCT
    log_diff: float | None = None  # mean log(other) - mean log(baseline); None: no test
    log_se: float | None = None  # its standard error
    df: float | None = None  # Welch-Satterthwaite degrees of freedom
    run_var: float | None = None  # var(log) baseline + other, per run: what more runs shrink
    alpha: float = ALPHA  # of this comparison's interval (1 - its confidence)
    no_test: str | None = None  # why there is no interval (too few runs, a value <= 0)
    q_value: float | None = None  # Benjamini-Hochberg adjusted p, set by ``adjust``
    left_out: int = 0  # runs the monitor saw disturbed, left out of the decision
    between: bool = False  # the baseline is several studies: their spread counts

    # -- the one computation ------------------------------------------------

    @property
    def ratio(self) -> float | None:
        """Other / baseline (geometric means): the procedure's estimate."""
        return math.exp(self.log_diff) if self.log_diff is not None else None

    @property
    def diff_pct(self) -> float | None:
        return (math.exp(self.log_diff) - 1.0) * 100 if self.log_diff is not None else None

    def _half(self) -> float | None:
        if self.log_se is None or self.df is None or self.no_test:
            return None
        if self.log_se == 0:
            return 0.0
        return t_quantile(1.0 - self.alpha / 2.0, self.df) * self.log_se

    def log_interval(self) -> tuple[float, float] | None:
        half = self._half()
        if half is None or self.log_diff is None:
            return None
        return (self.log_diff - half, self.log_diff + half)

    @property
    def interval(self) -> Interval | None:
        """The interval of ``diff_pct`` (rates) or of ``ratio`` (latencies,
        durations) at 1 - ``alpha``."""
        bounds = self.log_interval()
        if bounds is None:
            return None
        low, high = (math.exp(b) for b in bounds)
        if self.higher_is_better:
            low, high = (low - 1) * 100, (high - 1) * 100
        return Interval(low, high, 1.0 - self.alpha)

    @property
    def p_value(self) -> float | None:
        """Welch's two-sided p on the logs (None without a test)."""
        if self._half() is None or self.log_diff is None or self.log_se is None:
            return None
        if self.log_se == 0:
            return 0.0 if self.log_diff != 0 else 1.0
        assert self.df is not None
        return t_two_sided_p(self.log_diff / self.log_se, self.df)

    @property
    def verdict(self) -> str:
        """BETTER, WORSE, SAME or NOT_YET: where the interval lies."""
        bounds = self.log_interval()
        if bounds is None:
            return NOT_YET
        low, high = bounds
        if low > 0 or high < 0:
            return BETTER if (low > 0) == self.higher_is_better else WORSE
        edge = math.log1p(self.margin_pct / 100)
        if -edge <= low and high <= edge:
            return SAME
        return NOT_YET

    @property
    def called(self) -> bool:
        """A difference shown: better or worse."""
        return self.verdict in (BETTER, WORSE)

    @property
    def significant(self) -> bool:
        """p < 0.05 before any correction (the raw test)."""
        p = self.p_value
        return p is not None and p < ALPHA

    @property
    def too_few(self) -> bool:
        return min(self.n) < MIN_RUNS

    # -- how much it could tell ------------------------------------------------

    def _factor(self, runs: int) -> float:
        return _power_factor(runs, self.alpha)

    @property
    def detectable(self) -> float | None:
        """The smallest change (in %) these runs would show with ``POWER``."""
        if self.log_se is None or self.log_se == 0 or self.df is None:
            return None
        runs = max(min(self.n), 2)
        return math.expm1(self._factor(runs) * self.log_se) * 100

    def runs_needed(self, limit: int = NEEDED_LIMIT) -> int | None:
        """Runs a side that would, with ``POWER``, decide this comparison at the
        spread its runs showed and the difference they found: show the
        difference, or show it within the margin. None without spread (or with
        studies that differ among themselves, which more runs do not remove);
        ``limit`` when even that many would not do."""
        if self.run_var is None or self.run_var == 0 or self.log_diff is None or self.between:
            return None
        edge = math.log1p(self.margin_pct / 100)
        reach = max(abs(self.log_diff), edge - abs(self.log_diff))
        for runs in range(max(MIN_RUNS, min(self.n)), limit + 1):
            if self._factor(runs) * math.sqrt(self.run_var / runs) <= reach:
                return runs
        return limit

    # -- words ----------------------------------------------------------------

    def p_words(self) -> str:
        """'p=0.31, q=0.42': the raw and the study-corrected p ('' untested)."""
        return self._p_text() if self.p_value is not None else ""

    def _p_text(self) -> str:
        p = self.p_value
        assert p is not None
        text = f"p{p_text(p)}"
        if self.q_value is not None and self.q_value != p:
            text += f", q{p_text(self.q_value)}"
        return text

    def size_text(self) -> str:
        """The change in the unit that fits it: '+31.8%' for a rate, '7.3x slower'
        for a latency or a duration (``higher_is_better`` False)."""
        if self.ratio is None:
            return "n/a"
        if not self.higher_is_better:
            return ratio_text(self.ratio)
        return f"{self.diff_pct:+.1f}%"

    def interval_text(self) -> str:
        """'95% CI -13.5 to -3.1%', '95% CI 5.0–9.1x' (a ratio read the way
        ``size_text`` says it: '1.3x faster' beside '95% CI 1.27–1.33x'), '' without
        one."""
        iv = self.interval
        if iv is None:
            return ""
        level = f"{100 * iv.confidence:.2f}".rstrip("0").rstrip(".") + "% CI"
        if not self.higher_is_better:
            low, high = (iv.low, iv.high) if (self.ratio or 1.0) >= 1.0 else (
                1 / iv.high, 1 / iv.low)  # fmt: skip
            digits = 2 if high < 10 else 1
            return f"{level} {low:.{digits}f}–{high:.{digits}f}x"
        return f"{level} {iv.low:+.1f} to {iv.high:+.1f}%"

    def detectable_text(self) -> str:
        """'could detect ≥ 12%' ('' without spread)."""
        d = self.detectable
        if d is None:
            return ""
        return f"could detect ≥ {d:.0f}%" if d >= 1 else f"could detect ≥ {d:.1f}%"

    def needed_text(self) -> str:
        """'about 8 runs a side would decide it', or what would."""
        if self.between:
            return "more studies would decide it (the studies differ among themselves)"
        needed = self.runs_needed()
        if needed is None:
            return f"repeat ≥ {MIN_RUNS} runs a side" if self.too_few else ""
        if needed >= NEEDED_LIMIT:
            return f"over {NEEDED_LIMIT:,} runs a side would be needed at this noise"
        return f"about {needed} runs a side would decide it at this noise"

    def _left_text(self) -> str:
        return f"{self.left_out} disturbed run(s) left out" if self.left_out else ""

    def describe(self) -> str:
        """One of the four, the same words everywhere:
        '▲ +31.8% (95% CI +20.1 to +40.2%; p=0.002)',
        '▼ 7.3x slower (95% CI 5.0–9.1x; p<0.001)',
        '= +1.0%, the same within ±5% (95% CI -2.9 to +4.1%)',
        '? +12.0%, not yet (95% CI -8.0 to +35.0%; p=0.21; about 9 runs a side
        would decide it at this noise)'."""
        size = self.size_text()
        ci = self.interval_text()
        extra = self._left_text()
        verdict = self.verdict
        if verdict in (BETTER, WORSE):
            mark = "▲" if verdict == BETTER else "▼"
            return f"{mark} {size} ({'; '.join(filter(None, (ci, self._p_text(), extra)))})"
        if verdict == SAME:
            inner = "; ".join(filter(None, (ci, extra)))
            return f"= {size}, the same within ±{self.margin_pct:g}% ({inner})"
        why = self.no_test or ""
        parts = (ci, self.p_words(), why, self.needed_text(), extra)
        return f"? {size}, not yet ({'; '.join(filter(None, parts))})"


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


def _too_few(n: tuple[int, int]) -> str:
    return f"{n[1]} vs {n[0]} runs: a verdict needs ≥ {MIN_RUNS} a side"


def decide(
    baseline: Sequence[float],
    other: Sequence[float],
    *,
    higher_is_better: bool = True,
    margin_pct: float = MARGIN_PCT,
    left_out: int = 0,
) -> Comparison:
    """The one decision procedure: ``other`` against ``baseline`` from their runs
    (``Comparison`` says how it is read)."""
    n = (len(baseline), len(other))
    if min(n) == 0:
        raise ValueError("decide() needs at least one value on each side")
    made = Comparison(n, higher_is_better, margin_pct, left_out=left_out)
    if min(min(baseline), min(other)) <= 0:
        return replace(made, no_test="a value ≤ 0: no ratio to test")
    (mb, vb), (mo, vo) = _log_stats(baseline), _log_stats(other)
    d = mo - mb
    if min(n) < 2:
        return replace(made, log_diff=d, no_test=_too_few(n))
    sb, so = vb / n[0], vo / n[1]
    se = math.sqrt(sb + so)
    df = (
        float(sum(n) - 2) if se == 0 else (sb + so) ** 2 / (sb**2 / (n[0] - 1) + so**2 / (n[1] - 1))
    )
    made = replace(made, log_diff=d, log_se=se, df=df, run_var=vb + vo)
    return replace(made, no_test=_too_few(n)) if min(n) < MIN_RUNS else made


def decide_studies(
    baseline: Sequence[Sequence[float]],
    other: Sequence[Sequence[float]],
    *,
    higher_is_better: bool = True,
    margin_pct: float = MARGIN_PCT,
    left_out: int = 0,
) -> Comparison:
    """Studies against studies, each side a list of its studies' runs.

    Runs within a study share its machine's state, so studies differ among
    themselves more than one study's runs do. Each side's figure is the mean of
    its studies' mean logs, and its error carries the variance between studies
    (tau^2: the spread of the studies' means about their side's, less what
    their runs explain; floored at 0), on the studies' degrees of freedom.
    With one study a side there is no way to tell it: ``decide`` over the runs
    themselves."""
    sides = [[g for g in side if g] for side in (baseline, other)]
    flat = [[v for g in side for v in g] for side in sides]
    plain = decide(flat[0], flat[1], higher_is_better=higher_is_better, margin_pct=margin_pct,
                   left_out=left_out)  # fmt: skip
    studies = len(sides[0]) + len(sides[1])
    if plain.no_test or plain.log_se is None or studies < 3:
        return plain
    logs = [[_log_stats(g) for g in side] for side in sides]
    centre = [statistics.fmean(m for m, _ in side) for side in logs]
    spread = sum((m - c) ** 2 for side, c in zip(logs, centre, strict=True) for m, _ in side)
    runs = [(v, len(g)) for side, gs in zip(logs, sides, strict=True)
            for (_, v), g in zip(side, gs, strict=True) if len(g) > 1]  # fmt: skip
    within = statistics.fmean(v / n for v, n in runs) if runs else 0.0
    # Even where tau^2 comes out 0, the studies' own degrees of freedom stay: an
    # estimate of 0 from three studies is luck as often as it is quiet.
    tau2 = max(spread / (studies - 2) - within, 0.0)
    var = [
        statistics.fmean(tau2 + v / len(g) for (_, v), g in zip(side, gs, strict=True)) / len(gs)
        for side, gs in zip(logs, sides, strict=True)
    ]
    return replace(plain, log_diff=centre[1] - centre[0], log_se=math.sqrt(sum(var)),
                   df=float(studies - 2), between=True)  # fmt: skip


def adjust(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The same comparisons decided as one family: Benjamini-Hochberg adjusted
    p-values (``q_value``) over every one with an interval, and every interval at
    1 - max(R, 1) * alpha / m (R called of m): an interval then excludes no
    change exactly when BH calls it, so a mark and its interval never disagree,
    and the expected share of false calls among those marked stays at ``ALPHA``."""
    tested = [i for i, c in enumerate(comparisons) if c.log_interval() is not None]
    out = list(comparisons)
    if len(tested) < 2:
        return out
    ps = []
    for i in tested:
        p = comparisons[i].p_value
        assert p is not None  # an interval comes with its test
        ps.append(p)
    qs = _bh(ps)
    called = sum(float(q) < ALPHA for q in qs)
    alpha = max(called, 1) * ALPHA / len(tested)
    for i, q in zip(tested, qs, strict=True):
        out[i] = replace(out[i], q_value=float(q), alpha=alpha)
    return out


def _bh(ps: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values, as ``scipy.stats.false_discovery_control``
    (method "bh") computes them, step by step and so to the bit: each p times
    m / its rank, the running minimum from the largest down, clipped to [0, 1]
    (here, not there, so that ``scipy.stats`` is not imported: ``_scipy``)."""
    m = len(ps)
    order = sorted(range(m), key=ps.__getitem__)
    adjusted = [0.0] * m
    running = math.inf
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, ps[i] * (m / rank))
        adjusted[i] = min(max(running, 0.0), 1.0)
    return adjusted


def family_note(comparisons: Sequence[Comparison], study_total: int | None = None) -> str | None:
    """What the marks of one table rest on: the procedure, how many comparisons
    were decided together, how many came out each way. ``study_total``: the
    study's comparisons the correction ran over, when more than this table's.
    None without an interval."""
    decided = [c for c in comparisons if c.log_interval() is not None]
    if not decided:
        return None
    m = len(decided)
    counts = {v: sum(c.verdict == v for c in decided) for v in (BETTER, WORSE, SAME, NOT_YET)}
    over = (
        f" over all {study_total} comparisons of the study"
        if study_total is not None and study_total > m
        else ""
    )
    level = min(1.0 - c.alpha for c in decided)
    margins = sorted({c.margin_pct for c in decided})
    margin = "/".join(f"{x:g}" for x in margins)
    text = (
        f"Each difference is decided from its runs by one procedure: Welch's t on the "
        f"logarithms (a ratio of geometric means, its interval and its verdict one "
        f"computation), decided together{over} (Benjamini-Hochberg; intervals at "
        f"{100 * level:.4g}% or more, so an interval excludes no change exactly when it is "
        f"called). ▲ better / ▼ worse: the interval excludes no change "
        f"({counts[BETTER]} better, {counts[WORSE]} worse); = the same: it lies within "
        f"±{margin}% ({counts[SAME]}); ? not yet: neither ({counts[NOT_YET]}), with the runs a "
        f"side that would decide it at this noise."
    )
    few = sum(c.too_few for c in comparisons)
    if few:
        text += f" {few} rest on fewer than {MIN_RUNS} runs a side: not yet, whatever they show."
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
