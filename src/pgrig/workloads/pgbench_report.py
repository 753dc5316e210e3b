"""The pgbench part of the report: load, count(*), pgbench runs per client count -
of every workload pgbench drives (TPC-B, the user's own scripts), whose results
are the kinds they share (``pgrig.registry.shared``). Both workloads declare
``PGBENCH_REPORT`` as their ``runs_report``: the report asks it once for their
sections, their rows of the summary and the summary's sweep figure, and names
neither workload itself.

Every tps carries its noise (``pgrig.report.points``): repeated points their
median with the range (and the 95% confidence interval from 3 runs on), every
run the spread of its per-second tps. Points are flagged when the repeats
range wider than ``fmt.NOISE_THRESHOLD_PCT`` or a run's per-second tps varies
more than ``noise.HIGH_CV``, so a reader never takes one lucky (or disturbed)
run for the machine's speed.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

from pgrig import registry
from pgrig.cluster import loadwal
from pgrig.document import fmt
from pgrig.document.model import FAILED, NOISY, SKIPPED, Figure, Row, Section, Series, Table
from pgrig.meaning import Meaning
from pgrig.monitor import noise
from pgrig.monitor.model import MONITOR
from pgrig.registry.report import Runs
from pgrig.registry.shared import BUILTIN, COUNT, PGBENCH_INIT, PGBENCH_RUN, SQL_SETUP
from pgrig.report import decimate, figures, index
from pgrig.report.cost import latency_cell
from pgrig.report.fold import retitled
from pgrig.report.points import (
    Point,
    detectable_note,
    load_text,
    mode_key,
    noise_notes,
    not_ok_kind,
    per_second_text,
    points,
    statement_medians,
    status,
)
from pgrig.report.progress import Progress
from pgrig.results import SCRIPTS_MODE, CountResult, PgbenchInit, RunRecord

PERCENTILES = (("p50", 0), ("p95", 1), ("p99", 2))


def _tps_qps(point: Point) -> str:
    if point.tps is None or point.qps is None:
        return status(point.not_ok[0])
    spread = [point.tps.describe()] if point.tps.n > 1 else []
    worst = point.worst_second
    if worst is not None:
        spread.append(f"per second CV {100 * worst.cv:.0f}%")
    text = f"tps: {fmt.rate(point.tps.median)}"
    if spread:
        text += f" ({'; '.join(spread)})" + (" ⚠" if point.noisy else "")
    text += f"; qps: {fmt.rate(point.qps.median)}"
    if point.disturbed:
        text += f"; ⚠ {point.disturbed_text()}"
    return text


def headline_rows(
    records: Sequence[RunRecord], meaning: Meaning | None = None, progress: Progress | None = None
) -> list[Row]:
    """Seed 000's summary rows: load time, then each mode at its peak (the client
    count of the highest median tps, the answer's peak; the most clients when no
    point ran) with its p95/p99 - read-write with the settings that make its
    commits less than durable. ``progress``: where the runs' -P points are
    (default: in the records)."""
    rows = []
    study = index.read(records)
    for rec in study.kind(PGBENCH_INIT):
        init = study.result(rec, PgbenchInit)
        if init is None:
            scale = rec.params.get("scale", "?")
            rows.append(Row((f"TPC-B load, scale {scale}", status(rec)), _kind(rec)))
        else:
            rows.append(Row((_init_label(init), _init_value(init))))
    by_mode: dict[str, Point] = {}
    for point in points(study, progress):
        best = by_mode.get(point.mode)
        if best is None or not best.ok or (point.ok and _median_tps(point) > _median_tps(best)):
            by_mode[point.mode] = point
    for point in by_mode.values():
        flagged = point.noisy or point.disturbed > 0
        kind = (NOISY if flagged else "") if point.ok else not_ok_kind(point.not_ok)
        value = _tps_qps(point)
        if point.ok and (lat := latency_cell([run for _, run in point.ok])) != "no latency log":
            value += f"; {lat}"
        if point.ok and point.mode == "read-write" and meaning is not None:
            note = meaning.writes_note()
            value += f"; with {note}" if note else ""
        rows.append(Row((f"TPC-B {point.label}", value), kind))
    return rows


def _median_tps(point: Point) -> float:
    return statistics.median(run.tps for _, run in point.ok) if point.ok else 0.0


def _kind(rec: RunRecord) -> str:
    return SKIPPED if rec.status == "skipped" else FAILED


def _init_label(init: PgbenchInit) -> str:
    return f"TPC-B load, scale {init.scale} ({fmt.integer(init.rows)} rows)"


def _init_value(init: PgbenchInit) -> str:
    return load_text(init)


# pgbench -i's steps in the order it runs them (the store keeps them sorted by name).
INIT_STEPS = (
    loadwal.RESTART_MINIMAL,
    "drop tables",
    "create tables",
    "client-side generate",
    "server-side generate",
    "parallel generate",
    "vacuum",
    "primary keys",
    "foreign keys",
    loadwal.RESTART_PROFILE,
)


# --------------------------------------------------------------------------


def pgbench_section(
    records: Sequence[RunRecord],
    target: str,
    meaning: Meaning | None = None,
    progress: Progress | None = None,
) -> Section:
    title, anchor = f"{registry.title(BUILTIN)} (pgbench)", BUILTIN
    study = index.read(records)
    load = load_table(study)
    pts = points(study, progress)
    if load is None and not pts:
        return Section(title, anchor, ("Not run in this study.",))
    blocks: list[Table | Figure] = []
    if load is not None:
        blocks.append(load)
    if pts:
        candidates: tuple[Table | Figure, ...] = (
            throughput_table(pts, target, meaning),
            tps_vs_clients(pts),
            *tps_over_time(pts),
            latency_table(pts),
            latency_vs_clients(pts),
            *statements_tables(pts),
        )
        # A figure with nothing to draw (every run failed) is left out; the tables say why.
        blocks += [b for b in candidates if not _empty_figure(b)]
    return Section(title, anchor, blocks=tuple(blocks))


def _empty_figure(block: Table | Figure) -> bool:
    """Nothing to draw, or a curve over one client count (three targets stacked at x=8)."""
    return isinstance(block, Figure) and (
        not block.series or (block.x_label == "clients" and block.x_points < 2)
    )


def _wide(pts: Sequence[Point]) -> bool:
    """Client counts spanning 8x or more read better on a log2 axis (1, 2, 4 ... 64)."""
    clients = [p.clients for p in pts if p.clients > 0]
    return bool(clients) and max(clients) >= 8 * min(clients)


def load_table(records: Sequence[RunRecord]) -> Table | None:
    rows: list[Row] = []
    notes: list[str] = []
    study = index.read(records)
    inits = {r.key for r in study.kind(PGBENCH_INIT)}
    for rec in study.only(PGBENCH_INIT, COUNT):
        if (init := study.result(rec, PgbenchInit)) is not None:
            rows.append(Row((_init_label(init), _init_value(init))))
            notes.append(_init_note(init))
        elif (count := study.result(rec, CountResult)) is not None:
            value = f"{fmt.ms(count.execution_ms)} ms ({fmt.integer(count.rows)} rows)"
            rows.append(Row((f"count(*), {count.method}", value)))
        else:  # a load or a count that did not run
            what = (
                f"pgbench -i, scale {rec.params.get('scale', '?')}"
                if rec.key in inits
                else f"count(*), {rec.params.get('method', rec.key)}"
            )
            rows.append(Row((what, status(rec)), _kind(rec)))
    if not rows:
        return None
    if study.kind(COUNT):
        notes.append(
            "count(*): Execution Time from EXPLAIN ANALYZE of select count(*) from "
            "pgbench_accounts, with the planner forced to the named plan."
        )
    return Table(
        ("Test Case", "Result"),
        tuple(rows),
        caption="Loading and scanning pgbench_accounts",
        notes=tuple(notes),
        numeric=(False, True),
    )


def _init_note(init: PgbenchInit) -> str:
    parts = [f"generate={init.generate}"]
    if init.partitions:
        parts.append(f"partitions={init.partitions}")
    if init.unlogged:
        parts.append("unlogged tables")
    if init.tablespace:
        parts.append(f"tablespace={init.tablespace}")
    if init.index_tablespace:
        parts.append(f"index tablespace={init.index_tablespace}")
    if init.database_bytes is not None:
        parts.append(f"database size {fmt.size(init.database_bytes)}")
    text = f"pgbench -i, scale {init.scale}: " + ", ".join(parts)
    if init.steps:
        order = sorted(
            init.steps.items(),
            key=lambda kv: INIT_STEPS.index(kv[0]) if kv[0] in INIT_STEPS else len(INIT_STEPS),
        )
        steps = ", ".join(f"{k} {fmt.seconds(v)}" for k, v in order)
        text += f"; steps: {steps}"
    return text + "."


def throughput_table(pts: Sequence[Point], target: str, meaning: Meaning | None = None) -> Table:
    modes = sorted({p.mode for p in pts}, key=mode_key)
    clients = sorted({p.clients for p in pts})
    index = {(p.mode, p.clients): p for p in pts}
    columns = ["Clients"]
    for mode in modes:
        columns += [f"{mode} tps", f"{mode} per-second spread", f"{mode} qps"]
    rows = []
    notes = []
    noisy: list[Point] = []
    for c in clients:
        cells = [str(c)]
        kind = ""
        for mode in modes:
            point = index.get((mode, c))
            if point is None:
                cells += ["not run", "", ""]
                continue
            tps, qps = point.tps, point.qps
            if tps is None or qps is None:
                cells += [status(point.not_ok[0]), "", ""]
                kind = kind or not_ok_kind(point.not_ok)
                continue
            tps_text = fmt.with_spread(tps)
            if point.disturbed:
                tps_text += f"; ⚠ {point.disturbed}/{len(point.ok)} disturbed"
                kind = NOISY
            cells += [tps_text, per_second_text(point), fmt.rate(qps.median)]
            if point.noisy:
                kind = NOISY
                noisy.append(point)
            for rec in point.not_ok:
                notes.append(f"{point.label}: one repeat {status(rec)}")
        rows.append(Row(tuple(cells), kind))
    notes += noise_notes(noisy, len([p for p in pts if p.ok]))
    if can_tell := detectable_note(pts):
        notes.append(can_tell)
    if disturbed := [p for p in pts if p.disturbed]:
        runs = sum(p.disturbed for p in disturbed)
        notes.append(
            f"⚠ disturbed: {runs} run(s) of {len(disturbed)} point(s) shared the machine with "
            "other work (the monitor's verdict, see Bottlenecks): their tps is not the "
            "server's alone."
        )
    notes.insert(0, _run_params(pts))
    per_txn = {r.mode: r.statements_per_txn for p in pts for _, r in p.ok}
    if per_txn:
        counts = ", ".join(f"{m}: {n}" for m, n in per_txn.items())
        notes.insert(1, f"qps = tps x SQL statements per transaction ({counts}).")
    notes.insert(
        1,
        "per-second spread: the coefficient of variation (standard deviation / mean) and the "
        "range of pgbench -P 1's per-second tps; ⚠ from a CV of "
        f"{100 * noise.HIGH_CV:.0f}%: the run's average hides swings that large.",
    )
    if any(p.tps is not None and p.tps.n > 1 for p in pts):
        notes.insert(1, "Repeated points: the median of the repeats. " + fmt.SPREAD_NOTE)
    if meaning is not None:
        server = [f"Server: {meaning.line()}."]
        if any(p.mode == "read-write" for p in pts):
            server += [f"read-write: {c}." for c in meaning.caveats()]
        notes[1:1] = server
    return Table(
        tuple(columns),
        tuple(rows),
        caption=f"Throughput per client count; target: {target}",
        notes=tuple(notes),
        numeric=(False,) + (True,) * (len(columns) - 1),
    )


def _run_params(pts: Sequence[Point]) -> str:
    runs = [r for p in pts for _, r in p.ok]
    if not runs:
        return "No run completed."
    durations = sorted({r.duration_s for r in runs})
    modes = sorted({r.query_mode for r in runs})
    # A custom script's "scaling factor" is pgbench's default, not a data size.
    scales = sorted({r.scale for r in runs if r.mode != SCRIPTS_MODE})
    scale = f", scale {'/'.join(str(s) for s in scales)}" if scales else ""
    threads = sorted({(r.clients, r.threads) for r in runs})
    return (
        f"pgbench -T {'/'.join(f'{d:g}' for d in durations)} s{scale}, query mode "
        f"{'/'.join(modes)}; threads (-j) per clients: "
        + ", ".join(f"{c} → {t}" for c, t in threads)
        + "."
    )


def latency_table(pts: Sequence[Point]) -> Table:
    columns = (
        "Mode",
        "Clients",
        "avg (ms)",
        "stddev (ms)",
        "p50 (ms)",
        "p95 (ms)",
        "p99 (ms)",
        "max (ms)",
    )
    rows = []
    sampled = set()
    for point in pts:
        if not point.ok:
            cells = (point.mode, str(point.clients), status(point.not_ok[0]), *[""] * 5)
            rows.append(Row(cells, not_ok_kind(point.not_ok)))
            continue
        runs = [r for _, r in point.ok]
        avg = statistics.median([r.latency_avg_ms for r in runs])
        summaries = [r.latency for r in runs if r.latency is not None]
        if summaries:
            pct = [
                fmt.ms(statistics.median([getattr(s, f"{name}_ms") for s in summaries]))
                for name in ("p50", "p95", "p99", "max")
            ]
            sampled |= {s.sampling_rate for s in summaries if s.sampling_rate < 1}
        else:
            pct = ["n/a"] * 4
        stddevs = [r.latency_stddev_ms for r in runs if r.latency_stddev_ms is not None]
        stddev = fmt.ms(statistics.median(stddevs)) if stddevs else "n/a"
        rows.append(Row((point.mode, str(point.clients), fmt.ms(avg), stddev, *pct)))
    notes = [
        "avg and stddev: pgbench's latency average and standard deviation; percentiles "
        "and max from its per-transaction log (-l). Median over repeats.",
    ]
    summaries = [r.latency for p in pts for _, r in p.ok if r.latency is not None]
    if summaries:
        notes.append(fmt.percentile_method([(s.samples, s.digits) for s in summaries]))
    if sampled:
        rates = ", ".join(f"{r * 100:.2g}%" for r in sorted(sampled))
        notes.append(
            f"Some percentiles come from a {rates} sample of transactions (pgbench "
            "--sampling-rate, chosen so logging costs pgbench nothing measurable); "
            "there max is the largest sampled latency."
        )
    return Table(
        columns,
        tuple(rows),
        caption="Transaction latency per client count",
        notes=tuple(notes),
        numeric=(False, *[True] * 7),
    )


def statements_tables(pts: Sequence[Point]) -> list[Table]:
    """Per-statement latencies (-r) of every mode (custom scripts too) at its most
    clients: the median over the repeats."""
    tables = []
    for mode in sorted({p.mode for p in pts}, key=mode_key):
        candidates = [p for p in pts if p.mode == mode and p.ok]
        if not candidates:
            continue
        point = max(candidates, key=lambda p: p.clients)
        medians = statement_medians([r for _, r in point.ok])
        if not medians:
            continue
        rows = tuple(
            Row((command, fmt.ms(latency), str(failures) if failures is not None else "n/a"))
            for command, latency, failures in medians
        )
        n = len(point.ok)
        which = f", median of {n} runs" if n > 1 else ""
        tables.append(
            Table(
                ("Statement", "Latency (ms)", "Failures"),
                rows,
                caption=f"Per-statement latencies (pgbench -r), {point.label}{which}",
                numeric=(False, True, True),
            )
        )
    return tables


# --------------------------------------------------------------------------
# Figures


def tps_vs_clients(pts: Sequence[Point]) -> Figure:
    series = []
    for mode in sorted({p.mode for p in pts}, key=mode_key):
        done = [p for p in pts if p.mode == mode and p.tps is not None]
        spreads = [p.tps for p in done if p.tps is not None]
        series.append(
            Series(
                label=mode,
                x=tuple(float(p.clients) for p in done),
                y=tuple(s.median for s in spreads),
                y_low=tuple(s.low for s in spreads),
                y_high=tuple(s.high for s in spreads),
                group=mode,
            )
        )
    return Figure(
        name="tps_vs_clients",
        title="TPS vs clients",
        x_label="clients",
        y_label="transactions/s",
        series=tuple(s for s in series if s.x),
        caption=_tps_caption(pts),
        log_x=_wide(pts),
    )


def _tps_caption(pts: Sequence[Point]) -> str:
    """Say what the bars are - and that there are none when nothing was repeated."""
    counts = sorted({len(p.ok) for p in pts if p.ok})
    if not counts or counts == [1]:
        return (
            "tps per client count, one run each: no error bars (the spread of each run's "
            "per-second tps is in the throughput table)."
        )
    runs = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    once = " (points measured once have none)" if counts[0] == 1 else ""
    return f"Median tps of {runs} runs per client count; bars span min to max of the runs{once}."


def tps_over_time(pts: Sequence[Point]) -> list[Figure]:
    """One figure per mode: select-only runs ten times the tps of read-write and
    would flatten its lines on a shared axis."""
    figures = []
    for mode in sorted({p.mode for p in pts}, key=mode_key):
        drawn = [
            (point, rec, seconds)
            for point in pts
            if point.mode == mode
            for rec, _ in point.ok
            if (seconds := point.progress.seconds(rec)).n
        ]
        # one run's points read at a time, each line reduced before the next is read
        buckets = decimate.Buckets.across((s.n, s.low, s.high) for _, _, s in drawn)
        series = []
        for point, rec, _ in drawn:
            repeat = rec.params.get("repeat")
            suffix = f" #{repeat}" if repeat is not None and len(point.ok) > 1 else ""
            clients = f"{point.clients} client{'s' if point.clients != 1 else ''}"
            # One colour per client count, one dash per repeat: 4 counts x 3 repeats
            # are 4 colours a reader tells apart, not 12 from a palette of 10.
            dash = next(i for i, (r, _) in enumerate(point.ok) if r is rec)
            line = point.progress.line(rec)
            series.append(buckets.line(clients + suffix, *line, group=clients, dash=dash))
        figures.append(
            Figure(
                name="tps_over_time_" + re.sub(r"[^A-Za-z0-9]+", "_", mode),
                title=f"TPS over time, {mode}",
                x_label="seconds since start",
                y_label="transactions/s",
                series=tuple(series),
                caption=buckets.caption(
                    "pgbench -P progress of every run: dips and trends show "
                    "checkpoints, warm-up or interference."
                ),
            )
        )
    return figures


def latency_vs_clients(pts: Sequence[Point]) -> Figure:
    series = []
    with_pct = any(r.latency is not None for p in pts for _, r in p.ok)
    for mode in sorted({p.mode for p in pts}, key=mode_key):
        done = [p for p in pts if p.mode == mode and p.ok]
        if not with_pct:
            ys = [statistics.median([r.latency_avg_ms for _, r in p.ok]) for p in done]
            series.append(
                Series(f"{mode} avg", tuple(float(p.clients) for p in done), tuple(ys), group=mode)
            )
            continue
        for name, dash in PERCENTILES:
            xs, ys = [], []
            for p in done:
                values = [getattr(r.latency, f"{name}_ms") for _, r in p.ok if r.latency]
                if values:
                    xs.append(float(p.clients))
                    ys.append(statistics.median(values))
            if xs:
                series.append(Series(f"{mode} {name}", tuple(xs), tuple(ys), group=mode, dash=dash))
    return Figure(
        name="latency_vs_clients",
        title="Latency percentiles vs clients" if with_pct else "Average latency vs clients",
        x_label="clients",
        y_label="latency (ms)",
        series=tuple(series),
        caption="Median over repeats."
        + (
            " Log scale: the modes differ by orders of magnitude." if _spans_decades(series) else ""
        ),
        log_x=_wide(pts),
        log_y=_spans_decades(series),
    )


def _spans_decades(series: Sequence[Series]) -> bool:
    values = [y for s in series for y in s.y if y > 0]
    return bool(values) and max(values) >= 20 * min(values)


# What pgbench's workloads record (TPC-B's load and count, a custom script's setup,
# the runs of both): their sections' records.
PGBENCH_KINDS = (PGBENCH_INIT, COUNT, PGBENCH_RUN, SQL_SETUP)


def workload_sections(
    records: Sequence[RunRecord],
    target: str,
    meaning: Meaning | None = None,
    progress: Progress | None = None,
) -> list[Section]:
    """One TPC-B-style section per pgbench workload, scale and duration (a
    campaign can sweep scales, as seed 004 does from 1 to 10,000); none when no
    pgbench workload ran."""
    groups: dict[tuple[str, object, object], list[RunRecord]] = {}
    study = index.read(records)
    for rec in study.only(*PGBENCH_KINDS):
        p = rec.params
        groups.setdefault((str(p.get("workload", BUILTIN)), p.get("scale"), None), []).append(rec)
    if not groups:
        return []
    # The monitor's records go along: they say which runs other work disturbed.
    watched = list(study.kind(MONITOR))
    durations_all = {r.params.get("duration_s") for r in study.kind(PGBENCH_RUN)}
    distinct = {k for k in groups if k[1] is not None or k[0] != BUILTIN}
    if len(distinct) <= 1 and len(durations_all) <= 1:
        # One workload at one scale: one section, as the quick study shows it.
        only = next(iter(distinct), (BUILTIN, None, None))
        mine = [*study.only(*PGBENCH_KINDS), *watched]
        section = pgbench_section(mine, target, meaning, progress)
        if only[0] != BUILTIN:
            section = retitled(section, f"{only[0]} (pgbench)", fmt.slug(only[0]))
        return [section]
    out = []
    for (workload, scale, _), recs in groups.items():
        runs = {r.key for r in index.read(recs).kind(PGBENCH_RUN)}
        durations = sorted(
            {r.params.get("duration_s") for r in recs if r.key in runs}, key=lambda d: d or 0
        )
        for duration in durations or [None]:
            subset = [
                r for r in recs if r.key not in runs or r.params.get("duration_s") == duration
            ]
            section = pgbench_section(subset + watched, target, meaning, progress)
            label = registry.title(workload)
            parts = [
                f"scale {scale}" if scale is not None else "",
                f"{duration} s runs" if len(durations) > 1 else "",
            ]
            suffix = ", ".join(p for p in parts if p)
            if len(groups) > 1 or len(durations) > 1 or workload != BUILTIN:
                section = retitled(
                    section,
                    f"{label} (pgbench)" + (f", {suffix}" if suffix else ""),
                    fmt.slug(f"{workload}-{scale}-{duration}"),
                )
            out.append(section)
    return out


class PgbenchReport:
    """The runs report of every workload pgbench drives (``RunsReport``)."""

    def sections(self, runs: Runs) -> list[Section]:
        return workload_sections(runs.records, runs.target, runs.meaning, runs.progress)

    def headline_rows(self, runs: Runs) -> list[Row]:
        return headline_rows(runs.records, runs.meaning, runs.progress)

    def sweeps(self, runs: Runs) -> bool:
        groups = {
            (r.params.get("workload"), r.params.get("scale"), r.params.get("duration_s"))
            for r in index.read(runs.records).kind(PGBENCH_RUN)
        }
        return len(groups) > 1

    def summary_figures(self, runs: Runs) -> list[Figure]:
        return figures.tps_vs_clients_by_scale(runs.records)


PGBENCH_REPORT = PgbenchReport()
