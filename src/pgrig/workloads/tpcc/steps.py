"""TPC-C as steps: load, check, then each mode's timed run followed by a check.
``workload`` arranges them into phases; ``pgrig tpcc study`` is a one-target
campaign of them."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, replace

from pgrig import calibration
from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.policy import RunPolicy
from pgrig.registry.workload import TargetView, on_hosts
from pgrig.results import ProgressPoint
from pgrig.step import Action, Call, Context, Prepare, Step, StepKey
from pgrig.ui import Step as ProgressLine
from pgrig.workloads.common import Steady, checkpoint, load_restarts, restore_pristine, steady
from pgrig.workloads.tpcc import checks, driver, loader
from pgrig.workloads.tpcc.model import TpccCheck, TpccLoad, TpccRun
from pgrig.workloads.tpcc.spec import TpccSpec

LOAD_KIND = "tpcc"  # the TPC-C load's times in pgrig.calibration


@dataclass(frozen=True)
class Point:
    """One measured point of TPC-C: a mode on the first ``active`` warehouses
    (None: all), open loop at ``rate`` transactions/s (None: as fast as the
    terminals go)."""

    mode: str
    active: int | None = None
    rate: float | None = None


@dataclass(frozen=True)
class TpccPlan:
    warehouses: int = 4
    jobs: int = 0  # loader connections; 0: the CPU count
    load_wal: str = "profile"
    connections: int = 4
    threads: int | None = None
    duration_s: int = 60
    modes: tuple[str, ...] = ("server", "client")
    repeat: int = 1
    active: tuple[int, ...] | None = None  # the active sets, each on the same load; None: all
    isolation: str = "read committed"
    max_tries: int = 10
    rates: tuple[float, ...] = ()  # a sweep of offered rates; () closed loop

    @classmethod
    def of(cls, spec: TpccSpec, repeat: int = 1) -> TpccPlan:
        """The plan of a campaign's ``type = "tpcc"`` workload."""
        return cls(
            warehouses=spec.warehouses,
            jobs=spec.jobs,
            load_wal=spec.load_wal,
            connections=spec.connections,
            threads=spec.threads,
            duration_s=spec.duration_s,
            modes=spec.modes,
            repeat=repeat,
            active=spec.active,
            isolation=spec.isolation,
            max_tries=spec.max_tries,
            rates=spec.rates,
        )

    def validate(self) -> TpccPlan:
        if self.warehouses < 1:
            raise UsageError(
                f"--warehouses {self.warehouses}: must be at least 1",
                hint="TPC-C scales by warehouse: 1 is about 100 MB of data",
            )
        if self.repeat < 1:
            raise UsageError(f"--repeat {self.repeat}: must be at least 1")
        for k in self.active or ():
            if not 1 <= k <= self.warehouses:
                raise UsageError(
                    f"--active {k}: not between 1 and the {self.warehouses} warehouses loaded",
                    hint=f"use values from 1 to {self.warehouses}",
                )
            if self.active is not None and self.active.count(k) > 1:
                raise UsageError(f"--active {k}: given twice", hint="list each value once")
        for mode in self.modes:
            self.run_options(Point(mode)).validate()
        return self

    def points(self) -> list[Point]:
        """The measured points in the order they run: every active set on the one
        load inside each mode, as client counts for pgbench; a sweep's offered
        rates innermost."""
        rates: tuple[float | None, ...] = self.rates or (None,)
        return [Point(m, a, r) for m in self.modes for a in self.actives for r in rates]

    @property
    def actives(self) -> tuple[int | None, ...]:
        """The active sets in the order they run; (None,): one set, every warehouse."""
        return self.active or (None,)

    @property
    def loader_jobs(self) -> int:
        return self.jobs or max(1, os.cpu_count() or 1)

    def run_options(self, point: Point) -> driver.RunOptions:
        return driver.RunOptions(
            rate=point.rate,
            mode=point.mode,
            connections=self.connections,
            threads=self.threads,
            duration_s=self.duration_s,
            warehouses=self.warehouses,
            active=point.active,
            isolation=self.isolation,
            max_tries=self.max_tries,
        )


def _conn(ctx: Context) -> Conn:
    assert ctx.conn is not None, "the server must be up before TPC-C steps run"
    return ctx.conn


