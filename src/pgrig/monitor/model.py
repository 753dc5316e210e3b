"""What a watched run leaves behind: per-second samples of the host and the server,
the checkpoints seen, and the bottleneck verdict. Frozen dataclasses that
round-trip through ``pgrig.results.to_dict`` / ``from_dict`` (kind "monitor").

Units are in the field names: ``_pct`` of the whole machine (all CPUs = 100)
unless said otherwise, ``_s`` per second, ``_mib`` MiB, ``_ms`` milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    # pg_stat_io (PostgreSQL 16+): "backend_type:reads|writes|extends|fsyncs|hits" -> per second
    io: dict[str, float] = field(default_factory=dict)

    @property
    def hit_ratio(self) -> float | None:
        total = self.blks_hit_s + self.blks_read_s
        return self.blks_hit_s / total if total else None


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
