"""Report section: TPC-C - a summary in the style of seed 003 (environment,
warehouses, data size, active data, tpmC, tpmTotal, latencies), the load, the
transaction mix of every run, the consistency checks, and tpmC over time."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pgrig.cluster import loadwal
from pgrig.document import fmt
from pgrig.document.model import (
    FAILED,
    SKIPPED,
    Details,
    Figure,
    Row,
    Section,
    Series,
    Table,
    median_line,
)
from pgrig.meaning import meaning_of, unsafe_of
from pgrig.report import index
from pgrig.report.storage import flag, unsafe_note
from pgrig.results import RunRecord, Study
from pgrig.workloads.tpcc.model import (
    LABELS,
    STATEMENTS,
    TpccCheck,
    TpccLoad,
    TpccRun,
    active_share,
)

PHASES = (
    "generate",  # the loader before binary COPY
    "index",
    "vacuum analyze",
    loadwal.RESTART_MINIMAL,
    "copy, analyze and index whole tables",  # wall clock, then per-connection sums
    "the rest (ranges, vacuum, keys)",
    loadwal.RESTART_PROFILE,
    "copy (connection-s)",
    "analyze (connection-s)",
    "index (connection-s)",
    "vacuum analyze (connection-s)",
)
MODE_LABELS = {"server": "server-side (PL/pgSQL)", "client": "client-side statements"}


TYPES: dict[str, type] = {"tpcc_load": TpccLoad, "tpcc_run": TpccRun, "tpcc_check": TpccCheck}


def _ok(records: Sequence[RunRecord], kind: str) -> list[tuple[RunRecord, Any]]:
    """The records of one of TPC-C's kinds, each with its result (None: not run)."""
    study = index.read(records)
    return [(r, study.result(r, TYPES[kind])) for r in study.of_kind.get(kind, ())]


def _status(rec: RunRecord) -> str:
    return f"{rec.status}: {rec.reason or 'no reason recorded'}"


def _row_kind(rec: RunRecord) -> str:
    return SKIPPED if rec.status == "skipped" else FAILED


def environment_line(study: Study) -> str:
    env = study.environment
    if env is None:
        return study.target
    parts = [f"{env.cpu.logical_cpus} CPUs ({env.cpu.model})", f"{fmt.size(env.memory_bytes)} RAM"]
    if env.postgres is not None:
        parts.append(f"PostgreSQL {env.postgres.version}")
    profile = study.params.get("profile")
    if profile:
        parts.append(f"profile {profile}")
    parts.append(f"on {study.target}")
    return ", ".join(parts)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _targets(study: Study, records: Sequence[RunRecord]) -> list[str]:
    """The targets in the campaign's order (the baseline first), then any other."""
    declared = study.params.get("targets")
    names = [str(t["name"]) for t in declared if isinstance(t, dict) and t.get("name")] if (
        isinstance(declared, list)) else []  # fmt: skip
    baseline = study.params.get("baseline")
    if isinstance(baseline, str) and baseline in names:
        names.remove(baseline)
        names.insert(0, baseline)
    seen = list(dict.fromkeys(r.target for r in records))
    return [t for t in names if t in seen] + [t for t in seen if t not in names]


def _point(rec: RunRecord) -> tuple[str, int, int]:
    """A run's point: its mode, active warehouses and connections."""
    p = rec.params
    return (
        str(p.get("mode", "?")),
        int(p.get("active", 0) or 0),
        int(p.get("connections", 0) or 0),
    )


SUMMARY_COLUMNS = (
    "run",
    "target",
    "warehouses (active)",
    "data size (active)",
    "tpmC",
    "tpmTotal",
    "qps",
    "New-Order p50 / p95 / p99 ms",
    "failed / retried",
)
SUMMARY_NOTES = (
    "Each target's median over its repeats; tpmC with its interval (n=N, the "
    "distribution-free interval of the median: [min, max] below 6 runs), ⚠ where the "
    "runs range over more than 5%. The other columns: medians over the repeats; "
    "failed / retried: summed.",
    "tpmC: New-Order transactions per minute; tpmTotal: all five per minute "
    "(pgbench's tps x 60, without connection time). Expected New-Order rollbacks "
    "(1%) count as completed, as the specification counts them.",
    "qps: SQL statements per second, derived as the seeds derive it: tps x statements "
    "per transaction, over the mix the run completed, each type counted as the "
    "client-side scripts send it with BEGIN and COMMIT ("
    + ", ".join(f"{LABELS[k]} {v:g}" for k, v in STATEMENTS.items())
    + "; New-Order and Delivery averaged over their 5-15 items and 10 districts). "
    "Server-side mode runs the same statements inside its functions, one round trip "
    "per transaction.",
    "Active data: the share of the database in the warehouses the run used "
    "(--active K of W), item table included pro rata.",
)


