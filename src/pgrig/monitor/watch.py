"""``Watch``: sample the host and the server once a second while a run goes.

A background thread with its own connection to the server. Sampling must never
break or slow the benchmark: every failure inside the thread becomes a note in
the result, and a sample costs a few milliseconds of one CPU (the /proc walk
and one SQL statement; see bench/monitor_overhead.py).
Its statistics query is the server's heartbeat (``pgrig.monitor.heartbeat``).
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

import psycopg

from pgrig import environment
from pgrig.errors import PgrigError, UsageError
from pgrig.monitor import interference, procfs, verdict
from pgrig.monitor.checkpoints import find_checkpoints
from pgrig.monitor.heartbeat import Heartbeat, LastCloses, ServerHostLost
from pgrig.monitor.model import (
    CpuSample,
    DeviceSample,
    IdleBaseline,
    IoSample,
    Limits,
    MonitorResult,
    PgSample,
    Sample,
)
from pgrig.monitor.noise import noise
from pgrig.monitor.pgstats import PgSampler
from pgrig.monitor.spool import Spool, View
from pgrig.monitor.totals import run_totals
from pgrig.monitor.watched import Watched

if TYPE_CHECKING:
    from pgrig.results import PgbenchRun

APPLICATION_NAME = "pgrig-monitor"
MIB = 1024 * 1024
# Client programs a measured run drives the server with: their CPU is "client", and
# while one lives the run is on (a run without a duration of its own: a base backup).
LOAD_GENERATORS = ("pgbench", "pg_basebackup")


def _boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


@dataclass
class _Raw:
    """One sample before alignment: host + server numbers and how many pgbench
    processes were alive at its end."""

    wall: float
    interval_s: float
    cpu: CpuSample
    devices: tuple
    memory: object
    net: tuple[float, float]
    pg: PgSample | None
    clients_alive: int
    io: IoSample | None = None


Counters = dict[tuple[int, int], tuple[int, ...]]


@dataclass
class _ProcCpu:
    """What our processes did since the previous sample: ns, ticks and bytes."""

    alive: int
    server_run: float | None = None  # ns
    server_wait: float | None = None
    client_run: float = 0.0
    thread_core: float | None = None
    thread_demand: float | None = None
    pgrig_ticks: float = 0.0
    kernel_ticks: float = 0.0
    io: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # bytes


class _ProcessMeter:
    """CPU time and storage bytes of the server's, the load generator's and
    pgrig's processes on this machine, sample after sample: the counters each
    process had at the previous look, and who else ran (the interference ledger)."""

    def __init__(self, server_pid: Callable[[], int | None]) -> None:
        self.server_pid = server_pid  # the postmaster's, asked at every look
        self.started_at = 0.0  # the watch's start: processes born after it count whole
        self.primed = False  # the first look is taken: threads seen later are new
        self.client_start: float | None = None  # wall clock of the first pgbench start
        self.ledger = interference.Ledger.start()
        self._counters: dict[str, Counters] = {}
        self._threads: dict[int, tuple[int, int]] = {}

    def measure(self, seconds: float) -> _ProcCpu:
        """CPU and storage bytes of the server's, the load generator's and pgrig's
        processes since the last sample; and of the kernel's threads (one walk of
        /proc, which also names everybody else for the interference ledger)."""
        postmaster = self.server_pid()
        walk = self.ledger.walk(postmaster)
        procs = walk.procs
        me = os.getpid()
        client = {pid for pid in walk.mine if pid != me and procs[pid].comm in LOAD_GENERATORS}
        pgrig = walk.mine - client
        for pid in client:
            started = _wall_of(procs[pid].starttime)
            if self.client_start is None or started < self.client_start:
                self.client_start = started
        out = _ProcCpu(alive=len(client), kernel_ticks=walk.kernel_ticks)
        if postmaster is not None:
            # PostgreSQL's processes are single-threaded: a process's schedstat is all of it.
            current = {}
            for pid in walk.server:
                st = procfs.read_schedstat(f"/proc/{pid}/schedstat")
                if st is None:  # no schedstat in this kernel: clock ticks, no queueing
                    st = (procs[pid].ticks * 1_000_000_000 // procfs.CLK_TCK, 0)
                current[(pid, procs[pid].starttime)] = st
            out.server_run, out.server_wait = self._delta("server", current, 2)
        (out.pgrig_ticks,) = self._delta(
            "pgrig", {(pid, procs[pid].starttime): (procs[pid].ticks,) for pid in pgrig}, 1
        )
        for group, pids in (("server", walk.server), ("client", client), ("pgrig", pgrig)):
            io = {(pid, procs[pid].starttime): procfs.read_pid_io(pid) for pid in pids}
            readable = {k: v for k, v in io.items() if v is not None}
            if pids and not readable:
                out.io[group] = None
                continue
            r, w = self._delta(f"io-{group}", readable, 2)
            out.io[group] = (r, w)
        self._client_threads(client, seconds, out)
        return out

    def _client_threads(self, client: set[int], seconds: float, out: _ProcCpu) -> None:
        """pgbench -j runs one thread per -j, and /proc/<pid>/schedstat counts the
        main thread only: sum the threads, and find the busiest."""
        threads: dict[int, tuple[int, int]] = {}
        for pid in client:
            threads.update(procfs.thread_schedstats(pid))
        prev = self._threads
        wall_ns = seconds * 1e9
        for tid, (run, wait) in threads.items():
            # A thread first seen after the start was born since: all its time is new.
            run0, wait0 = prev.get(tid, (0, 0) if self.primed else (run, wait))
            out.client_run += max(0, run - run0)
            if tid not in prev:
                continue  # its share of this interval is unknown: not the busiest
            core = 100.0 * (run - run0) / wall_ns
            demand = 100.0 * (run - run0 + wait - wait0) / wall_ns
            out.thread_core = max(out.thread_core or 0.0, min(100.0, core))
            out.thread_demand = max(out.thread_demand or 0.0, min(100.0, demand))
        self._threads = threads

    def _delta(
        self, name: str, current: Mapping[tuple[int, int], tuple[int, ...]], width: int
    ) -> list[float]:
        """Sum over processes of what each counter grew since the previous call."""
        before_all = self._counters.get(name, {})
        total = [0.0] * width
        for key, values in current.items():
            before = before_all.get(key)
            if before is None:
                # New since the last look: if it was born after the watch started,
                # all its counts belong to the watch; if not (first look), none.
                born = _wall_of(key[1])
                before = (0,) * width if born >= self.started_at else values
            for i in range(width):
                total[i] += max(0, values[i] - before[i])
        self._counters[name] = dict(current)
        return total


class HostSampling(Protocol):
    """How the one sampler (``Watch``) reads the server's host, one strategy per
    kind of host, chosen by the target kind where it chooses the host's executor
    (``Context.sampling`` beside ``Context.host``): the sampler never asks which."""

    def __init__(self, watch: Watch) -> None: ...

    def read(self, path: str) -> str:
        """A /proc file of the host; "" if it could not be read (said in a note)."""
        ...

    def prime(self, interval: float) -> None:
        """The processes' counters at the start: the first sample's deltas."""
        ...

    @property
    def sees_server(self) -> bool:
        """Whether the server's processes' bytes are known."""
        ...

    def attribute(
        self, base: CpuSample, stat: procfs.Stat, seconds: float
    ) -> tuple[CpuSample, _ProcCpu]:
        """The host's CPU shares by process where they are known, and what the processes did."""
        ...

    def devices(self, notes: list[str]) -> tuple[str, ...]:
        """The block devices behind the target (their I/O is sampled)."""
        ...

    def unseen(self) -> str | None:
        """What cannot be sampled, said once."""
        ...


