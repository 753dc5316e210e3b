"""Load, crash, recover, verify - K times, then a last load period and the final
verification. Pure orchestration: the pieces live in workload, crasher and
verifier; the command (``command.py``) owns the cluster, the store and the report.
"""

from __future__ import annotations

import bisect
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from pgrig.durability import crasher, verifier
from pgrig.durability.clients import PREFIX, Client, Gate, create_schema
from pgrig.durability.model import (
    IMMEDIATE,
    KILL_BACKEND,
    METHODS,
    POWER_LOSS,
    POWER_LOSS_MODES,
    PROCESS,
    SETTINGS,
    Check,
    Crash,
    Cut,
    DurabilityResult,
    Loss,
    untested_by,
)
from pgrig.durability.userload import UserCheck, UserLoad, run_checks
from pgrig.errors import ClusterError, UsageError
from pgrig.lossyfs import sync_tree
from pgrig.pgsource.binaries import PgBinaries

PARK_TIMEOUT_S = 30.0

# Called as on_event(event, crash_number): "crashed" right after the crash
# signal, "recovered" once the server accepts connections again (before the
# verification), "end" before the final verification (crash_number 0).
EventHook = Callable[[str, int], None]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class DurabilityPlan:
    method: str = IMMEDIATE
    crashes: int = 3
    clients: int = 4
    interval_s: float = 5.0  # mean seconds of load before each crash (uniform 0.5x-1.5x)
    seed: int | None = None
    recovery_timeout_s: float = 120.0
    power_loss: str | None = None  # POWER_LOSS_MODES: the power goes after each crash

    @property
    def crash_model(self) -> str:
        return PROCESS if self.power_loss is None else POWER_LOSS

    def validate(self) -> DurabilityPlan:
        if self.method not in METHODS:
            raise UsageError(f"--crash {self.method!r}: must be one of {', '.join(METHODS)}")
        if self.power_loss is not None:
            if self.power_loss not in POWER_LOSS_MODES:
                raise UsageError(
                    f"--power-loss-mode {self.power_loss!r}: must be one of "
                    + ", ".join(POWER_LOSS_MODES)
                )
            if self.method == KILL_BACKEND:
                raise UsageError(
                    f"--crash {KILL_BACKEND} with --power-loss: the postmaster restarts by "
                    "itself, so the power cannot go while every process is down",
                    hint="use --crash immediate or kill-postmaster with --power-loss",
                )
        for option, value, low in (
            # 0 crashes would pass having tested nothing
            ("--crashes", self.crashes, 1),
            ("--clients", self.clients, 1),
            ("--interval", self.interval_s, 0.1),
            ("--recovery-timeout", self.recovery_timeout_s, 1),
        ):
            if value < low:
                raise UsageError(f"{option} {value}: must be at least {low}")
        return self


@dataclass
class _Run:
    """Mutable bookkeeping of one run; becomes a DurabilityResult at the end."""

    clients: list[Client]
    reported_missing: set[int] = field(default_factory=set)
    reported_checks: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)
    load_s: float = 0.0
    log_offset: int = 0
    user_checks: tuple[UserCheck, ...] = ()  # the custom workload's own invariants

    def acked(self) -> dict[int, float]:
        out: dict[int, float] = {}
        for c in self.clients:
            out.update(zip(c.ledger.ids, c.ledger.acked_at, strict=True))
        return out

    def in_doubt(self) -> set[int]:
        return {i for c in self.clients for i in c.ledger.in_doubt}

    def rejected(self) -> set[int]:
        return {i for c in self.clients for i in c.ledger.rejected}

    def count_acked(self) -> int:
        return sum(len(c.ledger.ids) for c in self.clients)

    def fail(self, checks: tuple[Check, ...], where: str, skip: str | None = None) -> None:
        for check in checks:
            if check.ok is False and check.name != skip and check.name not in self.reported_checks:
                self.reported_checks.add(check.name)
                self.failures.append(f"{where}: {check.name}: {check.detail}")


def loss_of(missing: set[int], acked: dict[int, float], at: float) -> Loss:
    """The lost commits as a time window: from the earliest lost acknowledgement to
    the last acknowledgement the server gave before it went down (``at`` is when
    the crash signal was sent; orphaned backends may answer a little longer)."""
    lost_times = sorted(acked[i] for i in missing)
    first = lost_times[0]
    all_times = sorted(acked.values())
    in_window = len(all_times) - bisect.bisect_left(all_times, first)
    return Loss(
        count=len(missing),
        window_ms=(all_times[-1] - first) * 1000,
        after_signal=sum(t > at for t in lost_times),
        acknowledged_in_window=in_window,
        example_ids=tuple(sorted(missing, key=lambda i: acked[i])[:5]),
    )


