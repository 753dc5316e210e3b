"""The gate a CI job acts on: each point of a study against its baseline, by the
one decision procedure of every comparison (``stats.decide_studies``), the
threshold being the margin:

- regression: worse (the interval excludes no change) by more than the
  threshold (the estimate past it): exit 1;
- passed: improved, the same within ±threshold, or slower by less than it;
- not yet: the interval holds no change and reaches past ±threshold, or too few
  runs: exit ``NotYet.exit_code``, a JUnit ``skipped`` with the runs that would
  decide it. A gate never passes what its runs could not see.

The points of one check are decided together (``stats.adjust``). A baseline is
a study, another target of the same study (paired: interleaved runs on one
machine, the way a shared runner still gives a verdict), or a series: its last
``ACCEPTED`` accepted studies before the one checked (a study is accepted when
none of its points regressed, or was left undecided leaning past the
threshold, against the studies accepted before it), so a regression never
becomes the baseline.
Across studies, runs the monitor saw disturbed are left out, with a count;
where too few quiet runs remain, every run is decided on, and the gate gives a
regression but never a pass on them (not yet instead).
JUnit XML (one test case per point) and a Markdown summary for the job's page.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgrig import stats
from pgrig.errors import PgrigError
from pgrig.history import ACCEPTED
from pgrig.history.series import Observation, Point, Series

REGRESSION, IMPROVEMENT, SAME, PASSED, NOT_YET = (
    "regression",
    "improvement",
    "the same",
    "passed",
    "not yet",
)
# A series' first studies make its first baseline as they are: against one or
# two studies, how much studies differ among themselves cannot be estimated, and
# a verdict on runs alone would call the machine's moods regressions.
FIRST = 3


@dataclass(frozen=True)
class Verdict:
    point: Point
    outcome: str  # one of the five above
    comparison: stats.Comparison
    max_regression: float  # the threshold, in %
    disturbed: int = 0  # runs the monitor saw disturbed (left out across studies)
    # False: too few undisturbed runs to leave the disturbed ones out; every run
    # decided, and no pass given on them
    vouched: bool = True

    @property
    def failed(self) -> bool:
        return self.outcome == REGRESSION

    @property
    def undecided(self) -> bool:
        return self.outcome == NOT_YET

    @property
    def diff_pct(self) -> float | None:
        return self.comparison.diff_pct

    @property
    def text(self) -> str:
        said = self.comparison.describe()
        if not self.vouched:
            said += (
                f"; {self.disturbed} run(s) disturbed by other work, too many to leave out: "
                "a busy machine can show a regression, not vouch for a pass"
            )
        elif self.disturbed:
            said += f"; {self.disturbed} run(s) disturbed by other work"
        return said


def outcome(cmp: stats.Comparison, max_regression: float) -> str:
    """A comparison (its margin the threshold) as the gate reads it."""
    verdict = cmp.verdict
    if verdict == stats.WORSE:
        return REGRESSION if (cmp.diff_pct or 0.0) < -max_regression else PASSED
    if verdict == stats.BETTER:
        return IMPROVEMENT
    return SAME if verdict == stats.SAME else NOT_YET


def judge_all(
    baseline: Mapping[Point, Sequence[Observation]],
    study: Mapping[Point, Observation],
    max_regression: float,
    *,
    paired: bool = False,
    pair: Mapping[Point, Point] | None = None,
) -> list[Verdict]:
    """Each point of ``study`` against its baseline's observations (one study's,
    or several studies' of a series), decided together. ``paired``: the
    baseline's runs were interleaved with the study's (another target of the same
    study), so a disturbance hit both sides and no run is left out.
    ``pair``: the baseline's point of each of the study's (default: the same)."""
    points = [p for p in sorted(study) if (pair or {}).get(p, p) in baseline]
    found, disturbed, vouched = [], [], []
    for p in points:
        base = baseline[(pair or {}).get(p, p)]
        mine = study[p]
        quiet = [list(o.quiet) for o in base], [list(mine.quiet)]
        enough = sum(map(len, quiet[0])) >= stats.MIN_RUNS and len(quiet[1][0]) >= stats.MIN_RUNS
        if paired or not enough:
            # Interleaved, a disturbance hit both sides; too few quiet runs, the
            # decision takes them all but cannot vouch for a pass (below).
            sides = [list(o.values) for o in base], [list(mine.values)]
            left = 0
        else:
            sides, left = quiet, mine.disturbed + sum(o.disturbed for o in base)
        found.append(stats.decide_studies(*sides, margin_pct=max_regression, left_out=left))
        disturbed.append(mine.disturbed + sum(o.disturbed for o in base))
        vouched.append(paired or enough)
    decided = stats.adjust(found)
    out = []
    for p, c, d, ok in zip(points, decided, disturbed, vouched, strict=True):
        said = outcome(c, max_regression)
        if not ok and said != REGRESSION:
            # A busy machine can show a regression, but cannot vouch for a pass:
            # the comparison stands as it is, the gate's answer is not yet.
            said = NOT_YET
        out.append(Verdict(p, said, c, max_regression, d, vouched=ok))
    return out


def passes(verdicts: Sequence[Verdict]) -> bool:
    """Accepted into a series' baseline: no point regressed, and none left
    undecided with its estimate past the threshold. An undecided point whose
    estimate is inside it is accepted, or a steady series would keep its first
    studies forever and never narrow; one that leans to a regression is not, so
    a regression too small for one study's verdict is not absorbed either."""
    return bool(verdicts) and not any(
        v.failed or (v.undecided and (v.diff_pct is None or v.diff_pct < -v.max_regression))
        for v in verdicts
    )


