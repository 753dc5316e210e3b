"""The user's own workload: setup SQL run with psql, then pgbench scripts with
weights and variables - seed 001's login/logout functions are the example
(``examples/seed001/``)."""

from __future__ import annotations

import time
from typing import Any

from pgrig import proc
from pgrig.campaign import CustomSpec, RunPolicy
from pgrig.results import SetupResult
from pgrig.step import Context, Step
from pgrig.tools import pgbench
from pgrig.ui import Step as ProgressLine
from pgrig.workloads.common import conn
from pgrig.workloads.tpcb import bench_action, prepare_action, threads_for

FIRST_GUESS_TPS = 10_000.0
SETUP_TIMEOUT_S = 3600.0


def _setup(spec: CustomSpec) -> Any:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        started = time.monotonic()
        outputs = []
        for path in spec.setup:
            line.update(detail=path.name)
            # psql, not psycopg: setup files may use psql's own commands (\set, \i).
            done = proc.run(
                [
                    ctx.bins.path("psql"),
                    "-X",
                    "-q",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-f",
                    path,
                    *conn(ctx).args(),
                ],
                timeout=SETUP_TIMEOUT_S,
                what=f"psql -f {path.name}",
            )
            outputs.append(done.stdout + done.stderr)
        with conn(ctx).connect() as db:
            size = db.execute("SELECT pg_database_size(current_database())").fetchone()
        result = SetupResult(
            files=tuple(str(p) for p in spec.setup),
            elapsed_s=time.monotonic() - started,
            database_bytes=int(size[0]) if size else None,
        )
        return result, "\n".join(outputs)

    return action


def prefix(target: str, spec: CustomSpec) -> str:
    return f"{target}/{spec.name}"


def setup_step(target: str, spec: CustomSpec) -> Step:
    return Step(
        key=f"{prefix(target, spec)}/setup",
        kind="sql_setup",
        label=f"{target}: {spec.name} setup",
        params={"workload": spec.name, "files": [str(p) for p in spec.setup]},
        action=_setup(spec),
        tools=("psql",),
    )


def run_key(target: str, spec: CustomSpec, point: tuple[int, int], rep: int) -> str:
    duration, clients = point
    return f"{prefix(target, spec)}/c{clients}/d{duration}/r{rep}"


def points(spec: CustomSpec) -> list[tuple[int, int]]:
    return [(d, c) for d in spec.durations for c in spec.clients]


def bench_step(
    target: str,
    spec: CustomSpec,
    point: tuple[int, int],
    repeat: int,
    policy: RunPolicy,
    observed: dict[str, float],
) -> Step:
    duration, clients = point
    threads = threads_for(spec.threads, clients)
    opts = pgbench.RunOptions(
        mode="custom",
        clients=clients,
        threads=threads,
        duration_s=duration,
        query_mode=spec.query_mode,  # type: ignore[arg-type]
        scripts=tuple((str(s.path), s.weight) for s in spec.scripts),
        defines=tuple(spec.defines.items()),
        rate=spec.rate,
        latency_limit_ms=spec.latency_limit_ms,
    )
    return Step(
        key=run_key(target, spec, point, repeat),
        kind="pgbench_run",
        label=f"{target}: {spec.name} -c {clients} -j {threads}",
        params={
            "workload": spec.name,
            "mode": spec.name,
            "clients": clients,
            "threads": threads,
            "duration_s": duration,
            "query_mode": spec.query_mode,
            "repeat": repeat,
            "scripts": [f"{s.path.name}@{s.weight}" for s in spec.scripts],
            "defines": spec.defines,
            "rate": spec.rate,
            "warmup": policy.warmup,
            "reset": policy.reset,
        },
        action=bench_action(opts, observed, FIRST_GUESS_TPS),
        prepare=prepare_action(opts, policy),
        total=duration,
        tools=("pgbench",),
        monitored=True,
    )
