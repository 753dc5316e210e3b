"""pgrig.stats against published values, not against SciPy itself.

t quantiles: any Student t table (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2),
three decimals. Welch's test: the worked examples of Wikipedia's "Welch's
t-test" article (t, nu and p as printed there, rounded), and t and nu again from
the textbook formulas evaluated here with the statistics module.
"""

from __future__ import annotations

import math
import random
import re
import statistics
import subprocess
import sys

import pytest

from pgrig import stats


@pytest.mark.parametrize(
    ("df", "published"),
    [
        (1, 12.706),
        (2, 4.303),
        (5, 2.571),
        (10, 2.228),
        (20, 2.086),
        (30, 2.042),
        (100, 1.984),
        (math.inf, 1.960),
    ],
)
def test_t_quantile_975_matches_t_table(df: float, published: float) -> None:
    assert stats.t_quantile_975(df) == pytest.approx(published, abs=5e-4)


@pytest.mark.parametrize(
    ("p", "df", "published"),
    [(0.95, 10, 1.812), (0.995, 5, 4.032), (0.99, 30, 2.457), (0.05, 10, -1.812)],
)
def test_t_quantile_other_levels(p: float, df: float, published: float) -> None:
    assert stats.t_quantile(p, df) == pytest.approx(published, abs=5e-4)


def test_two_sided_p_is_the_inverse_of_the_quantile() -> None:
    # From the table: |T| >= 2.228 with 10 df has probability 5%.
    assert stats.t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=1e-4)
    assert stats.t_two_sided_p(-12.706, 1) == pytest.approx(0.05, abs=1e-4)
    assert stats.t_two_sided_p(0.0, 7) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [0, -1, math.nan])
def test_t_functions_refuse_a_meaningless_df(bad: float) -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        stats.t_quantile_975(bad)
    with pytest.raises(ValueError, match="degrees of freedom"):
        stats.t_two_sided_p(1.0, bad)


def test_betainc_known_values() -> None:
    # I_x(1, 1) = x; I_x(2, 3) = 6x^2 - 8x^3 + 3x^4 (closed form); the clamping ends.
    assert stats.betainc(1, 1, 0.3) == pytest.approx(0.3)
    assert stats.betainc(2, 3, 0.4) == pytest.approx(6 * 0.16 - 8 * 0.064 + 3 * 0.0256)
    assert stats.betainc(2, 3, -0.1) == 0.0
    assert stats.betainc(2, 3, 1.5) == 1.0


def test_ci95_half_width_known_sample() -> None:
    # mean 5, s = sqrt(2.5) = 1.5811, n = 5: 2.776 * 1.5811 / sqrt(5) = 1.963
    assert stats.ci95_half_width([3.0, 4.0, 5.0, 6.0, 7.0]) == pytest.approx(1.963, abs=1e-3)
    # n = 2: 12.706 * s / sqrt(2) with s = sqrt(2) -> 12.706
    assert stats.ci95_half_width([10.0, 12.0]) == pytest.approx(12.706, abs=1e-3)


def test_ci95_half_width_edges() -> None:
    assert stats.ci95_half_width([]) == math.inf
    assert stats.ci95_half_width([42.0]) == math.inf
    assert stats.ci95_half_width([1234.5, 1234.5, 1234.5]) == 0.0


# Wikipedia, "Welch's t-test", Examples 2 and 3: (A1, A2, t, nu, p) as printed.
WIKI_EXAMPLES = [
    (
        [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8],
        [21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8]
        + [20.7, 21.7, 21.5, 22.5, 23.6, 21.5, 22.5, 23.5, 21.5, 21.8],
        -1.57,
        9.9,
        0.149,
    ),
    (
        [19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0],
        [28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7]
        + [23.2, 17.5, 20.6, 18.0, 23.9, 21.6, 24.3, 20.4, 24.0, 13.2],
        -2.22,
        24.5,
        0.036,
    ),
]


def _welch_by_hand(a: list[float], b: list[float]) -> tuple[float, float]:
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)
    nu = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return t, nu


def _logs(values: list[float]) -> list[float]:
    return [math.log(v) for v in values]


