"""``pgrig history NAME`` (a series of studies, its changes and their causes)
and ``pgrig check STUDY`` (the gate a CI job acts on)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import click

from pgrig.commands.options import results_options
from pgrig.errors import UsageError
from pgrig.history import cause, gate, series
from pgrig.history.changes import changes
from pgrig.store import Store, location


def _open(results: Path, store: str | None) -> Store:
    path = location(results, store)
    if isinstance(path, Path) and not path.exists():
        raise UsageError(
            f"no results store at {path}", hint="run `pgrig run` first, or pass --results/--store"
        )
    return Store.open(path)


@click.command("history")
@click.argument("name")
@results_options
def history_cmd(name: str, results: Path, store: str | None) -> None:
    """List the studies of series NAME (a campaign's name), each point's median
    over them, and where a point changed with what differed around the change."""
    with _open(results, store) as st:
        s = series.read(st, name)
    click.echo(f"series {name}: {len(s.studies)} studies")
    for i, study in enumerate(s.studies, start=1):
        click.echo(f"  {i:3d}  {study.id}  {study.started_at}  {study.status}")
    by_id = {study.id: study for study in s.studies}
    found = 0
    for point, seen in s.points.items():
        click.echo(f"\n{point.label}")
        for obs in seen:
            half = "" if math.isinf(obs.half_width) else f" ± {obs.half_width:.0f}"
            note = f"  ({obs.disturbed} disturbed)" if obs.disturbed else ""
            click.echo(f"  {obs.study}  {obs.median:10.0f} tps{half}  n={len(obs.values)}{note}")
        for ch in changes(seen):
            found += 1
            before, after = seen[ch.index - 1], seen[ch.index]
            verb = "rose" if ch.diff_pct > 0 else "fell"
            click.echo(
                f"  change: {point.short} {verb} {abs(ch.diff_pct):.0f}% (interval "
                f"{ch.low_pct:+.0f}% to {ch.high_pct:+.0f}%, p={ch.p_value:.3g}) "
                f"from study {after.study} on"
            )
            diffs = cause.differences(
                by_id[before.study], by_id[after.study], point.target, (before, after)
            )
            for line in diffs or ["nothing stored differs between the two studies"]:
                click.echo(f"    {line}")
    if not found:
        click.echo("\nno change outside the noise")


_PCT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*%?\s*")


def _percent(value: str) -> float:
    m = _PCT.fullmatch(value)
    if m is None:
        raise UsageError(
            f"--max-regression {value!r}: not a percentage", hint="e.g. --max-regression 5%"
        )
    return float(m.group(1))


@click.command("check")
@click.argument("study_id")
@results_options
@click.option(
    "--baseline",
    required=True,
    help="A study id, or a series: its latest study before STUDY_ID, and the "
    "series' earlier studies for how much studies differ.",
)
@click.option("--max-regression", default="5%", show_default=True, help="The slowdown tolerated.")
@click.option("--junit", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write JUnit XML here: one test case per point.")  # fmt: skip
@click.option("--summary", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY).")  # fmt: skip
def check_cmd(
    study_id: str,
    results: Path,
    store: str | None,
    baseline: str,
    max_regression: str,
    junit: Path | None,
    summary: Path | None,
) -> None:
    """Exit 1 when a point of STUDY_ID is significantly slower than the baseline
    by more than --max-regression; 0 otherwise (docs/exit-codes.md)."""
    threshold = _percent(max_regression)
    with _open(results, store) as st:
        study = st.study(study_id)
        base_id = baseline
        medians: dict[series.Point, list[float]] = {}
        if baseline not in {s.id for s in st.studies()}:
            before = [
                s.id
                for s in series.studies_of(st, baseline)
                if (s.started_at, s.id) < (study.started_at, study.id)
            ]
            if not before:
                raise UsageError(
                    f"--baseline {baseline}: the series holds no study before {study.id}",
                    hint="run the campaign once more, or name a baseline study",
                )
            base_id = before[-1]
            for point, past in series.read(st, baseline).points.items():
                medians[point] = [o.median for o in past if o.study in before]
        mine = series.observations(st.runs(study.id))
        theirs = series.observations(st.runs(base_id))
    verdicts = gate.judge_all(theirs, mine, threshold, medians)
    for sid, got in ((study.id, mine), (base_id, theirs)):
        if n := sum(o.disturbed for o in got.values()):
            click.echo(
                f"warning: {sid}: {n} runs disturbed by other work; a verdict on a busy "
                "machine says as much about the machine: rerun on a quiet one",
                err=True,
            )
    if not verdicts:
        raise UsageError(
            f"{study.id} and {base_id} have no pgbench point in common",
            hint="compare studies of the same campaign (workload, mode, clients, target)",
        )
    for v in verdicts:
        least = "" if math.isinf(v.detectable_pct) else f"; could call ≥ {v.detectable_pct:.1f}%"
        click.echo(f"{v.outcome:13s} {v.point.label}: {v.text}{least}")
    if junit is not None:
        junit.write_text(gate.junit(verdicts, f"pgrig check {study.id}"))
    if summary is not None:
        with summary.open("a") as out:  # $GITHUB_STEP_SUMMARY is appended to
            out.write(gate.summary(verdicts, study.id, base_id, threshold))
    failed = [v for v in verdicts if v.failed]
    if failed:
        raise gate.Regressed(
            f"{len(failed)} of {len(verdicts)} points of {study.id} regressed by more than "
            f"{threshold:g}% against {base_id}",
            hint="see the lines marked regression above; `pgrig history` names what changed",
        )
