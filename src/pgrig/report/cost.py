"""What a DBA compares besides tps: the latency percentiles beside every
throughput, the throughput each target reached under the campaign's latency
target (``latency_target = "p99 <= 5 ms"``), and what one transaction cost the
server by its own counters (WAL bytes, WAL syncs, CPU, checkpoints).

Pure functions of stored records: the percentiles come from pgbench's
per-transaction log (``PgbenchRun.latency``), the costs from the monitor's
per-run totals (``MonitorResult.totals``: the counters' deltas over pgbench's
timed window). The section is registered in ``pgrig.registry`` like a plug-in's.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from pgrig import registry
from pgrig.document import fmt
from pgrig.document.model import Figure, Row, Section, Series, Table
from pgrig.meaning import meaning_of
from pgrig.monitor.model import MONITOR, MonitorResult, RunTotals
from pgrig.policy import LatencyTarget
from pgrig.registry.report import Conclusion, Findings
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report.pointkey import point_key, point_order, runs_by_point
from pgrig.report.storage import NOT_SEEN, layered
from pgrig.results import PgbenchRun, RunRecord, Study

MONITOR_SUFFIX = "/monitor"  # a run's monitor record: the run's key with this suffix
WAL_VERSION = 140000  # pg_stat_wal: PostgreSQL 14+
Pairs = Sequence[tuple[RunRecord, PgbenchRun | None]]


def percentile(runs: Sequence[PgbenchRun], p: int) -> float | None:
    """The median over the runs of their ``p``th latency percentile (ms); None
    when no run kept a latency log."""
    values = [v for r in runs if r.latency is not None and (v := _pct(r, p)) is not None]
    return statistics.median(values) if values else None


def _pct(run: PgbenchRun, p: int) -> float | None:
    lat = run.latency
    if lat is None:
        return None
    value: float | None = {50: lat.p50_ms, 90: lat.p90_ms, 95: lat.p95_ms, 99: lat.p99_ms}[p]
    return value


def latency_cell(runs: Sequence[PgbenchRun]) -> str:
    """'p95 1.234 / p99 2.345 ms': medians over the repeats; 'no latency log'."""
    p95, p99 = percentile(runs, 95), percentile(runs, 99)
    if p95 is None or p99 is None:
        return "no latency log" if runs else ""
    return f"p95 {fmt.ms(p95)} / p99 {fmt.ms(p99)} ms"


def latency_vs(base: Sequence[PgbenchRun], mine: Sequence[PgbenchRun]) -> str:
    """The p99 against the baseline's, as a ratio (a latency: '1.8x higher')."""
    b, m = percentile(base, 99), percentile(mine, 99)
    if b is None or m is None or b <= 0 or m <= 0:
        return ""
    ratio = m / b
    if abs(ratio - 1) < 0.005:
        return "p99 the same"
    return f"p99 {ratio:.2f}x higher" if ratio > 1 else f"p99 {1 / ratio:.2f}x lower"


def ok_runs(pairs: Pairs) -> list[PgbenchRun]:
    return [run for _, run in pairs if run is not None]


# -- throughput under a latency target -------------------------------------------


def latency_target_of(study: Study) -> LatencyTarget | None:
    policy = study.params.get("policy")
    text = policy.get("latency_target") if isinstance(policy, dict) else None
    return LatencyTarget.parse(text) if isinstance(text, str) else None


@dataclass(frozen=True)
class Offered:
    """One measured point of a sweep (clients, and for an open-loop run its offered
    rate) on one target, its repeats together: its throughput and latency as its
    workload measured them (pgbench: tps and its per-transaction log's
    percentiles; TPC-C: tpmC and New-Order's)."""

    sweep: str  # the test case less its clients and rate
    target: str
    clients: int
    rate: float | None  # offered, transactions/s (None: closed loop)
    throughput: tuple[float, ...]
    unit: str  # "tps" | "tpmC"
    latency: tuple[dict[int, float | None], ...]  # per run: percentile -> ms
    latency_of: str = ""  # "New-Order " for TPC-C

    def pct(self, p: int) -> float | None:
        values = [v for lat in self.latency if (v := lat.get(p)) is not None]
        return statistics.median(values) if values else None

    def pcts(self, p: int) -> list[float]:
        return [v for lat in self.latency if (v := lat.get(p)) is not None]

    @property
    def where(self) -> str:
        who = "connection" if self.unit == "tpmC" else "client"
        at = f"{self.clients} {who}{'s' if self.clients != 1 else ''}"
        return at + (f", {self.rate:,g} tps offered" if self.rate is not None else "")


