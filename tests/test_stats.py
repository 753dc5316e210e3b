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


@pytest.mark.parametrize(("a1", "a2", "t", "nu", "p"), WIKI_EXAMPLES)
def test_welch_matches_published_examples(
    a1: list[float], a2: list[float], t: float, nu: float, p: float
) -> None:
    # Wikipedia's t is A1 - A2; welch(baseline, other) tests other - baseline.
    c = stats.welch(a2, a1)
    assert c.t == pytest.approx(t, abs=0.005)
    assert c.df == pytest.approx(nu, abs=0.05)
    assert c.p_value == pytest.approx(p, abs=0.0005)
    t_hand, nu_hand = _welch_by_hand(a1, a2)
    assert c.t == pytest.approx(t_hand, rel=1e-9)
    assert c.df == pytest.approx(nu_hand, rel=1e-9)
    assert c.n == (20, 10)
    assert c.significant is (p < 0.05)


def test_welch_describe_significant_and_not() -> None:
    same = stats.welch([100.0, 102.0, 98.0], [101.0, 99.0, 103.0])
    assert not same.significant
    assert "within noise" in same.describe()
    # beside "within noise": what these repeats could have told (issue 30.4)
    assert same.describe() == (
        "≈ +1.0% (95% CI -2.9 to +5.1%), within noise "
        "(p=0.57; could detect ≥ 6%; 5% needs 4 runs a side)"
    )
    assert same.verdict == stats.NOISE
    faster = stats.welch([100.0, 101.0, 99.0], [150.0, 151.0, 149.0])
    assert faster.significant and faster.called and faster.verdict == stats.BETTER
    assert faster.describe() == "▲ +50.0% (95% CI +47.5 to +52.5%; p<0.001)"
    # a latency or a duration: the ratio of the medians, "N.Nx slower"
    slower = stats.welch([100.0, 101.0, 99.0], [150.0, 151.0, 149.0], higher_is_better=False)
    assert slower.verdict == stats.WORSE
    assert re.fullmatch(r"▼ 1\.5x slower \(95% CI 1\.\d\d–1\.\d\dx; p<0\.001\)", slower.describe())


def test_welch_too_few_runs_says_so() -> None:
    c = stats.welch([100.0], [110.0, 112.0])
    assert c.p_value is None and c.t is None and not c.significant
    assert c.describe() == "+11.0% (n=2 vs 1: repeat ≥ 3 for a test)"


def test_welch_identical_samples_say_so_without_nan() -> None:
    c = stats.welch([500.0, 500.0, 500.0], [500.0, 500.0])
    assert c.p_value is None and not c.significant
    assert c.diff_pct == 0.0
    text = c.describe()
    assert "same value on both sides" in text and "nan" not in text.lower()


def test_welch_constant_but_different_sides_say_no_test() -> None:
    c = stats.welch([500.0, 500.0], [600.0, 600.0, 600.0])
    assert c.p_value is None
    assert c.describe() == (
        "+20.0% (no spread on either side, each side's runs are identical: no test)"
    )


def test_welch_one_constant_side_still_tests() -> None:
    # Only one side without spread: the other side's variance carries the test
    # (and SciPy's precision warning about the constant side does not escape:
    # pytest turns warnings into errors here).
    c = stats.welch([100.0, 100.0, 100.0], [90.0, 110.0, 95.0, 105.0])
    assert c.p_value == pytest.approx(1.0)
    assert c.df == pytest.approx(3.0)


def test_welch_zero_baseline_has_no_percentage() -> None:
    c = stats.welch([0.0, 0.0], [1.0, 2.0])
    assert c.diff_pct is None
    assert "n/a (baseline median is 0)" in c.describe()
    assert "inf" not in c.describe()


def test_welch_needs_values() -> None:
    with pytest.raises(ValueError):
        stats.welch([], [1.0, 2.0])


def test_the_difference_shown_is_the_medians() -> None:
    # Seed 004's versions table printed medians and computed "vs" from means:
    # one outlier run moves the mean, not the median.
    c = stats.welch([590.0, 591.0, 1290.0], [750.0, 753.0, 756.0])
    assert c.diff_pct == pytest.approx((753.0 - 591.0) / 591.0 * 100)
    assert stats.headline([590.0, 591.0, 1290.0]) == 591.0


def test_means_pointing_the_other_way_are_never_called() -> None:
    # Medians +2%, means -30% (one collapsed run): no win is marked on the medians.
    c = stats.welch([100.0, 100.5, 101.0, 100.2], [102.0, 102.5, 2.0, 102.2])
    assert c.disagree and not c.called


def test_two_runs_a_side_are_tested_but_never_called() -> None:
    c = stats.welch([100.0, 100.1], [90.0, 90.1])
    assert c.significant and not c.called and c.verdict == stats.NOISE
    assert "not called: 2 vs 2 runs" in c.describe()
    assert "needs ≥ 3 runs a side" in c.describe()


