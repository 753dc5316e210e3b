"""Report section: what the host and the server did during each run, and the bottleneck verdict.

One verdict row per watched run (records of kind "monitor"), then, per run, a
table of the medians behind it and four figures: TPS with checkpoints marked,
client backends by wait event (stacked), CPU by consumer (stacked) and the
device's IOPS. Pure functions of the stored results.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Sequence

from pgrig.monitor.model import MonitorResult, Sample
from pgrig.registry import typed_result
from pgrig.report.model import FAILED, SKIPPED, Figure, Row, Section, Series, Table
from pgrig.results import RunRecord, Study

TITLE, ANCHOR = "Bottlenecks (host and server monitoring)", "monitor"
TOP_EVENTS = 5  # wait events drawn one by one; the rest are summed as "other"
SUFFIX = "/monitor"


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """None until there are records of this kind."""
    watched = [r for r in records if r.kind == "monitor"]
    if not watched:
        return None
    rows: list[Row] = []
    blocks: list[Table | Figure] = []
    details: list[Table | Figure] = []
    for rec in watched:
        label = run_label(rec)
        mon: MonitorResult | None = typed_result(rec)
        if mon is None:
            reason = f"{rec.status}: {rec.reason or 'no reason recorded'}"
            kind = SKIPPED if rec.status == "skipped" else FAILED
            rows.append(Row((label, reason, "", ""), kind))
            continue
        v = mon.verdict
        rows.append(Row((label, v.summary, "; ".join(v.secondary), "; ".join(v.against_limits))))
        details.append(medians_table(label, mon))
        details.extend(f for f in figures(slug(label), label, mon) if f.series)
    blocks.append(
        Table(
            ("Run", "Verdict (primary cause: evidence)", "Also seen", "Against the probes"),
            tuple(rows),
            caption="One primary cause per run, chosen by the rules in docs/monitor.md",
            notes=(
                "Shares of sampled backends come from pg_stat_activity once a second "
                "(client backends of the benchmark's database); CPU shares are of the whole "
                "machine, all CPUs = 100%.",
            ),
        )
    )
    return Section(TITLE, ANCHOR, blocks=tuple(blocks + details))


def run_label(rec: RunRecord) -> str:
    key = rec.key[: -len(SUFFIX)] if rec.key.endswith(SUFFIX) else rec.key
    return key


def slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_")


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "n/a"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.{digits}f}"
    return f"{text}{unit}"


def medians_table(label: str, mon: MonitorResult) -> Table:
    inside = [s for s in mon.samples if s.in_run] or list(mon.samples)
    rows: list[Row] = []

    def add(name: str, values: Sequence[float | None], unit: str = "", digits: int = 1) -> None:
        present = [v for v in values if v is not None]
        if not present:
            return
        rows.append(
            Row((name, _fmt(statistics.median(present), unit, digits), _fmt(max(present), unit)))
        )

    cpu = [s.cpu for s in inside]
    add("CPU busy (% of machine)", [c.busy for c in cpu])
    add("CPU server (%)", [c.server for c in cpu])
    add("CPU pgbench (%)", [c.client for c in cpu])
    add("CPU iowait (%)", [c.iowait for c in cpu])
    add("CPU steal (%)", [c.steal for c in cpu])
    add("busiest pgbench thread runnable (% of time)", [c.client_thread_demand_pct for c in cpu])
    add("server waiting for a CPU (% of its demand)", [c.server_runq_pct for c in cpu])
    add("context switches/s", [c.ctxt_s for c in cpu])
    add("run queue", [c.runq for c in cpu])
    for name in mon.devices:
        devs = [d for s in inside for d in s.devices if d.name == name]
        add(f"{name} r/s", [d.reads_s for d in devs])
        add(f"{name} w/s", [d.writes_s for d in devs])
        add(f"{name} read MiB/s", [d.read_mib_s for d in devs])
        add(f"{name} write MiB/s", [d.write_mib_s for d in devs])
        add(f"{name} ms per read", [d.read_await_ms for d in devs], digits=2)
        add(f"{name} ms per write", [d.write_await_ms for d in devs], digits=2)
        add(f"{name} flushes/s", [d.flushes_s for d in devs])
        add(f"{name} busy (%)", [d.util_pct for d in devs])
    mem = [s.memory for s in inside if s.memory is not None]
    add("Dirty (MiB)", [m.dirty_mib for m in mem])
    add("Writeback (MiB)", [m.writeback_mib for m in mem])
    add("network in / out (MiB/s)", [s.net_rx_mib_s + s.net_tx_mib_s for s in inside])
    pg = [s.pg for s in inside if s.pg is not None]
    ratios = [p.hit_ratio * 100 if p.hit_ratio is not None else None for p in pg]
    add("buffer hit ratio (%)", ratios, digits=2)
    add("commits/s", [p.commits_s for p in pg])
    add("rollbacks/s", [p.rollbacks_s for p in pg])
    add("blocks read/s", [p.blks_read_s for p in pg])
    add("temp MiB/s", [p.temp_mib_s for p in pg])
    add("WAL MiB/s", [p.wal_mib_s for p in pg], digits=2)
    add("WAL syncs/s", [p.wal_syncs_s for p in pg])
    add("buffers written by checkpointer/s", [p.buffers_checkpoint_s for p in pg])
    add("buffers written by bgwriter/s", [p.buffers_clean_s for p in pg])
    add("buffers written by backends/s", [p.buffers_backend_s for p in pg])
    notes = [
        f"{len(inside)} samples of {mon.interval_s:g} s inside the run; "
        f"{len(mon.checkpoints)} checkpoint(s) seen.",
        *mon.notes,
    ]
    return Table(
        ("Measure", "median", "max"),
        tuple(rows),
        caption=f"{label}: {mon.verdict.label}",
        notes=tuple(notes),
        numeric=(False, True, True),
        collapsed=True,
    )


def figures(name: str, label: str, mon: MonitorResult) -> list[Figure]:
    samples = list(mon.samples)
    return [
        tps_figure(name, label, mon),
        waits_figure(name, label, samples),
        cpu_figure(name, label, samples),
        device_figure(name, label, mon),
    ]


def _x(samples: Sequence[Sample]) -> tuple[float, ...]:
    return tuple(s.t_s for s in samples)


def tps_figure(name: str, label: str, mon: MonitorResult) -> Figure:
    points = [s for s in mon.samples if s.tps is not None]
    series = []
    if points:
        series.append(Series("tps", _x(points), tuple(s.tps or 0.0 for s in points), group="tps"))
    top = max((s.tps or 0.0 for s in points), default=1.0) or 1.0
    if mon.checkpoints:
        xs: list[float] = []
        ys: list[float] = []
        for c in mon.checkpoints:
            for t in (c.start_s, c.end_s):
                if t is None:
                    continue
                # NaN breaks the line: one vertical stroke per start and end.
                xs += [t, t, math.nan]
                ys += [0.0, top, math.nan]
        series.append(
            Series("checkpoint start / end", tuple(xs), tuple(ys), group="checkpoint", dash=1)
        )
    return Figure(
        name=f"monitor_{name}_tps",
        title=f"TPS and checkpoints, {label}",
        x_label="seconds since start",
        y_label="transactions/s",
        series=tuple(series),
        caption="pgbench -P per second; vertical lines mark when the checkpointer "
        "started and finished (from pg_stat_activity and pg_stat_bgwriter).",
    )


def waits_figure(name: str, label: str, samples: Sequence[Sample]) -> Figure:
    with_pg = [s for s in samples if s.pg is not None and s.pg.waits]
    totals: Counter[str] = Counter()
    for s in with_pg:
        assert s.pg is not None
        totals.update(s.pg.waits)
    events = [e for e, _ in totals.most_common(TOP_EVENTS)]
    if len(totals) > TOP_EVENTS:
        events.append("other")
    running = [0.0] * len(with_pg)
    series = []
    for i, event in enumerate(events):
        for j, s in enumerate(with_pg):
            assert s.pg is not None
            n = sum(s.pg.waits.values()) or 1
            if event == "other":
                count = sum(v for k, v in s.pg.waits.items() if k not in events)
            else:
                count = s.pg.waits.get(event, 0)
            running[j] += 100.0 * count / n
        series.append(Series(event, _x(with_pg), tuple(running), group=event, dash=i % 2))
    return Figure(
        name=f"monitor_{name}_waits",
        title=f"Client backends by wait event, {label}",
        x_label="seconds since start",
        y_label="% of backends (stacked)",
        series=tuple(series),
        caption="Stacked: each line is the running total of itself and the events listed "
        "before it; the gap between two lines is that event's share. CPU = active with no "
        "wait event; Client:ClientRead = waiting for pgbench.",
    )


def cpu_figure(name: str, label: str, samples: Sequence[Sample]) -> Figure:
    parts: list[tuple[str, list[float]]] = []
    if all(s.cpu.server is not None for s in samples):
        server = [s.cpu.server or 0.0 for s in samples]
        client = [s.cpu.client or 0.0 for s in samples]
        other = [
            max(0.0, s.cpu.busy - a - b) for s, a, b in zip(samples, server, client, strict=True)
        ]
        parts += [("server", server), ("pgbench", client), ("other processes", other)]
    else:
        parts += [
            ("user", [s.cpu.user for s in samples]),
            ("system", [s.cpu.system for s in samples]),
        ]
    parts += [
        ("iowait", [s.cpu.iowait for s in samples]),
        ("steal", [s.cpu.steal for s in samples]),
    ]
    running = [0.0] * len(samples)
    series = []
    for label_, values in parts:
        running = [r + v for r, v in zip(running, values, strict=True)]
        series.append(Series(label_, _x(samples), tuple(running), group=label_))
    ratios = [(s.t_s, s.pg.hit_ratio) for s in samples if s.pg and s.pg.hit_ratio is not None]
    if ratios:
        series.append(
            Series(
                "buffer hit ratio",
                tuple(t for t, _ in ratios),
                tuple(100.0 * r for _, r in ratios if r is not None),
                group="hit ratio",
                dash=1,
            )
        )
    return Figure(
        name=f"monitor_{name}_cpu",
        title=f"CPU and buffer hit ratio, {label}",
        x_label="seconds since start",
        y_label="% (CPU stacked, of the machine)",
        series=tuple(series),
        caption="CPU stacked by consumer (all CPUs = 100%); dashed: share of block "
        "requests found in shared_buffers (pg_stat_database).",
    )


def device_figure(name: str, label: str, mon: MonitorResult) -> Figure:
    series = []
    for i, dev in enumerate(mon.devices):
        pairs = [(s.t_s, d) for s in mon.samples for d in s.devices if d.name == dev]
        if not pairs or not any(d.reads_s or d.writes_s for _, d in pairs):
            continue
        x = tuple(t for t, _ in pairs)
        series.append(
            Series(f"{dev} r/s", x, tuple(d.reads_s for _, d in pairs), group="r", dash=i)
        )
        series.append(
            Series(f"{dev} w/s", x, tuple(d.writes_s for _, d in pairs), group="w", dash=i)
        )
        if any(d.flushes_s for _, d in pairs):
            series.append(
                Series(
                    f"{dev} flushes/s", x, tuple(d.flushes_s for _, d in pairs), group="f", dash=i
                )
            )
    return Figure(
        name=f"monitor_{name}_device",
        title=f"Device IOPS, {label}",
        x_label="seconds since start",
        y_label="I/O per second",
        series=tuple(series),
        caption="From /proc/diskstats, as iostat -x: MiB/s, wait per I/O and % busy are "
        "in the table above.",
    )
