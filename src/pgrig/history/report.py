"""A series as a report: per point, its median with its interval in each study,
as a table and a plot, and each change said with what differed around it.

The same sentences as ``pgrig history`` prints (``found`` and ``sentence`` are
shared), so the console and the page never say two things of one series.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgrig.document import fmt
from pgrig.document.model import NOISY, NORMAL, Figure, ReportView, Row, Section, Series, Table
from pgrig.history import cause, gate
from pgrig.history.changes import Change, changes
from pgrig.history.series import Observation, Point
from pgrig.history.series import Series as StudySeries
from pgrig.stats import MARGIN_PCT, Interval


@dataclass(frozen=True)
class Found:
    """A confirmed change of one point, with what differed around it."""

    point: Point
    change: Change
    before: Observation  # the last study before the step
    after: Observation  # the first study after it
    causes: tuple[str, ...]


def found(s: StudySeries) -> list[Found]:
    """Every confirmed change of the series, point by point, with its causes."""
    by_id = {study.id: study for study in s.studies}
    out = []
    for point, seen in s.points.items():
        for ch in changes(seen):
            before, after = seen[ch.index - 1], seen[ch.index]
            why = cause.differences(by_id[before.study], by_id[after.study], point.target,
                                    (before, after))  # fmt: skip
            out.append(Found(point, ch, before, after, tuple(why)))
    return out


def steps(s: StudySeries, margin_pct: float = MARGIN_PCT) -> dict[str, gate.Step]:
    """Each study against the accepted studies before it (``gate.walk``): the
    verdicts ``pgrig check --baseline SERIES`` gives, study by study."""
    return {step.study: step for step in gate.walk(s, margin_pct)}


def step_words(step: gate.Step, point: Point) -> str:
    """'regression: ▼ -82.1% (95% CI ...) vs 4 accepted studies', '' for none."""
    v = next((v for v in step.verdicts if v.point == point), None)
    if v is None:
        return ""
    n = len(step.baseline)
    return f"{v.outcome}: {v.text}, vs {n} accepted stud{'y' if n == 1 else 'ies'}"


def smallest_step(walked: dict[str, gate.Step], point: Point) -> str:
    """'the smallest step its last verdict could show: 12%' (what a pass means),
    or why there is none yet."""
    for step in reversed(list(walked.values())):
        v = next((v for v in step.verdicts if v.point == point), None)
        if v is None:
            continue
        least = v.comparison.detectable
        if least is None:
            return "the smallest step its last verdict could show: none (no spread to tell by)"
        return f"the smallest step its last verdict could show with 80% power: {least:.0f}%"
    return f"no verdict yet: the first {gate.FIRST} studies make the series' first baseline"


def consecutive(s: StudySeries) -> list[tuple[str, str, list[str]]]:
    """What differs between each study and the one before it (every target's
    facts), whether or not anything changed there: (before, after, what)."""
    targets = sorted({p.target for p in s.points}) or [""]
    out = []
    for before, after in zip(s.studies, s.studies[1:], strict=False):
        what: list[str] = []
        for target in targets:
            seen = [o for p, obs in s.points.items() if p.target == target for o in obs]
            pair = (
                next((o for o in seen if o.study == before.id), Observation(before.id, ())),
                next((o for o in seen if o.study == after.id), Observation(after.id, ())),
            )
            for line in cause.differences(before, after, target, pair):
                if line not in what:
                    what.append(line)
        if what:
            out.append((before.id, after.id, what))
    return out


def sentence(f: Found) -> str:
    """'read-write at 2 clients on local fell 21% (interval -30% to -12%,
    p=0.0004) from study quick-... on'."""
    ch = f.change
    verb = "rose" if ch.diff_pct > 0 else "fell"
    return (
        f"{f.point.short} {verb} {abs(ch.diff_pct):.0f}% ({ch.comparison.interval_text()}, "
        f"p={ch.p_value:.3g}) from study {f.after.study} on"
    )


NOTHING_DIFFERS = "nothing stored differs between the two studies"


def view(s: StudySeries) -> ReportView:
    """The series' report: the changes first, then the studies, then each point."""
    changed = found(s)
    walked = steps(s)
    index = {study.id: i for i, study in enumerate(s.studies, start=1)}
    sections = [_changes_section(changed, walked), _studies_section(s), _differs_section(s)]
    sections += [
        _point_section(point, seen, index, [f for f in changed if f.point == point], n, walked)
        for n, (point, seen) in enumerate(s.points.items(), start=1)
    ]
    first, last = s.studies[0], s.studies[-1]
    return ReportView(
        title=f"pgrig history: series {s.name}",
        meta=(
            ("Series", s.name),
            ("Studies", f"{len(s.studies)}, from {first.id} to {last.id}"),
            ("Started", f"{first.started_at} to {last.started_at}"),
            ("Points", str(len(s.points))),
            ("Statistic", _STATISTIC),
        ),
        sections=tuple(sections),
    )