def test_a_no_effect_control_pair_is_never_marked() -> None:
    """Seed 004's io_workers 4 vs 1 under io_method=sync: no effect, reported
    '-9.0% (p=0.011)' on 2 runs a side. Two samples of one distribution (seeded),
    2 runs each, 20 times over: never marked better or worse, although the raw
    test does call some of them at p < 0.05 (which is why the rule exists)."""
    rng = random.Random(11)
    pairs = [
        ([rng.gauss(800, 60) for _ in range(2)], [rng.gauss(800, 60) for _ in range(2)])
        for _ in range(20)
    ]
    tests = stats.adjust([stats.welch(a, b) for a, b in pairs])
    assert all(c.verdict in (stats.NOISE, stats.UNTESTED) for c in tests)
    assert not any(c.called for c in tests)
    raw = [stats.welch(a, b) for a, b in pairs]
    # The guard is what kept them quiet: with 2 runs a side some come out p < 0.05.
    assert sum(c.significant for c in raw) >= 1


def test_the_correction_unmarks_what_chance_calls_among_many() -> None:
    """36 comparisons, one real difference among 35 nulls of 3 runs each: the raw
    test calls a couple of nulls; Benjamini-Hochberg keeps the real one only."""
    rng = random.Random(11)
    nulls = [
        stats.welch(
            [rng.gauss(1000, 40) for _ in range(3)], [rng.gauss(1000, 40) for _ in range(3)]
        )
        for _ in range(35)
    ]
    real = stats.welch([1000.0, 1010.0, 990.0], [1500.0, 1505.0, 1495.0])
    raw_false = sum(c.significant and c.called for c in nulls)
    adjusted = stats.adjust([*nulls, real])
    assert adjusted[-1].called
    assert sum(c.called for c in adjusted[:-1]) <= raw_false
    assert raw_false >= 1, "seed 11 should provoke a chance call before the correction"
    assert sum(c.called for c in adjusted[:-1]) == 0
    note = stats.family_note(adjusted)
    assert note is not None and "36 difference(s) tested" in note
    assert "chance alone would call about 1.8" in note
    assert "1 marked" in note


def test_adjust_leaves_untested_comparisons_alone() -> None:
    untested = stats.welch([1.0], [2.0])
    tested = stats.welch([100.0, 101.0, 99.0], [150.0, 151.0, 149.0])
    out = stats.adjust([untested, tested])
    assert out[0].q_value is None and out[1].q_value == pytest.approx(out[1].p_value)
    assert stats.family_note([untested]) is None


def test_the_cli_imports_neither_scipy_nor_matplotlib() -> None:
    """`pgrig --version` took 1.3 s on a quiet machine (11-13 s on this busy one),
    most of it importing SciPy and matplotlib that only a test or a report needs."""
    code = (
        "import sys, pgrig.cli; "
        "heavy = [m for m in ('scipy', 'matplotlib') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_latency_ratio_is_printed_n_n_x() -> None:
    """Issue 30: a 7.3x slower fdatasync (293 -> 2,141 us) was shown as '-86.3%'."""
    assert stats.ratio_text(2141 / 293) == "7.3x slower"
    assert stats.ratio_text(293 / 2141) == "7.3x faster"
    assert stats.ratio_text(1.04) == "1.04x slower"
    assert stats.ratio_text(1.0) == "same (1.00x)"
    c = stats.welch([290.0, 293.0, 300.0], [2100.0, 2141.0, 2200.0], higher_is_better=False)
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
    noisy = stats.welch([10.0, 100.0, 1000.0], [20.0, 30.0, 2000.0])
    assert "too noisy for an interval" in noisy.describe()


def test_difference_interval_is_reproducible_and_holds_the_medians() -> None:
    base, other = [100.0, 104.0, 98.0], [90.0, 95.0, 93.0]
    first = stats.difference_interval(base, other)
    assert first == stats.difference_interval(base, other)  # seeded: same report twice
    assert first is not None and first.low < -7.0 < first.high
    assert stats.difference_interval([100.0, 101.0], [90.0, 91.0]) is None  # < 3 a side


def test_detectable_difference_and_runs_needed() -> None:
    """MDE = (t(0.975, df) + t(0.8, df)) * sqrt(s1^2/n + s2^2/n), df = 2n - 2: for
    sd 2 a side, 3 runs, median 100: (2.776 + 0.941) * 2 * sqrt(2/3) = 6.07%."""
    values = [98.0, 100.0, 102.0]
    assert stats.detectable_pct(values, values) == pytest.approx(6.07, abs=0.01)
    n = stats.runs_needed(values, values, 5.0)
    assert n == 4
    assert stats.detectable_pct(values, values) > 5.0  # 3 runs do not suffice...
    # ...and 4 do: the detectable difference at n runs a side falls below 5%
    assert stats._detectable(8.0, 4, 4, 100.0) <= 5.0 < stats._detectable(8.0, 3, 3, 100.0)
    assert stats.detectable_pct([5.0, 5.0], [5.0, 5.0]) is None  # no spread: nothing to say
