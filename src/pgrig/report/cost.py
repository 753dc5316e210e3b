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

from pgrig import registry, stats
from pgrig.document import fmt
from pgrig.document.model import BETTER, QUIET, WORSE, Figure, Row, Section, Series, Table
from pgrig.meaning import meaning_of
from pgrig.monitor.model import MONITOR, MonitorResult, RunTotals
from pgrig.policy import LatencyTarget
from pgrig.registry.report import Conclusion, Findings
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report import index
from pgrig.report.pointkey import point_key, point_order
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
    latency: tuple[Mapping[int, float | None], ...]  # per run: percentile -> ms
    latency_of: str = ""  # "New-Order " for TPC-C
    who: str = "client"  # what ``clients`` counts: "connection" for TPC-C

    def pct(self, p: int) -> float | None:
        values = [v for lat in self.latency if (v := lat.get(p)) is not None]
        return statistics.median(values) if values else None

    def pcts(self, p: int) -> list[float]:
        return [v for lat in self.latency if (v := lat.get(p)) is not None]

    @property
    def where(self) -> str:
        at = f"{self.clients} {self.who}{'s' if self.clients != 1 else ''}"
        return at + (f", {self.rate:,g} tps offered" if self.rate is not None else "")


def offered(records: Sequence[RunRecord]) -> list[Offered]:
    """Every measured point of pgbench's workloads and of every result kind that
    declares its metric and its latency (TPC-C's tpmC and New-Order's), by target,
    in the records' order."""
    found: dict[
        tuple[str, str, int, float | None],
        tuple[list[float], list[Mapping[int, float | None]], str, str, str],
    ] = {}  # noqa: E501
    for rec, kind, res in index.read(records).succeeded():
        if isinstance(res, PgbenchRun):
            key = point_key(rec)
            sweep, clients, unit, of, who = key.sweep_label, key.clients, "tps", "", "client"
            value = res.tps
            lat: Mapping[int, float | None] = {p: _pct(res, p) for p in (50, 90, 95, 99)}
        elif kind.metric is not None and kind.latency is not None:
            load = {k: v for k, v in rec.params.items() if k not in LOAD_PARAMS}
            sweep, unit = case_words(kind.name, load), kind.unit
            of = kind.latency_label.removesuffix("latency")  # "New-Order latency": "New-Order "
            who = "connection" if "connections" in rec.params else "client"
            clients = int(rec.params.get("connections", rec.params.get("clients", 0)) or 0)
            value, lat = kind.metric(res), kind.latency(res)
        else:
            continue
        rate = rec.params.get("rate")
        r = float(rate) if isinstance(rate, int | float) else None
        key_ = (sweep, rec.target, clients, r)
        tps, lats, *_ = found.setdefault(key_, ([], [], unit, of, who))
        tps.append(value)
        lats.append(lat)
    return [
        Offered(sweep, t, c, r, tuple(v), unit, tuple(lats), of, who)
        for (sweep, t, c, r), (v, lats, unit, of, who) in found.items()
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
    study = index.read(records)
    order = {k.sweep_label: i for i, (k, _) in enumerate(sorted(study.points.items(),
                                                                 key=point_order))}  # fmt: skip
    out: dict[str, list[Offered]] = {}
    for o in offered(study):
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
        who = f"{points[0].who}s"
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


def _totals(monitors: Mapping[str, MonitorResult], rec: RunRecord) -> tuple[RunTotals, int] | None:
    result = monitors.get(rec.key)
    if result is None or result.totals is None:
        return None
    return result.totals, result.server_version_num or 0


def _each(
    found: Found, part: Callable[[RunTotals], float | None], scale: float = 1.0
) -> list[float]:
    """Each run's figure per commit."""
    return [v / t.commits * scale for t, _ in found if t.commits and (v := part(t)) is not None]


def _per(
    found: Found, part: Callable[[RunTotals], float | None], scale: float = 1.0
) -> float | None:
    values = _each(found, part, scale)
    return statistics.median(values) if values else None


# The per-commit figures a setting comparison reads: (label, part, scale, format).
# The sync wait counts only where it was timed (0: track_wal_io_timing off).
PerCommit = tuple[str, Callable[[RunTotals], float | None], float, Callable[[float], str]]
FIGURES: tuple[PerCommit, ...] = (
    ("WAL bytes", lambda t: t.wal_bytes, 1.0, lambda v: f"{v:,.0f}"),
    ("full-page images", lambda t: t.wal_fpi, 1.0, lambda v: f"{v:.2f}"),
    ("WAL syncs", lambda t: t.wal_syncs, 1.0, lambda v: f"{v:.2f}"),
    ("WAL sync wait ms", lambda t: t.wal_sync_ms or None, 1.0, lambda v: f"{v:.3f}"),
    ("server CPU ms", lambda t: t.server_cpu_s, 1000.0, lambda v: f"{v:.3f}"),
    ("device reads", lambda t: t.device_reads, 1.0, lambda v: f"{v:.2f}"),
    ("device writes", lambda t: t.device_writes, 1.0, lambda v: f"{v:.2f}"),
    ("device bytes", lambda t: t.device_bytes, 1.0, lambda v: fmt.size(int(v))),
)  # fmt: skip


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


# What makes a point's load rather than the point: its clients and its offered rate
LOAD_PARAMS = ("connections", "clients", "rate")


def case_words(kind_name: str, params: Mapping[str, object]) -> str:
    """The measured point a run belongs to, its repeats together: the workload,
    its mode and what else makes the point as its result kind names them
    (``ResultKind.case``), then its connections (or clients), offered rate and
    duration."""
    p = params
    kind = registry.kind(kind_name)
    if kind is not None and kind.case is not None:
        parts = [kind.case(p)]
    else:
        name = str(p.get("workload", kind_name))
        parts = [name + (f" {p['mode']}" if p.get("mode") not in (None, name) else "")]
    n = p.get("connections", p.get("clients"))
    if isinstance(n, int):
        parts.append(f"{n} connection{'s' if n != 1 else ''}")
    if isinstance(rate := p.get("rate"), int | float):
        parts.append(f"{float(rate):,g} tps offered")
    if p.get("duration_s"):
        parts.append(f"{p['duration_s']} s")
    return ", ".join(parts)


def case_label(rec: RunRecord) -> str:
    """A run's measured point, its repeats together: pgbench's point label, else
    ``case_words``."""
    return point_key(rec).label if PGBENCH_RUN.holds(rec) else case_words(rec.kind, rec.params)


def throughput(result: object) -> float | None:
    """A run's own transactions per second, as its workload measured it."""
    tps = getattr(result, "tps", None)
    return float(tps) if isinstance(tps, int | float) else None


def measured(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    """Every run the monitor watched, by (case, target), in the records' order."""
    study = index.read(records)
    runs = {r.key for r in study.kind(PGBENCH_RUN)}  # labelled by their pgbench point
    out: dict[tuple[str, str], list[RunRecord]] = {}
    for rec in study.other_than(MONITOR):
        if rec.key in study.watching:
            label = point_key(rec).label if rec.key in runs else case_words(rec.kind, rec.params)
            out.setdefault((label, rec.target), []).append(rec)
    return out


def _costs(
    records: Sequence[RunRecord], targets: list[str]
) -> list[tuple[str, str, list[float], Found]]:
    study = index.read(records)
    groups = measured(study)
    cases = list(dict.fromkeys(case for case, _ in groups))
    if any(r.key in study.watching for r in study.kind(PGBENCH_RUN)):
        order = {k.label: i for i, (k, _) in enumerate(sorted(study.points.items(),
                                                                key=point_order))}  # fmt: skip
        cases.sort(key=lambda c: order.get(c, len(order)))
    out: list[tuple[str, str, list[float], Found]] = []
    for case in cases:
        for t in targets:
            ok = [r for r in groups.get((case, t), []) if r.status == "ok"]
            tps = [v for r in ok if (v := throughput(study.by_key.get(r.key))) is not None]
            if ok:
                out.append((case, t, tps, [x for r in ok if (x := _totals(study.monitors, r))]))
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


_MARKS = {stats.BETTER: "▲", stats.WORSE: "▼", stats.SAME: "=", stats.NOT_YET: "?"}


def _pct_text(c: stats.Comparison) -> tuple[str, str]:
    """A per-commit figure's change in % of the baseline's, and its interval
    ('' without one): a cost, so lower is better, said as a change."""
    size = f"{c.diff_pct:+.0f}%" if c.diff_pct is not None else "n/a"
    iv = c.interval  # a ratio's bounds: higher_is_better is False
    if iv is None:
        return size, ""
    level = f"{100 * iv.confidence:.2f}".rstrip("0").rstrip(".") + "% CI"
    return size, f"{level} {(iv.low - 1) * 100:+.0f} to {(iv.high - 1) * 100:+.0f}%"


def _moved_cell(said: Sequence[tuple[str, str, stats.Comparison]]) -> tuple[str, str]:
    """One row's figures, each decided: the called ones (▲ less work per commit,
    ▼ more), the same ones together, the undecided ones with what would decide
    them; when no figure could be tested, why once. Returns the text and its mark."""
    called, same, open_ = [], [], []
    untested: dict[str, list[str]] = {}  # why no test -> the figures it left untested
    for name, moved, c in said:
        size, ci = _pct_text(c)
        if c.verdict in (stats.BETTER, stats.WORSE):
            inner = "; ".join(filter(None, (moved, ci, c.p_words())))
            called.append(f"{_MARKS[c.verdict]} {name} {size} ({inner})")
        elif c.verdict == stats.SAME:
            same.append(name)
        elif c.no_test:
            untested.setdefault(c.no_test, []).append(f"{name} {size} ({moved})")
        else:
            inner = "; ".join(filter(None, (moved, ci, c.p_words(), c.needed_text())))
            open_.append(f"? {name} {size}, not yet ({inner})")
    parts = called + open_
    if same:
        parts.append(f"= {', '.join(same)} the same within ±{stats.MARGIN_PCT:g}%")
    parts += [f"? not yet ({why}): {', '.join(names)}" for why, names in untested.items()]
    verdicts = {c.verdict for *_, c in said}
    mark = WORSE if stats.WORSE in verdicts else BETTER if stats.BETTER in verdicts else QUIET
    return "; ".join(parts), mark


def moved_table(
    records: Sequence[RunRecord], targets: list[str], baseline: str | None
) -> Table | None:
    """Which per-commit figures moved against the baseline, and by how much: what
    a setting (wal_compression, full_page_writes, synchronous_commit, checkpoint
    settings) changed in the work one transaction costs. Each figure of each case
    is decided from the runs (``stats.decide``, lower is better), the table's
    comparisons corrected together (``stats.adjust``)."""
    if baseline not in targets or len(targets) < 2:
        return None
    found = {(case, t): f for case, t, _, f in _costs(records, targets)}
    pending: list[tuple[str, str, list[tuple[str, str, stats.Comparison]]]] = []
    for (case, t), mine in found.items():
        base = found.get((case, baseline))
        if t == baseline or not base or not mine:
            continue
        said = []
        for name, part, scale, show in FIGURES:
            b, m = _each(base, part, scale), _each(mine, part, scale)
            if b and m and max(*b, *m) > 0:  # none on one side, or none at all: not a figure
                moved = f"{show(statistics.median(b))} -> {show(statistics.median(m))}"
                said.append((name, moved, stats.decide(b, m, higher_is_better=False)))
        pending.append((case, t, said))
    if not pending:
        return None
    tests = stats.adjust([c for *_, said in pending for *_, c in said])
    rows, i = [], 0
    for case, t, said in pending:
        decided = [(name, moved, tests[i + j]) for j, (name, moved, _) in enumerate(said)]
        i += len(said)
        text, mark = _moved_cell(decided) if decided else ("no figure on both sides", "")
        rows.append(Row((case, t, text), marks=("", "", mark) if mark else ()))
    note = stats.family_note(tests)
    return Table(
        ("Test case", "target", f"per commit against {baseline}"),
        tuple(rows),
        caption=f"What moved per commit against {baseline}",
        notes=(
            f"The per-commit figures above, each target's runs against {baseline}'s for the "
            "same test case: the change of the runs' geometric means in %, ▲ less work per "
            "commit / ▼ more (baseline's median -> this target's).",
            *((note,) if note else ()),
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
    records = index.read(records)  # the report's index, or one of a caller's records
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


PARTS = registry.Parts(sections=(("cost", section),), rules=(("latency-target", goal_rule),))
