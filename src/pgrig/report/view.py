"""Records -> report view: the sections, tables and figures of one study.

Pure functions: a ``Study`` and its ``RunRecord`` s in, a ``ReportView`` out.
Failed and skipped runs stay in every table as rows that say so with their
reason; nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pgrig import registry
from pgrig.document import fmt
from pgrig.document.model import (
    NORMAL,
    Figure,
    ReportView,
    Row,
    Section,
    Table,
)
from pgrig.meaning import meaning_of
from pgrig.monitor.model import MONITOR
from pgrig.probe import FIO, FSYNC, TIMING
from pgrig.registry.report import Runs
from pgrig.report import answer, compare, conclusions, index, sizes, variants
from pgrig.report import storage as storage_report
from pgrig.report.commands import commands_table
from pgrig.report.evidence import Evidence
from pgrig.report.fold import fold_runs, retitled
from pgrig.report.header import header, param_text, study_label
from pgrig.report.header import obtained_line as obtained_line  # named here for its tests
from pgrig.report.header import tools_text as tools_text
from pgrig.report.index import StudyIndex
from pgrig.report.machine import environment_section, machine_section, machines_of
from pgrig.report.monitor import busy_before, disturbed_summary
from pgrig.report.monitor import section as monitor_section
from pgrig.report.probes import (
    HEADLINE_FSYNC,
    fio_order,
    fio_section,
    fio_summary,
    fsync_section,
    fsync_summary,
    timing_section,
)
from pgrig.report.progress import Progress, ProgressReader, own_progress
from pgrig.report.samples import SampleReader, own_samples
from pgrig.report.status import status_kind
from pgrig.report.versus import Family
from pgrig.results import FioResult, RunRecord, Study


def build(
    study: Study,
    records: Sequence[RunRecord],
    samples: SampleReader = own_samples,
    progress: ProgressReader = own_progress,
) -> ReportView:
    """``samples`` gives a watched run's per-second samples when its section
    draws it, ``progress`` a pgbench run's -P points (the records may come
    without them: ``pgrig.report.samples``, ``pgrig.report.progress``)."""
    # The study read once, here: each stored result decoded and grouped; the
    # answer and every section read this index.
    study_index = index.ordered(records)
    records = list(study_index.records)
    targets = compare.targets_of(study.params, study_index)
    per_second = Progress(progress)  # one for every section: each run read once for its noise
    baseline = _baseline(study, targets)
    meanings = {t: m for t in targets if (m := meaning_of(study, t)) is not None}
    ev = Evidence(
        study_index,
        tuple(targets),
        baseline,
        study.environment,
        meanings,
        samples=samples,
        progress=per_second,
        indexed=study_index,
    )
    # The answer first, from the index alone: no section is needed to say it.
    answered = answer.section(ev)
    if len(targets) > 1:
        sections = _comparison_sections(study, ev, samples)
    else:
        sections = _one_target_sections(study, ev, samples)
    return ReportView(
        title=f"pgrig report: {study_label(study)}",
        meta=header(study, study_index),
        sections=tuple(conclusions.section(ev, sections, answered)),
    )


def _baseline(study: Study, targets: Sequence[str]) -> str:
    """The target the others are compared with: the study's ``baseline`` when it
    is one of them, else the first."""
    if len(targets) <= 1:
        return targets[0] if targets else ""
    baseline = str(study.params.get("baseline") or targets[0])
    return baseline if baseline in targets else targets[0]


def _one_target_sections(study: Study, ev: Evidence, samples: SampleReader) -> list[Section]:
    """The sections of a study of one target (or none)."""
    records, baseline, per_second = ev.index, ev.baseline, ev.progress
    return [
        _with_labs(summary_section(study, records, per_second), records, samples),
        environment_section(study, records),
        # A probe that did not run leaves no section, as a workload does not.
        *([timing_section(records, study.environment)] if records.kind(TIMING) else []),
        *([fsync_section(records, study.target)] if records.kind(FSYNC) else []),
        *([fio_section(records, study.target)] if records.kind(FIO) else []),
        *workload_sections(Runs(records, study.target, meaning_of(study, baseline), per_second)),
        *extra_sections(study, records, samples),
        runs_section(ev.index),
    ]


def _comparison_sections(study: Study, ev: Evidence, samples: SampleReader) -> list[Section]:
    """The sections of a comparison of targets: the comparison table first,
    then each target's own sections."""
    records, targets, progress = ev.index, list(ev.targets), ev.progress
    machines = machines_of(study, targets)
    policy = study.params.get("policy")
    compared = study.params.get("compared")
    first = compare.comparison_section(
        ev,
        machines,
        concurrent=isinstance(policy, dict) and bool(policy.get("concurrent")),
        studies=tuple(map(str, compared)) if isinstance(compared, list) else (),
    )
    first = replace(first, paragraphs=interference_lines(records) + first.paragraphs)
    sections = [_with_labs(first, records, samples)]
    # The campaign's axes next to the summary: versions in seed 004's layout,
    # settings beside pg_stat_io.
    for found in (
        variants.versions_section(study, records),
        variants.axes_section(study, records, samples),
    ):
        if found is not None:
            sections.append(found)
    sections.append(_environment(study, records, bool(machines)))
    for t in targets:
        sections += _target_sections(study, ev.index, t, progress)
    return [*sections, *extra_sections(study, records, samples), runs_section(ev.index)]


