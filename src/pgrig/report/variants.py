"""Report sections for the campaign's axes: PostgreSQL versions side by side in
seed 004's layout, and settings axes (io_method, io_workers) with what
``pg_stat_io`` saw beside the throughput.

Both read stored results only: the targets' parameters (their version and axis
values, what the profile had to change for each major), the servers' captured
settings, the pgbench runs and the monitor's samples. The comparison itself -
difference to the baseline, the one decision procedure over the repeats - is
``report.compare``'s; the TPS-vs-clients chart with one line per version is its
``tps_vs_clients``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pgrig import registry
from pgrig.document import fmt
from pgrig.document.model import HEADLINE, Row, Section, Table
from pgrig.monitor.model import Sample
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report import index
from pgrig.report.cost import latency_cell, ok_runs
from pgrig.report.index import PointRuns, StudyIndex
from pgrig.report.pointkey import PointKey, point_order
from pgrig.report.samples import SampleReader, own_samples
from pgrig.report.versus import TPS, VS_NOTE, Cell, Draft, Family, Key, Ledger
from pgrig.results import SERVER, PgbenchRun, RunRecord, Study

# Settings that differ between any two clusters (their own files): not a difference.
PATHS = frozenset({"config_file", "data_directory", "hba_file", "ident_file", "external_pid_file"})


def _targets(study: Study) -> list[dict[str, Any]]:
    declared = study.params.get("targets")
    return [t for t in declared if isinstance(t, dict)] if isinstance(declared, list) else []


def _tps(pairs: Sequence[tuple[RunRecord, PgbenchRun | None]]) -> list[float]:
    return [run.tps for _, run in pairs if run is not None]


def _cell(values: list[float]) -> str:
    """The median and its interval in the report's one spread notation
    (``fmt.with_spread``), ⚠ when noisy."""
    if not values:
        return "failed"
    return fmt.with_spread(fmt.spread(values))


# -- versions ----------------------------------------------------------------------

INCLUDING_NOTE = (
    "incl. connections: the same runs' transactions over their time with the clients' "
    "connecting, the figure seed 004 quoted (pgbench 13 and older printed it as "
    '"including connections establishing"; from 14 on it is derived from the initial '
    "connection time pgbench prints); shown where the runs recorded it."
)


def _including(pairs: Sequence[tuple[RunRecord, PgbenchRun | None]]) -> list[float]:
    return [v for _, run in pairs if run is not None and (v := run.tps_including_connections)]


@dataclass(frozen=True)
class _Servers:
    """The servers a study of versions compares: the targets' names, the baseline
    among them, and each one's PostgreSQL release as the campaign gave it."""

    names: Sequence[str]
    baseline: str
    release: Mapping[str, str]


def _versions_table(
    points: Sequence[tuple[PointKey, PointRuns]], servers: _Servers, family: Family
) -> Table:
    """The points of one workload, duration and mode: tps per version at each scale
    and client count, each against the baseline; then each version's tps including
    connections where recorded, and its latency."""
    names, baseline, release = servers.names, servers.baseline, servers.release
    first = points[0][0]
    workload, duration, mode = first.workload, first.duration, first.mode
    others = [n for n in names if n != baseline]
    columns = ["scale", "clients", f"{baseline} ({release.get(baseline, '?')})"]
    for n in others:
        columns += [f"{n} ({release.get(n, '?')})", f"{n} vs {baseline}"]
    including = any(_including(pairs) for _, per in points for pairs in per.values())
    if including:
        columns += [f"{n} incl. connections" for n in names]
    # Latency after the tps and its test, one column per version.
    columns += [f"{n} latency" for n in names]
    drafts = []
    for key, per_target in points:
        base = _tps(per_target.get(baseline, []))
        scale = "-" if key.scale is None else str(key.scale)
        cells: list[Cell] = [scale, str(key.clients), _cell(base)]
        for n in others:
            mine = _tps(per_target.get(n, []))
            cells += [_cell(mine), family.vs(base, mine, key=Key(TPS, key, n))]
        if including:
            cells += [_median(_including(per_target.get(n, []))) for n in names]
        cells += [latency_cell(ok_runs(per_target.get(n, []))) for n in names]
        drafts.append(Draft(tuple(cells)))
    name = registry.title(workload)
    return Table(
        tuple(columns),
        family.rows(drafts),
        caption=f"{name} {mode}, {duration} s per run: tps by PostgreSQL version "
        "(seed 004's table)",
        notes=(
            "Each cell: the median tps over the repeats. " + fmt.SPREAD_NOTE,
            VS_NOTE,
            *family.note(),
            *((INCLUDING_NOTE,) if including else ()),
            "latency: pgbench's per-transaction log (-l), p95 and p99 in ms, the "
            "median over the repeats.",
            "Every version ran on its own throwaway cluster with the same profile, "
            "interleaved with the others; the programs that drove each are in the "
            "provenance table below.",
        ),
        numeric=(True, True, *([True] * (len(columns) - 2))),
    )


