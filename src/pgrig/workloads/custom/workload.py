"""The user's own workload: setup SQL run with psql, then pgbench scripts with
weights and variables - seed 001's login/logout functions are the example
(``examples/seed001/``). Its runs are ``pgbench_run`` results, like TPC-B's."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pgrig import calibration
from pgrig.hosts.executor import C_LOCALE
from pgrig.hosts.local import HERE
from pgrig.pgsource.binaries import PgBinaries
from pgrig.policy import RunPolicy
from pgrig.registry.shared import PGBENCH_RUN, RELATION_SIZES, SQL_SETUP
from pgrig.registry.workload import (
    Needs,
    Phase,
    Series,
    TargetView,
    Workload,
    WorkloadSpec,
    on_hosts,
)
from pgrig.results import SetupResult
from pgrig.schema import Checked, Table
from pgrig.step import Action, Call, Context, Step, StepKey
from pgrig.tools import pgbench
from pgrig.ui import Step as ProgressLine
from pgrig.units import MB
from pgrig.workloads.common import conn, prepare_action, relation_sizes, sizes_step
from pgrig.workloads.custom import datasize
from pgrig.workloads.custom import spec as custom_spec
from pgrig.workloads.custom.spec import CustomSpec
from pgrig.workloads.pgbench_report import PGBENCH_REPORT
from pgrig.workloads.tpcb import steps as tpcb_steps
from pgrig.workloads.tpcb.spec import TpcbSpec
from pgrig.workloads.tpcb.steps import rate_part, threads_for
from pgrig.workloads.tpcb.workload import BYTES_PER_SCALE, peak_bytes

FIRST_GUESS_TPS = 10_000.0
SETUP_TIMEOUT_S = 3600.0


def setup_action(spec: CustomSpec, data: int, storage: str) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        started, machine = time.monotonic(), calibration.busy()
        outputs = []
        for path in spec.setup:
            line.update(detail=path.name)
            # psql, not psycopg: setup files may use psql's own commands (\set, \i).
            done = HERE.run(
                [
                    str(ctx.bins.path("psql")),
                    "-X",
                    "-q",
                    "-v",
                    "ON_ERROR_STOP=1",
                    # the workload's defines, as the scripts see them: :users in both
                    *(
                        arg
                        for name, value in spec.defines.items()
                        for arg in ("-v", f"{name}={value}")
                    ),
                    "-f",
                    str(path),
                    *conn(ctx).args(),
                ],
                timeout=SETUP_TIMEOUT_S,
                env={**C_LOCALE, **conn(ctx).env(own=True)},
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
        if data:
            calibration.record_on(SETUP_KIND, storage, data / MB, result.elapsed_s, machine)
        return result, "\n".join(outputs)

    return action


SETUP_KIND = "sql-setup"  # pgrig.calibration: a setup's seconds per estimated size (MB)


def setup_estimate(data: int, storage: str = "") -> float:
    """Seconds a setup making ``data`` bytes takes here: from the setups this
    machine ran (per estimated size), else at the pace of its TPC-B loads of as
    many bytes, else pgbench's default."""
    mb = data / MB
    as_tpcb = tpcb_steps.load_estimate(TpcbSpec(), max(1, round(data / BYTES_PER_SCALE)), storage)
    return calibration.estimate_on(SETUP_KIND, storage, mb, lambda _mb: as_tpcb if data else 1.0)


def setup_step(spec: CustomSpec, target: TargetView, data: int) -> Step:
    return Step(
        key=StepKey(target.name, spec.name, ("setup",)),
        kind="sql_setup",
        label=f"{target.name}: {spec.name} setup",
        params={"workload": spec.name, "files": [str(p) for p in spec.setup]},
        action=Call("custom.setup", {"spec": spec, "data": data, "storage": target.storage}),
        tools=("psql",),
        estimate_s=setup_estimate(data, target.storage),
        creates_data=True,
    )


@dataclass(frozen=True)
class Point:
    """One measured point of a custom workload's sweep."""

    duration: int
    clients: int
    rate: float | None  # offered transactions/s; None: closed loop


