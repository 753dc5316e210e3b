"""Runs one step and records it, whatever happens: the moment it ends, with its
tool versions, its raw output and - for measured runs - what the monitor saw.

A step already recorded (a resumed campaign) is not run again: a run is never
recorded twice. A failing step is recorded as failed and the study goes on;
Ctrl-C and SIGTERM record nothing for the step they cut short, so that a
resumed study runs it again.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from pgrig import files, proc, registry
from pgrig.cluster.server import Server, ServerLost
from pgrig.errors import HostUnusable, PgrigError, StoreError
from pgrig.hosts.executor import Executor, reconnect_s
from pgrig.monitor.heartbeat import Pulse
from pgrig.monitor.interference import disturbed_run_keys, wait_quiet
from pgrig.monitor.limits import limits_from
from pgrig.monitor.model import MONITOR, IdleBaseline, Limits
from pgrig.monitor.watch import Watch
from pgrig.registry.target import Target
from pgrig.results import (
    SERVER,
    Environment,
    JsonValue,
    PgbenchRun,
    RunRecord,
    Status,
    Study,
    from_dict,
    to_dict,
)
from pgrig.step import Skip, Step
from pgrig.storage import kernel
from pgrig.storage.emulator import EmulatorReading, EmulatorUse
from pgrig.storage.kinds import EMULATOR, MEMORY
from pgrig.storage.memcg import MemoryStats, MemoryUse
from pgrig.store import Store
from pgrig.ui import Step as ProgressLine
from pgrig.ui import Ui, duration

# A crash recovery this long is no recovery: the step goes on and fails, said.
RECOVERY_WAIT_S = 60.0

if TYPE_CHECKING:  # typeshed's name for any dataclass instance: no runtime class
    from _typeshed import DataclassInstance as Result

    from pgrig.conninfo import Conn


@dataclass(frozen=True)
class Outcome:
    """How a step ended, as its record keeps it: its status, why (when it did
    not succeed), its result and the tool's raw output."""

    status: Status
    reason: str | None = None
    result: dict[str, JsonValue] | None = None
    raw: str = ""

    @classmethod
    def ok(cls, result: dict[str, JsonValue] | None, raw: str = "") -> Outcome:
        return cls("ok", None, result, raw)

    @classmethod
    def failed(cls, exc: BaseException) -> Outcome:
        return cls("failed", f"{type(exc).__name__}: {exc}")


def _memory(t: Target) -> MemoryStats | None:
    return t.ctx.memory() if t.ctx.memory is not None else None


def _oom_kills(t: Target) -> int | None:
    """The memory cgroup's OOM kills so far; None: no cgroup, or unreadable."""
    try:
        stats = _memory(t)
    except (OSError, ValueError):
        return None
    return None if stats is None else stats.oom_kills


def _oom_note(t: Target, before: int) -> str:
    """Why a step on a memory-limited target failed, when the kernel says it: the
    tool only saw "server closed the connection unexpectedly" (a load outgrowing
    seed000-cloud's small-RAM target)."""
    try:
        after = _memory(t)
    except (OSError, ValueError):
        return ""
    if after is None or after.oom_kills <= before:
        return ""
    return (
        f"; the kernel OOM-killed {after.oom_kills - before} process(es) in the target's "
        f"memory cgroup ({after.limit_bytes / 2**20:,.0f} MiB) during this step: give the "
        "target more memory, or lower shared_buffers, maintenance_work_mem or work_mem"
    )


def _memory_before(t: Target, ui: Ui) -> MemoryStats | None:
    try:
        return _memory(t)
    except (OSError, ValueError) as exc:  # the run matters more than this evidence
        ui.warn(f"{t.name}: cannot read the memory cgroup ({exc}); not recorded")
        return None


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Provenance:
    """What a record says of the tools and the server build it was made with
    (``RunRecord.tool_versions``): read from an environment once, when the
    recorder learns it, not from the target's environment at every record."""

    tools: Mapping[str, str]
    server: str | None = None  # the build that served: release, compiler, its source

    @classmethod
    def of(cls, env: Environment) -> Provenance:
        return cls(env.tools, env.postgres.provenance() if env.postgres is not None else None)

    def versions(self, step: Step) -> dict[str, str]:
        """The step's tools' versions, and the server's build."""
        out = {name: self.tools[name] for name in step.tools if name in self.tools}
        if self.server is not None:
            out[SERVER] = self.server
        return out