class ProcessesHere:
    """Sampling the server's host when it is this machine: /proc read here, and
    the CPU and bytes told apart by process (the server's, pgbench's, pgrig's,
    the kernel's, the others': the interference rules read them)."""

    def __init__(self, watch: Watch) -> None:
        self.ctx = watch.ctx
        self.meter = watch._meter

    def read(self, path: str) -> str:
        return procfs.read_text(path) or ""

    def prime(self, interval: float) -> None:
        self.meter.measure(interval)

    @property
    def sees_server(self) -> bool:
        return self.ctx.server_pid is not None  # the postmaster is here, by PID

    def attribute(
        self, base: CpuSample, stat: procfs.Stat, seconds: float
    ) -> tuple[CpuSample, _ProcCpu]:
        pc = self.meter.measure(seconds)
        machine_ns = seconds * 1e9 * stat.ncpu
        machine_ticks = seconds * procfs.CLK_TCK * stat.ncpu
        server = None if pc.server_run is None else 100.0 * pc.server_run / machine_ns
        client = 100.0 * pc.client_run / machine_ns
        pgrig = 100.0 * pc.pgrig_ticks / machine_ticks
        kernel = 100.0 * pc.kernel_ticks / machine_ticks
        cpu = replace(
            base,
            server=server,
            client=client,
            pgrig=pgrig,
            kernel=kernel,
            other=interference.other_cpu(
                base.busy, base.steal, base.irq, kernel, [server, client, pgrig]
            ),
            server_runq_pct=_share(pc.server_wait, pc.server_run),
            client_thread_core_pct=pc.thread_core,
            client_thread_demand_pct=pc.thread_demand,
        )
        return cpu, pc

    def devices(self, notes: list[str]) -> tuple[str, ...]:
        fs = environment.describe_filesystem(self.ctx.target)
        if fs is None or fs.block_device is None:
            where = f"{fs.fstype} on {fs.device}" if fs else "unknown"
            notes.append(
                f"no block device behind {self.ctx.target} ({where}): device I/O not sampled"
            )
            return ()
        return tuple(procfs.slaves(fs.block_device))

    def unseen(self) -> str | None:
        if self.ctx.server_pid is None:
            return (
                "the server does not run on this machine (or its PID is unknown): "
                "its CPU share is not sampled"
            )
        return None


