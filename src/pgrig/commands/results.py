"""The commands that read the results store: ``report``, ``list``, ``export``,
``import`` and ``compare``.

What a command does is imported in its body: ``--help`` loads none of the
store, the registry, the report and their libraries (tests/test_cli_speed.py)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pgrig.commands.options import open_results, results_options
from pgrig.errors import PgrigError, UsageError
from pgrig.files import UNWRITABLE, output_path
from pgrig.results import Study
from pgrig.schema import NAME
from pgrig.ui import Ui, format_option

if TYPE_CHECKING:
    from pgrig.store import Store


def _write_report(store: Store, sid: str, results: Path, ui: Ui) -> tuple[Path, Path]:
    from pgrig.report import samples as report_samples
    from pgrig.report.monitor import closing_warning
    from pgrig.report.writer import write as write_report

    study = store.study(sid)
    records, samples, progress = report_samples.read(store, sid)  # each run's when drawn
    md, html = write_report(study, records, results, samples=samples, progress=progress)
    if closing := closing_warning(records):
        ui.warn(closing)
    click.echo(f"report: {md}")
    click.echo(f"report: {html}")
    return md, html


@click.command("report")
@click.argument("study_id", required=False)
@results_options
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Directory for the report files (default: RESULTS).",
)
def report_cmd(study_id: str | None, results: Path, store: str | None, out: Path | None) -> None:
    """Write the Markdown and HTML report of a study (default: the latest)."""
    if out is not None:
        output_path(out, "--out", directory=True)
    with open_results(results, store) as st:
        _write_report(st, study_id or _latest(st).id, out or results, Ui())


@click.command("list")
@results_options
def list_cmd(results: Path, store: str | None) -> None:
    """List the studies in the results store."""
    from pgrig import registry
    from pgrig.monitor.model import MONITOR
    from pgrig.report import progress as report_progress
    from pgrig.resume import planned_steps

    with open_results(results, store) as st:
        click.echo("study\tstatus\tsteps\ttarget")
        for study in st.studies():
            # what a line needs: no run's samples nor -P points (most of a long run's bytes)
            lean = st.runs(
                study.id,
                without_samples=(MONITOR.name,),
                without_progress=report_progress.kinds(),
            )
            runs = [r for r in lean if r.kind != MONITOR.name]
            planned = planned_steps(study)
            if planned is not None:  # the plan is known: count its steps, not the records
                runs = [r for r in runs if r.key in planned]
            # a check that ran to its end but failed (a durability check that lost
            # commits) is no "ok" step
            failed = sum(getattr(registry.typed_result(r), "ok", True) is False for r in runs)
            ok = sum(r.status == "ok" for r in runs) - failed
            steps = (
                f"{ok}/{len(runs)} ok"
                if planned is None
                else f"{len(runs)} of {len(planned)} steps recorded, {ok} ok"
            ) + (f", {failed} check(s) failed" if failed else "")
            click.echo(f"{study.id}\t{_status(study)}\t{steps}\t{study.target}")


def _status(study: Study) -> str:
    """'running' only while its pgrig lives: one killed without a word (kill -9,
    power loss) left an interrupted study."""
    from pgrig.resume import study_live

    return "interrupted" if study.status == "running" and not study_live(study) else study.status


@click.command("export")
@click.argument("study_ids", nargs=-1)
@results_options
@format_option(
    ("json", "csv"),
    "json: everything (docs/export.md); csv: one row per run, or per second with --series.",
)
@click.option(
    "--series",
    is_flag=True,
    help="CSV: one row per second of every pgbench run instead of one per run.",
)
@click.option("--raw", is_flag=True, help="JSON: include every tool's raw output.")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write to this file instead of stdout.",
)
def export_cmd(
    study_ids: tuple[str, ...],
    results: Path,
    store: str | None,
    fmt: str,
    series: bool,
    raw: bool,
    output: Path | None,
) -> None:
    """Export studies (default: the latest) as JSON (schema in docs/export.md) or CSV."""
    from pgrig import export

    if output is not None:
        output_path(output, "-o")
    with open_results(results, store) as st:
        studies = [st.study(s) for s in _once(study_ids)] or [_latest(st)]
        records = [r for s in studies for r in st.runs(s.id)]
    if fmt == "json":
        text = export.to_json(studies, records, raw=raw)
    else:
        text = export.series_csv(records) if series else export.runs_csv(records)
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            output.write_text(text)
        except OSError as exc:
            # a missing directory is bad input; a full disk is no typo (it said "give a file
            # in an existing, writable directory" of /dev/full)
            error = (
                UsageError
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR)
                else PgrigError
            )
            raise error(
                f"-o {output}: cannot write: {exc.strerror or exc}",
                hint=UNWRITABLE.get(
                    exc.errno or 0, "give a file in an existing, writable directory"
                ),
            ) from exc
        click.echo(f"wrote {output}", err=True)


@click.command("import")
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.argument("study_ids", nargs=-1)
@results_options
@click.option("--as", "as_id", default=None, help="Import a single study under this id.")
def import_cmd(
    source: Path, study_ids: tuple[str, ...], results: Path, store: str | None, as_id: str | None
) -> None:
    """Copy studies from another results file (e.g. from another machine) into the store."""
    from pgrig.store import Store, import_study, location

    if as_id is not None and not NAME.fullmatch(as_id):
        raise UsageError(
            f"--as {as_id!r}: a study id is letters, digits, '.', '_' and '-' only",
            hint="e.g. --as laptop-quick-2",
        )
    with Store.open(source) as other:
        ids = list(study_ids) or [s.id for s in other.studies()]
        if as_id is not None and len(ids) != 1:
            raise UsageError("--as names one study; give exactly one STUDY_ID")
        for sid in ids:  # an unknown or running id is refused before the store is created
            _importable(source, other, other.study(sid))
        into = location(results, store)
        if isinstance(into, Path) and into.exists() and into.resolve() == source.resolve():
            raise UsageError(
                f"import {source} into {into}: the same file",
                hint="pass --store (or --results) the store to copy the studies into",
            )
        with Store.open(into) as st:
            # every id checked before the first is copied: a clash left the others imported
            taken = sorted({as_id or sid for sid in ids} & {s.id for s in st.studies()})
            if taken:
                raise UsageError(
                    f"{st.path} already holds {', '.join(map(repr, taken))}; nothing was imported",
                    hint="import one study under another id with --as NEW_ID",
                )
            for sid in ids:
                click.echo(f"imported {import_study(st, other, sid, as_id=as_id)}")
                if _status(other.study(sid)) == "interrupted":
                    click.echo(
                        f"note: {sid} was interrupted (its pgrig is gone, it ran part of its"
                        " plan): imported as it is; `pgrig run` of its campaign on its machine"
                        " resumes it",
                        err=True,
                    )


def _importable(source: Path, other: Store, study: Study) -> None:
    """A study still being run is refused: a copy would hold what it has so far;
    a damaged one too, before the store it would go to is created."""
    from pgrig.resume import study_live
    from pgrig.store import importable

    if study.status == "running" and study_live(study):
        raise UsageError(
            f"{source}: study {study.id} is still running; a copy now would hold only what it"
            " has recorded so far",
            hint=f"import it once it has finished (`pgrig list --store {source}` says when)",
        )
    importable(other, study.id)  # readable and each result as pgrig wrote it, or refused


@click.command("compare")
@click.argument("study_ids", nargs=-1, required=True)
@results_options
@click.option("--baseline", default=None, help="The study (or STUDY/TARGET) to compare against.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Directory for the comparison report (default: RESULTS).",
)
def compare_cmd(
    study_ids: tuple[str, ...],
    results: Path,
    store: str | None,
    baseline: str | None,
    out: Path | None,
) -> None:
    """Compare studies from different campaigns or machines (import theirs first)."""
    from pgrig import export
    from pgrig.report import samples as report_samples
    from pgrig.report.writer import write as write_report

    if len(_once(study_ids)) < 2:
        raise UsageError("compare needs at least two different studies", hint="see `pgrig list`")
    if out is not None:
        output_path(out, "--out", directory=True)
    with open_results(results, store) as st:
        studies = [st.study(s) for s in _once(study_ids)]
        # each run's samples and -P points read when it is drawn, as `pgrig report` does
        lean = [report_samples.read(st, s.id) for s in studies]
        per_study = [records for records, _, _ in lean]
        empty = [s.id for s, recs in zip(studies, per_study, strict=True) if not recs]
        if empty:
            raise UsageError(
                f"study {empty[0]} has no recorded runs: nothing to compare",
                hint="see `pgrig list`; run it again to resume it",
            )
        study, records = export.combined(studies, per_study)
        names = [t["name"] for t in study.params["targets"]]
        if baseline is not None:
            study_of, _, target = baseline.partition("/")
            lone = {
                s.id: {r.target for r in recs} for s, recs in zip(studies, per_study, strict=True)
            }
            if baseline not in names and study_of in names and lone.get(study_of) == {target}:
                baseline = study_of  # the form --help gives, for a study of one target
            if baseline not in names:
                raise UsageError(f"--baseline {baseline!r} is not one of {', '.join(names)}")
            study.params["baseline"] = baseline
        _, samples, progress = lean[0]  # one store: its readers serve every study's runs
        md, html = write_report(study, records, out or results, samples=samples, progress=progress)
    click.echo(
        "note: targets of different studies ran apart, not interleaved: each interval counts "
        "how much one study's runs differ, not how much studies do (on a shared machine, "
        "identical runs minutes apart differed by 40%); for a decision, run both sides in one "
        "campaign, or check a study against its series (`pgrig check STUDY --baseline SERIES`)",
        err=True,
    )
    click.echo(f"report: {md}")
    click.echo(f"report: {html}")


def _once(study_ids: tuple[str, ...]) -> list[str]:
    """The ids in the order given, each once: a study named twice was counted
    twice (its runs pooled with themselves)."""
    return list(dict.fromkeys(study_ids))


def _latest(st: Store) -> Study:
    latest = st.latest_study()
    if latest is None:
        raise UsageError(f"{st.path} holds no study yet", hint="run `pgrig run` first")
    return latest