def _environment(study: Study, records: Sequence[RunRecord], machines: bool) -> Section:
    """The controlling machine's environment (each target's machine, when they
    differ, opens the comparison table)."""
    environment = environment_section(study, records)
    if machines:
        environment = replace(
            environment,
            paragraphs=(
                "The controlling machine (where pgrig ran); each target's own machine "
                "opens the comparison table above.",
                *environment.paragraphs,
            ),
        )
    return environment


def _target_sections(
    study: Study, study_index: StudyIndex, t: str, progress: Progress
) -> list[Section]:
    """One target's own sections: its machine and server when they are its own,
    its probes, its workloads' runs."""
    mine = study_index.target(t)
    env = study.target_environments.get(t)
    barriers = storage_report.barriers_off(study_index).get(t, "")
    per_target = [
        timing_section(mine, study.environment),
        fsync_section(mine, t, barriers),
        fio_section(mine, t),
        *workload_sections(Runs(mine, t, meaning_of(study, t), progress)),
    ]
    if env is not None and env.postgres is not None:
        per_target.insert(
            0,
            Section(
                "PostgreSQL",
                "postgres",
                paragraphs=(env.postgres.provenance(),),
                blocks=(
                    Table(
                        ("Setting", "Value"),
                        tuple(Row((k, v)) for k, v in sorted(env.postgres.settings.items())),
                        caption=f"Non-default settings ({len(env.postgres.settings)})",
                        collapsed=True,
                    ),
                ),
            ),
        )
    if env is not None and env.host:
        per_target.insert(0, machine_section(env))
    out: list[Section] = []
    for section in per_target:
        if section.blocks:
            out.append(retitled(section, f"{t}: {section.title}", fmt.slug(t)))
    return out


def workload_sections(runs: Runs) -> list[Section]:
    """The workloads' sections of their runs, in the workloads' order; a
    workload that did not run leaves none."""
    return [s for report in registry.runs_reports() for s in report.sections(runs)]


def extra_sections(
    study: Study, records: Sequence[RunRecord], samples: SampleReader = own_samples
) -> list[Section]:
    """The plug-ins' own sections (the target kinds', the workloads', the others'
    registered), then memory against data, then what the monitor saw."""
    out = [section(study, records) for section in registry.sections()]
    out.append(sizes.section(records))
    out.append(storage_report.memory_section(records, study.environment, samples))
    out.append(monitor_section(study, records, samples))
    return [fold_runs(s) for s in out if s is not None]


# --------------------------------------------------------------------------
# Summary in the seeds' layout: test cases as rows, the storage target as column