class WholeHost:
    """Sampling the server's host through its executor (``Context.host``): its
    CPUs, disks (``Context.host_devices``), memory and network as a whole; whose
    processes used them is not attributed (``CpuSample.other`` None: the
    interference rules do not apply)."""

    def __init__(self, watch: Watch) -> None:
        self.host = watch.ctx.host
        self.notes = watch.notes
        self._devices = watch.ctx.host_devices

    def read(self, path: str) -> str:
        try:
            return self.host.read_text(path)
        except PgrigError as exc:
            self.notes.append(f"{path} on {self.host.name} not read: {exc}")
            return ""

    def prime(self, interval: float) -> None:
        return None

    sees_server = False

    def attribute(
        self, base: CpuSample, stat: procfs.Stat, seconds: float
    ) -> tuple[CpuSample, _ProcCpu]:
        return base, _ProcCpu(alive=0)

    def devices(self, notes: list[str]) -> tuple[str, ...]:
        notes.append(
            f"host figures (CPU, disks, memory, network) are the server's host "
            f"{self.host.name}'s, read over SSH; its processes are not told apart "
            "(server, pgbench and others share the busy CPU)"
        )
        return self._devices

    def unseen(self) -> str | None:
        return None


class Watch:
    """Context manager: samples from ``__enter__`` to ``__exit__``; then ``result(run)``."""

    def __init__(
        self,
        ctx: Watched,
        interval: float = 1.0,
        limits: Limits | None = None,
        devices: tuple[str, ...] | None = None,
        *,
        baseline: IdleBaseline | None = None,
        thresholds: interference.Thresholds | None = None,
    ) -> None:
        _check_interval(interval)
        self.ctx = ctx
        self.interval = interval
        self.limits = limits
        self.devices = devices
        self.notes: list[str] = []
        # On disk, not in memory: a long run's samples must not grow pgrig (spool.py).
        self._raw: Spool[_Raw] = Spool()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection | None = None
        self._pg: PgSampler | None = None
        self._started_at = 0.0
        self.baseline = baseline
        self.thresholds = thresholds or interference.DEFAULT
        self._meter = _ProcessMeter(lambda: self.ctx.server_pid)
        self._beat = Heartbeat(lambda: self.ctx.conn.describe() if self.ctx.conn else "?")
        self._closer = LastCloses()  # this exit and the sampler thread's end
        self._host: HostSampling = ctx.sampling(self)

    def __enter__(self) -> Watch:
        self._started_at = self._meter.started_at = time.time()
        if self.devices is None:
            self.devices = self._host.devices(self.notes)
        self._open_server()
        self._prev_stat = procfs.parse_stat(self._host.read("/proc/stat"))
        self._prev_disks = procfs.parse_diskstats(self._host.read("/proc/diskstats"))
        self._prev_net = procfs.parse_net_dev(self._host.read("/proc/net/dev"))
        self._prev_t = time.monotonic()
        self._host.prime(self.interval)
        self._meter.primed = True
        self._thread = threading.Thread(target=self._loop, name="pgrig-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1 if self._beat.hung() else 10)
            if self._thread.is_alive():
                self.notes.append("the sampler's query had no answer when the run ended")
        self._closer.release(self._conn, 1 if self._thread is not None else 2)

    def heartbeat(self) -> None:
        """What the run's waits call (``proc.watched_by``): raise ``ServerHung``
        when the server stopped answering, ``ServerHostLost`` when the SSH
        connection to its host closed. That loss was seen only at the next
        step (issue 40.10): the run, its host unread, was recorded ok."""
        self._beat.check()
        if self.ctx.host.connection_lost():
            raise ServerHostLost(self.ctx.host.name)

    @property
    def backend_pid(self) -> int | None:
        """The sampler's server backend (what its statistics queries cost the server)."""
        return self._conn.info.backend_pid if self._conn is not None else None

    def _open_server(self) -> None:
        if self.ctx.conn is None:
            self.notes.append("no server connection: wait events and statistics not sampled")
            return
        conn = self.ctx.conn.with_params(application_name=APPLICATION_NAME)
        try:
            self._conn = conn.connect()
            # A stuck catalog must stall the sampler, never the benchmark behind it.
            self._conn.execute("SET statement_timeout = '2s'")
            self._pg = PgSampler(self._conn)
            self._pg.prime()
            self.notes.extend(self._pg.notes)
        except (PgrigError, psycopg.Error) as exc:
            self.notes.append(f"server statistics not sampled: {str(exc).strip()}")
            self._pg = None
        if (unseen := self._host.unseen()) is not None:
            self.notes.append(unseen)

    # -- sampling ----------------------------------------------------------

    def _loop(self) -> None:
        try:
            self._sampling()
        finally:
            self._closer.release(self._conn)

    def _sampling(self) -> None:
        deadline = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, deadline - time.monotonic())):
            try:
                self._sample()
            except Exception as exc:  # noqa: BLE001 - monitoring must not end the run
                self.notes.append(f"a sample failed: {type(exc).__name__}: {exc}")
            deadline += self.interval
            now = time.monotonic()
            if deadline < now:  # the machine stalled us: skip, do not burst
                deadline = now + self.interval

    def _sample(self) -> None:
        """One second of the server's host (as its ``HostSampling`` reads it):
        its CPUs, as its processes used them where they are known, disks, memory
        and network; and the server's statistics."""
        stat_text, disk_text, mem_text, net_text = (
            self._host.read(f"/proc/{name}") for name in ("stat", "diskstats", "meminfo", "net/dev")
        )
        now = time.monotonic()
        wall = time.time()
        seconds = max(now - self._prev_t, 1e-3)
        stat = procfs.parse_stat(stat_text)
        if not stat.ncpu:  # not read this second: the next sample spans both
            return
        base = procfs.cpu_rates(self._prev_stat, stat, seconds)
        cpu, pc = self._host.attribute(base, stat, seconds)
        disks = procfs.parse_diskstats(disk_text)
        devices = tuple(
            procfs.disk_rates(name, self._prev_disks[name], disks[name], seconds)
            for name in self.devices or ()
            if name in disks and name in self._prev_disks
        )
        net = procfs.parse_net_dev(net_text)
        self._raw.append(
            _Raw(
                wall=wall,
                interval_s=seconds,
                cpu=cpu,
                devices=devices,
                memory=procfs.memory_sample(procfs.parse_meminfo(mem_text)),
                net=procfs.net_rates(self._prev_net, net, seconds),
                pg=self._sample_server(seconds),
                clients_alive=pc.alive,
                io=_io_sample(pc, devices, seconds, server=self._host.sees_server),
            )
        )
        self._prev_stat, self._prev_disks, self._prev_net, self._prev_t = stat, disks, net, now

    def _sample_server(self, seconds: float) -> PgSample | None:
        if self._pg is None:
            return None
        try:
            with self._beat.asking():
                return self._pg.sample(seconds)
        except psycopg.Error as exc:
            self.notes.append(f"server statistics stopped: {str(exc).strip()}")
            self._pg = None
            return None

    # -- the result ----------------------------------------------------------

    def result(self, run: PgbenchRun | None) -> MonitorResult:
        """The samples aligned on pgbench's time axis, the checkpoints, the verdict:
        every sample in memory (for callers that want them there; the recorder
        takes ``summary`` and streams ``samples`` to the store instead)."""
        return replace(self.summary(run), samples=tuple(self.samples(run)))

    def samples(self, run: PgbenchRun | None) -> View[Sample]:
        """The samples aligned on pgbench's time axis, read back from the spool
        on every pass: never all in memory."""
        t0 = self._client_origin(run)
        origin = t0 if t0 is not None else self._started_at
        points = tuple(getattr(run, "progress", ()) or ())
        progress = {p.t_s: p.tps for p in points}
        times = sorted(progress)
        duration = getattr(run, "duration_s", None)

        def aligned() -> Iterator[Sample]:
            for raw in self._raw:
                t_s = raw.wall - origin
                middle = t_s - raw.interval_s / 2
                in_run = 0 <= middle <= duration if duration is not None else raw.clients_alive > 0
                yield Sample(
                    t_s=round(t_s, 3),
                    wall=round(raw.wall, 3),
                    interval_s=round(raw.interval_s, 3),
                    cpu=raw.cpu,
                    devices=raw.devices,
                    memory=raw.memory,  # type: ignore[arg-type]
                    net_rx_mib_s=raw.net[0],
                    net_tx_mib_s=raw.net[1],
                    pg=raw.pg,
                    tps=_nearest(progress, times, t_s),
                    in_run=in_run,
                    io=raw.io,
                )

        return View(aligned)

    def summary(self, run: PgbenchRun | None) -> MonitorResult:
        """Everything but the samples (``samples=()``): the checkpoints, other
        load and the verdict, worked out in passes over the spool."""
        samples = self.samples(run)
        version = self._pg.version_num if self._pg else None
        checkpoints = find_checkpoints(samples, counted_at_end=(version or 0) >= 170000)
        ncpu = self._prev_stat.ncpu
        others, disturbed = interference.assess(
            samples, self._meter.ledger.top(ncpu), self.thresholds
        )
        if (held := self.ctx.load_imbalance) is not None:
            disturbed = interference.also(disturbed, held, self.thresholds)
        points = tuple(getattr(run, "progress", ()) or ())
        return MonitorResult(
            interval_s=self.interval,
            ncpu=self._prev_stat.ncpu,
            started_at=self._started_at,
            client_started_at=self._client_origin(run),
            devices=self.devices or (),
            samples=(),
            verdict=verdict.decide(
                samples, checkpoints, self.limits, run, others, self.ctx.load_finding
            ),
            checkpoints=checkpoints,
            limits=self.limits,
            server_version_num=self._pg.version_num if self._pg else None,
            notes=tuple(dict.fromkeys(self.notes)),
            others=others,
            disturbed=disturbed,
            baseline=self.baseline,
            noise=noise([p.tps for p in points]),
            totals=run_totals(samples, ncpu),
        )

    def _client_origin(self, run: PgbenchRun | None) -> float | None:
        """pgbench's time 0 on the wall clock (epoch seconds); None: unknown."""
        started = self.ctx.client_started
        t0 = self._meter.client_start if started is None else started
        connecting_ms = getattr(run, "initial_connection_ms", None)
        if t0 is not None and connecting_ms:
            # pgbench's -P clock starts once its clients are connected.
            t0 += connecting_ms / 1000.0
        return t0


