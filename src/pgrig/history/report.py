"""A series as a report: per point, its median with its interval in each study,
as a table and a plot, and each change said with what differed around it.

The same sentences as ``pgrig history`` prints (``found`` and ``sentence`` are
shared), so the console and the page never say two things of one series.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgrig.document import fmt
from pgrig.document.model import NOISY, NORMAL, Figure, ReportView, Row, Section, Series, Table
from pgrig.history import cause
from pgrig.history.changes import Change, changes
from pgrig.history.series import Observation, Point
from pgrig.history.series import Series as StudySeries
from pgrig.stats import Interval


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


def sentence(f: Found) -> str:
    """'read-write at 2 clients on local fell 21% (interval -30% to -12%,
    p=0.0004) from study quick-... on'."""
    ch = f.change
    verb = "rose" if ch.diff_pct > 0 else "fell"
    return (
        f"{f.point.short} {verb} {abs(ch.diff_pct):.0f}% (interval {ch.low_pct:+.0f}% to "
        f"{ch.high_pct:+.0f}%, p={ch.p_value:.3g}) from study {f.after.study} on"
    )


NOTHING_DIFFERS = "nothing stored differs between the two studies"


def view(s: StudySeries) -> ReportView:
    """The series' report: the changes first, then the studies, then each point."""
    changed = found(s)
    index = {study.id: i for i, study in enumerate(s.studies, start=1)}
    sections = [_changes_section(changed), _studies_section(s)]
    sections += [
        _point_section(point, seen, index, [f for f in changed if f.point == point], n)
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
    "from 6; a change is Apache Otava's change point "
    "confirmed by Welch's test over the studies' medians on either side "
    "(docs/history.md)"
)


def _changes_section(changed: list[Found]) -> Section:
    if not changed:
        return Section("Changes", "changes", ("No change outside the noise.",))
    paragraphs = []
    for f in changed:
        why = "; ".join(f.causes) or NOTHING_DIFFERS
        paragraphs.append(f"{_capital(sentence(f))}. What differs: {why}.")
    return Section("Changes", "changes", tuple(paragraphs))


def _studies_section(s: StudySeries) -> Section:
    rows = tuple(
        Row((str(i), study.id, study.started_at, study.status))
        for i, study in enumerate(s.studies, start=1)
    )
    table = Table(("#", "study", "started", "status"), rows, numeric=(True, False, False, False))
    return Section("Studies", "studies", blocks=(table,))


def _point_section(
    point: Point, seen: tuple[Observation, ...], index: dict[str, int], changed: list[Found], n: int
) -> Section:
    starts = {f.after.study for f in changed}
    rows = []
    for obs in seen:
        note = [f"{obs.disturbed} of {len(obs.values)} disturbed"] if obs.disturbed else []
        if obs.study in starts:
            note.insert(0, "change from here")
        cells = (str(index[obs.study]), obs.study, fmt.rate(obs.median), obs.interval_text(),
                 str(len(obs.values)), "; ".join(note))  # fmt: skip
        rows.append(Row(cells, NOISY if obs.disturbed else NORMAL))
    table = Table(
        ("#", "study", "median tps", "interval of the median", "repeats", "note"),
        tuple(rows),
        numeric=(True, False, True, True, True, False),
    )
    figure = Figure(
        name=f"history-{n}-{fmt.slug(point.label)[:60]}",
        title=point.label,
        x_label="study (#, in the order they started)",
        y_label="tps (median of the repeats)",
        series=(_line(point, seen, index),),
        caption="Bars: the interval of each study's median (none with one repeat).",
    )
    paragraphs = tuple(f"{_capital(sentence(f))}." for f in changed)
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