def load_action(tp: TpccPlan, owned: bool, storage: str = "") -> Action:
    """The TPC-C data loaded by pgrig's loader (``owned``: tables there may be replaced),
    its time kept for the machine and for ``storage`` (the target's: a latency
    layer loads 4-5x slower than the disk beside it)."""

    def action(ctx: Context, line: ProgressLine) -> tuple[TpccLoad, str]:
        machine = calibration.busy()  # before the load adds its own
        messages: list[str] = []
        done = [0]

        def on_progress(message: str) -> None:
            messages.append(message)
            if message.startswith("warehouse "):
                done[0] += 1
                line.update(completed=done[0], detail=message)
            else:
                line.update(detail=message)

        data = tp.warehouses * loader.DATA_BYTES_PER_WAREHOUSE
        with load_restarts(ctx, tp.load_wal, data) as cluster:
            result = loader.load(_conn(ctx), tp.warehouses, jobs=tp.loader_jobs,
                                 replace=owned, on_progress=on_progress,
                                 minimal_wal=cluster)  # fmt: skip
        calibration.record_on(LOAD_KIND, storage, tp.warehouses, result.elapsed_s, machine)
        return result, "\n".join(messages) + "\n"

    return action


def load_step(tp: TpccPlan, name: str, target: TargetView) -> Step:
    return Step(
        key=StepKey(target.name, name, ("load", f"w{tp.warehouses}")),
        kind="tpcc_load",
        label=f"{target.name}: TPC-C load, {tp.warehouses} "
        f"warehouse{'s' if tp.warehouses > 1 else ''}",
        params={"warehouses": tp.warehouses, "jobs": tp.loader_jobs, "workload": name},
        action=Call("tpcc.load", {"tp": tp, "owned": target.owned, "storage": target.storage}),
        total=tp.warehouses,
        # This storage's or machine's earlier loads (pgrig.calibration), else 3 s per warehouse.
        estimate_s=calibration.estimate_on(
            LOAD_KIND, target.storage, tp.warehouses, lambda w: 5 + 3 * w
        ),
        creates_data=True,
    )


CHECK_KIND = "tpcc-check"  # the consistency check's times in pgrig.calibration


def check_estimate(warehouses: int) -> float:
    """Seconds of a consistency check (full scans, linear in the data): this
    machine's earlier checks, else 1 s per warehouse."""
    return calibration.estimate(CHECK_KIND, warehouses, lambda w: 2 + 1.0 * w)


def check_action(warehouses: int) -> Action:
    """The TPC-C consistency conditions, checked on the loaded or run data."""

    def action(ctx: Context, line: ProgressLine) -> tuple[TpccCheck, str]:
        started, machine = time.monotonic(), calibration.busy()
        result = checks.check(_conn(ctx), timeout_s=loader.timeout_for(warehouses))
        calibration.record(CHECK_KIND, warehouses, time.monotonic() - started, machine)
        raw = "".join(
            f"condition {c.number}: {'skipped' if c.skipped else 'pass' if c.passed else 'FAIL'}"
            f" ({c.offending} of {c.checked} offending) {c.title}\n"
            for c in result.conditions
        )
        return result, raw

    return action


def check_step(key: StepKey, label: str, name: str, warehouses: int) -> Step:
    return Step(
        key=key, kind="tpcc_check", label=label, params={"workload": name},
        action=Call("tpcc.check", {"warehouses": warehouses}),
        estimate_s=check_estimate(warehouses),
    )  # fmt: skip


def load_check_step(name: str, target: TargetView, warehouses: int) -> Step:
    return check_step(
        StepKey(target.name, name, ("check", "load")),
        f"{target.name}: TPC-C consistency after load",
        name,
        warehouses,
    )


def run_check_step(run: Step, name: str, target: TargetView, warehouses: int) -> Step:
    """The consistency check after a run, keyed like the run (run -> check)."""
    parts = ("check", *run.key.parts[1:])
    return check_step(
        StepKey(target.name, name, parts, run.key.repeat),
        f"{target.name}: TPC-C consistency",
        name,
        warehouses,
    )