@pytest.mark.parametrize(("a1", "a2", "t", "nu", "p"), WIKI_EXAMPLES)
def test_the_procedure_is_welchs_test_on_the_logs(
    a1: list[float], a2: list[float], t: float, nu: float, p: float
) -> None:
    """The published examples' t and nu from the textbook formulas, applied to the
    logarithms: decide(baseline, other) tests log(other) - log(baseline)."""
    t_raw, nu_raw = _welch_by_hand(a1, a2)
    assert t_raw == pytest.approx(t, abs=0.005) and nu_raw == pytest.approx(nu, abs=0.05)
    c = stats.decide(a2, a1)
    t_log, nu_log = _welch_by_hand(_logs(a1), _logs(a2))
    assert c.log_diff is not None and c.log_se is not None
    assert c.log_diff / c.log_se == pytest.approx(t_log, rel=1e-9)
    assert c.df == pytest.approx(nu_log, rel=1e-9)
    assert c.p_value == pytest.approx(stats.t_two_sided_p(t_log, nu_log))
    assert c.n == (20, 10)


def test_the_four_verdicts_are_said_the_same_way() -> None:
    same = stats.decide([1000.0, 1002.0, 998.0, 1001.0], [1001.0, 999.0, 1003.0, 1000.0])
    assert same.verdict == stats.SAME
    assert re.fullmatch(r"= \+0\.\d%, the same within ±5% \(95% CI -\d\.\d to \+\d\.\d%\)",
                        same.describe()), same.describe()  # fmt: skip
    faster = stats.decide([100.0, 101.0, 99.0], [150.0, 151.0, 149.0])
    assert faster.verdict == stats.BETTER and faster.called
    assert re.fullmatch(r"▲ \+50\.0% \(95% CI \+4\d\.\d to \+5\d\.\d%; p<0\.001\)",
                        faster.describe()), faster.describe()  # fmt: skip
    slower = stats.decide([100.0, 101.0, 99.0], [150.0, 151.0, 149.0], higher_is_better=False)
    assert slower.verdict == stats.WORSE
    assert re.fullmatch(r"▼ 1\.5x slower \(95% CI 1\.\d\d–1\.\d\dx; p<0\.001\)",
                        slower.describe()), slower.describe()  # fmt: skip
    open_ = stats.decide([100.0, 110.0, 90.0], [104.0, 114.0, 94.0])
    assert open_.verdict == stats.NOT_YET and not open_.called
    said = open_.describe()
    assert said.startswith("? +4.") and ", not yet (95% CI" in said
    assert re.search(r"about \d+ runs a side would decide it at this noise", said), said
    for c in (same, faster, slower, open_):
        assert "no difference" not in c.describe() and "within noise" not in c.describe()


def test_too_few_runs_are_not_yet_without_an_interval() -> None:
    c = stats.decide([100.0, 100.1], [90.0, 90.1])
    assert c.verdict == stats.NOT_YET and c.interval is None and not c.called
    assert "2 vs 2 runs: a verdict needs ≥ 3 a side" in c.describe()
    one = stats.decide([100.0], [110.0, 112.0])
    assert one.verdict == stats.NOT_YET and one.p_value is None
    assert one.describe().startswith("? +11.0%, not yet (")


def test_identical_and_constant_sides_decide_without_nan() -> None:
    same = stats.decide([500.0, 500.0, 500.0], [500.0, 500.0, 500.0])
    assert same.verdict == stats.SAME and "nan" not in same.describe()
    apart = stats.decide([500.0, 500.0, 500.0], [600.0, 600.0, 600.0])
    assert apart.verdict == stats.BETTER and apart.p_value == 0.0
    one_constant = stats.decide([100.0, 100.0, 100.0], [90.0, 110.0, 95.0, 105.0])
    assert one_constant.p_value is not None and one_constant.p_value > 0.05


def test_a_value_at_or_below_zero_has_no_ratio() -> None:
    c = stats.decide([0.0, 0.0, 1.0], [1.0, 2.0, 3.0])
    assert c.verdict == stats.NOT_YET and "a value ≤ 0" in c.describe()
    assert "inf" not in c.describe()
    with pytest.raises(ValueError):
        stats.decide([], [1.0, 2.0])


def _pair(rng: random.Random, n: int, m: int, shift: float, spread: tuple[float, float],
          lognormal: bool) -> tuple[list[float], list[float]]:  # fmt: skip
    def side(k: int, level: float, sd: float) -> list[float]:
        if lognormal:
            return [level * math.exp(rng.gauss(0.0, sd)) for _ in range(k)]
        return [max(level * rng.gauss(1.0, sd), 1e-6) for _ in range(k)]

    return side(n, 1000.0, spread[0]), side(m, 1000.0 * (1 + shift), spread[1])