@dataclass(frozen=True)
class Step:
    """One study of a series as the gate saw it: against the accepted studies
    before it (none for the first), and whether it joined them."""

    study: str
    baseline: tuple[str, ...]  # the accepted studies it was judged against
    verdicts: tuple[Verdict, ...]
    accepted: bool


def of_study(s: Series, study: str) -> dict[Point, Observation]:
    return {p: o for p, seen in s.points.items() for o in seen if o.study == study}


def of_studies(s: Series, studies: Sequence[str]) -> dict[Point, list[Observation]]:
    out: dict[Point, list[Observation]] = {}
    for p, seen in s.points.items():
        mine = [o for o in seen if o.study in studies]
        if mine:
            out[p] = mine
    return out


def walk(s: Series, max_regression: float, keep: int = ACCEPTED) -> list[Step]:
    """Each study of the series against its last ``keep`` accepted studies: the
    baseline ``pgrig check --baseline SERIES`` uses and ``pgrig history`` shows.
    The first ``FIRST`` studies are accepted as they are, unjudged."""
    steps: list[Step] = []
    accepted: list[str] = []
    for study in s.studies:
        base = tuple(accepted[-keep:])
        first = len(accepted) < FIRST
        verdicts = (
            ()
            if first
            else tuple(judge_all(of_studies(s, base), of_study(s, study.id), max_regression))
        )
        ok = first or passes(verdicts)
        if ok:
            accepted.append(study.id)
        steps.append(Step(study.id, base, verdicts, ok))
    return steps


def _reason(v: Verdict) -> str:
    needed = v.comparison.needed_text()
    return f"{v.outcome}: {v.text}" + (f" ({needed})" if needed and v.undecided else "")


def junit(verdicts: Sequence[Verdict], name: str) -> str:
    """JUnit XML: one test case per point; a regression is a failure, a point
    not yet decided is skipped with what would decide it."""
    failures = sum(v.failed for v in verdicts)
    skipped = sum(v.undecided for v in verdicts)
    counts = {
        "tests": str(len(verdicts)),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
    }
    root = ET.Element("testsuites", {"name": name, **counts})
    suite = ET.SubElement(root, "testsuite", {"name": name, **counts})
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=name, name=v.point.label)
        if v.failed:
            ET.SubElement(case, "failure", message=_reason(v))
        elif v.undecided:
            ET.SubElement(case, "skipped", message=_reason(v))
        else:
            ET.SubElement(case, "system-out").text = _reason(v)
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )


def skipped_junit(name: str, text: str) -> str:
    """JUnit XML of one skipped case: a first study, with nothing to compare."""
    counts = {"tests": "1", "failures": "0", "errors": "0", "skipped": "1"}
    suite = ET.Element("testsuite", {"name": name, **counts})
    case = ET.SubElement(suite, "testcase", classname=name, name="baseline")
    ET.SubElement(case, "skipped", message=text)
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )


def headline(verdicts: Sequence[Verdict], max_regression: float) -> str:
    """The summary's first line: what the job's page shows first."""
    failed = sum(v.failed for v in verdicts)
    open_ = sum(v.undecided for v in verdicts)
    if failed:
        return f"❌ {failed} of {len(verdicts)} points regressed by more than {max_regression:g}%"
    if open_:
        return (
            f"⚠️ not yet: {open_} of {len(verdicts)} points undecided at ±{max_regression:g}% "
            "(more runs would decide them; nothing regressed that these runs could see)"
        )
    return f"✅ no point regressed by more than {max_regression:g}%"


def summary(
    verdicts: Sequence[Verdict], study: str, baseline: str, max_regression: float, note: str = ""
) -> str:
    """Markdown for a CI job's step summary ($GITHUB_STEP_SUMMARY)."""
    lines = [
        f"## pgrig check: {study} vs {baseline}",
        "",
        headline(verdicts, max_regression),
        "",
        *([note, ""] if note else []),
        "| point | verdict | vs baseline | would decide it |",
        "|---|---|---|---|",
    ]
    for v in verdicts:
        needed = v.comparison.needed_text() if v.undecided else ""
        lines.append(f"| {v.point.label} | {v.outcome} | {v.text} | {needed or '–'} |")
    disturbed = sum(v.disturbed for v in verdicts)
    if disturbed:
        lines += [
            "",
            f"⚠️ {disturbed} runs were disturbed by other work on the machine (pgrig's "
            "monitor); across studies they are left out of the verdict.",
        ]
    return "\n".join(lines) + "\n"


class Regressed(PgrigError):
    """``pgrig check`` found a regression: exit code 1, a check failed."""

    exit_code = 1


class NotYet(PgrigError):
    """``pgrig check`` could not decide a point either way: exit code 8, neither a
    pass nor a failure (docs/exit-codes.md)."""

    exit_code = 8