def _tpcc_sweep(rec: RunRecord) -> str:
    p = rec.params
    active = p.get("active")
    part = f", {active} of {p['warehouses']} warehouses active" if (
        active not in (None, p.get("warehouses"))) else ""  # fmt: skip
    return f"TPC-C {p.get('mode', '?')}-side{part}, {p.get('duration_s', '?')} s"


def offered(records: Sequence[RunRecord]) -> list[Offered]:
    """Every measured point of pgbench's workloads and TPC-C, by target, in the
    records' order."""
    found: dict[
        tuple[str, str, int, float | None],
        tuple[list[float], list[dict[int, float | None]], str, str],
    ] = {}  # noqa: E501
    for rec in records:
        res = registry.typed_result(rec)
        if isinstance(res, PgbenchRun):
            key = point_key(rec)
            sweep, clients, unit, of = key.sweep_label, key.clients, "tps", ""
            value = res.tps
            lat = {p: _pct(res, p) for p in (50, 90, 95, 99)}
        elif rec.kind == "tpcc_run" and res is not None:
            sweep, unit, of = _tpcc_sweep(rec), "tpmC", "New-Order "
            clients = int(rec.params.get("connections", 0) or 0)
            value = float(getattr(res, "tpmc", 0.0))
            no = res.stats("new_order")
            lat = {p: getattr(no, f"p{p}_ms", None) if no is not None else None
                   for p in (50, 90, 95, 99)}  # fmt: skip
        else:
            continue
        rate = rec.params.get("rate")
        r = float(rate) if isinstance(rate, int | float) else None
        tps, lats, _, _ = found.setdefault((sweep, rec.target, clients, r), ([], [], unit, of))
        tps.append(value)
        lats.append(lat)
    return [
        Offered(sweep, t, c, r, tuple(v), unit, tuple(lats), of)
        for (sweep, t, c, r), (v, lats, unit, of) in found.items()
    ]


def under_target(points: Sequence[Offered], goal: LatencyTarget) -> str:
    """The highest median throughput of one target's points whose median
    percentile met the goal: '8,123 tps at 8 clients (p99 4.1 ms)'; what came
    closest otherwise."""
    met: list[tuple[float, Offered, float]] = []
    closest: tuple[float, Offered] | None = None
    for o in points:
        value = o.pct(goal.percentile)
        if value is None:
            continue
        if value <= goal.limit_ms:
            met.append((statistics.median(o.throughput), o, value))
        elif closest is None or value < closest[0]:
            closest = (value, o)
    if met:
        best, o, value = max(met, key=lambda m: m[0])
        name = f"{o.latency_of}p{goal.percentile}"
        return f"{fmt.rate(best)} {o.unit} at {o.where} ({name} {fmt.ms(value)} ms)"
    if closest is not None:
        o = closest[1]
        name = f"{o.latency_of}p{goal.percentile}"
        return f"none within: the lowest {name} was {fmt.ms(closest[0])} ms at {o.where}"
    return "no latency log"


def _sweeps(records: Sequence[RunRecord]) -> dict[str, list[Offered]]:
    order = {k.sweep_label: i for i, (k, _) in enumerate(sorted(runs_by_point(records).items(),
                                                                 key=point_order))}  # fmt: skip
    out: dict[str, list[Offered]] = {}
    for o in offered(records):
        out.setdefault(o.sweep, []).append(o)
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


def target_table(records: Sequence[RunRecord], targets: list[str], goal: LatencyTarget) -> Table:
    rows = []
    for sweep, points in _sweeps(records).items():
        cells = [under_target([o for o in points if o.target == t], goal) for t in targets]
        rows.append(Row((sweep, *cells)))
    return Table(
        ("Test case", *targets),
        tuple(rows),
        caption=f"Throughput under the latency target {goal.text}",
        notes=(
            f"Each cell: the highest median throughput among the points (client counts, "
            f"and offered rates of an open-loop sweep) whose median p{goal.percentile} "
            f"stayed at or under {goal.limit_ms:g} ms; the campaign's latency_target. "
            "pgbench: tps and its per-transaction log's percentile; TPC-C: tpmC and "
            "New-Order's percentile. Medians over the repeats.",
        ),
        numeric=(False, *([True] * len(targets))),
    )


