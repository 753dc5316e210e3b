"""TPC-B with pgbench as steps, as seed 000 runs it.

1. ``pgbench -i -s S`` timed (load time, rows/s);
2. ``CHECKPOINT``, then ``count(*)`` forced onto an index-only scan and onto a
   sequential scan;
3. for each mode (select-only, read-write tpcb-like), client count and
   duration: reset / warm-up / ``CHECKPOINT`` as the campaign says, then
   ``pgbench -M prepared -n -r -P 1 -c C -j J -T D`` with a sampled
   per-transaction log for latency percentiles.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Any

from pgrig import calibration
from pgrig.cluster import loadwal
from pgrig.errors import ToolError
from pgrig.load import LoadJob, threads_on
from pgrig.policy import RunPolicy
from pgrig.registry.workload import TargetView, on_hosts
from pgrig.results import (
    CountResult,
    JsonValue,
    PgbenchInit,
    PgbenchRun,
    ProgressPoint,
    from_dict,
    to_dict,
)
from pgrig.sql import load as load_sql
from pgrig.step import Action, Call, Context, Step, StepKey
from pgrig.tools import pgbench
from pgrig.ui import Step as ProgressLine
from pgrig.workdb import database_bytes, limit_by_size, size_timeout_s
from pgrig.workloads import loaded
from pgrig.workloads.common import conn, load_restarts, sizes_step
from pgrig.workloads.tpcb import loader
from pgrig.workloads.tpcb.spec import TpcbSpec

COUNT_METHODS = {
    "index-only scan": ("tpcb_count_index_only", "Index Only Scan"),
    "seq scan": ("tpcb_count_seq", "Seq Scan"),
}
TABLES = "pgbench\\_%"  # what a TPC-B load writes (a LIKE pattern)
# First guess of the rate, only used to size the sampled transaction log of the
# first run of a mode; later runs use the highest tps measured so far, so the
# log stays small (and cheap for pgbench) however fast the machine is.
FIRST_GUESS_TPS = {"select-only": 100_000.0, "read-write": 10_000.0}


def threads_for(threads: int | None, clients: int, cpus: int | None = None) -> int:
    """pgbench -j: as asked (at most one per client), else min(clients, CPUs) of
    the host that runs it (``cpus``; None: this machine's) - the seeds set -j to
    -c, but threads beyond the cores only add scheduling noise. A target's load
    hosts each run their own (``LoadJob.auto_threads``)."""
    if threads is not None:
        return min(threads, clients)
    return threads_on(clients, cpus if cpus is not None else os.cpu_count() or 1)


def load_action(
    spec: TpcbSpec, scale: int, tablespaces: dict[str, str | None], storage: str
) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[PgbenchInit, str]:
        machine = calibration.busy()  # before the load adds its own
        server, bin_dir = conn(ctx), ctx.bins.client_bin_dir
        opts = pgbench.InitOptions(
            scale=scale,
            generate=spec.generate,  # type: ignore[arg-type]
            partitions=spec.partitions,
            unlogged=spec.unlogged,
            tablespace=tablespaces.get("tablespace"),
            index_tablespace=tablespaces.get("index_tablespace"),
            fillfactor=spec.fillfactor,
        )

        def on_progress(done: int, total: int) -> None:
            line.update(completed=done, total=total, detail=f"{done:,} of {total:,} rows")

        who: dict[str, JsonValue] = {}
        if spec.reuse:
            with server.connect() as db:
                who = loaded.identity(
                    db, workload="tpcb", scale=scale,
                    partitions=spec.partitions, unlogged=spec.unlogged,
                    fillfactor=spec.fillfactor, loader=spec.generate, **tablespaces,
                )  # fmt: skip
                stored = loaded.find(db, who, TABLES)
                if stored is not None:
                    line.update(detail="loaded by an earlier study: reused")
                    earlier = from_dict(PgbenchInit, stored)
                    raw = f"pgbench tables of scale {scale} reused, loaded earlier by the same " \
                        f"loader, PostgreSQL version and settings: {json.dumps(who)}\n"  # fmt: skip
                    return replace(earlier, reused=True), raw
                loaded.forget(db, "tpcb")
        if spec.generate == "parallel":
            jobs = spec.load_jobs or os.cpu_count() or 1
            # Unlogged tables write no WAL anyway: no restart for them.
            wal = "profile" if spec.unlogged else spec.load_wal
            with load_restarts(ctx, wal, scale * pgbench.BYTES_PER_SCALE) as cluster:
                result, raw = loader.load(bin_dir, server, opts, jobs,
                                          on_progress=on_progress, minimal_wal=cluster)  # fmt: skip
        else:
            result, raw = pgbench.run_init(bin_dir, server, opts, on_progress=on_progress)
        minimal = result.wal_level is not None
        calibration.record_on(
            load_kind(spec, scale, minimal), storage, scale, load_seconds(result), machine
        )
        # One session after the load: its size (the result's, and what the
        # CHECKPOINT's time limit is sized by), the CHECKPOINT, the reuse mark.
        with server.connect() as db:
            size = database_bytes(db)
            limit_by_size(db, size_timeout_s(size))
            db.execute("CHECKPOINT")
            result = replace(result, database_bytes=size)
            if who:
                loaded.mark(db, who, TABLES, to_dict(result))
        return result, raw

    return action


def pgbench_data(scale: int) -> str:
    """What a step that loads the pgbench tables leaves (``Step.leaves``)."""
    return f"pgbench scale {scale}"


def load_kind(spec: TpcbSpec, scale: int = 0, minimal_wal: bool | None = None) -> str:
    """What a load's time is calibrated under: the loader, partitioned or not,
    and at wal_level=minimal or not (``minimal_wal``; None: as the spec asks -
    a plan cannot know yet whether the server may be restarted)."""
    if minimal_wal is None:
        minimal_wal = spec.generate == "parallel" and loadwal.wanted(
            spec.load_wal, scale * pgbench.BYTES_PER_SCALE
        )
    return (
        f"tpcb:{spec.generate}"
        + (":partitioned" if spec.partitions else "")
        + (":minimal-wal" if minimal_wal else "")
    )


def load_seconds(result: PgbenchInit) -> float:
    """A load's seconds as calibrated: without dropping the tables that were
    there before (that time is the earlier data's: dropping scale-100 tables
    took 1-2 s before a scale-10 load of 5 s here)."""
    return max(0.01, result.elapsed_s - result.steps.get("drop tables", 0.0))


# What a partition of pgbench_accounts adds to a load, empty or not: pgbench -i
# -s 1 took 0.44 s, with 100 partitions 1.55 s, with 1000 11.2 s (PostgreSQL 15,
# this 2-core machine, busy, 2026-11-27). --partitions 100000000 at scale 1 was
# planned at 6 s and ran over 5 minutes (issue 33).
PARTITION_S = 0.011


def load_estimate(spec: TpcbSpec, scale: int, storage: str = "") -> float:
    """Seconds to load ``scale``: from this storage's or this machine's earlier
    loads (pgrig.calibration), else 1.5 s per scale unit (pgbench -i on a slow
    disk); and its partitions' (a calibrated load of partitions has them)."""
    partitions = spec.partitions * PARTITION_S
    return calibration.estimate_on(
        load_kind(spec, scale), storage, scale, lambda s: 5 + 1.5 * s + partitions
    )


def _find_node(plan: dict[str, Any], node_type: str) -> dict[str, Any] | None:
    if plan.get("Node Type") == node_type:
        return plan
    for child in plan.get("Plans", []):
        found = _find_node(child, node_type)
        if found is not None:
            return found
    return None


def count_workers(asked: int) -> int:
    """Seed 000 sets 16 parallel workers per gather for count(*) on 64 threads;
    more workers than CPUs here would only queue for them."""
    return min(asked, os.cpu_count() or 1)


def count_action(method: str, workers: int) -> Action:
    sql_name, node_type = COUNT_METHODS[method]

    def action(ctx: Context, line: ProgressLine) -> tuple[CountResult, str]:
        # One statement per execute: the SETs must apply to the EXPLAIN's session.
        statements = [s for s in load_sql(sql_name).split(";") if s.strip()]
        if workers:
            statements.insert(0, f"SET max_parallel_workers_per_gather = {int(workers)}")
        with conn(ctx).connect() as db:
            for statement in statements[:-1]:
                db.execute(statement)
            row = db.execute(statements[-1]).fetchone()
        assert row is not None
        explain = row[0] if isinstance(row[0], list) else json.loads(row[0])
        top = explain[0]
        scan = _find_node(top["Plan"], node_type)
        if scan is None:
            used = top["Plan"].get("Node Type")
            raise ToolError(
                f"count(*) by {method}: the planner did not use a {node_type} (it chose {used})",
                hint="the server's settings forbid that plan; see the plan in the raw output",
            )
        raw = json.dumps(explain, indent=2)
        result = CountResult(
            method=method,
            # EXPLAIN gives a node's rows per loop: a parallel scan's loops are its
            # workers (and the leader), so 200,000 rows on two workers read 100,000
            rows=round(float(scan.get("Actual Rows", 0)) * int(scan.get("Actual Loops", 1))),
            execution_ms=float(top["Execution Time"]),
            plan=raw,
        )
        return result, raw

    return action


def bench_action(
    opts: pgbench.RunOptions, first_guess: float, auto_threads: bool = False
) -> Action:
    """A measured pgbench run (TPC-B or custom), with a sampled transaction log,
    from the target's clients (``Context.clients``: wherever its kind runs them).
    ``auto_threads``: ``opts.threads`` is this machine's guess, not asked (load
    hosts run their own)."""

    def action(ctx: Context, line: ProgressLine) -> tuple[PgbenchRun, str]:
        observed = ctx.running.observed
        run_opts = replace(
            opts,
            transaction_log=True,
            sampling_rate="auto",
            expected_tps=observed.get(opts.mode, first_guess),
        )

        def on_progress(point: ProgressPoint) -> None:
            line.update(completed=point.t_s, detail=f"{point.tps:,.0f} tps")

        job = LoadJob(
            run_opts, ctx.scratch, conn(ctx), on_progress=on_progress, auto_threads=auto_threads
        )
        result, raw = ctx.clients.bench(job)
        observed[opts.mode] = max(observed.get(opts.mode, 0.0), result.tps)
        return result, raw

    return action


def _key(
    target: str, spec: TpcbSpec, scale: int, *parts: str, repeat: int | None = None
) -> StepKey:
    """A TPC-B step's key: its target, workload, scale, parts and repeat (None:
    a step that is not repeated)."""
    return StepKey(target, spec.name, (f"s{scale}", *parts), repeat)


def load_steps(spec: TpcbSpec, scale: int, target: TargetView) -> list[Step]:
    """pgbench -i, then count(*) by both plans (seed 000)."""
    tablespaces = target.tablespaces
    params: dict[str, object] = {
        "workload": spec.name,
        "scale": scale,
        "generate": spec.generate,
        "load_jobs": spec.load_jobs,
        "load_wal": spec.load_wal,
        "reuse": spec.reuse,
        "partitions": spec.partitions,
        "unlogged": spec.unlogged,
        "fillfactor": spec.fillfactor,
        **tablespaces,
    }
    out = [
        Step(
            key=_key(target.name, spec, scale, "init"),
            kind="pgbench_init",
            label=f"{target.name}: pgbench -i -s {scale}",
            params=params,
            action=Call(
                "tpcb.load",
                {
                    "spec": spec,
                    "scale": scale,
                    "tablespaces": tablespaces,
                    "storage": target.storage,
                },
            ),
            total=scale * pgbench.ROWS_PER_SCALE,
            tools=("pgbench",),
            estimate_s=load_estimate(spec, scale, target.storage),
            creates_data=True,
            leaves=pgbench_data(scale),
        )
    ]
    if spec.count:
        workers = count_workers(spec.count_workers)
        for method in COUNT_METHODS:
            out.append(
                Step(
                    key=_key(target.name, spec, scale, "count", method.replace(" ", "-")),
                    kind="count",
                    label=f"{target.name}: count(*) by {method}"
                    + (f", {workers} parallel workers" if workers else ""),
                    params={
                        "workload": spec.name,
                        "method": method,
                        "scale": scale,
                        **(
                            {"workers": count_workers(spec.count_workers)}
                            if spec.count_workers
                            else {}
                        ),
                    },
                    action=Call("tpcb.count", {"method": method, "workers": workers}),
                    estimate_s=1 + 0.05 * scale,
                )
            )
    out.append(sizes_after(spec, scale, target, "after load"))
    return out


def sizes_after(spec: TpcbSpec, scale: int, target: TargetView, when: str) -> Step:
    """The pgbench tables and indexes after the load, or after the target's runs."""
    return sizes_step(
        _key(target.name, spec, scale),
        when,
        {"workload": spec.name, "scale": scale},
    )


def sizes_after_runs(spec: TpcbSpec, scale: int, target: TargetView, _repeat: int) -> Step:
    """``sizes_after`` as a series makes it: once per target after its runs."""
    return sizes_after(spec, scale, target, "after runs")


@dataclass(frozen=True)
class Point:
    """One measured point of a TPC-B sweep."""

    duration: int
    mode: str
    clients: int
    rate: float | None  # offered transactions/s; None: closed loop


def points(spec: TpcbSpec) -> list[Point]:
    """(duration, mode, clients, rate) in the order they run: the offered rates of
    a sweep (``rates``) innermost, else the one ``rate`` (None: closed loop)."""
    rates: tuple[float | None, ...] = spec.rates or (spec.rate,)
    return [
        Point(d, m, c, r) for d in spec.durations for m in spec.modes for c in spec.clients
        for r in rates
    ]  # fmt: skip


def rate_part(rate: float | None, swept: bool) -> tuple[str, ...]:
    """A swept rate's step-key part: 'R400' (a single ``rate`` keeps the key it had)."""
    return (f"R{rate:g}",) if swept and rate is not None else ()


def bench_step(
    spec: TpcbSpec,
    scale: int,
    point: Point,
    policy: RunPolicy,
    target: TargetView,
    repeat: int,
) -> Step:
    threads = threads_for(spec.threads, point.clients)
    opts = pgbench.RunOptions(
        mode=point.mode,  # type: ignore[arg-type]
        clients=point.clients,
        threads=threads,
        duration_s=point.duration,
        query_mode=spec.query_mode,  # type: ignore[arg-type]
        rate=point.rate,
        latency_limit_ms=spec.latency_limit_ms,
    )
    swept = rate_part(point.rate, bool(spec.rates))
    parts = (point.mode, f"c{point.clients}", f"d{point.duration}", *swept)
    return Step(
        key=_key(target.name, spec, scale, *parts, repeat=repeat),
        kind="pgbench_run",
        label=f"{target.name}: {point.mode} -s {scale} -c {point.clients} -j {threads}"
        + (f" -R {point.rate:g}" if point.rate is not None else "")
        + on_hosts(target, point.clients)
        + policy.run_label(repeat),
        params={
            "workload": spec.name,
            "mode": point.mode,
            "scale": scale,
            "clients": point.clients,
            "threads": threads,
            "duration_s": point.duration,
            "query_mode": spec.query_mode,
            "repeat": repeat,
            "rate": point.rate,
            # a sweep's goal, for the report's first screen (cost.goal_rule)
            **({"latency_target": policy.latency_target} if spec.rates else {}),
            "latency_limit_ms": spec.latency_limit_ms,
            "warmup": policy.warmup,
            "reset": policy.reset,
        },
        action=Call(
            "pgbench.run",
            {
                "opts": opts,
                "first_guess": FIRST_GUESS_TPS[point.mode],
                "auto_threads": spec.threads is None,
            },
        ),
        prepare=Call(
            "pgbench.prepare",
            {"opts": opts, "policy": policy, "auto_threads": spec.threads is None},
        ),
        total=point.duration,
        tools=("pgbench",),
        monitored=True,
        estimate_s=policy.run_seconds(point.duration, restore_s=0.2 * scale),
    )
