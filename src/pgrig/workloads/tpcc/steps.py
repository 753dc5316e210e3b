"""A TPC-C study as steps: load, check, then each mode's timed run followed by a
check - alternating the modes, repeated - on a throwaway cluster (or an existing
server), every step recorded in the results store by the core runner."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pgrig import __version__, environment
from pgrig.cluster import workdir
from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.plan import check_space
from pgrig.results import ProgressPoint, Study
from pgrig.runner import CampaignRunner, new_study_id, now
from pgrig.step import Context, Step
from pgrig.store import Store
from pgrig.ui import Step as ProgressLine
from pgrig.workloads.tpcc import checks, driver, loader

# Tables and indexes take about 110 MB per warehouse; the load writes as much WAL.
BYTES_PER_WAREHOUSE = 250 * 2**20


@dataclass(frozen=True)
class TpccPlan:
    warehouses: int = 4
    jobs: int = 0  # loader connections; 0: the CPU count
    connections: int = 4
    threads: int | None = None
    duration_s: int = 60
    modes: tuple[str, ...] = ("server", "client")
    repeat: int = 1
    active: int | None = None
    isolation: str = "read committed"
    max_tries: int = 10

    def validate(self) -> TpccPlan:
        if self.warehouses < 1:
            raise UsageError(
                f"--warehouses {self.warehouses}: must be at least 1",
                hint="TPC-C scales by warehouse: 1 is about 100 MB of data",
            )
        if self.repeat < 1:
            raise UsageError(f"--repeat {self.repeat}: must be at least 1")
        if self.active is not None and self.active > self.warehouses:
            raise UsageError(
                f"--active {self.active}: more than the {self.warehouses} warehouses loaded",
                hint=f"use --active {self.warehouses} or less",
            )
        for mode in self.modes:
            self.run_options(mode).validate()
        return self

    @property
    def loader_jobs(self) -> int:
        return self.jobs or max(1, os.cpu_count() or 1)

    def run_options(self, mode: str) -> driver.RunOptions:
        return driver.RunOptions(
            mode=mode,
            connections=self.connections,
            threads=self.threads,
            duration_s=self.duration_s,
            warehouses=self.warehouses,
            active=self.active,
            isolation=self.isolation,
            max_tries=self.max_tries,
        )


def _conn(ctx: Context) -> Any:
    assert ctx.conn is not None, "the server must be up before TPC-C steps run"
    return ctx.conn


def load_step(tp: TpccPlan, replace: bool) -> Step:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        messages: list[str] = []
        done = [0]

        def on_progress(message: str) -> None:
            messages.append(message)
            if message.startswith("warehouse "):
                done[0] += 1
                line.update(completed=done[0], detail=message)
            else:
                line.update(detail=message)

        result = loader.load(
            _conn(ctx), tp.warehouses, jobs=tp.loader_jobs, replace=replace, on_progress=on_progress
        )
        return result, "\n".join(messages) + "\n"

    return Step(
        key=f"tpcc/load/w{tp.warehouses}",
        kind="tpcc_load",
        label=f"TPC-C load, {tp.warehouses} warehouse{'s' if tp.warehouses > 1 else ''}",
        params={"warehouses": tp.warehouses, "jobs": tp.loader_jobs},
        action=action,
        total=tp.warehouses,
    )


def check_step(key: str, label: str) -> Step:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        result = checks.check(_conn(ctx))
        raw = "".join(
            f"condition {c.number}: {'skipped' if c.skipped else 'pass' if c.passed else 'FAIL'}"
            f" ({c.offending} of {c.checked} offending) {c.title}\n"
            for c in result.conditions
        )
        return result, raw

    return Step(key=key, kind="tpcc_check", label=label, params={}, action=action)


def run_step(tp: TpccPlan, mode: str, repeat: int) -> Step:
    opts = tp.run_options(mode)

    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        def on_progress(point: ProgressPoint) -> None:
            line.update(completed=point.t_s, detail=f"{point.tps:,.0f} tps")

        scratch = ctx.scratch if ctx.scratch.is_dir() else ctx.target
        return driver.run(ctx.bins.bin_dir, _conn(ctx), opts, scratch, on_progress=on_progress)

    suffix = f"/r{repeat}" if tp.repeat > 1 else ""
    return Step(
        key=f"tpcc/run/{mode}/c{tp.connections}{suffix}",
        kind="tpcc_run",
        label=f"TPC-C {mode}-side, {tp.connections} connections, {tp.duration_s} s",
        params={
            "mode": mode,
            "warehouses": tp.warehouses,
            "active": tp.active or tp.warehouses,
            "connections": tp.connections,
            "threads": opts.pgbench_threads,
            "duration_s": tp.duration_s,
            "isolation": tp.isolation,
            "repeat": repeat,
        },
        action=action,
        total=tp.duration_s,
        tools=("pgbench",),
        monitored=True,
    )


def steps(tp: TpccPlan, replace: bool = True) -> list[Step]:
    out = [load_step(tp, replace), check_step("tpcc/check/load", "TPC-C consistency after load")]
    for repeat in range(1, tp.repeat + 1):
        for mode in tp.modes:
            step = run_step(tp, mode, repeat)
            out.append(step)
            out.append(
                check_step(f"tpcc/check/{step.key[len('tpcc/run/') :]}", "TPC-C consistency")
            )
    return out


def run_study(tp: TpccPlan, runner: CampaignRunner, store: Store) -> Study:
    """Like ``CampaignRunner.run`` with TPC-C steps in place of its workloads: the
    runner's checks, server (throwaway cluster, or a dsn) and recording are reused.
    The campaign must have exactly one target and no workloads of its own."""
    camp = runner.campaign
    runner.preflight()
    t = runner.targets[0]
    if t.directory is not None and t.spec.dsn is None:
        check_space(t.directory, tp.warehouses * BYTES_PER_WAREHOUSE, f"{tp.warehouses} warehouses")
    for path in workdir.clean_orphans():
        runner.ui.info(f"removed the orphan work directory {path} of a killed pgrig run")
    runner._store = store
    sid = new_study_id(camp.name)
    label = Conn.from_user(t.spec.dsn).describe() if t.spec.dsn else str(t.directory)
    store.begin_study(
        Study(
            id=sid,
            name=camp.name,
            target=label,
            started_at=now(),
            status="running",
            params=runner._params() | {"tpcc": asdict(tp)},
            pgrig_version=__version__,
        )
    )
    runner.study = store.study(sid)
    status = "failed"
    try:
        with runner.ui.step("capturing the environment"):
            env = environment.capture([t.directory or Path.cwd()], bin_dir=t.bins.bin_dir)
        store.set_environment(sid, env)
        with runner._server(t):
            for step in steps(tp, replace=t.spec.dsn is None or runner.yes):
                if not runner._execute(step, t) and step.kind == "tpcc_load":
                    runner.ui.fail("the load failed; skipping the TPC-C runs")
                    break
        status = "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        store.finish_study(sid, status, now())
        runner.study = store.study(sid)
    return runner.study