def rate_figures(
    records: Sequence[RunRecord], targets: list[str], goal: LatencyTarget | None
) -> list[Figure]:  # noqa: E501
    """Latency against the offered rate, one line per target, for every sweep of
    two rates or more at one client count: where each target's latency leaves
    the goal is the throughput it can carry within it (BenchBase's rate-limited
    phases, read the same way)."""
    p = goal.percentile if goal is not None else 99
    figures = []
    by: dict[tuple[str, int], list[Offered]] = {}
    for o in offered(records):
        if o.rate is not None:
            by.setdefault((o.sweep, o.clients), []).append(o)
    for (sweep, clients), points in by.items():
        rates = sorted({o.rate for o in points if o.rate is not None})
        if len(rates) < 2:
            continue
        series = []
        for t in targets:
            mine = sorted((o for o in points if o.target == t and o.pct(p) is not None),
                          key=lambda o: o.rate or 0.0)  # fmt: skip
            if not mine:
                continue
            series.append(Series(
                label=t, x=tuple(o.rate or 0.0 for o in mine),
                y=tuple(o.pct(p) or 0.0 for o in mine),
                y_low=tuple(min(o.pcts(p)) for o in mine),
                y_high=tuple(max(o.pcts(p)) for o in mine), group=t,
            ))  # fmt: skip
        if not series:
            continue
        if goal is not None:
            limit = (goal.limit_ms, goal.limit_ms)
            line = Series(f"the goal: {goal.text}", (rates[0], rates[-1]), limit, group="goal")
            series.append(replace(line, dash=1))
        of = points[0].latency_of
        who = "connections" if points[0].unit == "tpmC" else "clients"
        figures.append(Figure(
            name=f"latency-vs-rate-{_slug(sweep)}-c{clients}",
            title=f"{of}p{p} against the offered rate, {sweep}, {clients} {who}",
            x_label="offered rate (transactions/s, pgbench -R)",
            y_label=f"{of}p{p} latency (ms)",
            series=tuple(series),
            caption="Open-loop runs at each offered rate: the median of the repeats' "
            f"p{p}, bars from min to max; the throughput a target carries within the "
            "goal is the highest rate whose line stays under it.",
        ))  # fmt: skip
    return figures


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def goal_rule(ev: Findings) -> list[Conclusion]:
    """On the first screen: each target's highest throughput within the campaign's
    latency target, for every sweep (the goal travels in the runs' params)."""
    goals = {str(g) for r in ev.records if isinstance(g := r.params.get("latency_target"), str)}
    if len(goals) != 1:
        return []
    goal = LatencyTarget.parse(goals.pop())
    out = []
    for sweep, points in _sweeps(ev.records).items():
        if not any(o.rate is not None for o in points):
            continue
        said = [f"{t} {under_target([o for o in points if o.target == t], goal)}"
                for t in ev.targets]  # fmt: skip
        out.append(Conclusion(
            "latency-target",
            f"Within {goal.text}, {sweep}: " + "; ".join(said) + ".",
            "medians of the repeats at each offered rate: no test",
        ))  # fmt: skip
    return out


# -- per-transaction cost -----------------------------------------------------------


Found = Sequence[tuple[RunTotals, int]]  # a case's runs: totals, server_version_num


def _totals(monitors: Mapping[str, RunRecord], rec: RunRecord) -> tuple[RunTotals, int] | None:
    mon = monitors.get(rec.key + MONITOR_SUFFIX)
    result = registry.typed_result(mon) if mon is not None and mon.status == "ok" else None
    if not isinstance(result, MonitorResult) or result.totals is None:
        return None
    return result.totals, result.server_version_num or 0