def summary_section(
    study: Study, records: Sequence[RunRecord], progress: Progress | None = None
) -> Section:
    rows: list[Row] = []
    study_index = index.read(records)
    fsync_row = fsync_summary(study_index)
    if fsync_row is not None:
        rows.append(fsync_row)
    fio = sorted(study_index.kind(FIO), key=fio_order)
    rows += [fio_summary(rec, study_index.result(rec, FioResult)) for rec in fio]
    target = compare.targets_of(study.params, study_index)[0] if records else study.target
    meaning = meaning_of(study, target)
    runs = Runs(study_index, target, meaning, progress)
    reports = registry.runs_reports()
    notes: list[str] = []
    probed = sum(len(study_index.kind(k)) for k in PROBE_KINDS)
    if meaning is not None and probed < len(study_index):
        # Before the server's numbers: the probes do not depend on its settings.
        rows.append(Row(("PostgreSQL settings", meaning.line())))
        notes += [f"{c}." for c in meaning.caveats()]
    if any(report.sweeps(runs) for report in reports):
        # Several workloads, scales or durations: every point, as in a campaign.
        table = compare.comparison_table(study_index, [target], target, progress=progress)
        rows.extend(r for r in table.rows if not _is_probe_row(r))
    else:
        rows.extend(r for report in reports for r in report.headline_rows(runs))
        # The other workloads' headline figure, a row per point (TPC-C's tpmC).
        family = Family()
        rows.extend(family.rows(compare.summary_rows(study_index, target, [], family)))
    sweep = [f for report in reports for f in report.summary_figures(runs)]
    table = Table(
        columns=("Test Case", target),  # the target's name, not its directory
        rows=tuple(rows),
        caption="Headline numbers; details in the sections below.",
        notes=tuple(notes),
        numeric=(False, True),
    )
    blocks: tuple[Table | Figure, ...] = ((table,) if rows else ()) + tuple(sweep)
    return Section("Performance Summary", "summary", interference_lines(study_index), blocks)


def interference_lines(records: Sequence[RunRecord]) -> tuple[str, ...]:
    """Above the headline numbers: the machine was busy before the study, and
    other work disturbed measured runs (who, how much) - before anyone quotes them."""
    out = []
    if before := busy_before(records):
        out.append(f"⚠ {before}")
    if disturbed := disturbed_summary(records):
        out.append(
            f"⚠ {disturbed}. The figures below are not the server's alone: each point "
            "measured while other work ran says so in its row, and Bottlenecks names who "
            "took what, run by run. Rerun on a quiet machine to quote them."
        )
    return tuple(out)


PROBE_KINDS = (TIMING, FSYNC, FIO)


def _is_probe_row(row: Row) -> bool:
    return row.cells[0] == HEADLINE_FSYNC or row.cells[0] in dict(compare.FIO_ROWS).values()


# --------------------------------------------------------------------------
# Environment


def _with_labs(
    section: Section, records: Sequence[RunRecord], samples: SampleReader = own_samples
) -> Section:
    """The storage-lab targets (filesystem, I/O cap, memory) beside the results,
    and what a latency layer adds to them (its calibration misses, its CPU) above."""
    table = storage_report.targets_table(records)
    if table is None:
        return section
    said = tuple(storage_report.layer_lines(records, samples))
    return replace(section, paragraphs=said + section.paragraphs, blocks=(*section.blocks, table))


def runs_section(study_index: StudyIndex) -> Section:
    records = study_index.records
    rows = []
    for rec in records:
        detail = rec.reason or ""
        kind = NORMAL if rec.status == "ok" else status_kind(rec)
        params = ", ".join(f"{k}={param_text(v)}" for k, v in rec.params.items())
        rows.append(Row((rec.key, rec.kind, rec.status, rec.started_at, params, detail), kind))
    watched = len(study_index.kind(MONITOR))
    also = f" and the monitor's records of {watched} of them" if watched else ""
    table = Table(
        ("Key", "Kind", "Status", "Started", "Parameters", "Reason"),
        tuple(rows),
        caption=f"All {len(rows) - watched} runs of this study{also}, in the order they ran",
        collapsed=True,  # a reference: failures also show in their own sections
    )
    lines = commands_table(records)  # the exact pgbench and pg_basebackup command lines
    blocks = ((table,) if rows else ()) + ((lines,) if lines else ())
    return Section("All runs", "runs", blocks=blocks)
