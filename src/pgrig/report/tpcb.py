"""The TPC-B part of the report: load, count(*), pgbench runs per client count.

Repeated points are summarised by their median with the range beside it, and
flagged when the range is wider than ``fmt.NOISE_THRESHOLD_PCT``, so a reader
never takes one lucky run for the machine's speed.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pgrig.registry import typed_result
from pgrig.report import fmt
from pgrig.report.model import FAILED, NOISY, SKIPPED, Figure, Row, Section, Series, Table
from pgrig.results import CountResult, PgbenchInit, PgbenchRun, RunRecord

MODE_ORDER = ("select-only", "read-write")
PERCENTILES = (("p50", 0), ("p95", 1), ("p99", 2))


@dataclass(frozen=True)
class Point:
    """All runs of one mode at one client count."""

    mode: str
    clients: int
    ok: tuple[tuple[RunRecord, PgbenchRun], ...]
    not_ok: tuple[RunRecord, ...]  # failed or skipped repeats

    @property
    def tps(self) -> fmt.Spread | None:
        return fmt.spread([r.tps for _, r in self.ok]) if self.ok else None

    @property
    def qps(self) -> fmt.Spread | None:
        return fmt.spread([r.qps for _, r in self.ok]) if self.ok else None

    @property
    def label(self) -> str:
        return f"{self.mode}, {self.clients} client{'s' if self.clients != 1 else ''}"

    def representative(self) -> tuple[RunRecord, PgbenchRun] | None:
        """The repeat closest to the median tps: the one to show in detail."""
        if not self.ok:
            return None
        median = statistics.median([r.tps for _, r in self.ok])
        return min(self.ok, key=lambda pair: abs(pair[1].tps - median))


def _mode_key(mode: str) -> tuple[int, str]:
    return (MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER), mode)


def points(records: Sequence[RunRecord]) -> list[Point]:
    ok: dict[tuple[str, int], list[tuple[RunRecord, PgbenchRun]]] = {}
    not_ok: dict[tuple[str, int], list[RunRecord]] = {}
    for rec in records:
        if rec.kind != "pgbench_run":
            continue
        res: PgbenchRun | None = typed_result(rec)
        # The campaign's name for the mode (a custom workload's name) over pgbench's "custom".
        mode = str(rec.params.get("mode") or (res.mode if res is not None else "unknown"))
        clients = res.clients if res is not None else int(rec.params.get("clients", 0))
        key = (mode, clients)
        ok.setdefault(key, [])
        not_ok.setdefault(key, [])
        if res is None:
            not_ok[key].append(rec)
        else:
            ok[key].append((rec, res))
    keys = sorted(ok, key=lambda k: (_mode_key(k[0]), k[1]))
    return [Point(m, c, tuple(ok[(m, c)]), tuple(not_ok[(m, c)])) for m, c in keys]


def _status(rec: RunRecord) -> str:
    return f"{rec.status}: {rec.reason or 'no reason recorded'}"


def _not_ok_kind(recs: Sequence[RunRecord]) -> str:
    return SKIPPED if all(r.status == "skipped" for r in recs) else FAILED


def _tps_qps(point: Point) -> str:
    if point.tps is None or point.qps is None:
        return _status(point.not_ok[0])
    return f"tps: {fmt.rate(point.tps.median)}; qps: {fmt.rate(point.qps.median)}"


def headline_rows(records: Sequence[RunRecord]) -> list[Row]:
    """Seed 000's summary rows: load time, then each mode at its most clients."""
    rows = []
    for rec in records:
        if rec.kind != "pgbench_init":
            continue
        init: PgbenchInit | None = typed_result(rec)
        if init is None:
            scale = rec.params.get("scale", "?")
            rows.append(Row((f"TPC-B load, scale {scale}", _status(rec)), _kind(rec)))
        else:
            rows.append(Row((_init_label(init), _init_value(init))))
    by_mode: dict[str, Point] = {}
    for point in points(records):
        if point.mode not in by_mode or point.ok or not by_mode[point.mode].ok:
            by_mode[point.mode] = point
    for point in by_mode.values():
        kind = "" if point.ok else _not_ok_kind(point.not_ok)
        rows.append(Row((f"TPC-B {point.label}", _tps_qps(point)), kind))
    return rows