UNKNOWN = Provenance({})  # no environment read yet (a build before the server)


@dataclass
class Execution:
    """One step on one target as it runs and is recorded: when its measured part
    started, and what was read before it so that the records written after it
    say what the run took (the memory cgroup, the latency layer, the monitor's
    watch). Every record of the step is written from it."""

    step: Step
    t: Target
    started: str = field(default_factory=lambda: now())
    value: Result | None = None  # the typed result, once the action returned it
    memory: MemoryStats | None = None
    emulated: EmulatorReading | None = None
    watched: Watch | None = None

    def below(self, tail: str, kind: str, what: str | None = None) -> Execution:
        """A record of what belongs to the run (its monitor, memory, extras), keyed
        below it; recorded, never run: the run's action stays as data."""
        step = self.step
        below = Step(
            key=step.key.below(tail),
            kind=kind,
            label=f"{step.label}: {what or tail}",
            params={**step.params, "run": step.id},
            action=step.action,
        )
        return replace(self, step=below)


class StartTogether:
    """Targets measured at once (``concurrent = true``) start their measured runs
    together: each target's thread waits here after its own prepare (reset,
    warm-up, CHECKPOINT take different times on different machines), so the
    measured windows overlap from their first second. A target whose step ends
    before its run (a failed prepare, Ctrl-C) leaves, and the others go on
    without waiting for it."""

    WAIT_S = 1800.0  # the longest one target's prepare may outlast another's

    def __init__(self, parties: int) -> None:
        self._barrier = threading.Barrier(parties)

    def meet(self) -> bool:
        """Wait for the other targets; False when one of them left (not together)."""
        try:
            self._barrier.wait(self.WAIT_S)
        except threading.BrokenBarrierError:
            return False
        return True

    def leave(self) -> None:
        """This target will not start a run now: nobody waits for it."""
        self._barrier.abort()


class Recorded:
    """What later steps ask of the study's recorded runs, kept as they are
    recorded: whether a step is done, the headline figures a repeat policy
    reads, a target's probe results (its limits). The store is read once (a
    resumed study), never again per repetition; raw output and monitor
    samples are not kept in memory."""

    def __init__(self) -> None:
        self.done: set[str] = set()
        self.failed: set[str] = set()  # recorded failed: a resume's rerun of one is not
        # The registered result kinds, looked up once: every step's record asks one.
        self.kinds = registry.kinds()
        self._metric: dict[str, float] = {}  # run key -> headline figure (tps, tpmC)
        self._disturbed: set[str] = set()  # run keys whose monitor record says disturbed
        self._probes: dict[str, list[object]] = {}  # target -> typed results of its limits' kinds
        self._limits: dict[str, Limits | None] = {}  # target -> its limits, as they stand

    @classmethod
    def read(cls, store: Store, study: str) -> Recorded:
        out = cls()
        # (the monitor's samples stay in the store: only its verdict is asked of it)
        for rec in store.runs(study, without_samples=(MONITOR.name,)):
            out.remember(rec)
        return out

    def pending(self, steps: Iterable[Step]) -> bool:
        return any(s.id not in self.done for s in steps)

    def metrics(self, steps: Iterable[Step], *, disturbed: bool = False) -> list[float]:
        """The recorded headline figures of these steps (what repeats until a CI
        narrows: tps, tpmC), skipping those that failed, have none, or - unless
        ``disturbed`` - that other work on the machine disturbed (their monitor
        record says so). A comparison of targets run interleaved keeps them: a
        disturbance hit both sides (``RunPolicy.until_decided``)."""
        out: list[float] = []
        for step in steps:
            value = self._metric.get(step.id)
            if value is not None and (disturbed or step.id not in self._disturbed):
                out.append(value)
        return out

    def remember(self, rec: RunRecord) -> None:
        """Keep what ``metrics`` and ``limits`` need of one recorded run."""
        self.done.add(rec.key)
        if rec.status == "failed":
            self.failed.add(rec.key)
        if rec.status != "ok" or rec.result is None:
            return
        if rec.kind == MONITOR.name:
            self._disturbed |= disturbed_run_keys([rec])
            return
        kind = self.kinds.get(rec.kind)
        if kind is None:
            return
        if kind.limits:  # the kind says so: fio's and pg_test_fsync's
            probes = self._probes.setdefault(rec.target, [])
            probes.append(from_dict(kind.type, rec.result))
            self._limits[rec.target] = limits_from(probes)
        elif kind.metric is not None:
            # The metric alone is kept: a campaign keeps no result alive.
            self._metric[rec.key] = kind.metric(from_dict(kind.type, rec.result))

    def limits(self, target: str) -> Limits | None:
        """The limits the target's own probe results say (None: no probe of
        theirs recorded): what its runs are compared with."""
        return self._limits.get(target)