def _per(
    found: Found, part: Callable[[RunTotals], float | None], scale: float = 1.0
) -> float | None:
    values = [v / t.commits * scale for t, _ in found if t.commits and (v := part(t)) is not None]
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class Cost:
    """A case's per-commit cost on one target: medians over its runs' totals."""

    runs: int
    wal_bytes: float | None
    wal_fpi: float | None
    wal_syncs: float | None
    sync_ms: float | None  # None: not recorded; 0 with syncs: untimed
    cpu_ms: float | None
    reads: float | None
    writes: float | None
    device_bytes: float | None
    checkpoints: int
    old: bool  # PostgreSQL < 14: no pg_stat_wal

    @classmethod
    def of(cls, found: Found) -> Cost:
        return cls(
            runs=len(found),
            wal_bytes=_per(found, lambda t: t.wal_bytes),
            wal_fpi=_per(found, lambda t: t.wal_fpi),
            wal_syncs=_per(found, lambda t: t.wal_syncs),
            sync_ms=_per(found, lambda t: t.wal_sync_ms),
            cpu_ms=_per(found, lambda t: t.server_cpu_s, 1000.0),
            reads=_per(found, lambda t: t.device_reads),
            writes=_per(found, lambda t: t.device_writes),
            device_bytes=_per(found, lambda t: t.device_bytes),
            checkpoints=sum(t.checkpoints for t, _ in found),
            old=bool(found) and all(0 < v < WAL_VERSION for _, v in found),
        )

    # The figures a setting comparison reads, by name: (label, value, format).
    def figures(self) -> tuple[tuple[str, float | None, Callable[[float], str]], ...]:
        return (
            ("WAL bytes", self.wal_bytes, lambda v: f"{v:,.0f}"),
            ("full-page images", self.wal_fpi, lambda v: f"{v:.2f}"),
            ("WAL syncs", self.wal_syncs, lambda v: f"{v:.2f}"),
            ("WAL sync wait ms", self.sync_ms or None, lambda v: f"{v:.3f}"),
            ("server CPU ms", self.cpu_ms, lambda v: f"{v:.3f}"),
            ("device reads", self.reads, lambda v: f"{v:.2f}"),
            ("device writes", self.writes, lambda v: f"{v:.2f}"),
            ("device bytes", self.device_bytes, lambda v: fmt.size(int(v))),
        )


def cost_cells(found: Found) -> tuple[str, str, str, str, str]:
    """WAL bytes (full-page images) per commit, WAL syncs (their wait) per commit,
    server CPU ms per commit, device reads / writes (bytes) per commit, and the
    checkpoints during the runs."""
    if not found:
        return ("not recorded",) * 5
    c = Cost.of(found)
    pre14 = "n/a (PG < 14)" if c.old else "n/a"
    wal = pre14 if c.wal_bytes is None else f"{c.wal_bytes:,.0f}"
    if c.wal_bytes is not None and c.wal_fpi is not None:
        wal += f" ({c.wal_fpi:.2f} FPI)"
    syncs = pre14 if c.wal_syncs is None else f"{c.wal_syncs:.2f}"
    if c.wal_syncs and c.sync_ms is not None:
        syncs += " (wait not timed)" if c.sync_ms == 0 else f" ({c.sync_ms:.3f} ms)"
    device = "no device sampled"
    if c.reads is not None and c.writes is not None:
        device = f"{c.reads:.2f} / {c.writes:.2f}"
        if c.device_bytes is not None:
            device += f" ({fmt.size(int(c.device_bytes))})"
    return (
        wal,
        syncs,
        f"{c.cpu_ms:.3f}" if c.cpu_ms is not None else "n/a (server not on this machine)",
        device,
        f"{c.checkpoints} in {c.runs} run{'s' if c.runs != 1 else ''}",
    )


def case_label(rec: RunRecord) -> str:
    """The measured point a run belongs to, its repeats together: pgbench's point
    label, else the workload's name and the parameters that make a point."""
    if PGBENCH_RUN.holds(rec):
        return point_key(rec).label
    p = rec.params
    name = str(p.get("workload", rec.kind))
    name = {"tpcc": "TPC-C"}.get(name, name)
    parts = [f"{name} {p['mode']}-side" if rec.kind == "tpcc_run" and "mode" in p else name]
    if rec.kind != "tpcc_run" and p.get("mode") not in (None, name):
        parts[0] += f" {p['mode']}"
    n = p.get("connections", p.get("clients"))
    if isinstance(n, int):
        parts.append(f"{n} connection{'s' if n != 1 else ''}")
    if p.get("active") not in (None, p.get("warehouses")):
        parts.append(f"{p['active']} of {p['warehouses']} warehouses active")
    if isinstance(p.get("rate"), int | float):
        parts.append(f"{float(p['rate']):,g} tps offered")
    if p.get("duration_s"):
        parts.append(f"{p['duration_s']} s")
    return ", ".join(parts)