def summary_table(study: Study, records: Sequence[RunRecord]) -> Table | None:
    """One row per point (mode, active set) and target: the median of the repeats
    with its interval, New-Order's p95/p99 beside it, the unsafe setting at the
    figures it changes."""
    # Each target's own load: their data sizes differ (filesystems, versions).
    loads: dict[str, TpccLoad] = {r.target: res for r, res in _ok(records, "tpcc_load") if res}
    runs = _ok(records, "tpcc_run")
    if not runs:
        return None
    targets = _targets(study, [rec for rec, _ in runs])
    points = list(dict.fromkeys(_point(rec) for rec, _ in runs))
    several_active = len({a for _, a, _ in points}) > 1
    rows = []
    for point in sorted(points, key=lambda p: (p[0] != "server", p[1], p[2])):
        mode, active, connections = point
        label = f"{MODE_LABELS.get(mode, mode)}, {connections} connections"
        for t in targets:
            mine = [(rec, res) for rec, res in runs if rec.target == t and _point(rec) == point]
            if not mine:
                continue
            ok: list[TpccRun] = [res for _, res in mine if res is not None]
            if not ok:
                rec = mine[0][0]
                cells = (label, t, _status(rec))
                rows.append(
                    Row(cells + ("",) * (len(SUMMARY_COLUMNS) - len(cells)), _row_kind(rec))
                )
                continue
            shown = label if several_active or t == targets[0] else ""
            figures = _summary_figures(ok, len(mine) - len(ok), loads.get(t), unsafe_of(study, t))
            rows.append(Row((shown, t, *figures)))
    return Table(
        columns=SUMMARY_COLUMNS,
        rows=tuple(rows),
        caption=f"TPC-C summary - {environment_line(study)}",
        notes=(
            *SUMMARY_NOTES,
            *unsafe_note(
                {t: m.unsafe() for t in targets if (m := meaning_of(study, t)) is not None},
                "commits that do not wait for their WAL to reach stable storage",
            ),
        ),
        numeric=(False, False, *([True] * 7)),
    )


def _summary_figures(
    ok: Sequence[TpccRun], not_ok: int, load: TpccLoad | None, unsafe: str
) -> tuple[str, ...]:
    """A target's figures at one point, from its repeats that finished (``ok``;
    ``not_ok`` did not): the columns after the target's name. ``load``: the
    target's load, for a run recorded before runs knew their load's size."""
    tpmc = fmt.with_spread(fmt.spread([r.tpmc for r in ok]), fmt.integer)
    r0 = ok[0]
    loaded = r0.loaded_bytes
    if loaded is None and load is not None:
        loaded = load.database_bytes
    size = "n/a"
    if loaded is not None:
        share = active_share(loaded, r0.active, r0.warehouses)
        size = f"{fmt.size(loaded)} ({fmt.size(share)})"
    lat = "n/a"
    nos = [no for r in ok if (no := r.stats("new_order")) is not None and no.p50_ms]
    if nos:
        lat = " / ".join(
            fmt.ms(_median([getattr(no, f) or 0.0 for no in nos]))
            for f in ("p50_ms", "p95_ms", "p99_ms")
        )
    qps = [q for r in ok if (q := r.qps) is not None]
    return (
        f"{r0.warehouses} ({r0.active})",
        size,
        flag(tpmc + (f", {not_ok} failed" if not_ok else ""), unsafe),
        flag(fmt.integer(_median([r.tpm_total for r in ok])), unsafe),
        fmt.integer(_median(qps)) if qps else "n/a",
        lat,
        f"{sum(r.failed for r in ok)} / {sum(r.retried for r in ok)}",
    )


def how_loaded(res: TpccLoad) -> str:
    """How a load was made, as its record says: the loader (from the phases it
    timed: pgrig's loader times its binary COPY per connection, the PL/pgSQL
    loader before it timed "generate"), its connections, its WAL level, and
    what its elapsed time holds."""
    if "copy (connection-s)" in res.phases:
        loader = "rows built in numpy and sent in binary COPY"
    elif "generate" in res.phases:
        loader = "rows generated inside the server (PL/pgSQL)"
    else:
        loader = "loader not recorded"
    jobs = f"{res.jobs} parallel connection{'s' if res.jobs != 1 else ''}"
    wal = (
        f"copies and index builds at wal_level={res.wal_level}, the restarts timed"
        if res.wal_level
        else "at the server's own WAL settings"
    )
    vacuum = "VACUUM ANALYZE" if any(k.startswith("vacuum") for k in res.phases) else "ANALYZE"
    return f"{loader} over {jobs}, {wal}; indexes, keys and {vacuum} included"