def _median(values: list[float]) -> str:
    return fmt.rate(statistics.median(values)) if values else "-"


def versions_section(
    study: Study, records: Sequence[RunRecord], ledger: Ledger | None = None
) -> Section | None:
    """Seed 004's table (TPS per version at each scale and client count, versions as
    columns, each against the baseline), and what each major's profile changed.
    None unless the campaign's targets differ in their PostgreSQL version.
    ``ledger``: the study's comparisons (default: ``Ledger.of`` the records)."""
    targets = _targets(study)
    versions = {str(t.get("pg_version")) for t in targets if t.get("pg_version")}
    if len(versions) < 2:
        return None
    names = [str(t["name"]) for t in targets]
    baseline = str(study.params.get("baseline") or names[0])
    release = {str(t["name"]): str(t.get("pg_version", "?")) for t in targets}
    study_index = index.read(records)
    ledger = ledger if ledger is not None else Ledger.of_index(study_index, baseline)
    blocks: list[Table] = []
    by_point = sorted(study_index.points.items(), key=point_order)
    curves: dict[
        tuple[str, int, str],
        list[tuple[PointKey, PointRuns]],
    ] = {}
    for key, per_target in by_point:
        curves.setdefault((key.workload, key.duration, key.mode), []).append((key, per_target))
    servers = _Servers(names, baseline, release)
    for points in curves.values():
        blocks.append(_versions_table(points, servers, Family(ledger)))
    extra = (provenance_table(study, study_index, names), _adapted_table(targets),
             _settings_table(study, names))  # fmt: skip
    blocks += [t for t in extra if t]
    return Section(
        "PostgreSQL versions",
        "versions",
        paragraphs=(
            f"{len(names)} servers: "
            + ", ".join(f"{n} = PostgreSQL {release.get(n, '?')}" for n in names)
            + f"; baseline {baseline}.",
        ),
        blocks=tuple(blocks),
    )


def provenance_table(study: Study, study_index: StudyIndex, names: list[str]) -> Table | None:
    """What really ran for each target: the server build (``SELECT version()``:
    release, platform, compiler), where it came from, and every pgbench that
    drove its runs, as each record stored them."""
    rows = []
    for n in names:
        env = study.target_environments.get(n)
        pg = env.postgres if env is not None else None
        mine = study_index.of_target.get(n, ())
        builds = list(dict.fromkeys(v for r in mine if (v := r.tool_versions.get(SERVER))))
        runs = study_index.by_target(PGBENCH_RUN).get(n, ())
        drivers = list(dict.fromkeys(v for r in runs if (v := r.tool_versions.get("pgbench"))))
        build = pg.build if pg is not None and pg.build else (builds[0] if builds else "")
        rows.append(
            Row(
                (
                    n,
                    pg.version if pg is not None else "?",
                    build or "not recorded",
                    (pg.source if pg is not None else None) or "not recorded",
                    "; ".join(drivers) or "not recorded",
                )
            )
        )
    if not rows:
        return None
    return Table(
        ("target", "PostgreSQL", "build (SELECT version())", "source", "pgbench that drove it"),
        tuple(rows),
        caption="Provenance: the server build each target ran and the pgbench that drove "
        "it, as stored with every record. A server-only build (zonky, otj) has no pgbench: "
        "the newest installed one drives it.",
    )