def throughput(rec: RunRecord) -> float | None:
    """The run's own transactions per second, as its workload measured it."""
    tps = getattr(registry.typed_result(rec), "tps", None)
    return float(tps) if isinstance(tps, int | float) else None


def measured(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    """Every run the monitor watched, by (case, target), in the records' order."""
    watched = {r.key.removesuffix(MONITOR_SUFFIX) for r in records if MONITOR.holds(r)}
    out: dict[tuple[str, str], list[RunRecord]] = {}
    for rec in records:
        if rec.key in watched and not MONITOR.holds(rec):
            out.setdefault((case_label(rec), rec.target), []).append(rec)
    return out


def _costs(
    records: Sequence[RunRecord], targets: list[str]
) -> list[tuple[str, str, list[float], Found]]:
    monitors = {r.key: r for r in records if MONITOR.holds(r)}
    groups = measured(records)
    cases = list(dict.fromkeys(case for case, _ in groups))
    if any(PGBENCH_RUN.holds(r) for rs in groups.values() for r in rs):
        order = {k.label: i for i, (k, _) in enumerate(sorted(runs_by_point(records).items(),
                                                                key=point_order))}  # fmt: skip
        cases.sort(key=lambda c: order.get(c, len(order)))
    out: list[tuple[str, str, list[float], Found]] = []
    for case in cases:
        for t in targets:
            ok = [r for r in groups.get((case, t), []) if r.status == "ok"]
            tps = [v for r in ok if (v := throughput(r)) is not None]
            if ok:
                out.append((case, t, tps, [x for r in ok if (x := _totals(monitors, r))]))
    return out


# wal_sync_method values whose WAL writes are the syncs (O_DSYNC, O_SYNC): pg_stat_wal
# counts no wal_sync for them, so "0 syncs per commit" would read as no wait at all.
SYNC_ON_WRITE = ("open_datasync", "open_sync")


def cost_table(
    records: Sequence[RunRecord], targets: list[str], methods: Mapping[str, str] | None = None
) -> Table | None:
    """``methods``: each target's wal_sync_method, where its server reported one."""
    rows = []
    recorded = False
    behind = layered(records)  # a FUSE process serves their I/O: no device of theirs
    for case, t, tps, found in _costs(records, targets):
        recorded = recorded or bool(found)
        rate = fmt.rate(statistics.median(tps)) if tps else "n/a"
        cells = list(cost_cells(found))
        if t in behind and found:
            cells[3] = NOT_SEEN
        if (method := (methods or {}).get(t)) in SYNC_ON_WRITE and found:
            cells[1] = f"n/a ({method}: each WAL write syncs, no fsync call to count)"
        rows.append(Row((case, t, rate, *cells)))
    if not recorded:  # not monitored, or stored before the totals: no table of blanks
        return None
    return Table(
        ("Test case", "target", "tps", "WAL bytes / commit (full-page images)",
         "WAL syncs / commit (wait)", "server CPU ms / commit",
         "device reads / writes per commit (bytes)", "checkpoints during the runs"),
        tuple(rows),
        caption="Per-transaction cost, from the server's own counters",
        notes=(
            "The monitor's before/after deltas over the workload's timed window, divided by "
            "the commits pg_stat_database counted in it (the sampler's one a second included); "
            "median over the repeats. WAL bytes, full-page images (FPI) and syncs: pg_stat_wal "
            "(PostgreSQL 14+; WAL syncs from pg_stat_io on 18); the sync wait: wal_sync_time, "
            "timed only with track_wal_io_timing = on ('wait not timed' otherwise); server CPU: "
            "the postmaster and its children's CPU time (/proc), only when the server runs on "
            "this machine; device reads and writes: the target's block devices (iostat, every "
            "process's I/O), what a cloud disk's IOPS and throughput budget is sized by. A WAL "
            "sync per commit near 1 is one flush per commit; below 1, group commit; near 0, "
            "commits that do not wait for a flush (synchronous_commit = off).",
            "not recorded: the runs were not monitored (monitor = false), or were recorded "
            "by a pgrig that did not keep per-run totals.",
        ),
        numeric=(False, False, True, True, True, True, True, False),
    )  # fmt: skip


MOVED = 0.10  # a per-commit figure that changed by less than this is not named


def moved_table(
    records: Sequence[RunRecord], targets: list[str], baseline: str | None
) -> Table | None:
    """Which per-commit figures moved against the baseline, and by how much: what
    a setting (wal_compression, full_page_writes, synchronous_commit, checkpoint
    settings) changed in the work one transaction costs."""
    costs = {(case, t): Cost.of(found) for case, t, _, found in _costs(records, targets)}
    if baseline not in targets or len(targets) < 2:
        return None
    rows = []
    for (case, t), mine in costs.items():
        base = costs.get((case, baseline))
        if t == baseline or base is None or not mine.runs or not base.runs:
            continue
        moved = []
        for (name, b, show), (_, m, _) in zip(base.figures(), mine.figures(), strict=True):
            if b is None or m is None or max(b, m) <= 0:
                continue
            change = (m - b) / b if b > 0 else float("inf")
            if abs(change) >= MOVED:
                pct = "new" if b <= 0 else f"{change:+.0%}"
                moved.append(f"{name} {pct} ({show(b)} -> {show(m)})")
        rows.append(Row((case, t, "; ".join(moved) or f"none by {MOVED:.0%} or more")))
    if not rows:
        return None
    return Table(
        ("Test case", "target", f"per commit against {baseline}"),
        tuple(rows),
        caption=f"What moved per commit against {baseline}",
        notes=(
            f"The per-commit figures above, each target's median against {baseline}'s for "
            f"the same test case; a figure that changed by less than {MOVED:.0%} is not named. "
            "Medians of the repeats, no interval: what a setting changed in a transaction's "
            "work, not a verdict on its throughput.",
        ),
        numeric=(False, False, False),
    )


def fpi_burst_note(study: Study, records: Sequence[RunRecord]) -> str | None:
    """When the runs start right after a forced CHECKPOINT and write about a full
    page image per commit or more: what the WAL figures mostly measure."""
    policy = study.params.get("policy")
    forced = isinstance(policy, dict) and bool(policy.get("checkpoint"))
    fpi = [c.wal_fpi for *_, f in _costs(records, targets_in(study, records))
           if (c := Cost.of(f)).wal_fpi is not None]  # fmt: skip
    if not forced or not fpi or max(fpi) < 1.0:
        return None
    return (
        f"Each run starts right after a forced CHECKPOINT, and the runs wrote up to "
        f"{max(fpi):.1f} full-page images per commit: the first change of every page after "
        "a checkpoint logs the whole page, so these WAL figures mostly measure that burst; "
        "a longer run (or checkpoint = false) measures the steady state."
    )


def targets_in(study: Study, records: Sequence[RunRecord]) -> list[str]:
    declared = study.params.get("targets")
    names = [
        str(t["name"]) for t in declared if isinstance(t, dict) and t.get("name")
    ] if isinstance(declared, list) else []  # fmt: skip
    return names + list(dict.fromkeys(r.target for r in records if r.target not in names))


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """Per-transaction cost of each target for every monitored workload, what
    moved against the baseline, and the throughput under the campaign's latency
    target when it names one; None with nothing to show."""
    targets = targets_in(study, records)
    blocks: list[Table | Figure] = []
    goal = latency_target_of(study)
    if goal is not None and offered(records):
        blocks.append(target_table(records, targets, goal))
    figures: list[Table | Figure] = list(rate_figures(records, targets, goal))
    found = {t: meaning_of(study, t) for t in targets}
    methods = {t: m for t, f in found.items() if f and (m := dict(f.rest).get("wal_sync_method"))}
    if (cost := cost_table(records, targets, methods)) is not None:
        blocks.append(cost)
        baseline = study.params.get("baseline")
        if (moved := moved_table(records, targets, str(baseline or targets[0]))) is not None:
            blocks.append(moved)
    blocks += figures
    if not blocks:
        return None
    note = fpi_burst_note(study, records)
    return Section(
        "What a transaction costs", "cost", paragraphs=(note,) if note else (), blocks=tuple(blocks)
    )


def register() -> None:
    registry.register_section("cost", section)
    registry.register_rule("latency-target", goal_rule)
