"""Report section: what the host and the server did during each run, and the bottleneck verdict.

One verdict row per watched run (records of kind "monitor"), with the other
load on the machine and the per-second noise; warnings above it for runs that
other processes disturbed or that were noisy; then, per run and folded, what
else was seen, the run against the probes' limits, a table of the medians
behind it and four figures: TPS with checkpoints marked, client
backends by wait event (stacked), CPU by consumer (stacked) and the device's
IOPS. Pure functions of the stored results.
"""

from __future__ import annotations

import math
import re
import statistics
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import PurePath

from pgrig.document.model import FAILED, NOISY, SKIPPED, Figure, Row, Section, Series, Table
from pgrig.monitor import interference
from pgrig.monitor import noise as noise_
from pgrig.monitor.limits import WAL_SYNCS, limits_from, wal_syncs_line
from pgrig.monitor.model import MONITOR, MonitorResult
from pgrig.probe import FSYNC
from pgrig.report import decimate, index, storage
from pgrig.report.index import StudyIndex
from pgrig.report.samples import Columns, SampleReader, own_samples
from pgrig.results import RunRecord, Study

TITLE, ANCHOR = "Bottlenecks (host and server monitoring)", "monitor"
TOP_EVENTS = 5  # wait events drawn one by one; the rest are summed as "other"
SUFFIX = "/monitor"


def section(
    study: Study, records: Sequence[RunRecord], samples: SampleReader = own_samples
) -> Section | None:
    """None until there are records of this kind. Each run's samples are read
    when its table and figures are drawn, and let go after."""
    study_index = index.read(records)
    watched = study_index.kind(MONITOR)
    if not watched:
        return None
    rows: list[Row] = []
    blocks: list[Table | Figure] = []
    details: list[Table | Figure] = []
    by_key = {r.key: r for r in study_index.records}
    fdatasync = _fdatasync(study_index)
    behind = storage.layered(study_index)
    for rec in watched:
        label = run_label(rec)
        mon = study_index.monitors.get(rec.key.removesuffix(SUFFIX))
        if mon is None:
            reason = f"{rec.status}: {rec.reason or 'no reason recorded'}"
            kind = SKIPPED if rec.status == "skipped" else FAILED
            rows.append(Row((label, reason, "", ""), kind))
            continue
        v = mon.verdict
        flagged = mon.disturbed is not None or noise_.is_noisy(mon.noise)
        rows.append(
            Row(
                (
                    label,
                    v.summary,
                    other_load_text(mon),
                    noise_.describe(mon.noise) if mon.noise else "n/a",
                ),
                NOISY if flagged else "",
            )
        )
        cols = Columns(samples(rec), mon.devices)
        client = client_name(by_key.get(str(rec.params.get("run"))))
        details.append(
            medians_table(label, mon, cols, fdatasync.get(rec.target), client, rec.target in behind)
        )
        # A run with nothing to draw in a figure (a pg_basebackup run has no tps) gets
        # none; nor does one sample (a second-long run), a line needs two.
        drawn = figures(slug(label), label, mon, cols, client)
        details.extend(f for f in drawn if f.drawable and f.x_points >= 2)
        del cols  # before the next run's are read
    blocks.append(
        Table(
            (
                "Run",
                "Verdict (primary cause: evidence)",
                "Other load",
                "Per-second tps",
            ),
            tuple(rows),
            caption="One primary cause per run, chosen by the rules in docs/monitor.md",
            notes=(
                "Shares of sampled backends come from pg_stat_activity once a second "
                "(client backends of the benchmark's database); CPU shares are of the whole "
                "machine, all CPUs = 100%.",
                "Other load: CPU of processes that are neither the server, pgbench nor pgrig "
                "(mean over the run), the busiest by name, and their share of the target "
                "device's bytes. Per-second tps: coefficient of variation and range of "
                "pgbench -P. What else was seen, and the run against the probes' limits, "
                "are in each run's details below.",
            ),
        )
    )
    paragraphs = summary_warnings(study_index)
    return Section(TITLE, ANCHOR, paragraphs=paragraphs, blocks=tuple(blocks + details))