def load_caption(loads: Sequence[TpccLoad]) -> str:
    ways = list(dict.fromkeys(how_loaded(res) for res in loads))
    if not ways:
        return "TPC-C load"
    summed = any(k.endswith("(connection-s)") for res in loads for k in res.phases)
    return f"TPC-C load ({' / '.join(ways)})" + (
        "; phases: wall-clock first, then seconds per step summed over the "
        "connections, which overlap"
        if summed
        else ""
    )


def load_table(records: Sequence[RunRecord]) -> Table | None:
    loads = _ok(records, "tpcc_load")
    if not loads:
        return None
    columns = ("target", "warehouses", "rows", "size", "elapsed", "rows/s", "MB/s", "phases")
    rows = []
    for rec, res in loads:
        if res is None:
            w = str(rec.params.get("warehouses", "?"))
            rows.append(Row((rec.target, w, _status(rec), "", "", "", "", ""), _row_kind(rec)))
            continue
        order = [k for k in PHASES if k in res.phases] + sorted(set(res.phases) - set(PHASES))
        phases = ", ".join(f"{k} {res.phases[k]:.1f} s" for k in order)
        rows.append(
            Row(
                (
                    rec.target,
                    str(res.warehouses),
                    fmt.integer(res.rows),
                    fmt.size(res.database_bytes),
                    fmt.seconds(res.elapsed_s),
                    fmt.rate(res.rows_per_s),
                    f"{res.mb_per_s:.1f}",
                    phases,
                )
            )
        )
    return Table(
        columns=columns,
        rows=tuple(rows),
        caption=load_caption([res for _rec, res in loads if res is not None]),
        notes=(
            "MB/s: tables and indexes of the tpcc schema over the elapsed time.",
            *(
                (
                    "Loaded at wal_level=minimal: the server restarted before the copies and "
                    "back to the profile's settings after the keys (both restarts in the "
                    "elapsed time), so the tables copied whole and the indexes wrote no WAL.",
                )
                if any(res is not None and res.wal_level for _rec, res in loads)
                else ()
            ),
        ),
        numeric=(False, True, True, True, True, True, True, False),
    )


def mix_table(rec: RunRecord, r: TpccRun) -> Table:
    total = sum(t.transactions for t in r.types) or 1
    rows = []
    for t in r.types:
        cells = (t.p50_ms, t.p90_ms, t.p95_ms, t.p99_ms, t.max_ms)
        rows.append(
            Row(
                (
                    LABELS.get(t.name, t.name),
                    fmt.integer(t.transactions),
                    f"{100.0 * t.transactions / total:.1f}% ({t.weight}%)",
                    *(fmt.optional(v, fmt.ms) for v in cells),
                    str(t.failed),
                    str(t.retried),
                )
            )
        )
    return Table(
        columns=(
            "transaction",
            "count",
            "share (target)",
            "p50 ms",
            "p90 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "failed",
            "retried",
        ),
        rows=tuple(rows),
        caption=f"{rec.target}, {MODE_LABELS.get(r.mode, r.mode)}"
        + (f", run {rec.params['repeat']}" if rec.params.get("repeat", 1) != 1 else "")
        + f": {r.connections} connections, "
        f"{r.active} of {r.warehouses} warehouses active, "
        f"{r.duration_s:.0f} s, {r.isolation}, {r.rollbacks} New-Order rollbacks, "
        f"{r.serialization_failures} serialization failures, {r.deadlock_failures} deadlocks",
        notes=(
            f"Latencies from pgbench's per-transaction log (sampling rate {r.sampling_rate:g}).",
            fmt.percentile_method(
                [(t.samples, r.latency_digits) for t in r.types if t.samples], per="type"
            ),
        ),
        numeric=(False,) + (True,) * 9,
    )


def checks_table(records: Sequence[RunRecord]) -> Table | None:
    found = _ok(records, "tpcc_check")
    if not found:
        return None
    results: list[tuple[RunRecord, TpccCheck | None]] = found
    numbers = sorted({c.number for _, r in results if r for c in r.conditions})
    columns = ("after", *(str(n) for n in numbers), "verdict")
    rows = []
    for rec, res in results:
        after = f"{rec.target}: {rec.key.split('/check/', 1)[-1]}"
        if res is None:
            rows.append(Row((after, _status(rec)) + ("",) * (len(columns) - 2), _row_kind(rec)))
            continue
        by_number = {c.number: c for c in res.conditions}
        cells = []
        for n in numbers:
            c = by_number.get(n)
            if c is None or c.skipped:
                cells.append("-")
            else:
                cells.append("ok" if c.passed else f"FAIL ({c.offending:,})")
        verdict = "all hold" if res.passed else f"{len(res.failures)} fail"
        rows.append(Row((after, *cells, verdict), "" if res.passed else FAILED))
    return Table(
        columns=columns,
        rows=tuple(rows),
        caption="TPC-C consistency conditions (clause 3.3.2); FAIL (n): n offending rows",
        notes=("-: not evaluated (condition 11 holds only right after the load).",),
    )