def points(spec: CustomSpec) -> list[Point]:
    """(duration, clients, rate) in the order they run, a sweep's rates innermost."""
    rates: tuple[float | None, ...] = spec.rates or (spec.rate,)
    return [Point(d, c, r) for d in spec.durations for c in spec.clients for r in rates]


def bench_step(
    spec: CustomSpec,
    point: Point,
    policy: RunPolicy,
    target: TargetView,
    repeat: int,
) -> Step:
    threads = threads_for(spec.threads, point.clients)
    opts = pgbench.RunOptions(
        mode="custom",
        clients=point.clients,
        threads=threads,
        duration_s=point.duration,
        query_mode=spec.query_mode,  # type: ignore[arg-type]
        scripts=tuple((str(s.path), s.weight) for s in spec.scripts),
        defines=tuple(spec.defines.items()),
        rate=point.rate,
        latency_limit_ms=spec.latency_limit_ms,
    )
    swept = rate_part(point.rate, bool(spec.rates))
    return Step(
        key=StepKey(
            target.name, spec.name, (f"c{point.clients}", f"d{point.duration}", *swept), repeat
        ),
        kind="pgbench_run",
        label=f"{target.name}: {spec.name} -c {point.clients} -j {threads}"
        + on_hosts(target, point.clients)
        + policy.run_label(repeat),
        params={
            "workload": spec.name,
            "mode": spec.name,
            "clients": point.clients,
            "threads": threads,
            "duration_s": point.duration,
            "query_mode": spec.query_mode,
            "repeat": repeat,
            "scripts": [f"{s.path.name}@{s.weight}" for s in spec.scripts],
            "defines": spec.defines,
            "rate": point.rate,
            **({"latency_target": policy.latency_target} if spec.rates else {}),
            "warmup": policy.warmup,
            "reset": policy.reset,
        },
        action=Call(
            "pgbench.run",
            {"opts": opts, "first_guess": FIRST_GUESS_TPS, "auto_threads": spec.threads is None},
        ),
        prepare=Call(
            "pgbench.prepare",
            {"opts": opts, "policy": policy, "auto_threads": spec.threads is None},
        ),
        total=point.duration,
        tools=("pgbench",),
        monitored=True,
        estimate_s=policy.run_seconds(point.duration),
    )


class CustomWorkload(Workload):
    type = "custom"
    order = 20
    schema = custom_spec.SCHEMA
    actions = {
        "custom.setup": setup_action,
        "pgbench.prepare": prepare_action,
        "pgbench.run": tpcb_steps.bench_action,
        "common.relation_sizes": relation_sizes,
    }
    from_load_hosts = True
    kinds = (
        SQL_SETUP,
        PGBENCH_RUN,
        RELATION_SIZES,
    )
    runs_report = PGBENCH_REPORT  # TPC-B's: the runs are pgbench's, as TPC-B's are
    needs = Needs(destructive="the setup SQL may drop and recreate tables")

    def parse(self, table: Table, read: Checked) -> CustomSpec:
        return custom_spec.parse(table, read)

    def check(self, spec: WorkloadSpec, bins: PgBinaries, source: str) -> None:
        assert isinstance(spec, CustomSpec)  # what parse made
        custom_spec.check_scripts(
            spec.name, spec.scripts, bins, source, spec.defines, spec.query_mode
        )

    def phases(self, spec: CustomSpec, policy: RunPolicy) -> list[Phase]:
        def series(point: Point) -> Series:
            return Series(lambda t, rep: bench_step(spec, point, policy, t, rep))

        def sizes(t: TargetView, when: str) -> Step:
            return sizes_step(StepKey(t.name, spec.name), when, {"workload": spec.name})

        data = datasize.of_files(spec.setup, spec.defines)
        return [
            Phase(
                data=lambda t: [setup_step(spec, t, data), sizes(t, "after load")],
                series=[
                    *(series(p) for p in points(spec)),
                    Series(lambda t, _rep: sizes(t, "after runs"), repeated=False),
                ],
                disk_bytes=peak_bytes(data) if spec.setup else 0,
            )
        ]


WORKLOAD = CustomWorkload()
