"""Durability as a campaign workload: on each target, crash the server under a
write load K times and verify (one step per target, never repeated)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pgrig import calibration
from pgrig.document.model import Section
from pgrig.durability import crasher, driver, report
from pgrig.durability.model import KILL_BACKEND, METHODS, POWER_LOSS_MODES, DurabilityResult
from pgrig.durability.userload import UserCheck, UserLoad, parse_checks
from pgrig.errors import UsageError
from pgrig.pgsource.binaries import PgBinaries
from pgrig.policy import RunPolicy
from pgrig.registry.workload import Needs, Phase, Series, TargetView, Workload, WorkloadSpec
from pgrig.results import ResultKind, RunRecord, Study
from pgrig.schema import Checked, Schema, Table, choice, custom, integer, number, text
from pgrig.step import Action, Call, Context, Skip, Step, StepKey
from pgrig.ui import Step as ProgressLine
from pgrig.workloads.custom.spec import ScriptSpec, _defines, _scripts, check_scripts

# A target's peak disk use: the cluster and a few minutes of WAL of small transactions.
NEEDED_BYTES = 256 * 2**20


@dataclass(frozen=True)
class DurabilitySpec:
    """Crash the server under load and prove no acknowledged commit was lost
    (see docs/durability.md); on each target pgrig created."""

    name: str = "durability"
    method: str = "immediate"  # immediate | kill-postmaster | kill-backend
    crashes: int = 3
    clients: int = 4
    interval_s: float = 5.0
    seed: int | None = None
    recovery_timeout_s: float = 120.0
    # After each crash the power goes too (POWER_LOSS_MODES): the target's cluster
    # runs on the lossy filesystem. None: a process crash only.
    power_loss: str | None = None
    # The user's own workload under the crashes (seed 001's login): pgbench scripts
    # writing beside the ledger, and the checks it declares (userload.py).
    scripts: tuple[ScriptSpec, ...] = ()
    defines: dict[str, str] = field(default_factory=dict)
    script_clients: int = 4
    checks: tuple[UserCheck, ...] = ()

    kind: ClassVar[str] = "durability"

    @property
    def plan(self) -> driver.DurabilityPlan:
        return driver.DurabilityPlan(
            method=self.method,
            crashes=self.crashes,
            clients=self.clients,
            interval_s=self.interval_s,
            seed=self.seed,
            recovery_timeout_s=self.recovery_timeout_s,
            power_loss=self.power_loss,
        )


def _power_loss(t: Table, key: str, default: str | None) -> str | None:
    value = t.get(key, str, default)
    if value is not None and value not in POWER_LOSS_MODES:
        raise t.error(key, f"{value!r} is not one of {', '.join(POWER_LOSS_MODES)}")
    return value


def _optional_scripts(t: Table, key: str, default: object) -> tuple[ScriptSpec, ...]:
    return _scripts(t, key, default) if key in t.data else ()


SCHEMA = Schema(
    'type = "durability"',
    text("name", "durability", "the workload's name in step keys and the report"),
    choice("method", METHODS, "immediate", "how to crash: `immediate` (`pg_ctl stop -m "
           "immediate`), `kill-postmaster` (SIGKILL), `kill-backend` (SIGKILL of a backend)"),
    integer("crashes", 3, "crashes per target"),
    integer("clients", 4, "client connections writing with a ledger"),
    number("interval", 5.0, "mean seconds of load before each crash", field="interval_s",
           above=0.099),
    integer("seed", None, "seed of the crash moments (recorded either way)", minimum=0),
    number("recovery_timeout", 120.0, "seconds the server has to come back after a crash",
           field="recovery_timeout_s", above=0),
    custom("power_loss", None, "after each crash the power goes too: `drop` (every unsynced "
           "write lost), `random-subset` (some unsynced pages written anyway) or `torn` (half "
           "of one page written); the cluster runs on the lossy filesystem (docs/lossyfs.md) "
           "and the campaign may hold no other workload", _power_loss),
    custom("scripts", (), "the user's own pgbench scripts writing under the crashes too, "
           "relaunched after each (seed 001's login.sql); tables from a custom workload's "
           "setup", _optional_scripts, shown_default="`[]`"),
    custom("defines", None, "pgbench `-D NAME=VALUE` for those scripts", _defines,
           shown_default="`{}`"),
    integer("script_clients", 4, "pgbench clients running the scripts", minimum=1),
    custom("checks", (), "the workload's invariants, checked after every crash: "
           "`[{ name = \"...\", sql = \"SELECT ... rows that break it\" }]`", parse_checks,
           shown_default="`[]`"),
    also=("type",),
)  # fmt: skip


def calibration_kind(spec: DurabilitySpec) -> str:
    """What a check's time is calibrated under: how it crashes, and whether the
    user's scripts run and are checked too (seed001: 104 s where 40 were planned)."""
    return (
        f"durability:{spec.method}"
        + (":power-loss" if spec.power_loss else "")
        + (":scripts" if spec.scripts else "")
    )