def _io_sample(
    pc: _ProcCpu, devices: tuple[DeviceSample, ...], seconds: float, *, server: bool
) -> IoSample:
    """One second's bytes: the device's, and the server's, pgbench's and pgrig's own."""

    def mib(group: str, i: int) -> float | None:
        value = pc.io.get(group)
        return None if value is None else value[i] / MIB / seconds

    device = devices[0] if devices else None
    return IoSample(
        device=device.name if device else None,
        device_read_mib_s=device.read_mib_s if device else 0.0,
        device_write_mib_s=device.write_mib_s if device else 0.0,
        server_read_mib_s=mib("server", 0) if server else None,
        server_write_mib_s=mib("server", 1) if server else None,
        client_read_mib_s=mib("client", 0) or 0.0,
        client_write_mib_s=mib("client", 1) or 0.0,
        pgrig_read_mib_s=mib("pgrig", 0) or 0.0,
        pgrig_write_mib_s=mib("pgrig", 1) or 0.0,
    ).capped()


def _wall_of(starttime_ticks: int) -> float:
    return time.time() - (_boottime() - starttime_ticks / procfs.CLK_TCK)


def _check_interval(interval: float) -> None:
    if not 0.1 <= interval <= 60:
        raise UsageError(
            f"monitor interval must be between 0.1 and 60 seconds, not {interval:g}",
            hint="sample once a second (interval=1.0) unless a run is very long",
        )


def _share(wait: float | None, run: float | None) -> float | None:
    if wait is None or run is None or wait + run <= 0:
        return None
    return 100.0 * wait / (wait + run)


def _nearest(
    progress: dict[float, float], times: list[float], t_s: float, slack: float = 0.6
) -> float | None:
    """The tps of the progress point nearest ``t_s`` (the earlier of two as
    near), None beyond ``slack``; ``times``: the points' times, sorted (a
    search, not a scan: it runs for every sample on every pass)."""
    i = bisect.bisect_left(times, t_s)
    near = [p for p in times[max(0, i - 1) : i + 1] if abs(p - t_s) <= slack]
    if not near:
        return None
    return progress[min(near, key=lambda p: abs(p - t_s))]