def other_load_text(mon: MonitorResult) -> str:
    """'DISTURBED: 54% CPU (cpuhog 46%, ...)' or '2% CPU' or 'n/a' (not attributed)."""
    o = mon.others
    if o is None:
        return "n/a"
    text = f"{o.cpu_pct + o.steal_pct:.0f}% CPU"
    if o.top:
        text += f" ({interference.names(o.top)})"
    if o.io_share is not None and o.device_mib_s and o.io_share >= 0.005:  # not "0% of"
        text += f"; {o.io_share:.0%} of the device's bytes"
    return f"DISTURBED: {text}" if mon.disturbed is not None else text


MANY = 3  # more warnings than this of one kind become one sentence for them all


def _watched(records: Sequence[RunRecord]) -> list[tuple[str, MonitorResult]]:
    out = []
    for rec, mon in index.read(records, MONITOR).ok(MONITOR, MonitorResult):
        out.append((run_label(rec), mon))
    return out


def _top_names(mons: Sequence[MonitorResult], n: int = 3) -> str:
    """The other processes that took most CPU over several runs, by name, with
    their mean share: 'cpuhog 48%, postgres 20%'."""
    total: dict[str, float] = {}
    for mon in mons:
        assert mon.disturbed is not None
        for p in mon.disturbed.top:
            total[p.name] = total.get(p.name, 0.0) + p.cpu_pct
    busiest = sorted(total.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{name} {cpu / len(mons):.0f}%" for name, cpu in busiest)


def _pct_range(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}%"


def busy_before(records: Sequence[RunRecord]) -> str | None:
    """'Before the study the idle machine was 35% busy: ...' when the idle
    sample taken before the first run found other work, else None."""
    for _, mon in _watched(records):
        b = mon.baseline
        if b is not None and interference.baseline_busy(b):
            who = interference.names(b.top)
            return (
                f"Before the study the idle machine was {b.busy_pct:.0f}% busy: other "
                f"processes {b.other_pct:.0f}%, steal {b.steal_pct:.0f}%"
                + (f" ({who})" if who else "")
                + "."
            )
    return None


def disturbed_summary(records: Sequence[RunRecord]) -> str | None:
    """One sentence for the top of a report: how many measured runs other work
    disturbed, how much it took and who it was; None when none was."""
    watched = _watched(records)
    hit = [mon for _, mon in watched if mon.disturbed is not None]
    if not hit:
        return None
    cpu = [mon.disturbed.cpu_pct for mon in hit if mon.disturbed is not None]
    io = [m.disturbed.io_share for m in hit if m.disturbed is not None and m.disturbed.io_share]
    text = (
        f"{len(hit)} of {len(watched)} measured runs shared the machine with other work: "
        f"other processes took {_pct_range(cpu)} of the CPU ({_top_names(hit)})"
    )
    if io:
        # seed002's runs: "up to 0% of the target device's bytes" (0.3% rounded down)
        most = f"up to {max(io):.0%}" if max(io) >= 0.005 else "less than 1%"
        text += f" and {most} of the target device's bytes"
    return text


def closing_warning(records: Sequence[RunRecord]) -> str | None:
    """The console's last word before the report's paths, when other work
    disturbed measured runs: how many, how much, who, and what to do."""
    disturbed = disturbed_summary(records)
    if disturbed is None:
        return None
    return f"{disturbed}; their numbers are not the server's alone: rerun on a quiet machine"


def summary_warnings(records: Sequence[RunRecord]) -> tuple[str, ...]:
    """Warnings to put above the monitor's table: a busy machine before the
    study, runs other processes disturbed (with who and how much), noisy runs -
    one per run, or one for them all when there are many."""
    out: list[str] = []
    watched = _watched(records)
    if before := busy_before(records):
        out.append(f"Warning: {before}")
    disturbed = [(label, mon) for label, mon in watched if mon.disturbed is not None]
    why = "their numbers are not the server's alone (they do not count towards until_ci_pct)"
    if len(disturbed) > MANY:
        out.append(f"Warning: {disturbed_summary(records)}; {why}. Each run's share: Other load.")
    elif disturbed:
        runs = " | ".join(f"{lb}: {interference.disturbance(m)}" for lb, m in disturbed)
        out.append(
            f"Warning: {len(disturbed)} run(s) shared the machine with other work; {why}. {runs}"
        )
    noisy = [(label, mon) for label, mon in watched if noise_.warning(mon) is not None]
    if len(noisy) > MANY:
        out.append(f"Warning: {_noisy_summary([m for _, m in noisy], len(watched))}")
    elif noisy:
        out.append(
            f"Warning: {len(noisy)} noisy run(s). "
            + " | ".join(f"{label}: {noise_.warning(mon)}" for label, mon in noisy)
        )
    return tuple(out)


def _noisy_summary(noisy: Sequence[MonitorResult], watched: int) -> str:
    """'24 of 24 runs were noisy (per-second tps CV 11–53%): 24 shared the
    machine: rerun on a quiet machine; ...' - the advice of ``noise.warning``
    once, with how many runs it concerns."""
    cvs = [100 * m.noise.cv for m in noisy if m.noise is not None]
    advice = []
    if busy := sum(m.disturbed is not None for m in noisy):
        advice.append(f"{busy} shared the machine with other work: rerun on a quiet machine")
    if ckpt := sum(any(c.completed or c.end_s is None for c in m.checkpoints) for m in noisy):
        advice.append(
            f"{ckpt} had a checkpoint inside: run longer than checkpoint_timeout, or "
            "checkpoint before each run"
        )
    if short := sum(m.noise is not None and noise_.is_short(m.noise) for m in noisy):
        advice.append(f"{short} lasted under 30 s: run longer (30 s or more)")
    if not advice:
        advice.append("run longer or repeat, and look at the TPS plots for a trend or dips")
    return (
        f"{len(noisy)} of {watched} runs were noisy (per-second tps CV {_pct_range(cvs)}): "
        + "; ".join(advice)
        + "."
    )


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


def client_name(run: RunRecord | None) -> str:
    """The program whose CPU the monitor counts as the client's: the measured run's
    own command (pg_basebackup's records always kept it); pgbench for a record
    made before pgbench's was kept."""
    argv = run.result.get("argv") if run is not None and run.result else None
    if isinstance(argv, list) and argv and isinstance(argv[0], str):
        return PurePath(argv[0]).name
    return "pgbench"


def _fdatasync(study: StudyIndex) -> dict[str, float]:
    """Each target's fdatasync ops/s: the median of its pg_test_fsync runs, the
    figure the report's headline shows."""
    probes: dict[str, list[object]] = {}
    for rec, res in study.ok(FSYNC, object):
        probes.setdefault(rec.target, []).append(res)
    out = {}
    for target, results in probes.items():
        limits = limits_from(results)
        if limits is not None and limits.fdatasync_ops:
            out[target] = limits.fdatasync_ops
    return out


def _against(mon: MonitorResult, cols: Columns, fdatasync: float | None) -> tuple[str, ...]:
    """The note on the verdict's lines against the probes, its WAL syncs against
    ``fdatasync`` (the median of the target's pg_test_fsync runs): a verdict
    recorded before pgrig took the median compared the last run's (1,088 ops/s
    beside a headline of 6,847)."""
    lines = mon.verdict.against_limits
    syncs = cols.present("pg.wal_syncs_s", cols.inside()) if fdatasync else []
    if syncs and fdatasync is not None:
        lines = tuple(wal_syncs_line(syncs, fdatasync) if a.startswith(WAL_SYNCS) else a
                      for a in lines)  # fmt: skip
    return (f"Against the probes: {'; '.join(lines)}.",) if lines else ()


def medians_table(
    label: str,
    mon: MonitorResult,
    cols: Columns,
    fdatasync: float | None = None,
    client: str = "pgbench",
    layer: bool = False,
) -> Table:
    """``layer``: the target is behind a latency layer, whose FUSE process serves
    the server's I/O: the server's own reads and writes are not seen through it."""
    inside = cols.inside()
    rows: list[Row] = []

    def add(name: str, column: str, unit: str = "", digits: int = 1) -> None:
        present = cols.present(column, inside)
        if not present or (column == "cpu.client" and not any(present)):  # no client ran
            return
        rows.append(
            Row((name, _fmt(statistics.median(present), unit, digits), _fmt(max(present), unit)))
        )

    add("CPU busy (% of machine)", "cpu.busy")
    add("CPU server (%)", "cpu.server")
    add(f"CPU {client} (%)", "cpu.client")
    add("CPU pgrig (%)", "cpu.pgrig")
    add("CPU other processes (%)", "cpu.other")
    add("CPU kernel threads (%)", "cpu.kernel")
    add("CPU iowait (%)", "cpu.iowait")
    add("CPU steal (%)", "cpu.steal")
    add("busiest pgbench thread runnable (% of time)", "cpu.client_thread_demand_pct")
    add("server waiting for a CPU (% of its demand)", "cpu.server_runq_pct")
    add("context switches/s", "cpu.ctxt_s")
    add("run queue", "cpu.runq")
    if layer:
        for what in ("reads from", "writes to"):
            rows.append(Row((f"server's own {what} storage (MiB/s)", storage.NOT_SEEN, "")))
    else:
        add("server's own reads from storage (MiB/s)", "io.server_read_mib_s", digits=2)
        add("server's own writes to storage (MiB/s)", "io.server_write_mib_s", digits=2)
    dirtied = "io.server_dirtied_mib_s"
    add("server's pages dirtied (MiB/s, /proc/<pid>/io write_bytes)", dirtied, digits=2)
    for name in mon.devices:
        dev = f"dev.{name}."
        add(f"{name} r/s (device-wide)", dev + "reads_s")
        add(f"{name} w/s (device-wide)", dev + "writes_s")
        add(f"{name} read MiB/s (device-wide)", dev + "read_mib_s")
        add(f"{name} write MiB/s (device-wide)", dev + "write_mib_s")
        add(f"{name} ms per read", dev + "read_await_ms", digits=2)
        add(f"{name} ms per write", dev + "write_await_ms", digits=2)
        add(f"{name} flushes/s", dev + "flushes_s")
        add(f"{name} busy (%)", dev + "util_pct")
    add("Dirty (MiB, host-wide)", "memory.dirty_mib")
    add("Writeback (MiB, host-wide)", "memory.writeback_mib")
    add("network in / out (MiB/s)", "net_mib_s")
    add("buffer hit ratio (%)", "pg.hit_pct", digits=2)
    add("commits/s", "pg.commits_s")
    add("rollbacks/s", "pg.rollbacks_s")
    add("blocks read/s", "pg.blks_read_s")
    add("temp MiB/s", "pg.temp_mib_s")
    add("WAL MiB/s", "pg.wal_mib_s", digits=2)
    syncs, writes = cols.present("pg.wal_syncs_s", inside), cols.present("pg.wal_writes_s", inside)
    if syncs and not any(syncs) and any(writes):  # seed001-login printed "0.0 WAL syncs/s"
        rows.append(Row(("WAL syncs/s", "none counted: each WAL write syncs itself "
                         "(wal_sync_method open_datasync or open_sync)", "")))  # fmt: skip
        add("WAL writes/s (each a sync)", "pg.wal_writes_s")
    else:
        add("WAL syncs/s", "pg.wal_syncs_s")
    add("buffers written by checkpointer/s", "pg.buffers_checkpoint_s")
    add("buffers written by bgwriter/s", "pg.buffers_clean_s")
    add("buffers written by backends/s", "pg.buffers_backend_s")
    notes = [
        *([f"Also seen: {'; '.join(mon.verdict.secondary)}."] if mon.verdict.secondary else []),
        *_against(mon, cols, fdatasync),
        f"{len(inside)} samples of {mon.interval_s:g} s inside the run; "
        f"{len(mon.checkpoints)} checkpoint(s) seen.",
        "Device and Dirty/Writeback rows count every process on the machine; the server's "
        "own rows are its processes' /proc/<pid>/io, capped each second at the device's: "
        "write_bytes counts a page each time it is dirtied anew, not what reached the "
        "device (the 'pages dirtied' row, uncapped, can exceed the device's writes).",
        *mon.notes,
    ]
    if mon.disturbed is not None:
        notes.insert(0, f"Disturbed: {interference.disturbance(mon)}.")
    if warning := noise_.warning(mon):
        notes.insert(0, warning)
    return Table(
        ("Measure", "median", "max"),
        tuple(rows),
        caption=f"{label}: {mon.verdict.label}",
        notes=tuple(notes),
        numeric=(False, True, True),
        collapsed=True,
    )


def figures(
    name: str, label: str, mon: MonitorResult, cols: Columns, client: str = "pgbench"
) -> list[Figure]:
    """The run's four figures; a long run's lines are drawn as the min and max
    of each bucket (``decimate``), its table above from every sample."""
    return [
        tps_figure(name, label, mon, cols),
        waits_figure(name, label, cols),
        cpu_figure(name, label, cols, client),
        device_figure(name, label, mon, cols),
    ]


def _has_client(cols: Columns) -> bool:
    """pgbench ran beside the server in this run: its CPU was seen above zero."""
    return any(v > 0 for v in cols.get("cpu.client") if not math.isnan(v))


def _where(cols: Columns, column: str) -> tuple[array[float], array[float]]:
    """(t_s, value) of the samples that have a value in ``column``."""
    t, values = cols.get("t_s"), cols.get(column)
    x, y = array("d"), array("d")
    for i, v in enumerate(values):
        if not math.isnan(v):
            x.append(t[i])
            y.append(v)
    return x, y


def tps_figure(name: str, label: str, mon: MonitorResult, cols: Columns) -> Figure:
    x, tps = _where(cols, "tps")
    buckets = decimate.Buckets.over(cols.get("t_s"))
    series = []
    if tps:
        series.append(buckets.line("tps", x, tps, group="tps"))
    top = max(tps, default=1.0) or 1.0
    # Checkpoint marks alone, on a made-up 0-1 tps axis, say nothing: no tps, no figure.
    if tps and mon.checkpoints:
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
        caption=buckets.caption(
            "pgbench -P per second; vertical lines mark when the checkpointer "
            "started and finished (from pg_stat_activity and pg_stat_bgwriter)."
        ),
    )


