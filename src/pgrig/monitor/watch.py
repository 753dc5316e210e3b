"""``Watch``: sample the host and the server once a second while a run goes.

A background thread with its own connection to the server. Sampling must never
break or slow the benchmark: every failure inside the thread becomes a note in
the result, and a sample costs a few milliseconds of one CPU (the /proc walk
and one SQL statement; see bench/monitor_overhead.py).
Its statistics query is the server's heartbeat (``pgrig.monitor.heartbeat``).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING

import psycopg

from pgrig.errors import PgrigError, UsageError
from pgrig.monitor import interference, verdict
from pgrig.monitor.checkpoints import find_checkpoints
from pgrig.monitor.heartbeat import Heartbeat, LastCloses, ServerHostLost
from pgrig.monitor.model import (
    CpuSample,
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
from pgrig.monitor.watched import Counters, HostSampling, Watched

if TYPE_CHECKING:
    from pgrig.results import PgbenchRun

APPLICATION_NAME = "pgrig-monitor"


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


class Watch:
    """Context manager: samples from ``__enter__`` to ``__exit__``; then ``result(run)``.

    Made from what it is given; its parts are built when it is entered, in the
    order the run needs them: the server's statistics connection, the host's
    sampling (its devices and first look), the spool and the heartbeat - none
    for a watch never entered."""

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
        self.notes: list[str] = []
        self._devices = devices  # None: the host's sampling finds them
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection | None = None
        self._pg: PgSampler | None = None
        self._started_at = 0.0
        self.baseline = baseline
        self.thresholds = thresholds or interference.DEFAULT

    def __enter__(self) -> Watch:
        self._started_at = time.time()
        self._open_server()
        try:
            # What only one kind of host needs (this machine's process meter) is
            # its strategy's: the sampler knows neither.
            self._host: HostSampling = self.ctx.sampling(self.ctx, self.notes)
            self.devices: tuple[str, ...] = (
                self._host.devices() if self._devices is None else self._devices
            )
            self._prev: Counters = self._host.first(self._started_at, self.interval)
        except BaseException:  # not entered: no exit closes the server connection
            if self._conn is not None:
                self._conn.close()
            raise
        # On disk, not in memory: a long run's samples must not grow pgrig (spool.py).
        self._raw: Spool[_Raw] = Spool()
        self._beat = Heartbeat(lambda: self.ctx.conn.describe() if self.ctx.conn else "?")
        self._closer = LastCloses()  # this exit and the sampler thread's end
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
        """One second of the server's host: its CPUs, as its processes used them
        where they are known, disks, memory and network (its strategy's); and the
        server's statistics."""
        prev, cur = self._prev, self._host.read()
        wall = time.time()
        seconds = max(cur.at - prev.at, 1e-3)
        if not cur.stat.ncpu:  # not read this second: the next sample spans both
            return
        host = self._host.sample(prev, cur, seconds, self.devices)
        self._raw.append(
            _Raw(
                wall=wall,
                interval_s=seconds,
                cpu=host.cpu,
                devices=host.devices,
                memory=host.memory,
                net=host.net,
                pg=self._sample_server(seconds),
                clients_alive=host.clients_alive,
                io=host.io,
            )
        )
        self._prev = cur

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
        ncpu = self._prev.stat.ncpu
        others, disturbed = interference.assess(samples, self._host.others(ncpu), self.thresholds)
        if (held := self.ctx.load_imbalance) is not None:
            disturbed = interference.also(disturbed, held, self.thresholds)
        points = tuple(getattr(run, "progress", ()) or ())
        return MonitorResult(
            interval_s=self.interval,
            ncpu=self._prev.stat.ncpu,
            started_at=self._started_at,
            client_started_at=self._client_origin(run),
            devices=self.devices,
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
        t0 = self._host.client_start if started is None else started
        connecting_ms = getattr(run, "initial_connection_ms", None)
        if t0 is not None and connecting_ms:
            # pgbench's -P clock starts once its clients are connected.
            t0 += connecting_ms / 1000.0
        return t0


def _check_interval(interval: float) -> None:
    if not 0.1 <= interval <= 60:
        raise UsageError(
            f"monitor interval must be between 0.1 and 60 seconds, not {interval:g}",
            hint="sample once a second (interval=1.0) unless a run is very long",
        )


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
