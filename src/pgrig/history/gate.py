"""The gate a CI job acts on: each point of a study against its baseline, a
regression being significantly slower (Welch, p < 0.05, >= 3 repeats a side)
by more than the threshold. Each verdict says the smallest difference its
repeats could have called, so a pass is not read as more than it is; JUnit XML
(one test case per point) and a Markdown summary for the CI job's page."""

from __future__ import annotations

import math
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgrig.errors import PgrigError
from pgrig.history.series import Observation, Point
from pgrig.stats import BETTER, MIN_RUNS, WORSE, t_quantile_975, welch

REGRESSION, IMPROVEMENT, NOISE, UNTESTED, PASSED = (
    "regression",
    "improvement",
    "within noise",
    "untested",
    "passed",
)


@dataclass(frozen=True)
class Verdict:
    point: Point
    outcome: str  # one of the five above
    diff_pct: float | None  # median vs the baseline's, in %
    detectable_pct: float  # the smallest difference these repeats could call (inf: none)
    text: str  # the comparison as the reports say it

    @property
    def failed(self) -> bool:
        return self.outcome == REGRESSION


def detectable(baseline: Sequence[float], other: Sequence[float]) -> float:
    """The smallest difference of the means, in % of the baseline's, that
    Welch's test could call significant with these repeats and this spread."""
    if min(len(baseline), len(other)) < 2:
        return math.inf
    vb = statistics.variance(baseline) / len(baseline)
    vo = statistics.variance(other) / len(other)
    if vb + vo == 0:
        return 0.0
    df = (vb + vo) ** 2 / (vb**2 / (len(baseline) - 1) + vo**2 / (len(other) - 1))
    return t_quantile_975(df) * math.sqrt(vb + vo) / statistics.fmean(baseline) * 100


def judge(
    point: Point,
    baseline: Observation,
    study: Observation,
    max_regression: float,
    medians: Sequence[float] = (),
) -> Verdict:
    """One point: a regression only when called slower by more than ``max_regression`` %.

    ``medians``: the point's median in each other study of the baseline series;
    from ``MIN_RUNS`` of them on, a regression must also be called against them,
    so that how much studies differ among themselves (another load on the
    machine, a new cluster) counts, not only how much one study's repeats do."""
    test = welch(baseline.values, study.values)
    least = detectable(baseline.values, study.values)
    across = welch(medians, study.values) if len(medians) >= MIN_RUNS else None
    if across is not None:
        least = max(least, detectable(medians, study.values))
    slower = test.verdict == WORSE and (test.diff_pct or 0.0) < -max_regression
    if slower and across is not None and across.verdict != WORSE:
        outcome = NOISE  # slower than the baseline study, not than the series
    elif slower:
        outcome = REGRESSION
    elif test.verdict == WORSE:
        outcome = PASSED  # slower, but by less than the threshold
    elif test.verdict == BETTER:
        outcome = IMPROVEMENT
    elif test.p_value is None:
        outcome = UNTESTED
    else:
        outcome = NOISE
    return Verdict(point, outcome, test.diff_pct, least, test.describe())


def judge_all(
    baseline: Mapping[Point, Observation],
    study: Mapping[Point, Observation],
    max_regression: float,
    medians: Mapping[Point, Sequence[float]] | None = None,
) -> list[Verdict]:
    across = medians or {}
    return [
        judge(p, baseline[p], study[p], max_regression, across.get(p, ()))
        for p in sorted(study)
        if p in baseline
    ]


def _least(v: Verdict) -> str:
    if math.isinf(v.detectable_pct):
        return "no test possible: repeat each point at least 3 times"
    return f"the smallest difference these repeats could call: {v.detectable_pct:.1f}%"


def junit(verdicts: Sequence[Verdict], name: str) -> str:
    """JUnit XML: one test case per point; a regression is a failure, a point
    that could not be tested is skipped."""
    failures = sum(v.failed for v in verdicts)
    skipped = sum(v.outcome == UNTESTED for v in verdicts)
    root = ET.Element(
        "testsuites",
        name=name,
        tests=str(len(verdicts)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    suite = ET.SubElement(
        root,
        "testsuite",
        name=name,
        tests=str(len(verdicts)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=name, name=v.point.label)
        if v.failed:
            ET.SubElement(case, "failure", message=f"{v.outcome}: {v.text}").text = _least(v)
        elif v.outcome == UNTESTED:
            ET.SubElement(case, "skipped", message=v.text)
        else:
            ET.SubElement(case, "system-out").text = f"{v.outcome}: {v.text}; {_least(v)}"
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )


def summary(verdicts: Sequence[Verdict], study: str, baseline: str, max_regression: float) -> str:
    """Markdown for a CI job's step summary ($GITHUB_STEP_SUMMARY)."""
    failed = [v for v in verdicts if v.failed]
    head = (
        f"❌ {len(failed)} of {len(verdicts)} points regressed by more than {max_regression:g}%"
        if failed
        else f"✅ no point regressed by more than {max_regression:g}%"
    )
    lines = [
        f"## pgrig check: {study} vs {baseline}",
        "",
        head,
        "",
        "| point | verdict | vs baseline | smallest callable difference |",
        "|---|---|---|---|",
    ]
    for v in verdicts:
        least = "–" if math.isinf(v.detectable_pct) else f"{v.detectable_pct:.1f}%"
        lines.append(f"| {v.point.label} | {v.outcome} | {v.text} | {least} |")
    return "\n".join(lines) + "\n"


class Regressed(PgrigError):
    """``pgrig check`` found a regression: exit code 1, a check failed."""

    exit_code = 1