class Recorder:
    def __init__(
        self,
        store: Store,
        study: Study,
        ui: Ui,
        *,
        monitor_runs: bool = True,
        wait_quiet_s: float = 0.0,
        begun: bool = False,
    ) -> None:
        """``begun``: the study was just begun, so nothing is recorded in it
        yet (its store is not asked); otherwise its records are read once."""
        self.store = store
        self.study = study
        self.ui = ui
        self.monitor_runs = monitor_runs
        self.wait_quiet_s = wait_quiet_s  # before a measured run, wait this long for quiet
        self.baseline: IdleBaseline | None = None  # the idle machine, before the study
        self.failures = 0
        # Targets measured at once (concurrent = true) record from their own threads.
        self._lock = threading.RLock()
        # Seconds inside steps, summed over threads: the rest of a run is its setup
        # and teardown (the plan's overhead; not recorded for concurrent targets).
        self.busy_s = 0.0
        # target -> (the read-only path, steps skipped since): a filesystem turned
        # read-only under a target fails every step left (issue 40.5)
        self.read_only: dict[str, tuple[str, int]] = {}
        self.recorded = Recorded() if begun else Recorded.read(store, study.id)
        self.done = self.recorded.done
        # target -> its server, known up: since it started or since a step ended well
        # on it. Only a step changes that (a kill from outside shows in the step
        # it cuts short), so the server is asked again only after one that did not
        # end well or stops it on purpose (``_revive``): not over SSH before every step.
        self._up: dict[str, Server] = {}
        # What the records carry of their tools and server: a target's own
        # environment's (``record_environment``), else the study's (key None).
        self._provenance: dict[str | None, Provenance] = {}
        if study.environment is not None:  # a resumed study's
            self._provenance[None] = Provenance.of(study.environment)

    def server_up(self, t: Target, *, alone: bool = True) -> Environment | None:
        """The target's server has just come up (its start waited until it accepts
        connections): the first step need not ask it. Its environment, read where
        it runs, is recorded in the study (``record_environment``) and returned: the
        study's own when the target is ``alone`` in it, else the target's."""
        if (server := t.server) is not None:
            self._up[t.name] = server
        if (env := t.env) is not None:
            self.record_environment(env, None if alone else t.name)
        return env

    def record_environment(self, env: Environment, target: str | None = None) -> None:
        """The study's environment (``target`` None) or one target's, recorded in
        the study; the recorder's study is then the one the store holds, and the
        records made in it carry its tools' and server's versions."""
        sid = self.study.id
        self._provenance[target] = Provenance.of(env)
        if target is None:
            self.store.set_environment(sid, env)
            self.study = replace(self.study, environment=env)
        else:
            self.store.set_target_environment(sid, target, env)
            targets = {**self.study.target_environments, target: env}
            self.study = replace(self.study, target_environments=targets)

    def execute(
        self, step: Step, t: Target, *, record: bool = True, together: StartTogether | None = None
    ) -> bool:
        """Run one step and record it. True if it succeeded (or was recorded before).
        ``together``: a measured step starts its run with the other targets'."""
        try:
            if record and step.id in self.done:
                return True
            if (ro := self.read_only.get(t.name)) is not None:
                # said once, when found; left unrecorded, so that a resume runs it
                with self._lock:
                    self.read_only[t.name] = (ro[0], ro[1] + 1)
                return False
            with kernel.applied(t.spec.kernel):  # a kernel-settings axis: around its points
                return self._execute(step, t, record=record, together=together)
        finally:
            if together is not None:  # met already, or never will: nobody waits for it
                together.leave()

    def _execute(
        self, step: Step, t: Target, *, record: bool, together: StartTogether | None = None
    ) -> bool:
        self._revive(t)
        t0 = time.monotonic()
        t.ctx.running.begin()
        run = Execution(step, t)
        oom_before = _oom_kills(t)
        outcome = self._run(run, record=record, together=together)
        if outcome.status != "ok" or not step.heartbeat:
            self._up.pop(t.name, None)
        if outcome.status == "failed" and oom_before is not None:
            outcome = replace(outcome, reason=f"{outcome.reason}{_oom_note(t, oom_before)}")
        # A step's record and what belongs to it (its extras, the monitor's and the
        # memory cgroup's readings) are written together: a resume never runs a
        # recorded step again, so a signal in between lost them for good (issue 19's
        # memory-cgroup run under SIGTERM). The signal waits for the last of them.
        with proc.signals_deferred():
            if record:
                self.record(run, outcome)
                if outcome.status == "ok":
                    self._record_extra(run)
            self._say(run, outcome, time.monotonic() - t0, record=record)
            if record and run.watched is not None:
                self._record_monitor(run, run.value if outcome.status == "ok" else None)
            if run.memory is not None:
                self._record_memory(run, run.memory)
            if run.emulated is not None:
                self._record_emulator(run, run.emulated)
        with self._lock:
            self.busy_s += time.monotonic() - t0
        return outcome.status == "ok"

    def _run(self, run: Execution, *, record: bool, together: StartTogether | None) -> Outcome:
        """The step's prepare, its wait for quiet and for the other targets, then
        its action, watched by the monitor when it is a measured run; how it
        ended, as its record keeps it. What is read before the measured part (the
        memory cgroup, the latency layer) lands in ``run``."""
        step, t = run.step, run.t
        watching = step.monitored and self.monitor_runs and t.ctx.conn is not None
        raw = ""
        try:
            with self.ui.step(step.label, total=step.total) as line, _pulse(step, t, watching):
                if step.prepare is not None:  # a warm-up, a CHECKPOINT: before the monitor's
                    with _pulse(step, t, not watching):
                        registry.resolve_prepare(step.prepare)(t.ctx, line)
                if step.monitored and self.wait_quiet_s > 0:
                    self._wait_quiet(t, line)
                if step.monitored and together is not None:
                    line.update(detail="waiting for the other targets to start together")
                    if not together.meet():
                        proc.raise_if_cancelled()  # left because the study is being stopped
                        self.ui.warn(f"{step.label}: another target did not start its run")
                    line.update(detail="")
                run.started = now()
                if step.monitored and record:
                    run.memory = _memory_before(t, self.ui)
                    run.emulated = t.ctx.emulator() if t.ctx.emulator is not None else None
                if watching:
                    watch_ = Watch(
                        t.ctx, limits=self.recorded.limits(t.name), baseline=self.baseline
                    )
                    # Its heartbeat ends the run's waits when the server stops answering.
                    with watch_ as watch, proc.watched_by(watch.heartbeat):
                        try:
                            run.value, raw = registry.resolve(step.action)(t.ctx, line)
                        finally:
                            run.watched = watch
                else:
                    run.value, raw = registry.resolve(step.action)(t.ctx, line)
            return Outcome.ok(to_dict(run.value), raw)
        except Skip as exc:
            return Outcome("skipped", exc.reason, raw=raw)
        except ServerLost as exc:  # the evidence: the cluster is kept, the rest goes on
            t.live.lost = exc
            return Outcome("failed", str(exc), raw=raw)
        except PgrigError as exc:
            return Outcome("failed", str(exc), raw=getattr(exc, "stderr", "") or "")
        except OSError as exc:  # the target's filesystem turned read-only, or failed
            where = f" ({exc.filename})" if exc.filename else ""
            return Outcome("failed", f"cannot write{where}: {exc.strerror or exc}", raw=raw)
        except Exception as exc:  # a bug or an unexpected server answer: keep going
            return Outcome("failed", f"{type(exc).__name__}: {exc}", raw=raw)

    def _say(self, run: Execution, outcome: Outcome, elapsed: float, *, record: bool) -> None:
        """The step's line: done, skipped or failed (then the target's filesystem
        is asked whether it turned read-only)."""
        step, t = run.step, run.t
        # A resume runs a recorded data step again (its data went with the killed
        # run's cluster) without recording it: its line says so where the store
        # holds another outcome - a setup's ✓ beside its failed record (issue 40.5).
        kept = not record and step.id in self.recorded.failed
        again = (
            " - again for this resume, not recorded: the store keeps its earlier "
            "failure (--retry-failed records a new try)"
            if kept and outcome.status != "failed"
            else ""
        )
        if outcome.status == "ok":
            took = duration(elapsed)
            kind = self.recorded.kinds.get(step.kind)
            said = kind.headline(run.value) if kind is not None and run.value is not None else ""
            self.ui.ok(f"{step.label} ({took}){said}{again}")
        elif outcome.status == "skipped":
            self.ui.warn(f"{step.label} skipped: {outcome.reason}{again}")
        else:
            with self._lock:
                self.failures += 1
            self.ui.fail(f"{step.label} failed{' again' if kept else ''}: {outcome.reason}")
            self._check_writable(t)

    def _check_writable(self, t: Target) -> None:
        """After a failed step: has the filesystem of the target's cluster turned
        read-only (ext4's errors=remount-ro, a failing disk)? Then every step
        left on it would fail one by one, each with a restart that cannot work:
        they are skipped, said once, and the other targets go on."""
        cluster = t.cluster  # this machine's cluster: its filesystem is ours to ask
        if cluster is None or t.name in self.read_only:
            return
        for path in (cluster.workdir, t.spec.wal_directory):
            # a file made and removed: ext4's errors=remount-ro here marks the
            # filesystem emergency_ro, which statvfs does not report as ST_RDONLY
            failed = files.probe_dir(path) if path is not None else None
            if failed is None or failed.errno != errno.EROFS:
                continue
            with self._lock:
                self.read_only[t.name] = (str(path), 0)
            self.ui.fail(
                f"{t.name}: skipped: the target's filesystem is read-only ({path}; `dmesg` "
                "says why): its remaining steps are not run nor recorded - a resume runs "
                "them once it is writable again; the other targets go on"
            )
            return

    def _revive(self, t: Target) -> None:
        """The server died under an earlier step (crash, OOM, someone's kill):
        bring it back so the campaign goes on, and say so. The server pgrig made on
        whichever host (``Live.server``): this machine's cluster or another host's."""
        server = t.server
        if server is None or t.ctx.conn is None or t.lost is not None:
            return
        if self._up.get(t.name) is server:
            return
        host = getattr(server, "ex", None)  # another host's server: reached through it
        if isinstance(host, Executor) and host.connection_lost():
            # The host's SSH went, not (as far as anyone knows) the server: read
            # through a closed connection it looked down, and was "restarted".
            bound = reconnect_s()
            self.ui.warn(
                f"{t.name}: lost the SSH connection to {host.name}; reconnecting "
                f"(up to {bound:g} s)"
            )
            if not host.reconnect(bound):
                raise HostUnusable(
                    f"target {t.name}: lost the SSH connection to {host.name}, the server's "
                    f"host, and could not reconnect in {bound:g} s: its server may "
                    "still run there",
                    hint=f"once {host.name} answers (pgrig hosts check -i FILE): pgrig clean "
                    "--inventory FILE stops it, and pgrig run resumes the study",
                )
            self.ui.info(f"{t.name}: reconnected to {host.name}")
        if server.running():
            if self._await_recovery(t, server):
                self._up[t.name] = server
            return
        self.ui.warn(f"{t.name}: the server is down ({server.log_tail(2)}); restarting it")
        try:
            server.restart_after_crash()
            if t.ctx.running.server_pid is not None:  # watched here (another host's: None)
                t.ctx.running.server_pid = server.postmaster_pid()
        except PgrigError as exc:
            self.ui.fail(f"{t.name}: could not restart the server: {exc}")
        else:
            self._up[t.name] = server

    def _await_recovery(self, t: Target, server: Server) -> bool:
        """A backend crashed (an OOM kill, a segfault): the postmaster lives and
        restarts the others after a crash recovery, during which every connection
        is refused ("the database system is in recovery mode") - the next steps
        failed one after the other, an unrelated setup too (issue 40.5). Wait for
        it, bounded, and say so; True: it accepts connections."""
        if server.accepting():
            return True
        self.ui.warn(
            f"{t.name}: the server is not accepting connections ({server.log_tail(2)}); "
            f"waiting up to {RECOVERY_WAIT_S:.0f} s for its crash recovery"
        )
        try:
            server.wait_ready(RECOVERY_WAIT_S)
        except PgrigError as exc:
            self.ui.fail(f"{t.name}: {exc}")
            return False
        return True

    def _record_extra(self, run: Execution) -> None:
        """What the action made besides its result (``Running.extra``), each a
        record of its own below the step's key."""
        extras = run.t.ctx.running.extra
        for made in extras:
            self.record(run.below(made.tail, made.kind), Outcome.ok(to_dict(made.value)))
        extras.clear()

    def _record_monitor(self, run: Execution, value: Result | None) -> None:
        """What the host and the server did during the run, and the verdict - a
        record of its own, so a failing sampler never costs the run itself."""
        assert run.watched is not None
        watch, step = run.watched, run.step
        mon = run.below("monitor", MONITOR.name)
        try:
            # The samples go from the monitor's spool to the store one at a time,
            # in the record's transaction: never all in memory (issue 18.6).
            # The monitor reads what it knows of a run by name (a pgbench run's
            # progress and duration; a TPC-C run's where it has them).
            bench = cast("PgbenchRun | None", value)
            observed = watch.summary(bench)
            samples = (to_dict(s) for s in watch.samples(bench))
            self.record(mon, Outcome.ok(to_dict(observed)), samples)
        except StoreError:
            raise
        except Exception as exc:  # the run is recorded; say why the evidence is missing
            self.record(mon, Outcome.failed(exc))
            return
        self.ui.info(f"  [dim]bottleneck: {observed.verdict.summary}[/dim]")
        if observed.disturbed is not None:
            self.ui.warn(
                f"{step.label}: disturbed by other work - {'; '.join(observed.disturbed.reasons)}"
                " (not counted towards a confidence interval)"
            )

    def _record_memory(self, run: Execution, before: MemoryStats) -> None:
        """A memory-limited target's cgroup over the run (limit hits, peak, OOM
        kills): a record of its own, like the monitor's."""
        mem = run.below("memory", MEMORY.name, "memory cgroup")
        try:
            after = _memory(run.t)
        except (OSError, ValueError) as exc:  # the run is recorded; say why this is missing
            self.record(mem, Outcome.failed(exc))
            return
        if after is not None:
            use = MemoryUse.between(before, after)
            self.record(mem, Outcome.ok(to_dict(use), after.describe()))

    def _record_emulator(self, run: Execution, before: EmulatorReading) -> None:
        """The latency layer's CPU and I/O over the run: a record of its own."""
        emu = run.below("emulator", EMULATOR.name)
        emulator = run.t.ctx.emulator
        after = emulator() if emulator is not None else None
        if after is None or after.pid != before.pid:
            self.record(emu, Outcome("failed", "the latency layer's process is gone"))
            return
        use = EmulatorUse.between(before, after)
        self.record(emu, Outcome.ok(to_dict(use)))
        if use.dominates:
            self.ui.warn(f"{run.step.label}{use.headline()}")

    def _wait_quiet(self, t: Target, line: ProgressLine) -> None:
        """The policy's ``wait_quiet``: hold a measured run until other work calms down."""
        line.update(detail=f"waiting up to {self.wait_quiet_s:.0f} s for a quiet machine")
        quiet, probe = wait_quiet(self.wait_quiet_s, target=t.directory)
        if not quiet:
            self.ui.warn(
                f"the machine stayed busy for {self.wait_quiet_s:.0f} s (others took "
                f"{probe.other_pct:.0f}% of the CPUs); running anyway"
            )
        line.update(detail="")

    def record(
        self,
        run: Execution,
        outcome: Outcome,
        samples: Iterable[Mapping[str, object]] | None = None,
    ) -> None:
        step, t = run.step, run.t
        known = self._provenance.get(t.name) or self._provenance.get(None, UNKNOWN)
        rec = RunRecord(
            study=self.study.id,
            key=step.id,
            kind=step.kind,
            target=t.name,
            params=step.params,
            status=outcome.status,
            reason=outcome.reason,
            result=outcome.result,
            raw=outcome.raw,
            tool_versions=known.versions(step),
            started_at=run.started,
            finished_at=now(),
        )
        with self._lock:
            self.recorded.remember(self.store.record(rec, samples))


def _pulse(step: Step, t: Target, watching: bool) -> contextlib.AbstractContextManager[None]:
    """The server's heartbeat where the monitor's is not (a load, a setup, a probe
    while the server is up): a server stopped during ``pgbench -i`` failed the
    load only at its hour-long timeout (issue 33). Not for a step that stops the
    server on purpose (``Step.heartbeat``)."""
    if watching or not step.heartbeat or t.ctx.conn is None:
        return contextlib.nullcontext()
    return _pulsed(t.ctx.conn)


@contextlib.contextmanager
def _pulsed(conn: Conn) -> Iterator[None]:
    with Pulse(conn) as pulse, proc.watched_by(pulse.check):
        yield