def prepare_action(tp: TpccPlan, point: Point, policy: RunPolicy) -> Prepare:
    """Reset / warm-up / CHECKPOINT before a measured run, as the policy says
    (docs/campaigns.md): the TPC-B rules, with TPC-C's own transactions warming up."""

    def prepare(ctx: Context, line: ProgressLine) -> None:
        timeout_s = loader.timeout_for(tp.warehouses)
        if policy.reset == "restore":
            line.update(detail="restoring the freshly loaded data")
            restore_pristine(ctx, timeout_s=timeout_s)
        if policy.warmup:
            auto = policy.warmup == "auto"
            seconds = policy.warmup_max_s if auto else int(policy.warmup)
            seen: list[ProgressPoint] = []

            def on_progress(progress: ProgressPoint) -> None:
                seen.append(progress)
                line.update(detail=f"warming up: {progress.tps:,.0f} tps")
                if auto and steady(seen):
                    raise Steady

            # the warm-up runs closed loop, whatever rate the measured run offers
            opts = replace(tp.run_options(point), duration_s=seconds, rate=None)
            scratch = ctx.scratch if ctx.scratch.is_dir() else ctx.target
            with contextlib.suppress(Steady):  # from the clients the run comes from
                driver.warm(_conn(ctx), opts, scratch, ctx.clients, on_progress)
        if policy.checkpoint:
            checkpoint(ctx, timeout_s=timeout_s)
        line.update(detail="")

    return prepare


def run_step(
    tp: TpccPlan,
    point: Point,
    repeat: int,
    name: str,
    target: TargetView,
    policy: RunPolicy,
) -> Step:
    """One measured run at ``point``."""
    opts = tp.run_options(point)
    mode, active, rate = point.mode, point.active, point.rate
    offered = () if rate is None else (f"R{rate:g}",)
    return Step(
        # One run per mode keeps the key short, as the first version stored it;
        # an active set named in the campaign is part of the point.
        key=StepKey(
            target.name,
            name,
            (
                "run",
                mode,
                f"c{tp.connections}",
                *(() if active is None else (f"a{active}",)),
                *offered,
            ),  # fmt: skip
            repeat if tp.repeat > 1 else None,
        ),
        kind="tpcc_run",
        label=f"{target.name}: TPC-C {mode}-side, {tp.connections} connections"
        # issue 40.16: "2 connections" where the report counted the hosts' 4
        + on_hosts(target, tp.connections, "connections")
        + ", "
        + ("" if active is None else f"{active} of {tp.warehouses} warehouses active, ")
        + ("" if rate is None else f"-R {rate:g}, ")
        + f"{tp.duration_s} s",
        params={
            "workload": name,
            "mode": mode,
            "warehouses": tp.warehouses,
            "active": active or tp.warehouses,
            "connections": tp.connections,
            "threads": opts.pgbench_threads,
            "duration_s": tp.duration_s,
            "isolation": tp.isolation,
            "repeat": repeat,
            "warmup": policy.warmup,
            "checkpoint": policy.checkpoint,
            "reset": policy.reset,
            **({"rate": rate, "latency_target": policy.latency_target} if rate else {}),
        },
        action=Call("tpcc.run", {"tp": tp, "point": point}),
        prepare=Call("tpcc.prepare", {"tp": tp, "point": point, "policy": policy}),
        total=tp.duration_s,
        tools=("pgbench",),
        monitored=True,
        # The warm-up, the run and the reset; nothing per warehouse beyond the
        # restore: the check after a run is its own step (check_estimate), and
        # counting it here too planned seed003's 15 s runs at 30 s (21-24 s real).
        estimate_s=policy.run_seconds(tp.duration_s, restore_s=0.5 * tp.warehouses),
    )


def run_action(tp: TpccPlan, point: Point) -> Action:
    """A measured TPC-C run at ``point``."""
    opts = tp.run_options(point)
    mode = point.mode

    def action(ctx: Context, line: ProgressLine) -> tuple[TpccRun, str]:
        observed = ctx.running.observed

        def on_progress(progress: ProgressPoint) -> None:
            line.update(completed=progress.t_s, detail=f"{progress.tps:,.0f} tps")

        scratch = ctx.scratch if ctx.scratch.is_dir() else ctx.target
        result, raw = driver.run(
            ctx.bins.client_bin_dir,
            _conn(ctx),
            opts,
            scratch,
            on_progress=on_progress,
            expected_tps=observed.get(f"tpcc-{mode}"),
            clients=ctx.clients,  # this machine, or a target's load hosts
        )
        # The next run's transaction log is sampled from what this one measured.
        observed[f"tpcc-{mode}"] = max(observed.get(f"tpcc-{mode}", 0.0), result.tps)
        return result, raw

    return action