def _kind(rec: RunRecord) -> str:
    return SKIPPED if rec.status == "skipped" else FAILED


def _init_label(init: PgbenchInit) -> str:
    return f"TPC-B load, scale {init.scale} ({fmt.integer(init.rows)} rows)"


def _init_value(init: PgbenchInit) -> str:
    return f"{fmt.seconds(init.elapsed_s)} ({fmt.rate(init.rows_per_s)} rows/s)"


# --------------------------------------------------------------------------


def tpcb_section(records: Sequence[RunRecord], target: str) -> Section:
    title, anchor = "TPC-B (pgbench)", "tpcb"
    load = load_table(records)
    pts = points(records)
    if load is None and not pts:
        return Section(title, anchor, ("Not run in this study.",))
    blocks: list[Table | Figure] = []
    if load is not None:
        blocks.append(load)
    if pts:
        candidates = (
            throughput_table(pts, target),
            tps_vs_clients(pts),
            *tps_over_time(pts),
            latency_table(pts),
            latency_vs_clients(pts),
            statements_table(pts),
        )
        # A figure with nothing to draw (every run failed) is left out; the tables say why.
        blocks += [b for b in candidates if b is not None and not _empty_figure(b)]
    return Section(title, anchor, blocks=tuple(blocks))


def _empty_figure(block: Table | Figure) -> bool:
    return isinstance(block, Figure) and not block.series


def _wide(pts: Sequence[Point]) -> bool:
    """Client counts spanning 8x or more read better on a log2 axis (1, 2, 4 ... 64)."""
    clients = [p.clients for p in pts if p.clients > 0]
    return bool(clients) and max(clients) >= 8 * min(clients)


def load_table(records: Sequence[RunRecord]) -> Table | None:
    rows: list[Row] = []
    notes: list[str] = []
    for rec in records:
        if rec.kind == "pgbench_init":
            init: PgbenchInit | None = typed_result(rec)
            if init is None:
                label = f"pgbench -i, scale {rec.params.get('scale', '?')}"
                rows.append(Row((label, _status(rec)), _kind(rec)))
                continue
            rows.append(Row((_init_label(init), _init_value(init))))
            notes.append(_init_note(init))
        elif rec.kind == "count":
            count: CountResult | None = typed_result(rec)
            if count is None:
                label = f"count(*), {rec.params.get('method', rec.key)}"
                rows.append(Row((label, _status(rec)), _kind(rec)))
                continue
            value = f"{fmt.ms(count.execution_ms)} ms ({fmt.integer(count.rows)} rows)"
            rows.append(Row((f"count(*), {count.method}", value)))
    if not rows:
        return None
    if any(r.kind == "count" for r in records):
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
        steps = ", ".join(f"{k} {fmt.seconds(v)}" for k, v in init.steps.items())
        text += f"; steps: {steps}"
    return text + "."


def throughput_table(pts: Sequence[Point], target: str) -> Table:
    modes = sorted({p.mode for p in pts}, key=_mode_key)
    clients = sorted({p.clients for p in pts})
    index = {(p.mode, p.clients): p for p in pts}
    columns = ["Clients"]
    for mode in modes:
        columns += [f"{mode} tps", f"{mode} qps"]
    rows = []
    notes = []
    for c in clients:
        cells = [str(c)]
        kind = ""
        for mode in modes:
            point = index.get((mode, c))
            if point is None:
                cells += ["not run", ""]
                continue
            tps, qps = point.tps, point.qps
            if tps is None or qps is None:
                cells += [_status(point.not_ok[0]), ""]
                kind = kind or _not_ok_kind(point.not_ok)
                continue
            cells += [fmt.with_spread(tps), fmt.rate(qps.median)]
            if tps.noisy:
                kind = NOISY
                notes.append(
                    f"⚠ {point.label}: tps varied by {tps.range_pct:.1f}% across {tps.n} "
                    f"repeats (more than {fmt.NOISE_THRESHOLD_PCT:g}%): treat differences "
                    "smaller than that as noise; rerun with a longer duration or more repeats "
                    "and check for background load (see TPS over time)."
                )
            for rec in point.not_ok:
                notes.append(f"{point.label}: one repeat {_status(rec)}")
        rows.append(Row(tuple(cells), kind))
    notes.insert(0, _run_params(pts))
    per_txn = {r.mode: r.statements_per_txn for p in pts for _, r in p.ok}
    if per_txn:
        counts = ", ".join(f"{m}: {n}" for m, n in per_txn.items())
        notes.insert(1, f"qps = tps x SQL statements per transaction ({counts}).")
    if any(p.tps is not None and p.tps.n > 1 for p in pts):
        notes.insert(1, "Repeated points: median, then (min–max, range = (max − min) / median).")
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
    scales = sorted({r.scale for r in runs})
    threads = sorted({(r.clients, r.threads) for r in runs})
    return (
        f"pgbench -T {'/'.join(f'{d:g}' for d in durations)} s, scale "
        f"{'/'.join(str(s) for s in scales)}, query mode {'/'.join(modes)}; threads (-j) "
        "per clients: " + ", ".join(f"{c} → {t}" for c, t in threads) + "."
    )