def waits_figure(name: str, label: str, cols: Columns) -> Figure:
    t = cols.get("t_s")
    x = array("d", (t[j] for j, _ in cols.waits()))
    buckets = decimate.Buckets.over(t)
    events = [e for e, _ in cols.wait_totals.most_common(TOP_EVENTS)]
    if len(cols.wait_totals) > TOP_EVENTS:
        events.append("other")
    drawn = {cols.events.index(e) for e in events if e != "other"}

    def share(event: str) -> Iterator[float]:
        """The event's % of the sampled backends, sample by sample."""
        k = cols.events.index(event) if event != "other" else -1
        for _, waits in cols.waits():
            n = sum(v for _, v in waits) or 1
            if event == "other":
                count = sum(v for e, v in waits if e not in drawn)
            else:
                count = next((v for e, v in waits if e == k), 0)
            yield 100.0 * count / n

    series = _stacked(buckets, x, [(event, share(event)) for event in events], dashed=True)
    return Figure(
        name=f"monitor_{name}_waits",
        title=f"Client backends by wait event, {label}",
        x_label="seconds since start",
        y_label="% of backends (stacked)",
        series=series,
        stacked=True,
        caption=buckets.caption(
            "Stacked: each band is one event's share of the sampled backends, the bands "
            "adding up to 100%. CPU = active with no "
            "wait event; Client:ClientRead = waiting for pgbench."
        ),
    )