def seeded_pairs(count: int, seed: int) -> list[tuple[list[float], list[float], float]]:
    """Normal and log-normal sides, 2-20 runs each, equal and unequal spreads,
    no change in a third of them: (baseline, other, true change)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        n, m = rng.randint(2, 20), rng.randint(2, 20)
        shift = 0.0 if i % 3 == 0 else rng.choice((-0.3, -0.1, -0.03, 0.02, 0.08, 0.5))
        sd = rng.choice((0.01, 0.05, 0.15))
        spread = (sd, sd) if i % 2 else (sd, sd * rng.choice((0.3, 3.0)))
        a, b = _pair(rng, n, m, shift, spread, lognormal=bool(i % 4 < 2))
        out.append((a, b, shift))
    return out


def test_on_1000_seeded_pairs_the_interval_and_the_verdict_never_disagree() -> None:
    """Issue 39's property, on synthetic seeded data: better or worse exactly when
    the interval excludes no change; the same only inside the margin; and on
    sides without a change, a false call at most at the stated 5% (plus the
    binomial slack of 334 pairs: 3 standard errors)."""
    false_calls = nulls = 0
    for base, other, shift in seeded_pairs(1000, 39):
        c = stats.decide(base, other)
        bounds = c.log_interval()
        excludes = bounds is not None and (bounds[0] > 0 or bounds[1] < 0)
        assert c.called == excludes, (base, other)
        if c.verdict == stats.SAME:
            assert bounds is not None
            edge = math.log1p(c.margin_pct / 100)
            assert -edge <= bounds[0] and bounds[1] <= edge
        iv = c.interval
        if iv is not None and c.diff_pct is not None:
            assert iv.low <= c.diff_pct <= iv.high
        if shift == 0.0:
            nulls += 1
            false_calls += c.called
    rate = false_calls / nulls
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / nulls), (false_calls, nulls)


def test_a_family_decided_together_keeps_marks_and_intervals_in_step() -> None:
    """36 comparisons, one real difference among 35 nulls of 3 runs each (seeded):
    decided together, the real one is called, no null is, and every interval at
    the family's level excludes no change exactly where a call is made."""
    rng = random.Random(11)
    nulls = [
        stats.decide(
            [rng.gauss(1000, 40) for _ in range(3)], [rng.gauss(1000, 40) for _ in range(3)]
        )
        for _ in range(35)
    ]
    real = stats.decide([1000.0, 1010.0, 990.0], [1500.0, 1505.0, 1495.0])
    raw_false = sum(c.called for c in nulls)
    adjusted = stats.adjust([*nulls, real])
    assert adjusted[-1].called
    assert raw_false >= 1, "seed 11 should provoke a chance call before the correction"
    assert sum(c.called for c in adjusted[:-1]) == 0
    for c in adjusted:
        bounds = c.log_interval()
        assert bounds is not None
        assert c.called == (bounds[0] > 0 or bounds[1] < 0)
        assert c.q_value is not None and c.called == (c.q_value < stats.ALPHA)
    note = stats.family_note(adjusted)
    assert note is not None and "1 better" in note and "one procedure" in note


def test_adjust_leaves_comparisons_without_an_interval_alone() -> None:
    untested = stats.decide([1.0], [2.0])
    tested = stats.decide([100.0, 101.0, 99.0], [150.0, 151.0, 149.0])
    out = stats.adjust([untested, tested])
    assert out == [untested, tested]  # one decided: nothing to correct
    assert stats.family_note([untested]) is None


def test_studies_that_differ_among_themselves_widen_the_interval() -> None:
    """Synthetic: four baseline studies at 900-1100 with tight runs: one study
    10% below their mean is not yet, where its runs against one study's would
    call it; a 3x drop is still worse."""
    studies = [[v - 2, v, v + 2] for v in (1000.0, 1100.0, 900.0, 1050.0)]
    lower = [v * 0.9 for v in (1012.0, 1014.0, 1016.0)]
    across = stats.decide_studies(studies, [lower])
    assert across.between and across.verdict == stats.NOT_YET
    assert stats.decide(studies[0], lower).verdict == stats.WORSE
    far = stats.decide_studies(studies, [[330.0, 335.0, 340.0]])
    assert far.verdict == stats.WORSE


