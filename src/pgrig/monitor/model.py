"""What a watched run leaves behind: per-second samples of the host and the server,
the checkpoints seen, and the bottleneck verdict. Frozen dataclasses that
round-trip through ``pgrig.results.to_dict`` / ``from_dict`` (kind "monitor").

Units are in the field names: ``_pct`` of the whole machine (all CPUs = 100)
unless said otherwise, ``_s`` per second, ``_mib`` MiB, ``_ms`` milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pgrig.results import ResultKind


@dataclass(frozen=True)
class Limits:
    """The storage's physical limits as the study's own probes measured them."""

    randread_iops: float | None = None  # fio 8k randread
    randwrite_iops: float | None = None  # fio 8k randwrite
    fdatasync_ops: float | None = None  # pg_test_fsync, one 8kB write, fdatasync


@dataclass(frozen=True)
class CpuSample:
    """Percent of the whole machine over one interval (what vmstat shows)."""

    user: float
    system: float
    iowait: float
    irq: float
    steal: float
    idle: float
    server: float | None = None  # postmaster and its children; None if not local
    client: float | None = None  # pgbench: descendants of the pgrig process
    pgrig: float | None = None  # pgrig itself and its other children (the sampler too)
    # Everything else in user space: busy - steal - irq - kernel threads - the
    # three above (so short-lived processes count too). None: not attributed.
    other: float | None = None
    kernel: float | None = None  # kernel threads (kworkers, loop, jbd2): work for anyone
    # Of the time the server's processes wanted a CPU, the share spent waiting
    # in a run queue: CPU contention, whoever causes it.
    server_runq_pct: float | None = None
    # The busiest pgbench thread: % of ONE CPU it ran, and % of the wall time it
    # was runnable (running or queued). Near 100 runnable = it never waits for
    # the server: the load generator is the limit.
    client_thread_core_pct: float | None = None
    client_thread_demand_pct: float | None = None
    ctxt_s: float = 0.0
    runq: float = 0.0  # procs_running
    blocked: float = 0.0  # procs_blocked (uninterruptible, mostly I/O)

    @property
    def busy(self) -> float:
        return max(0.0, 100.0 - self.idle - self.iowait)


@dataclass(frozen=True)
class DeviceSample:
    """``iostat -x`` for one block device over one interval."""

    name: str
    reads_s: float
    writes_s: float
    read_mib_s: float
    write_mib_s: float
    read_await_ms: float
    write_await_ms: float
    util_pct: float
    queue: float  # aqu-sz: average I/Os in flight
    flushes_s: float = 0.0


@dataclass(frozen=True)
class MemorySample:
    cached_mib: float
    dirty_mib: float
    writeback_mib: float
    available_mib: float


@dataclass(frozen=True)
class PgSample:
    """The server over one interval: backends by wait event, and stats deltas."""

    # Client backends by what they wait on: "CPU" (active, no wait event: on a
    # CPU or queued for one), "Client:ClientRead" (idle: waiting for pgbench),
    # else "Type:Event" as pg_stat_activity names it.
    waits: dict[str, int] = field(default_factory=dict)
    # The backends waiting on I/O or a lightweight lock by event and their
    # process's state, from the server's own /proc/<pid>/stat in the same
    # statement: "IO:WALWrite|R": 2. R: on a CPU or queued for one - preempted
    # inside a write, a backend keeps its wait event set yet waits for a CPU;
    # D: blocked in the kernel (I/O); S: asleep. Empty: not read (pg_read_file
    # of /proc needs superuser or pg_read_server_files, 11+), or no such waits.
    states: dict[str, int] = field(default_factory=dict)
    checkpoint_active: bool = False  # checkpointer busy (not on CheckpointerMain)
    commits_s: float = 0.0
    rollbacks_s: float = 0.0
    blks_hit_s: float = 0.0
    blks_read_s: float = 0.0
    temp_mib_s: float = 0.0
    deadlocks: int = 0
    checkpoints: int = 0  # completed in this interval (timed + requested)
    buffers_checkpoint_s: float = 0.0
    buffers_clean_s: float = 0.0
    buffers_backend_s: float | None = None  # gone from the stats in PostgreSQL 17
    wal_mib_s: float | None = None  # pg_stat_wal: PostgreSQL 14+
    wal_records_s: float | None = None
    wal_fpi_s: float | None = None
    wal_writes_s: float | None = None
    wal_syncs_s: float | None = None
    # ms a second spent in WAL syncs (pg_stat_wal.wal_sync_time; pg_stat_io on 18):
    # 0 while track_wal_io_timing is off
    wal_sync_ms_s: float | None = None
    # pg_stat_io (PostgreSQL 16+), relations only, per second:
    # "backend_type:reads|writes|extends|fsyncs|hits|read_bytes|read_time" (read_time
    # in ms per second, with track_io_timing; read_bytes from reads x 8 kB before 18)
    io: dict[str, float] = field(default_factory=dict)

    @property
    def hit_ratio(self) -> float | None:
        total = self.blks_hit_s + self.blks_read_s
        return self.blks_hit_s / total if total else None


@dataclass(frozen=True)
class IoSample:
    """Bytes sent to or read from storage over one interval, MiB/s, by consumer:
    ``/proc/<pid>/io`` (read_bytes, write_bytes - cancelled_write_bytes) of each
    consumer's processes, and ``/proc/diskstats`` of the target's device (every
    process's traffic).

    ``write_bytes`` counts a page when it is dirtied, and again each time a clean
    page is dirtied anew (WAL pages rewritten commit after commit, hint bits),
    whether or not the page ever reaches the device: one run's server "wrote"
    800 MiB/s into a device that took 31. So the server's own figures are capped,
    each interval, at what the device itself did (``capped``): never more than the
    device, possibly less than the server's share when writeback lags. What the
    server dirtied is kept beside them (``server_dirtied_mib_s``)."""

    device: str | None  # the target's block device; None: none found
    device_read_mib_s: float = 0.0
    device_write_mib_s: float = 0.0
    server_read_mib_s: float | None = None  # None: not local, or not readable
    server_write_mib_s: float | None = None  # at most device_write_mib_s
    client_read_mib_s: float = 0.0
    client_write_mib_s: float = 0.0
    pgrig_read_mib_s: float = 0.0
    pgrig_write_mib_s: float = 0.0
    server_dirtied_mib_s: float | None = None  # write_bytes as counted, before the cap

    def capped(self) -> IoSample:
        """The server's figures no larger than the device's (older records were
        stored uncapped)."""
        if self.device is None:
            return self
        read, write = self.server_read_mib_s, self.server_write_mib_s
        dirtied = self.server_dirtied_mib_s if self.server_dirtied_mib_s is not None else write
        return replace(
            self,
            server_read_mib_s=None if read is None else min(read, self.device_read_mib_s),
            server_write_mib_s=None if write is None else min(write, self.device_write_mib_s),
            server_dirtied_mib_s=dirtied,
        )

    @property
    def ours_mib_s(self) -> float:
        return (
            (self.server_read_mib_s or 0.0)
            + (self.server_write_mib_s or 0.0)
            + self.client_read_mib_s
            + self.client_write_mib_s
            + self.pgrig_read_mib_s
            + self.pgrig_write_mib_s
        )

    @property
    def device_mib_s(self) -> float:
        return self.device_read_mib_s + self.device_write_mib_s


@dataclass(frozen=True)
class Sample:
    """One interval, ending at ``wall`` (seconds since the epoch)."""

    t_s: float  # end of the interval on pgbench's time axis (its start = 0)
    wall: float
    interval_s: float
    cpu: CpuSample
    devices: tuple[DeviceSample, ...] = ()
    memory: MemorySample | None = None
    net_rx_mib_s: float = 0.0
    net_tx_mib_s: float = 0.0
    pg: PgSample | None = None
    tps: float | None = None  # pgbench -P for the same second, when aligned
    in_run: bool = True  # inside pgbench's timed run (not connecting, not after)
    io: IoSample | None = None


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint seen during the run, on pgbench's time axis."""

    start_s: float
    end_s: float | None  # None: still running when sampling stopped
    completed: bool


@dataclass(frozen=True)
class Verdict:
    """One primary cause and the numbers behind it."""

    cause: str  # a key of pgrig.monitor.verdict.CAUSES
    label: str  # e.g. "storage-read bound"
    summary: str  # the sentence the report leads with, numbers included
    evidence: tuple[str, ...] = ()
    secondary: tuple[str, ...] = ()  # other causes that also showed, weaker
    against_limits: tuple[str, ...] = ()  # how close the run came to the probes


@dataclass(frozen=True)
class OtherProcess:
    """Processes that are neither the server, the load generator nor pgrig,
    summed by command name (``comm``)."""

    name: str
    processes: int  # how many with this name were seen
    cpu_pct: float  # of the whole machine, averaged over the time watched
    io_mib_s: float = 0.0  # read + written, on any device (/proc/<pid>/io)


@dataclass(frozen=True)
class OtherLoad:
    """How much of the machine others took during one watched run."""

    cpu_pct: float  # mean over the run's seconds, % of the machine
    cpu_max_pct: float  # the worst second
    steal_pct: float  # mean: CPU the hypervisor gave to other guests
    top: tuple[OtherProcess, ...] = ()  # by CPU, then I/O
    # Of the target device's traffic (bytes), the share no process of ours
    # sent and other processes did; None: no device or no I/O to share.
    io_share: float | None = None
    io_mib_s: float = 0.0  # other processes' read + written, any device
    device_mib_s: float | None = None  # the target device, all processes
    device_util_pct: float | None = None


@dataclass(frozen=True)
class Disturbance:
    """Why a run does not measure the server alone: other load over the thresholds."""

    reasons: tuple[str, ...]  # one sentence each, numbers and names included
    cpu_pct: float
    io_share: float | None
    top: tuple[OtherProcess, ...]
    cpu_threshold_pct: float
    io_threshold_share: float

    @property
    def summary(self) -> str:
        return "; ".join(self.reasons)


@dataclass(frozen=True)
class IdleBaseline:
    """The machine before a study, while pgrig does nothing: what is already running."""

    seconds: float
    ncpu: int
    busy_pct: float  # mean, % of the machine (steal included)
    other_pct: float  # mean: user-space processes other than pgrig's
    other_max_pct: float  # the busiest second
    steal_pct: float
    iowait_pct: float
    kernel_pct: float = 0.0
    top: tuple[OtherProcess, ...] = ()
    device: str | None = None
    device_mib_s: float | None = None  # read + written on the target's device
    device_util_pct: float | None = None


@dataclass(frozen=True)
class Noise:
    """How steady a run's per-second throughput was (pgbench -P)."""

    n: int  # seconds
    mean: float
    cv: float  # standard deviation / mean
    min: float
    max: float


@dataclass(frozen=True)
class RunTotals:
    """What the server did over a run's timed window (the samples inside it),
    summed: the counters' before/after deltas behind a per-transaction cost."""

    seconds: float  # the in-run samples' intervals, summed
    commits: float  # pg_stat_database.xact_commit
    checkpoints: int  # completed inside the window
    wal_bytes: float | None = None  # pg_stat_wal (14+); None before
    wal_syncs: float | None = None  # pg_stat_wal.wal_sync, pg_stat_io's WAL fsyncs on 18
    server_cpu_s: float | None = None  # the server's processes; None: not attributed
    wal_fpi: float | None = None  # full-page images written to the WAL (14+)
    wal_sync_ms: float | None = None  # pg_stat_wal.wal_sync_time: 0 untimed (track_wal_io_timing)
    # The target's block devices (iostat), every process's I/O: what a cloud
    # disk's IOPS and throughput budget is sized by. None: no device sampled.
    device_reads: float | None = None
    device_writes: float | None = None
    device_bytes: float | None = None  # read + written


@dataclass(frozen=True)
class MonitorResult:
    interval_s: float
    ncpu: int
    started_at: float  # epoch seconds: the watch started
    client_started_at: float | None  # epoch seconds: pgbench started (t_s = 0)
    devices: tuple[str, ...]  # block devices behind the target
    samples: tuple[Sample, ...]
    verdict: Verdict
    checkpoints: tuple[Checkpoint, ...] = ()
    limits: Limits | None = None
    server_version_num: int | None = None
    notes: tuple[str, ...] = ()  # what could not be sampled, and why
    others: OtherLoad | None = None  # None: written by a pgrig that did not attribute
    disturbed: Disturbance | None = None  # None: not disturbed (or not known)
    baseline: IdleBaseline | None = None  # the idle machine before the study
    noise: Noise | None = None  # per-second tps of the run
    totals: RunTotals | None = None  # None: written by a pgrig that did not sum them


# The monitor's record of every measured run (registered by pgrig.plugins.monitor).
MONITOR = ResultKind("monitor", MonitorResult)