def cpu_figure(name: str, label: str, cols: Columns, client: str = "pgbench") -> Figure:
    def col(field: str) -> array[float]:
        return cols.get(f"cpu.{field}")

    def known(field: str) -> bool:
        return not any(math.isnan(v) for v in col(field))

    def zero(field: str) -> array[float]:
        return array("d", (0.0 if math.isnan(v) else v for v in col(field)))

    parts: list[tuple[str, Sequence[float]]] = []
    if known("server"):
        server, client_cpu = zero("server"), zero("client")
        parts.append(("server", server))
        if _has_client(cols):
            parts.append((client, client_cpu))
        if known("other"):
            parts += [
                ("pgrig", zero("pgrig")),
                (
                    "kernel threads, interrupts",
                    array(
                        "d", (k + irq for k, irq in zip(zero("kernel"), col("irq"), strict=True))
                    ),
                ),
                ("other processes", zero("other")),
            ]
        else:  # stored before attribution: the rest of the busy time
            rest = zip(col("busy"), col("steal"), server, client_cpu, strict=True)
            parts.append(("the rest", array("d", (max(0.0, u - s - a - b) for u, s, a, b in rest))))
    else:
        parts += [("user", col("user")), ("system", col("system")), ("irq", col("irq"))]
    parts += [("steal", col("steal")), ("iowait", col("iowait"))]
    x = cols.get("t_s")
    buckets = decimate.Buckets.over(x)
    series = _stacked(buckets, x, parts)
    return Figure(
        name=f"monitor_{name}_cpu",
        title=f"CPU by consumer, {label}",
        x_label="seconds since start",
        y_label="% of the machine (stacked)",
        series=series,
        stacked=True,
        caption=buckets.caption(
            "Stacked (all CPUs = 100%): each band is one consumer's share of the machine; "
            "the white above the top band is idle. Other processes: neither the server, "
            f"{client} nor pgrig."
        ),
    )