def estimate(spec: DurabilitySpec, storage: str = "") -> float:
    """The intervals under load, and what each crash costs besides (recovery,
    checks, relaunch): from this storage's or machine's earlier checks, per crash."""

    def default(crashes: float) -> float:
        return crashes * (15 if spec.power_loss else 5) + 10

    besides = calibration.estimate_on(calibration_kind(spec), storage, spec.crashes, default)
    return spec.crashes * spec.interval_s + besides


def check_action(spec: DurabilitySpec, owned: bool, storage: str) -> Action:
    """The crashes under load and the checks after each (``owned``: pgrig
    created the server, or --yes lets a backend be killed on an existing one)."""
    plan = spec.plan

    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        started, machine = time.monotonic(), calibration.busy()
        own = ctx.cluster is not None
        if ctx.conn is None or not (own or (owned and plan.method == KILL_BACKEND)):
            raise Skip("an existing server: run `pgrig durability --dsn ... --yes`")
        if plan.power_loss is not None and ctx.lossy is None:
            raise Skip("the cluster is not on the lossy filesystem: no power loss possible")
        result = driver.run(
            plan,
            crasher.Server(conn=ctx.conn, cluster=ctx.cluster, lossy=ctx.lossy),
            ctx.bins,
            logfile=ctx.cluster.logfile if ctx.cluster is not None else None,
            progress=lambda text: line.update(detail=text),
            on_event=ctx.on_event or (lambda _e, _n: None),
            user_load=UserLoad(ctx.bins, ctx.conn, spec.scripts, spec.defines, spec.script_clients)
            if spec.scripts
            else None,
            user_checks=spec.checks,
        )
        if ctx.cluster is not None:
            ctx.running.server_pid = ctx.cluster.postmaster_pid()
        besides = time.monotonic() - started - spec.crashes * spec.interval_s
        calibration.record_on(
            calibration_kind(spec), storage, spec.crashes, max(0.1, besides), machine
        )
        return result, ""

    return action


def check_step(spec: DurabilitySpec, target: TargetView) -> Step:
    return Step(
        key=StepKey(target.name, spec.name),
        kind="durability",
        label=f"{target.name}: durability, {spec.crashes} x {spec.method}"
        + (f" + power loss ({spec.power_loss})" if spec.power_loss else ""),
        params={
            "workload": spec.name,
            "method": spec.method,
            "crashes": spec.crashes,
            "clients": spec.clients,
            "interval_s": spec.interval_s,
            "power_loss": spec.power_loss,
            **({"scripts": [s.path.name for s in spec.scripts]} if spec.scripts else {}),
            **({"checks": [c.name for c in spec.checks]} if spec.checks else {}),
        },
        action=Call(
            "durability.check", {"spec": spec, "owned": target.owned, "storage": target.storage}
        ),
        tools=("pg_amcheck", "postgres", "pg_ctl"),
        estimate_s=estimate(spec, target.storage),
        heartbeat=False,  # it crashes the server, and cuts the lossy filesystem's power
    )


class DurabilityWorkload(Workload):
    type = "durability"
    order = 40
    schema = SCHEMA
    actions = {"durability.check": check_action}
    rules = (report.durable,)
    kinds = (
        ResultKind(
            "durability",
            DurabilityResult,
            headline=lambda r: f": {r.acknowledged:,} acknowledged, {r.lost:,} lost",
        ),
    )
    needs = Needs(destructive="the durability check kills the server's processes under load")

    def parse(self, table: Table, read: Checked) -> DurabilitySpec:
        spec = DurabilitySpec(
            **(read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned})
        )
        try:  # the command line's checks, before anything is created
            spec.plan.validate()
        except UsageError as exc:
            key = "power_loss" if spec.power_loss is not None else "method"
            raise table.error(key, str(exc), hint=exc.hint) from None
        return spec

    def check(self, spec: WorkloadSpec, bins: PgBinaries, source: str) -> None:
        assert isinstance(spec, DurabilitySpec)  # what parse made
        if spec.scripts:
            check_scripts(spec.name, spec.scripts, bins, source, spec.defines)

    def loses_power(self, spec: DurabilitySpec) -> bool:
        return spec.power_loss is not None

    def phases(self, spec: DurabilitySpec, policy: RunPolicy) -> list[Phase]:
        return [
            Phase(
                series=[Series(lambda t, _rep: check_step(spec, t), repeated=False)],
                disk_bytes=NEEDED_BYTES,
            )
        ]

    def section(self, study: Study, records: Sequence[RunRecord]) -> Section | None:
        return report.section(study, records)


WORKLOAD = DurabilityWorkload()