def _adapted_table(targets: list[dict[str, Any]]) -> Table | None:
    rows = []
    for t in targets:
        notes = t.get("adapted")
        if notes is None:
            continue
        for note in notes or ["(nothing: every setting applied as written)"]:
            rows.append(Row((str(t["name"]), str(t.get("pg_version", "?")), str(note))))
    if not rows:
        return None
    return Table(
        ("target", "PostgreSQL", "what the profile became on this major"),
        tuple(rows),
        caption="The profile fitted to each major: renamed settings translated, missing "
        "ones dropped with the reason - never silently",
    )


def _settings_table(study: Study, names: list[str]) -> Table | None:
    """The servers' own non-default settings, side by side: what each version really
    ran with."""
    settings = {
        n: env.postgres.settings
        for n in names
        if (env := study.target_environments.get(n)) is not None and env.postgres is not None
    }
    if len(settings) < 2:
        return None
    keys = sorted({k for s in settings.values() for k in s if k not in PATHS})
    rows = []
    for k in keys:
        values = [settings.get(n, {}).get(k, "-") for n in names]
        rows.append(Row((k, *values), HEADLINE if len(set(values)) > 1 else ""))
    return Table(
        ("setting", *names),
        tuple(rows),
        caption="Non-default settings each server reported (pg_settings); rows that differ "
        "are highlighted, '-' where a version lacks the setting or runs it at its default",
        collapsed=True,
    )


# -- settings axes -------------------------------------------------------------------


def _io(run: Iterable[Sample]) -> dict[str, float] | None:
    """pg_stat_io over a run, per second, summed over backend types: reads, bytes,
    time; and the share of the bytes that I/O workers read. One pass: the run's
    samples are streamed from the store."""
    # Each second's sum per operation (a few floats, not the samples)
    per: dict[str, list[float]] = {"reads": [], "hits": [], "read_bytes": [], "read_time": []}
    waits: dict[str, int] = {}
    for s in run:
        p = s.pg
        if not s.in_run or p is None or not p.io:
            continue
        for op, values in per.items():
            values.append(sum(v for k, v in p.io.items() if k.endswith(f":{op}")))
        for event, n in p.waits.items():
            waits[event] = waits.get(event, 0) + n
    if not per["reads"]:
        return None
    reads, hits, read_bytes, read_ms = (statistics.fmean(per[op]) for op in per)
    sampled = sum(waits.values())
    return {
        "reads": reads,
        "read_mib": read_bytes / 2**20,
        "kib_per_read": read_bytes / reads / 1024 if reads else 0.0,
        "ms_per_read": read_ms / reads if reads else 0.0,
        "hit_ratio": hits / (hits + reads) if hits + reads else 0.0,
        "wait_read": waits.get("IO:DataFileRead", 0) / sampled if sampled else 0.0,
        "wait_aio": sum(n for e, n in waits.items() if e.startswith("IO:AioIo")) / sampled
        if sampled
        else 0.0,
    }


def _median_of(values: list[dict[str, float]], key: str) -> float:
    return statistics.median(v[key] for v in values)


AXES_IO_NOTES = (
    "pg_stat_io (PostgreSQL 16+), relations only, summed over backend types, "
    "mean per second over each run, median over the repeats. Bytes per read "
    "above 8 KiB: PostgreSQL 18 combined adjacent blocks into one read "
    "(io_combine_limit). ms per read needs track_io_timing (the oltp profile "
    "sets it). PostgreSQL 18 counts a read under the backend that issued it, "
    "also when an I/O worker performed it.",
    "Backends in DataFileRead / AioIoCompletion: share of the sampled client "
    "backends waiting for a read they do themselves (sync) or for one handed "
    "to an I/O worker or io_uring.",
    "n/a: no monitor samples (monitor = false) or a server before 16.",
)