def _stacked(
    buckets: decimate.Buckets,
    x: Sequence[float],
    bands: Sequence[tuple[str, Iterable[float]]],
    dashed: bool = False,
) -> tuple[Series, ...]:
    """A stacked figure's lines: each band's values along ``x`` on top of the
    bands before it (the running total, which the plot fills down to the band
    below); ``dashed``: every other band's line dashed."""
    running = array("d", bytes(8 * len(x)))  # zeros
    series = []
    for i, (label, values) in enumerate(bands):
        for j, v in enumerate(values):
            running[j] += v
        series.append(buckets.line(label, x, running, group=label, dash=i % 2 if dashed else 0))
    return tuple(series)


def device_figure(name: str, label: str, mon: MonitorResult, cols: Columns) -> Figure:
    buckets = decimate.Buckets.over(cols.get("t_s"))
    series = []
    for i, dev in enumerate(mon.devices):
        x, reads = _where(cols, f"dev.{dev}.reads_s")
        _, writes = _where(cols, f"dev.{dev}.writes_s")
        if not reads or not any(r or w for r, w in zip(reads, writes, strict=True)):
            continue
        series.append(buckets.line(f"{dev} r/s (device-wide)", x, reads, group="r", dash=i))
        series.append(buckets.line(f"{dev} w/s (device-wide)", x, writes, group="w", dash=i))
        _, flushes = _where(cols, f"dev.{dev}.flushes_s")
        if any(flushes):
            series.append(buckets.line(f"{dev} flushes/s", x, flushes, group="f", dash=i))
    reads_x, blocks = _where(cols, "pg.blks_read_s")
    if series and blocks:
        series.append(buckets.line("blocks PostgreSQL read/s", reads_x, blocks, group="pg", dash=1))
    return Figure(
        name=f"monitor_{name}_device",
        title=f"Device IOPS, {label}",
        x_label="seconds since start",
        y_label="I/O per second",
        series=tuple(series),
        caption=buckets.caption(
            "Device-wide, from /proc/diskstats as iostat -x: every process's I/O on "
            "the device, not only the server's. Blocks PostgreSQL read/s (pg_stat_database) "
            "are the database's own reads, from the page cache or the device. MiB/s, wait per "
            "I/O and % busy are in the table above."
        ),
    )
