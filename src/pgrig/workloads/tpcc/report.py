"""Report section: TPC-C - a summary in the style of seed 003 (environment,
warehouses, data size, active data, tpmC, tpmTotal, latencies), the load, the
transaction mix of every run, the consistency checks, and tpmC over time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgrig.cluster import loadwal
from pgrig.document import fmt
from pgrig.document.model import (
    FAILED,
    HEADLINE,
    SKIPPED,
    Figure,
    Row,
    Section,
    Series,
    Table,
    median_line,
)
from pgrig.results import RunRecord, Study, typed
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
    return [(r, typed(r, TYPES[kind])) for r in records if r.kind == kind]


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


def summary_table(study: Study, records: Sequence[RunRecord]) -> Table | None:
    # Each target's own load: their data sizes differ (filesystems, versions).
    loads: dict[str, TpccLoad] = {r.target: res for r, res in _ok(records, "tpcc_load") if res}
    runs = _ok(records, "tpcc_run")
    several = len({rec.target for rec, _ in runs}) > 1
    if not runs:
        return None
    columns = (
        *(("target",) if several else ()),
        "run",
        "warehouses (active)",
        "data size (active)",
        "connections",
        "tpmC",
        "tpmTotal",
        "qps",
        "New-Order p50 / p95 / p99 ms",
        "failed / retried",
    )
    rows = []
    for rec, res in runs:
        label = f"{MODE_LABELS.get(str(rec.params.get('mode')), rec.params.get('mode'))}"
        if rec.params.get("repeat", 1) != 1:
            label += f", repeat {rec.params['repeat']}"
        first = (rec.target, label) if several else (label,)
        if res is None:
            cells = (*first, _status(rec))
            rows.append(Row(cells + ("",) * (len(columns) - len(cells)), _row_kind(rec)))
            continue
        r: TpccRun = res
        size = "n/a"
        loaded = r.loaded_bytes
        if loaded is None and (load := loads.get(rec.target)) is not None:
            loaded = load.database_bytes  # a run recorded before runs knew their load's size
        if loaded is not None:
            size = f"{fmt.size(loaded)} ({fmt.size(active_share(loaded, r.active, r.warehouses))})"
        no = r.stats("new_order")
        lat = "n/a"
        if no is not None and no.p50_ms is not None:
            lat = " / ".join(fmt.ms(v or 0.0) for v in (no.p50_ms, no.p95_ms, no.p99_ms))
        rows.append(
            Row(
                (
                    *first,
                    f"{r.warehouses} ({r.active})",
                    size,
                    str(r.connections),
                    fmt.integer(r.tpmc),
                    fmt.integer(r.tpm_total),
                    fmt.integer(r.qps) if r.qps is not None else "n/a",
                    lat,
                    f"{r.failed} / {r.retried}",
                ),
                HEADLINE,
            )
        )
    return Table(
        columns=columns,
        rows=tuple(rows),
        caption=f"TPC-C summary - {environment_line(study)}",
        notes=(
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
        ),
        numeric=(False, *([False] if several else []), *([True] * 8)),
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
    columns = ("warehouses", "rows", "size", "elapsed", "rows/s", "MB/s", "phases")
    rows = []
    for rec, res in loads:
        if res is None:
            w = str(rec.params.get("warehouses", "?"))
            rows.append(Row((w, _status(rec), "", "", "", "", ""), _row_kind(rec)))
            continue
        order = [k for k in PHASES if k in res.phases] + sorted(set(res.phases) - set(PHASES))
        phases = ", ".join(f"{k} {res.phases[k]:.1f} s" for k in order)
        rows.append(
            Row(
                (
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
        numeric=(True, True, True, True, True, True, False),
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
        caption=f"{MODE_LABELS.get(r.mode, r.mode)}: {r.connections} connections, "
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
        after = rec.key.split("/check/", 1)[-1]
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


def tpmc_figure(records: Sequence[RunRecord]) -> Figure | None:
    series = []
    runs = _ok(records, "tpcc_run")
    several = len({res.active for _, res in runs if res is not None}) > 1
    for rec, res in runs:
        if res is None or not res.timeline:
            continue
        label = f"{res.mode}-side" + (f", {res.active} active" if several else "")
        if rec.params.get("repeat", 1) != 1:
            label += f" #{rec.params['repeat']}"
        series.append(
            Series(
                label=label,
                x=tuple(p.t_s for p in res.timeline),
                y=tuple(p.tpmc for p in res.timeline),
                group=res.mode,
            )
        )
    if not series:
        return None
    return Figure(
        name="tpcc-tpmc",
        title="TPC-C: tpmC over time",
        x_label="seconds",
        y_label="tpmC (New-Order / min)",
        series=tuple(series),
        caption="New-Order transactions per minute in each interval of the run, "
        "from pgbench's per-transaction log.",
    )


def active_figure(records: Sequence[RunRecord]) -> Figure | None:
    """tpmC against the active warehouses, one line per mode (the curve of
    TPS vs clients, with the active set as its axis); None below two active sets."""
    by_mode: dict[str, dict[int, list[float]]] = {}
    sizes: dict[int, int] = {}
    for _, res in _ok(records, "tpcc_run"):
        if res is not None:
            by_mode.setdefault(res.mode, {}).setdefault(res.active, []).append(res.tpmc)
            if res.active_bytes is not None:
                sizes.setdefault(res.active, res.active_bytes)
    if len({k for points in by_mode.values() for k in points}) < 2:
        return None
    series = tuple(median_line(f"{mode}-side", by_mode[mode]) for mode in sorted(by_mode))
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
    mine = [r for r in records if r.kind in ("tpcc_load", "tpcc_run", "tpcc_check")]
    if not mine:
        return None
    blocks: list[Table | Figure] = []
    runs = [mix_table(rec, res) for rec, res in _ok(mine, "tpcc_run") if res is not None]
    candidates = [summary_table(study, mine), load_table(mine), *runs, checks_table(mine)]
    blocks = [b for b in candidates if b is not None]
    blocks += [f for f in (active_figure(mine), tpmc_figure(mine)) if f is not None]
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
