"""TPC-B with pgbench, as seed 000 runs it.

1. ``pgbench -i -s S`` timed (load time, rows/s);
2. ``CHECKPOINT``, then ``count(*)`` forced onto an index-only scan and onto a
   sequential scan;
3. for each mode (select-only ``-S``, read-write tpcb-like) and client count:
   ``CHECKPOINT``, then ``pgbench -M prepared -n -r -P 1 -c C -j J -T D`` with a
   sampled per-transaction log for latency percentiles.
"""

from __future__ import annotations

import json
from typing import Any

from pgrig.plan import StudyPlan, TpcbPlan
from pgrig.results import CountResult, ProgressPoint
from pgrig.sql import load as load_sql
from pgrig.step import Context, Step
from pgrig.tools import pgbench
from pgrig.ui import Step as ProgressLine

COUNT_METHODS = {
    "index-only scan": ("tpcb_count_index_only", "Index Only Scan"),
    "seq scan": ("tpcb_count_seq", "Seq Scan"),
}
# First guess of the rate, only used to size the sampled transaction log of the
# first run of a mode; later runs use the highest tps measured so far, so the
# log stays small (and cheap for pgbench) however fast the machine is.
FIRST_GUESS_TPS = {"select-only": 100_000.0, "read-write": 10_000.0}


def _conn(ctx: Context) -> Any:
    assert ctx.conn is not None, "the server must be up before TPC-B steps run"
    return ctx.conn


def checkpoint(ctx: Context) -> None:
    with _conn(ctx).connect() as conn:
        conn.execute("CHECKPOINT")


def _load(tp: TpcbPlan) -> Any:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        opts = pgbench.InitOptions(
            scale=tp.scale,
            generate=tp.generate,  # type: ignore[arg-type]
            partitions=tp.partitions,
            unlogged=tp.unlogged,
            tablespace=tp.tablespace,
            index_tablespace=tp.index_tablespace,
        )

        def on_progress(done: int, total: int) -> None:
            line.update(completed=done, total=total, detail=f"{done:,} of {total:,} rows")

        result, raw = pgbench.run_init(ctx.bins.bin_dir, _conn(ctx), opts, on_progress=on_progress)
        with _conn(ctx).connect() as conn:
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        checkpoint(ctx)
        from dataclasses import replace

        return replace(result, database_bytes=int(size[0]) if size else None), raw

    return action


def _find_node(plan: dict[str, Any], node_type: str) -> dict[str, Any] | None:
    if plan.get("Node Type") == node_type:
        return plan
    for child in plan.get("Plans", []):
        found = _find_node(child, node_type)
        if found is not None:
            return found
    return None


def _count(method: str) -> Any:
    sql_name, node_type = COUNT_METHODS[method]

    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        # One statement per execute: the SETs must apply to the EXPLAIN's session.
        statements = [s for s in load_sql(sql_name).split(";") if s.strip()]
        with _conn(ctx).connect() as conn:
            for statement in statements[:-1]:
                conn.execute(statement)
            row = conn.execute(statements[-1]).fetchone()
        assert row is not None
        explain = row[0] if isinstance(row[0], list) else json.loads(row[0])
        top = explain[0]
        scan = _find_node(top["Plan"], node_type)
        if scan is None:
            used = top["Plan"].get("Node Type")
            raise RuntimeError(f"the planner did not use a {node_type} (it chose {used})")
        raw = json.dumps(explain, indent=2)
        result = CountResult(
            method=method,
            rows=int(scan.get("Actual Rows", 0)),
            execution_ms=float(top["Execution Time"]),
            plan=raw,
        )
        return result, raw

    return action


def _bench(plan: StudyPlan, mode: str, clients: int, observed: dict[str, float]) -> Any:
    tp = plan.tpcb
    assert tp is not None

    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        checkpoint(ctx)
        opts = pgbench.RunOptions(
            mode=mode,  # type: ignore[arg-type]
            clients=clients,
            threads=plan.threads_for(clients),
            duration_s=tp.duration_s,
            query_mode=tp.query_mode,  # type: ignore[arg-type]
            transaction_log=True,
            sampling_rate="auto",
            expected_tps=observed.get(mode, FIRST_GUESS_TPS[mode]),
        )

        def on_progress(point: ProgressPoint) -> None:
            line.update(completed=point.t_s, detail=f"{point.tps:,.0f} tps")

        result, raw = pgbench.run_bench(
            ctx.bins.bin_dir, _conn(ctx), opts, ctx.scratch, on_progress=on_progress
        )
        observed[mode] = max(observed.get(mode, 0.0), result.tps)
        return result, raw

    return action


def load_steps(plan: StudyPlan) -> list[Step]:
    tp = plan.tpcb
    assert tp is not None
    init_params = {
        "scale": tp.scale,
        "generate": tp.generate,
        "partitions": tp.partitions,
        "unlogged": tp.unlogged,
        "tablespace": tp.tablespace,
        "index_tablespace": tp.index_tablespace,
    }
    out = [
        Step(
            key=f"tpcb/init/s{tp.scale}",
            kind="pgbench_init",
            label=f"pgbench -i -s {tp.scale}",
            params=init_params,
            action=_load(tp),
            total=tp.scale * pgbench.ROWS_PER_SCALE,
            tools=("pgbench",),
        )
    ]
    if tp.count:
        for method in COUNT_METHODS:
            out.append(
                Step(
                    key=f"tpcb/count/{method.replace(' ', '-')}",
                    kind="count",
                    label=f"count(*) by {method}",
                    params={"method": method, "scale": tp.scale},
                    action=_count(method),
                )
            )
    return out


def bench_steps(plan: StudyPlan) -> list[Step]:
    tp = plan.tpcb
    assert tp is not None
    out = []
    observed: dict[str, float] = {}
    for repeat in range(1, tp.repeat + 1):
        for mode in tp.modes:
            for clients in tp.clients:
                threads = plan.threads_for(clients)
                suffix = f"/r{repeat}" if tp.repeat > 1 else ""
                out.append(
                    Step(
                        key=f"tpcb/run/{mode}/c{clients}{suffix}",
                        kind="pgbench_run",
                        label=f"{mode} -c {clients} -j {threads}",
                        params={
                            "mode": mode,
                            "scale": tp.scale,
                            "clients": clients,
                            "threads": threads,
                            "duration_s": tp.duration_s,
                            "query_mode": tp.query_mode,
                            "repeat": repeat,
                        },
                        action=_bench(plan, mode, clients, observed),
                        total=tp.duration_s,
                        tools=("pgbench",),
                    )
                )
    return out