def run(
    plan: DurabilityPlan,
    server: crasher.Server,
    bins: PgBinaries,
    *,
    logfile: Path | None,
    progress: Progress = lambda _: None,
    on_event: EventHook = lambda _e, _n: None,
    user_load: UserLoad | None = None,
    user_checks: tuple[UserCheck, ...] = (),
) -> DurabilityResult:
    plan.validate()
    crasher.check_method(server, plan.method)
    seed = plan.seed if plan.seed is not None else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    create_schema(server.conn, branches=plan.clients)
    if server.lossy is not None and server.cluster is not None:
        # The starting state is durable, as initdb's is: the check is about the
        # commits acknowledged under load, not about the schema it made.
        sync_tree(server.cluster.workdir)
    with server.conn.connect() as db:
        settings = verifier.server_settings(db, SETTINGS)
        version = str(db.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    gate = Gate(plan.clients)
    state = _Run(
        [Client(n, server.conn, plan.clients, seed, gate) for n in range(1, plan.clients + 1)]
    )
    state.log_offset = verifier.log_offset(logfile) if logfile else 0
    crashes: list[Crash] = []
    for client in state.clients:
        client.start()
    if user_load is not None:  # the workload's own scripts write beside the ledger
        user_load.start()
    state.user_checks = user_checks
    watch = _watch(server)
    rig = _Rig(plan, server, bins, logfile, gate, state, progress, on_event)
    try:
        for number in range(1, plan.crashes + 1):
            crashed = _crash(rig, rng, watch, number)
            watch.close()
            watch = _watch(server)
            crashes.append(_check_crash(rig, crashed))
            if any(c.name == verifier.READABLE and c.ok is False for c in crashes[-1].checks):
                break  # the tables are gone or broken: more load proves nothing
        else:
            started = _load(gate, state, plan.interval_s)
            gate.close()
            state.load_s += time.monotonic() - started
            _park(gate, state)
        on_event("end", 0)
        checks, final_loss = _verify(state, server, bins, logfile, at=time.time())
        if plan.power_loss is not None and server.cluster is not None:
            enabled = settings.get("data_checksums") == "on"
            checks += (verifier.checksums(server.cluster, enabled=enabled),)
        if final_loss is not None:
            state.failures.append(final_loss.sentence(None))
        state.fail(checks, "at the end", skip=verifier.ACKED)
    finally:
        if user_load is not None:
            user_load.stop()
        gate.stop()
        for client in state.clients:
            client.join(timeout=PARK_TIMEOUT_S)
        with contextlib.suppress(psycopg.Error):
            watch.close()

    return _result(rig, seed, version, settings, crashes, checks, final_loss)


@dataclass(frozen=True)
class _Rig:
    """What every crash of one run works with."""

    plan: DurabilityPlan
    server: crasher.Server
    bins: PgBinaries
    logfile: Path | None
    gate: Gate
    state: _Run
    progress: Progress
    on_event: EventHook


@dataclass(frozen=True)
class _Crashed:
    """One crash as sent and recovered from, before its checks."""

    number: int
    sent: crasher.Signal
    started: float  # monotonic: when the load before it began
    acked_before: int
    doubt_before: int
    downtime: float
    recovery: float
    cut: Cut | None


def _crash(rig: _Rig, rng: random.Random, watch: psycopg.Connection, number: int) -> _Crashed:
    """Load for a while, crash the server, wait until it is back."""
    plan, server, state, gate, progress = rig.plan, rig.server, rig.state, rig.gate, rig.progress
    acked_before, doubt_before = state.count_acked(), len(state.in_doubt())
    pause = rng.uniform(0.5, 1.5) * plan.interval_s
    started = _load(gate, state, pause)
    sent = crasher.crash(server, plan.method, rng, watch)
    gate.close()
    state.load_s += sent.mono - started
    if sent.killed_pid is not None:
        state.killed.add(sent.killed_pid)
    rig.on_event("crashed", number)
    progress(f"crash {number} ({plan.method}) after {sent.mono - started:.1f} s of load")
    downtime, recovery, cut = crasher.wait_recovered(
        server,
        plan.method,
        sent,
        watch,
        plan.recovery_timeout_s,
        power_loss=plan.power_loss,
        # drawn only for power losses: a process-crash seed keeps its moments
        seed=rng.randrange(2**31) if plan.power_loss else 0,
    )
    if cut is not None:
        progress(f"power loss {number} ({cut.mode}): {cut.sentence()}")
    return _Crashed(number, sent, started, acked_before, doubt_before, downtime, recovery, cut)


def _check_crash(rig: _Rig, c: _Crashed) -> Crash:
    """After a crash: the clients parked, the data verified, the crash recorded."""
    state, number = rig.state, c.number
    _park(rig.gate, state)
    rig.on_event("recovered", number)
    checks, loss = _verify(state, rig.server, rig.bins, rig.logfile, at=c.sent.wall)
    if loss is not None:
        state.failures.append(loss.sentence(number))
    state.fail(checks, f"after crash {number}", skip=verifier.ACKED)
    crash = Crash(
        number=number,
        method=rig.plan.method,
        at=c.sent.at,
        load_s=c.sent.mono - c.started,
        acknowledged=state.count_acked() - c.acked_before,
        in_doubt=len(state.in_doubt()) - c.doubt_before,
        downtime_s=c.downtime,
        recovery_s=c.recovery,
        killed_pid=c.sent.killed_pid,
        loss=loss,
        checks=checks,
        power_loss=c.cut,
    )
    rig.progress(
        f"crash {number}: back in {c.downtime:.2f} s (recovery {c.recovery:.2f} s); "
        + (loss.sentence(number) if loss else "no acknowledged commit lost")
    )
    return crash


def _result(
    rig: _Rig,
    seed: int,
    version: str,
    settings: dict[str, str],
    crashes: list[Crash],
    checks: tuple[Check, ...],
    final_loss: Loss | None,
) -> DurabilityResult:
    """The run's result, with how many in-doubt commits the server kept."""
    plan, state, server = rig.plan, rig.state, rig.server
    in_doubt = state.in_doubt()
    rows = None
    # Tables a power loss took (UndefinedTable) or tore (DataCorrupted: a torn page,
    # a catalog's too, read back with a bad checksum) leave the count unknown, and 0:
    # the checks have said so. It failed the whole step, the checks' findings lost.
    with contextlib.suppress(psycopg.Error), server.conn.connect() as db:
        rows = db.execute(
            f"SELECT count(*) FROM {PREFIX}history WHERE id = ANY(%s)", (sorted(in_doubt),)
        ).fetchone()
    errors = [e for c in state.clients for e in c.ledger.errors]
    return DurabilityResult(
        method=plan.method,
        clients=plan.clients,
        crashes_planned=plan.crashes,
        interval_s=plan.interval_s,
        seed=seed,
        server_version=version,
        settings=settings,
        crashes=tuple(crashes),
        load_s=state.load_s,
        acknowledged=state.count_acked(),
        in_doubt=len(in_doubt),
        in_doubt_committed=int(rows[0]) if rows else 0,
        rejected=len(state.rejected()),
        rejected_examples=tuple(dict.fromkeys(errors))[:5],
        lost=len(state.reported_missing),
        final_loss=final_loss,
        checks=checks,
        failures=tuple(state.failures),
        crash_model=plan.crash_model,
        power_loss_mode=plan.power_loss,
        untested=untested_by(
            plan.crash_model,
            settings,
            plan.power_loss,
            [c.power_loss for c in crashes if c.power_loss is not None],
        ),
    )


def _watch(server: crasher.Server) -> psycopg.Connection:
    """An idle connection of the driver: how a backend crash is noticed."""
    return server.conn.connect()


def _load(gate: Gate, state: _Run, seconds: float) -> float:
    started = time.monotonic()
    gate.open()
    deadline = started + seconds
    while time.monotonic() < deadline:
        _raise_client_bug(state)
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return started


def _park(gate: Gate, state: _Run) -> None:
    if not gate.wait_parked(PARK_TIMEOUT_S):
        _raise_client_bug(state)
        raise ClusterError(
            f"the clients did not stop within {PARK_TIMEOUT_S:.0f} s after the crash",
            hint="a connection hangs; check the server and the network",
        )


def _raise_client_bug(state: _Run) -> None:
    for client in state.clients:
        if client.crashed is not None:
            raise client.crashed


def _verify(
    state: _Run, server: crasher.Server, bins: PgBinaries, logfile: Path | None, *, at: float
) -> tuple[tuple[Check, ...], Loss | None]:
    acked = state.acked()
    try:
        data = verifier.verify_data(server.conn, acked, state.in_doubt(), state.rejected())
    except psycopg.Error as exc:  # a power loss took the tables, or broke them
        data = verifier.unreadable(acked, exc)
    checks = list(data.checks)
    checks.append(verifier.amcheck(bins, server.conn, install_missing=True))
    checks.append(verifier.check_log(logfile, state.log_offset, state.killed))
    if state.user_checks:
        try:
            checks += run_checks(server.conn, state.user_checks)
        except psycopg.Error as exc:
            checks.append(Check("the workload's checks", None, f"could not run: {exc}"))
    if logfile is not None:
        state.log_offset = verifier.log_offset(logfile)
    new = set(data.missing) - state.reported_missing
    state.reported_missing |= new
    return tuple(checks), (loss_of(new, acked, at) if new else None)