def _io_cells(
    pairs: Sequence[tuple[RunRecord, PgbenchRun | None]],
    monitors: Mapping[str, RunRecord],
    samples: SampleReader,
) -> tuple[str, ...]:
    """A point's pg_stat_io cells: medians over its runs' monitor samples."""
    io = [
        x
        for rec, _ in pairs
        if (m := monitors.get(rec.key)) is not None
        and m.status == "ok"
        and (x := _io(samples(m))) is not None
    ]
    if not io:
        return ("n/a",) * 6
    return (
        f"{_median_of(io, 'read_mib'):,.1f}",
        fmt.rate(_median_of(io, "reads")),
        f"{_median_of(io, 'kib_per_read'):,.0f}",
        f"{_median_of(io, 'ms_per_read'):.3f}",
        f"{_median_of(io, 'hit_ratio'):.1%}",
        f"{_median_of(io, 'wait_read'):.0%} / {_median_of(io, 'wait_aio'):.0%}",
    )


def axes_section(
    study: Study,
    records: Sequence[RunRecord],
    samples: SampleReader = own_samples,
    ledger: Ledger | None = None,
) -> Section | None:
    """Targets that differ in settings axes (io_method, io_workers): tps against the
    baseline, next to pg_stat_io's reads of the same runs. None without axes."""
    targets = [t for t in _targets(study) if t.get("axes")]
    if not targets:
        return None
    names = [str(t["name"]) for t in targets]
    axis_names = list(dict.fromkeys(str(a[0]) for t in targets for a in t["axes"]))
    values = {str(t["name"]): {str(a[0]): str(a[1]) for a in t["axes"]} for t in targets}
    baseline = str(study.params.get("baseline") or names[0])
    study_index = index.read(records)
    columns = (
        "test case",
        *axis_names,
        "tps",
        f"vs {baseline}",
        "read MiB/s",
        "reads/s",
        "KiB per read",
        "ms per read",
        "buffer hit ratio",
        "backends in DataFileRead / AioIoCompletion",
        "latency",
    )
    drafts: list[Draft] = []
    family = Family(ledger if ledger is not None else Ledger.of_index(study_index, baseline))
    for key, per_target in sorted(study_index.points.items(), key=point_order):
        base = _tps(per_target.get(baseline, []))
        for n in names:
            pairs = per_target.get(n, [])
            if not pairs:
                continue
            tps = _tps(pairs)
            io_cells = _io_cells(pairs, study_index.watching, samples)
            drafts.append(
                Draft(
                    (
                        key.label,
                        *(values[n].get(a, "") for a in axis_names),
                        _cell(tps),
                        "(baseline)"
                        if n == baseline
                        else family.vs(base, tps, key=Key(TPS, key, n)),
                        *io_cells,
                        latency_cell(ok_runs(pairs)),
                    )
                )
            )
    return Section(
        f"Settings axes: {', '.join(axis_names)}",
        "axes",
        paragraphs=(
            f"{len(names)} servers, identical but for {', '.join(axis_names)}; baseline "
            f"{baseline}. Each ran on its own cluster, interleaved with the others.",
        ),
        blocks=(
            Table(
                columns,
                family.rows(drafts),
                caption=f"Throughput and pg_stat_io by {', '.join(axis_names)}",
                notes=(
                    "tps: the median over the repeats. " + fmt.SPREAD_NOTE,
                    VS_NOTE,
                    *family.note(),
                    "latency: pgbench's per-transaction log (-l), p95 and p99 in ms, the "
                    "median over the repeats.",
                    *AXES_IO_NOTES,
                ),
                numeric=(False, *([False] * len(axis_names)), *([True] * 9)),
            ),
        ),
    )