def test_the_cli_imports_neither_scipy_nor_numpy() -> None:
    """`pgrig --version` took 1.3 s on a quiet machine (11-13 s on this busy one),
    most of it importing SciPy and matplotlib that only a test or a report needs
    (matplotlib has since left pgrig: the report draws its own SVG)."""
    code = (
        "import sys, pgrig.cli; "
        "heavy = [m for m in ('scipy', 'numpy') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_latency_ratio_is_printed_n_n_x() -> None:
    """Issue 30: a 7.3x slower fdatasync (293 -> 2,141 us) was shown as '-86.3%'."""
    assert stats.ratio_text(2141 / 293) == "7.3x slower"
    assert stats.ratio_text(293 / 2141) == "7.3x faster"
    assert stats.ratio_text(1.04) == "1.04x slower"
    assert stats.ratio_text(1.0) == "same (1.00x)"
    c = stats.decide([290.0, 293.0, 300.0], [2100.0, 2141.0, 2200.0], higher_is_better=False)
    assert c.describe().startswith("▼ 7.3x slower")


@pytest.mark.parametrize(
    ("n", "published"),
    # 1 - 2 * 0.5^n for [min, max]; n = 6: 1 - 2/64 (any nonparametric table)
    [(2, 0.5), (3, 0.75), (4, 0.875), (5, 0.9375), (6, 0.96875)],
)
def test_order_statistic_coverage(n: int, published: float) -> None:
    assert stats.order_coverage(n) == pytest.approx(published)


def test_median_interval_is_distribution_free() -> None:
    assert stats.median_interval([5.0]) is None
    three = stats.median_interval([3.0, 1.0, 2.0])
    assert three == stats.Interval(1.0, 3.0, 0.75)
    # 20 runs: [x(6), x(15)] covers 95.9% (x(7)..x(14) only 88.5%)
    twenty = stats.median_interval([float(v) for v in range(1, 21)])
    assert twenty is not None and (twenty.low, twenty.high) == (6.0, 15.0)
    assert twenty.confidence == pytest.approx(0.9586, abs=1e-4)


def test_no_interval_wider_than_100_pct_is_printed() -> None:
    """Issue 30: '±171.4%' beside a median (an interval of the mean implying
    negative ops/s). Every interval the report prints goes through this rule."""
    from pgrig.document import fmt

    wide = fmt.spread([1088.0, 6847.0, 30000.0])
    assert wide.describe() == "n=3, too noisy for an interval"
    ok = fmt.spread([1088.0, 6847.0, 9000.0])
    assert ok.describe() == "n=3, 75% CI 1,088–9,000"
    assert stats.Interval(0.0, 10.0, 0.95).too_noisy(4.9)
    assert not stats.Interval(0.0, 10.0, 0.95).too_noisy(5.0)


def test_detectable_difference_and_runs_needed() -> None:
    """On the logs: MDE = exp((t(0.975, df) + t(0.8, df)) * sqrt(2 s^2 / n)) - 1,
    df = 2n - 2; for [98, 100, 102] (s of the logs 0.0200) at 3 runs:
    exp((2.776 + 0.941) * 0.0200 * sqrt(2/3)) - 1 = 6.26%."""
    values = [98.0, 100.0, 102.0]
    assert stats.detectable_pct(values, values) == pytest.approx(6.26, abs=0.01)
    n = stats.runs_needed(values, values, 5.0)
    assert n == 4
    assert stats.detectable_pct([5.0, 5.0], [5.0, 5.0]) is None  # no spread: nothing to say


def test_the_special_functions_give_scipy_stats_own_values() -> None:
    """pgrig.stats calls the special functions below scipy.stats' t and binomial
    distributions and computes Benjamini-Hochberg itself, so that a pgrig process
    imports scipy.special alone (0.35 s of CPU against 0.95: docs/bench.md,
    "Starting a pgrig process"); the numbers must stay scipy.stats' own."""
    from scipy import stats as sps

    dfs = [0.5, 1, 1.5, 2, 3, 4, 5, 9, 29, 99, 999, 1e6, math.inf]
    ps = [0.5, 0.8, 0.975, 0.995, 1 - 0.05 / 14, 1e-9, 0.025, 0.3]
    for df in dfs:
        for p in ps:
            assert stats.t_quantile(p, df) == float(sps.t.ppf(p, df)), (p, df)
        for t in [0.0, 0.1, 1.0, 1.96, 2.5, 7.0, 40.0, math.inf]:
            assert stats.t_two_sided_p(t, df) == float(2.0 * sps.t.sf(abs(t), df)), (t, df)
    for n in range(1, 80):
        for k in range(1, n + 2):
            want = float(1.0 - 2.0 * sps.binom.cdf(k - 1, n, 0.5))
            assert abs(stats.order_coverage(n, k) - want) <= 1e-13, (n, k)
    rng = random.Random(41)
    for m in range(2, 40):
        family = [rng.choice([rng.random(), rng.random() ** 6, 0.0, 1.0, 0.5]) for _ in range(m)]
        want = [float(q) for q in sps.false_discovery_control(family, method="bh")]
        assert stats._bh(family) == want, family