def latency_table(pts: Sequence[Point]) -> Table:
    columns = ("Mode", "Clients", "avg (ms)", "p50 (ms)", "p95 (ms)", "p99 (ms)", "max (ms)")
    rows = []
    sampled = set()
    for point in pts:
        if not point.ok:
            cells = (point.mode, str(point.clients), _status(point.not_ok[0]), "", "", "", "")
            rows.append(Row(cells, _not_ok_kind(point.not_ok)))
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
        rows.append(Row((point.mode, str(point.clients), fmt.ms(avg), *pct)))
    notes = [
        "avg: pgbench's latency average; percentiles and max from its per-transaction "
        "log (-l). Median over repeats.",
    ]
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
        numeric=(False, True, True, True, True, True, True),
    )


def statements_table(pts: Sequence[Point]) -> Table | None:
    """Per-statement latencies (-r) of the read-write run with the most clients."""
    candidates = [p for p in pts if p.mode == "read-write" and p.ok]
    if not candidates:
        return None
    point = max(candidates, key=lambda p: p.clients)
    rep = point.representative()
    assert rep is not None
    rec, run = rep
    if not run.statements:
        return None
    rows = tuple(
        Row(
            (
                s.command,
                fmt.ms(s.latency_ms),
                str(s.failures) if s.failures is not None else "n/a",
            )
        )
        for s in run.statements
    )
    repeat = rec.params.get("repeat")
    which = f", repeat {repeat}" if repeat is not None and len(point.ok) > 1 else ""
    return Table(
        ("Statement", "Latency (ms)", "Failures"),
        rows,
        caption=f"Per-statement latencies (pgbench -r), {point.label}{which}",
        numeric=(False, True, True),
    )


# --------------------------------------------------------------------------
# Figures


def tps_vs_clients(pts: Sequence[Point]) -> Figure:
    series = []
    for mode in sorted({p.mode for p in pts}, key=_mode_key):
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
        caption="Median tps per client count; bars span min to max of the repeats.",
        log_x=_wide(pts),
    )


def tps_over_time(pts: Sequence[Point]) -> list[Figure]:
    """One figure per mode: select-only runs ten times the tps of read-write and
    would flatten its lines on a shared axis."""
    figures = []
    for mode in sorted({p.mode for p in pts}, key=_mode_key):
        series = []
        for point in (p for p in pts if p.mode == mode):
            for rec, run in point.ok:
                if not run.progress:
                    continue
                repeat = rec.params.get("repeat")
                suffix = f" #{repeat}" if repeat is not None and len(point.ok) > 1 else ""
                label = f"{point.clients} client{'s' if point.clients != 1 else ''}{suffix}"
                series.append(
                    Series(
                        label=label,
                        x=tuple(p.t_s for p in run.progress),
                        y=tuple(p.tps for p in run.progress),
                        group=label,
                    )
                )
        figures.append(
            Figure(
                name="tps_over_time_" + re.sub(r"[^A-Za-z0-9]+", "_", mode),
                title=f"TPS over time, {mode}",
                x_label="seconds since start",
                y_label="transactions/s",
                series=tuple(series),
                caption="pgbench -P progress of every run: dips and trends show checkpoints, "
                "warm-up or interference.",
            )
        )
    return figures


def latency_vs_clients(pts: Sequence[Point]) -> Figure:
    series = []
    with_pct = any(r.latency is not None for p in pts for _, r in p.ok)
    for mode in sorted({p.mode for p in pts}, key=_mode_key):
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