def tpmc_figure(study: Study, records: Sequence[RunRecord]) -> Figure | None:
    """tpmC over time, one line per target and mode (and active set): the median
    of the repeats at each interval, a band from their min to max. Colour: the
    target; line style: the mode."""
    runs = [(rec, res) for rec, res in _ok(records, "tpcc_run") if res is not None and res.timeline]
    several = len({res.active for _, res in runs}) > 1
    lines: dict[tuple[str, str, int, float], dict[float, list[float]]] = {}
    for rec, res in runs:
        rate = rec.params.get("rate")  # a sweep's offered rate: a line of its own
        offered = float(rate) if isinstance(rate, int | float) else 0.0
        per_t = lines.setdefault((rec.target, res.mode, res.active, offered), {})
        for p in res.timeline:
            per_t.setdefault(p.t_s, []).append(p.tpmc)
    if not lines:
        return None
    order = {t: i for i, t in enumerate(_targets(study, [rec for rec, _ in runs]))}
    modes = sorted({mode for _, mode, _, _ in lines}, key=lambda m: m != "server")
    series = []
    for (target, mode, active, offered), per_t in sorted(
        lines.items(),
        key=lambda kv: (order.get(kv[0][0], 99), modes.index(kv[0][1]), kv[0][2], kv[0][3]),
    ):
        xs = sorted(per_t)
        label = f"{target}, {mode}-side" + (f", {active} active" if several else "")
        label += f", {offered:,g} tps offered" if offered else ""
        runs_n = max(len(v) for v in per_t.values())
        if runs_n > 1:
            label += f" (median of {runs_n})"
        series.append(
            Series(
                label=label,
                x=tuple(xs),
                y=tuple(_median(per_t[x]) for x in xs),
                y_low=tuple(min(per_t[x]) for x in xs) if runs_n > 1 else None,
                y_high=tuple(max(per_t[x]) for x in xs) if runs_n > 1 else None,
                group=target,
                dash=modes.index(mode),
            )
        )
    return Figure(
        name="tpcc-tpmc",
        title="TPC-C: tpmC over time",
        x_label="seconds",
        y_label="tpmC (New-Order / min)",
        series=tuple(series),
        caption="New-Order transactions per minute in each interval of the run, from "
        "pgbench's per-transaction log: one line per target (colour) and mode (line style), "
        "the median of its repeats at each interval, a band from their min to max.",
    )


def active_figure(records: Sequence[RunRecord]) -> Figure | None:
    """tpmC against the active warehouses, one line per mode (the curve of
    TPS vs clients, with the active set as its axis); None below two active sets."""
    by_mode: dict[tuple[str, str], dict[int, list[float]]] = {}
    sizes: dict[int, int] = {}
    for rec, res in _ok(records, "tpcc_run"):
        if res is not None:
            line = by_mode.setdefault((rec.target, res.mode), {})
            line.setdefault(res.active, []).append(res.tpmc)
            if res.active_bytes is not None:
                sizes.setdefault(res.active, res.active_bytes)
    if len({k for points in by_mode.values() for k in points}) < 2:
        return None
    series = tuple(
        replace(median_line(f"{target}, {mode}-side", by_mode[target, mode]), group=target)
        for target, mode in by_mode
    )
    data = "; ".join(f"{k}: {fmt.size(b)}" for k, b in sorted(sizes.items()))
    return Figure(
        name="tpcc-tpmc-vs-active",
        title="TPC-C: tpmC vs active warehouses",
        x_label="active warehouses",
        y_label="tpmC (New-Order / min)",
        series=series,
        caption="The same load run with the terminals confined to the first K warehouses "
        "(seed 003's active data): median tpmC per active set, bars from min to max of the "
        "repeats." + (f" Active data: {data}." if data else ""),
    )


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """None until there are records of this kind."""
    mine = index.of(index.read(records).named(*TYPES))  # its results decoded already
    if not mine:
        return None
    mixes = tuple(mix_table(rec, res) for rec, res in _ok(mine, "tpcc_run") if res is not None)
    blocks: list[Table | Figure | Details] = [
        b for b in (summary_table(study, mine), load_table(mine)) if b is not None
    ]
    if mixes:
        blocks.append(Details(f"The transaction mix of every run ({len(mixes)})", mixes))
    blocks += [b for b in (checks_table(mine), active_figure(mine), tpmc_figure(study, mine)) if b]
    return Section(
        title="TPC-C",
        anchor="tpcc",
        paragraphs=(
            "The nine tables populated per the specification (clause 4.3.3) inside the "
            "server; the five transactions in the 45/43/4/4/4 mix driven by pgbench with "
            "weighted scripts - server-side as one PL/pgSQL call per transaction, "
            "client-side as one round trip per statement.",
        ),
        blocks=tuple(blocks),
    )
