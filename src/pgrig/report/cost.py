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

from pgrig import registry
from pgrig.document import fmt
from pgrig.document.model import Row, Section, Table
from pgrig.monitor.model import MONITOR, MonitorResult, RunTotals
from pgrig.policy import LatencyTarget
from pgrig.report.pointkey import PointKey, point_order, runs_by_point
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


def under_target(
    points: Sequence[tuple[PointKey, Mapping[str, Pairs]]], target: str, goal: LatencyTarget
) -> str:
    """The highest median tps of a curve's points whose median percentile met the
    goal: '8,123 tps at 8 clients (p99 4.1 ms)'; what came closest otherwise."""
    met: list[tuple[float, PointKey, float]] = []
    closest: tuple[float, PointKey] | None = None
    for key, per_target in points:
        runs = ok_runs(per_target.get(target, []))
        value = percentile(runs, goal.percentile)
        if value is None:
            continue
        if value <= goal.limit_ms:
            met.append((statistics.median(r.tps for r in runs), key, value))
        elif closest is None or value < closest[0]:
            closest = (value, key)
    name = f"p{goal.percentile}"
    if met:
        tps, key, value = max(met, key=lambda m: m[0])
        return f"{fmt.rate(tps)} tps at {fmt.clients(key.clients)} ({name} {fmt.ms(value)} ms)"
    if closest is not None:
        return (
            f"none within: the lowest {name} was {fmt.ms(closest[0])} ms at "
            f"{fmt.clients(closest[1].clients)}"
        )
    return "no latency log"


def target_table(records: Sequence[RunRecord], targets: list[str], goal: LatencyTarget) -> Table:
    curves: dict[tuple[str, int | None, int, str], list[tuple[PointKey, Mapping[str, Pairs]]]]
    curves = {}
    for key, per_target in sorted(runs_by_point(records).items(), key=point_order):
        curves.setdefault(key.curve, []).append((key, per_target))
    rows = []
    for points in curves.values():
        label = points[0][0].label.rsplit(", ", 2)[0] + f", {points[0][0].duration} s"
        rows.append(Row((label, *(under_target(points, t, goal) for t in targets))))
    return Table(
        ("Test case", *targets),
        tuple(rows),
        caption=f"Throughput under the latency target {goal.text}",
        notes=(
            f"Each cell: the highest median tps among the client counts whose median "
            f"p{goal.percentile} (pgbench's per-transaction log, median over the repeats) "
            f"stayed at or under {goal.limit_ms:g} ms; the campaign's latency_target.",
        ),
        numeric=(False, *([True] * len(targets))),
    )


# -- per-transaction cost -----------------------------------------------------------


def _totals(monitors: Mapping[str, RunRecord], rec: RunRecord) -> tuple[RunTotals, int] | None:
    mon = monitors.get(rec.key + MONITOR_SUFFIX)
    result = registry.typed_result(mon) if mon is not None and mon.status == "ok" else None
    if not isinstance(result, MonitorResult) or result.totals is None:
        return None
    return result.totals, result.server_version_num or 0


def _per(
    found: Sequence[tuple[RunTotals, int]],
    part: Callable[[RunTotals], float | None],
    scale: float = 1.0,
) -> float | None:
    values = [v / t.commits * scale for t, _ in found if t.commits and (v := part(t)) is not None]
    return statistics.median(values) if values else None


def cost_cells(found: Sequence[tuple[RunTotals, int]]) -> tuple[str, str, str, str]:
    """WAL bytes per transaction, WAL syncs per commit, server CPU ms per
    transaction (medians over the runs), checkpoints during the runs."""
    if not found:
        return ("not recorded",) * 4
    wal = _per(found, lambda t: t.wal_bytes)
    old = all(0 < v < WAL_VERSION for _, v in found)
    syncs = _per(found, lambda t: t.wal_syncs)
    cpu = _per(found, lambda t: t.server_cpu_s, 1000.0)
    checkpoints = sum(t.checkpoints for t, _ in found)
    return (
        f"{wal:,.0f}" if wal is not None else ("n/a (PG < 14)" if old else "n/a"),
        f"{syncs:.2f}" if syncs is not None else ("n/a (PG < 14)" if old else "n/a"),
        f"{cpu:.3f}" if cpu is not None else "n/a (server not on this machine)",
        f"{checkpoints} in {len(found)} run{'s' if len(found) != 1 else ''}",
    )


def cost_table(records: Sequence[RunRecord], targets: list[str]) -> Table | None:
    monitors = {r.key: r for r in records if MONITOR.holds(r)}
    rows = []
    recorded = False
    for key, per_target in sorted(runs_by_point(records).items(), key=point_order):
        for t in targets:
            pairs = per_target.get(t, [])
            runs = ok_runs(pairs)
            if not runs:
                continue
            found = [x for rec, run in pairs if run is not None and (x := _totals(monitors, rec))]
            recorded = recorded or bool(found)
            tps = fmt.rate(statistics.median(r.tps for r in runs))
            rows.append(Row((key.label, t, tps, *cost_cells(found))))
    if not recorded:  # not monitored, or stored before the totals: no table of blanks
        return None
    return Table(
        ("Test case", "target", "tps", "WAL bytes / xact", "WAL syncs / commit",
         "server CPU ms / xact", "checkpoints during the runs"),
        tuple(rows),
        caption="Per-transaction cost, from the server's own counters",
        notes=(
            "The monitor's before/after deltas over pgbench's timed window, divided by the "
            "commits pg_stat_database counted in it (the sampler's one a second included); "
            "median over the repeats. WAL bytes and syncs: pg_stat_wal (PostgreSQL 14+; "
            "WAL syncs from pg_stat_io on 18); server CPU: the postmaster and its children's "
            "CPU time (/proc), only when the server runs on this machine. A WAL sync per "
            "commit near 1 is one flush per commit; below 1, group commit; near 0, commits "
            "that do not wait for a flush (synchronous_commit = off).",
            "not recorded: the runs were not monitored (monitor = false), or were recorded "
            "by a pgrig that did not keep per-run totals.",
        ),
        numeric=(False, False, True, True, True, True, False),
    )  # fmt: skip


def targets_in(study: Study, records: Sequence[RunRecord]) -> list[str]:
    declared = study.params.get("targets")
    names = [
        str(t["name"]) for t in declared if isinstance(t, dict) and t.get("name")
    ] if isinstance(declared, list) else []  # fmt: skip
    return names + list(dict.fromkeys(r.target for r in records if r.target not in names))


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """Per-transaction cost of each target, and the throughput under the
    campaign's latency target when it names one; None without pgbench runs."""
    if not runs_by_point(records):
        return None
    targets = targets_in(study, records)
    blocks: list[Table] = []
    goal = latency_target_of(study)
    if goal is not None:
        blocks.append(target_table(records, targets, goal))
    if (cost := cost_table(records, targets)) is not None:
        blocks.append(cost)
    if not blocks:
        return None
    return Section("What a transaction costs", "cost", blocks=tuple(blocks))


def register() -> None:
    registry.register_section("cost", section)