_STATISTIC = (
    "each study's median tps over its finished repeats, with the median's own "
    "(order-statistic) interval: [min, max] holds it with 75% at 3 repeats, 95% "
    "from 6; each study is decided against the last accepted studies before it, and "
    "a change is a change point (E-Divisive with a t-test) decided over the runs on either side, "
    "by the one procedure of every comparison (docs/history.md)"
)


def rejected(walked: dict[str, gate.Step]) -> list[str]:
    """'nightly-05: regression at 1 of 1 points', for each study not accepted."""
    out = []
    for step in walked.values():
        if step.accepted:
            continue
        bad = sum(v.failed for v in step.verdicts)
        open_ = sum(v.undecided for v in step.verdicts)
        words = [f"regression at {bad}" if bad else "", f"not yet at {open_}" if open_ else ""]
        out.append(
            f"{step.study}: {' and '.join(w for w in words if w)} of {len(step.verdicts)} "
            f"points against {', '.join(step.baseline)}"
        )
    return out


def _changes_section(changed: list[Found], walked: dict[str, gate.Step]) -> Section:
    paragraphs = []
    for f in changed:
        why = "; ".join(f.causes) or NOTHING_DIFFERS
        paragraphs.append(f"{_capital(sentence(f))}. What differs: {why}.")
    not_ok = rejected(walked)
    if not_ok:
        paragraphs.append(
            "Studies not accepted into the baseline (as `pgrig check --baseline SERIES` "
            "decides them): " + "; ".join(not_ok) + "."
        )
    if not paragraphs:
        paragraphs.append(
            f"Every study was accepted against the ones before it (better, or the same within "
            f"±{MARGIN_PCT:g}%), and no change point was found."
        )
    return Section("Changes", "changes", tuple(paragraphs))


def _differs_section(s: StudySeries) -> Section:
    lines = [f"{b} -> {a}: {'; '.join(what)}" for b, a, what in consecutive(s)]
    return Section(
        "What differs between consecutive studies",
        "differs",
        tuple(lines) or ("Nothing stored differs between consecutive studies.",),
    )


def _studies_section(s: StudySeries) -> Section:
    rows = tuple(
        Row((str(i), study.id, study.started_at, study.status))
        for i, study in enumerate(s.studies, start=1)
    )
    table = Table(("#", "study", "started", "status"), rows, numeric=(True, False, False, False))
    return Section("Studies", "studies", blocks=(table,))


def _point_section(
    point: Point,
    seen: tuple[Observation, ...],
    index: dict[str, int],
    changed: list[Found],
    n: int,
    walked: dict[str, gate.Step],
) -> Section:
    starts = {f.after.study for f in changed}
    rows = []
    for obs in seen:
        note = [f"{obs.disturbed} of {len(obs.values)} disturbed"] if obs.disturbed else []
        if obs.study in starts:
            note.insert(0, "change from here")
        step = walked.get(obs.study)
        said = step_words(step, point) if step is not None else ""
        if step is not None and not step.verdicts:
            said = f"one of the first {gate.FIRST}: the series' first baseline"
        cells = (str(index[obs.study]), obs.study, fmt.rate(obs.median), obs.interval_text(),
                 str(len(obs.values)), said or "–", "; ".join(note))  # fmt: skip
        rows.append(Row(cells, NOISY if obs.disturbed else NORMAL))
    table = Table(
        ("#", "study", "median tps", "interval of the median", "repeats",
         "vs the accepted studies before", "note"),
        tuple(rows),
        numeric=(True, False, True, True, True, False, False),
    )  # fmt: skip
    figure = Figure(
        name=f"history-{n}-{fmt.slug(point.label)[:60]}",
        title=point.label,
        x_label="study (#, in the order they started)",
        y_label="tps (median of the repeats)",
        series=(_line(point, seen, index),),
        caption="Bars: the interval of each study's median (none with one repeat).",
    )
    paragraphs = (
        *(f"{_capital(sentence(f))}." for f in changed),
        f"{_capital(smallest_step(walked, point))}.",
    )
    return Section(point.label, f"point-{n}", paragraphs, (table, figure))


def _line(point: Point, seen: tuple[Observation, ...], index: dict[str, int]) -> Series:
    bounds = [o.interval or Interval(o.median, o.median, 1.0) for o in seen]
    return Series(
        label=point.short,
        x=tuple(float(index[o.study]) for o in seen),
        y=tuple(o.median for o in seen),
        y_low=tuple(b.low for b in bounds),
        y_high=tuple(b.high for b in bounds),
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
