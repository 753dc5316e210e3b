"""Campaign files: a whole study written down once (TOML), checked before anything runs.

A campaign names its targets (where PostgreSQL runs: a directory on the
storage under test, or an existing server), the storage probes, the
workloads and how to run them (repeats, warm-up, checkpoints, reset,
interleaving). ``load(path)`` returns a validated ``Campaign`` or raises a
``UsageError`` naming the file, the line and the nearest valid key. The format
is documented in docs/campaigns.md.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgrig.errors import UsageError
from pgrig.units import parse_size

TPCB_MODES = ("select-only", "read-write")
FIO_PATTERNS = ("randwrite", "randread", "write", "read")


@dataclass(frozen=True)
class FioPlan:
    patterns: tuple[str, ...] = FIO_PATTERNS
    numjobs: int = 1
    iodepth: int = 8
    size: str = "256M"
    runtime_s: int = 10
    direct: bool = True
    ioengine: str = "libaio"


@dataclass(frozen=True)
class InitdbSpec:
    encoding: str = "UTF8"
    locale: str = "C"
    wal_segsize_mb: int | None = None
    data_checksums: bool = False


@dataclass(frozen=True)
class TargetSpec:
    """Where PostgreSQL runs for one column of the comparison."""

    name: str
    directory: Path | None = None  # the storage under test: the cluster goes in here
    dsn: str | None = None  # or an existing server
    wal_directory: Path | None = None  # initdb --waldir on another disk
    tablespace: str | None = None  # directory (created in our cluster) or existing name
    index_tablespace: str | None = None
    pg_bin: str | None = None
    profile: str = "oltp"
    settings: dict[str, str] = field(default_factory=dict)
    initdb: InitdbSpec = field(default_factory=InitdbSpec)
    os_user: str | None = None


@dataclass(frozen=True)
class ProbeSpec:
    timing_s: int | None = 3  # None: not run
    fsync_s: int | None = 2
    fio: FioPlan | None = field(default_factory=FioPlan)


@dataclass(frozen=True)
class TpcbSpec:
    name: str = "tpcb"
    scales: tuple[int, ...] = (10,)
    modes: tuple[str, ...] = TPCB_MODES
    clients: tuple[int, ...] = (1, 2, 4, 8)
    threads: int | None = None  # None: min(clients, CPUs)
    durations: tuple[int, ...] = (30,)
    query_mode: str = "prepared"
    generate: str = "client"
    partitions: int = 0
    unlogged: bool = False
    fillfactor: int | None = None
    count: bool = True
    rate: float | None = None  # open loop: pgbench -R (transactions/s in total)
    latency_limit_ms: float | None = None  # pgbench -L, with rate

    kind = "tpcb"


@dataclass(frozen=True)
class ScriptSpec:
    path: Path
    weight: int = 1


@dataclass(frozen=True)
class CustomSpec:
    """The user's own SQL setup and pgbench scripts (seed 001's login/logout)."""

    name: str
    scripts: tuple[ScriptSpec, ...]
    setup: tuple[Path, ...] = ()
    clients: tuple[int, ...] = (1,)
    threads: int | None = None
    durations: tuple[int, ...] = (30,)
    query_mode: str = "prepared"
    defines: dict[str, str] = field(default_factory=dict)
    rate: float | None = None
    latency_limit_ms: float | None = None

    kind = "custom"


@dataclass(frozen=True)
class DurabilitySpec:
    """Crash the server under load and prove no acknowledged commit was lost
    (see docs/durability.md); on each target pgrig created."""

    name: str = "durability"
    method: str = "immediate"  # immediate | kill-postmaster | kill-backend
    crashes: int = 3
    clients: int = 4
    interval_s: float = 5.0

    kind = "durability"


@dataclass(frozen=True)
class TpccSpec:
    """TPC-C (docs/tpcc.md): load W warehouses, check, then each mode's timed runs
    with a consistency check after each."""

    name: str = "tpcc"
    warehouses: int = 4
    jobs: int = 0  # loader connections; 0: the CPU count
    connections: int = 4
    threads: int | None = None
    duration_s: int = 60
    modes: tuple[str, ...] = ("server", "client")
    active: int | None = None  # confine the runs to the first K warehouses
    isolation: str = "read committed"
    max_tries: int = 10

    kind = "tpcc"


WorkloadSpec = TpcbSpec | CustomSpec | DurabilitySpec | TpccSpec


@dataclass(frozen=True)
class RunPolicy:
    repeat: int = 1
    # "repeat until the 95% confidence interval is within X% of the mean", up to max_repeat
    until_ci_pct: float | None = None
    max_repeat: int = 10
    warmup: int | str = 0  # seconds, or "auto": until per-second tps is steady
    warmup_max_s: int = 120  # "auto" gives up after this long
    checkpoint: bool = True
    reset: str = "reuse"  # reuse | restore
    interleave: bool = True
    monitor: bool = True  # sample host and server during every measured run


@dataclass(frozen=True)
class Campaign:
    name: str
    source: str
    targets: tuple[TargetSpec, ...]
    probes: ProbeSpec | None = field(default_factory=ProbeSpec)
    workloads: tuple[WorkloadSpec, ...] = ()
    policy: RunPolicy = field(default_factory=RunPolicy)
    baseline: str | None = None

    def target(self, name: str) -> TargetSpec:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)


# --------------------------------------------------------------------------
# Locating keys in the file, for error messages

_HEADER = re.compile(r"^\s*\[(\[)?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"']+)\s*=")


class _Locator:
    """Maps (table path, key) to a line number of the TOML text.

    Table paths look like ``("target", 1)`` for the second ``[[target]]`` or
    ``("campaign",)``; keys of inline tables are found on their parent's line.
    """

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[tuple[Any, ...], str], int] = {}
        self.tables: dict[tuple[Any, ...], int] = {}
        counts: dict[str, int] = {}
        path: tuple[Any, ...] = ()
        for number, line in enumerate(text.splitlines(), start=1):
            header = _HEADER.match(line)
            if header:
                name = header.group(2).strip()
                if header.group(1):  # [[array]]
                    index = counts.get(name, -1) + 1
                    counts[name] = index
                    path = (*name.split("."), index)
                else:
                    parts = name.split(".")
                    # [target.set] after [[target]]: belongs to the last target
                    if parts[0] in counts:
                        path = (parts[0], counts[parts[0]], *parts[1:])
                    else:
                        path = tuple(parts)
                self.tables.setdefault(path, number)
                continue
            key = _KEY.match(line)
            if key:
                self.lines.setdefault((path, key.group(1).strip("\"'")), number)

    def line(self, path: tuple[Any, ...], key: str | None = None) -> int | None:
        if key is not None and (path, key) in self.lines:
            return self.lines[(path, key)]
        # an inline table: the key of its parent
        if key is not None and len(path) >= 1 and isinstance(path[-1], str):
            parent = self.lines.get((path[:-1], path[-1]))
            if parent:
                return parent
        return self.tables.get(path)


class _Reader:
    """Typed access to one table of the campaign with precise errors."""

    def __init__(self, data: dict[str, Any], path: tuple[Any, ...], ctx: _Context) -> None:
        self.data = data
        self.path = path
        self.ctx = ctx
        self.used: set[str] = set()

    def where(self, key: str | None = None) -> str:
        line = self.ctx.locator.line(self.path, key)
        table = _table_name(self.path)
        place = f"{self.ctx.source}:{line}" if line else self.ctx.source
        return f"{place}: {table}.{key}" if key else f"{place}: [{table}]"

    def error(self, key: str | None, message: str, hint: str | None = None) -> UsageError:
        return UsageError(f"{self.where(key)}: {message}", hint=hint)

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.data:
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(_type_name(k) for k in kinds)
            raise self.error(key, f"expected {names}, got {_type_name(type(value))} {value!r}")
        return value

    def ints(self, key: str, default: tuple[int, ...], minimum: int = 1) -> tuple[int, ...]:
        value = self.get(key, (int, list), None)
        if value is None:
            return default
        items = value if isinstance(value, list) else [value]
        if not items:
            raise self.error(key, "must not be empty")
        for item in items:
            if not isinstance(item, int) or isinstance(item, bool):
                raise self.error(key, f"expected integers, got {item!r}")
            if item < minimum:
                raise self.error(key, f"{item} is less than {minimum}")
        return tuple(items)

    def choice(self, key: str, allowed: tuple[str, ...], default: str) -> str:
        value = self.get(key, str, default)
        if value not in allowed:
            raise self.error(key, f"{value!r} is not one of {', '.join(allowed)}")
        return str(value)

    def table(self, key: str) -> _Reader | None:
        value = self.get(key, dict, None)
        return None if value is None else _Reader(value, (*self.path, key), self.ctx)

    def path_value(self, key: str) -> Path | None:
        value = self.get(key, str, None)
        if value is None:
            return None
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.ctx.base / p)

    def finish(self, allowed: tuple[str, ...] | None = None) -> None:
        """Refuse keys nobody read, naming the nearest valid one."""
        valid = allowed if allowed is not None else tuple(sorted(self.used))
        for key in self.data:
            if key not in valid:
                close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
                raise self.error(
                    key,
                    f"unknown key {key!r}",
                    hint=f"did you mean {close[0]!r}?"
                    if close
                    else f"valid keys here: {', '.join(valid)}",
                )


@dataclass
class _Context:
    source: str
    base: Path
    locator: _Locator


def _type_name(t: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true/false",
        list: "a list",
        dict: "a table",
    }.get(t, t.__name__)


def _table_name(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


# --------------------------------------------------------------------------
# Parsing

_TARGET_KEYS = (
    "name",
    "directory",
    "dsn",
    "wal_directory",
    "tablespace",
    "index_tablespace",
    "pg_bin",
    "profile",
    "set",
    "initdb",
    "os_user",
)


def _target(r: _Reader) -> TargetSpec:
    name = r.get("name", str)
    if not name:
        raise r.error("name", "every target needs a name", hint='add name = "local-ssd"')
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name):
        raise r.error("name", f"{name!r}: use letters, digits, '.', '_' and '-' only")
    directory = r.path_value("directory")
    dsn = r.get("dsn", str)
    if directory is None and dsn is None:
        raise r.error(
            None,
            f"target {name!r} needs a directory or a dsn",
            hint="directory = the storage under test (pgrig creates a cluster there); "
            "dsn = an existing server (a directory beside it is where probes run)",
        )
    settings: dict[str, str] = {}
    set_table = r.table("set")
    if set_table is not None:
        for key, value in set_table.data.items():
            if isinstance(value, bool):
                settings[key] = "on" if value else "off"
            elif isinstance(value, int | float | str):
                settings[key] = str(value)
            else:
                raise set_table.error(key, f"expected a value, got {_type_name(type(value))}")
    initdb = InitdbSpec()
    init_table = r.table("initdb")
    if init_table is not None:
        seg = init_table.get("wal_segsize", int)
        if seg is not None and (seg < 1 or seg > 1024 or seg & (seg - 1)):
            raise init_table.error("wal_segsize", f"{seg}: a power of 2 from 1 to 1024 (MB)")
        initdb = InitdbSpec(
            encoding=init_table.get("encoding", str, "UTF8"),
            locale=init_table.get("locale", str, "C"),
            wal_segsize_mb=seg,
            data_checksums=init_table.get("data_checksums", bool, False),
        )
        init_table.finish(("encoding", "locale", "wal_segsize", "data_checksums"))

    def ts(key: str) -> str | None:
        value = r.get(key, str)
        if value is None or "/" not in value:
            return value  # an existing tablespace's name
        return str(r.path_value(key))

    spec = TargetSpec(
        name=name,
        directory=directory,
        dsn=dsn,
        wal_directory=r.path_value("wal_directory"),
        tablespace=ts("tablespace"),
        index_tablespace=ts("index_tablespace"),
        pg_bin=r.get("pg_bin", str),
        profile=r.get("profile", str, "oltp"),
        settings=settings,
        initdb=initdb,
        os_user=r.get("os_user", str),
    )
    r.finish(_TARGET_KEYS)
    if dsn is not None and (settings or spec.wal_directory or init_table is not None):
        raise r.error(
            None,
            f"target {name!r} is an existing server (dsn): set, initdb and "
            "wal_directory apply only to a cluster pgrig creates",
        )
    return spec


def _probes(r: _Reader) -> ProbeSpec:
    timing = r.get("timing", (int, bool), 3)
    fsync = r.get("fsync", (int, bool), 2)
    fio_value = r.get("fio", (dict, bool), True)
    fio: FioPlan | None = FioPlan()
    if fio_value is False:
        fio = None
    elif isinstance(fio_value, dict):
        f = _Reader(fio_value, (*r.path, "fio"), r.ctx)
        patterns = tuple(f.get("patterns", list, list(FIO_PATTERNS)))
        for p in patterns:
            if p not in FIO_PATTERNS:
                raise f.error("patterns", f"{p!r} is not one of {', '.join(FIO_PATTERNS)}")
        size = f.get("size", str, "256M")
        try:
            parse_size(size)
        except UsageError as exc:
            raise f.error("size", exc.message, exc.hint) from exc
        fio = FioPlan(
            patterns=patterns,
            numjobs=f.ints("numjobs", (1,))[0],
            iodepth=f.ints("iodepth", (8,))[0],
            size=size,
            runtime_s=f.ints("runtime", (10,))[0],
            direct=f.get("direct", bool, True),
            ioengine=f.get("ioengine", str, "libaio"),
        )
        f.finish(("patterns", "numjobs", "iodepth", "size", "runtime", "direct", "ioengine"))
    r.finish(("timing", "fsync", "fio"))

    def seconds(value: int | bool, key: str) -> int | None:
        if value is False:
            return None
        if value is True:
            return 3 if key == "timing" else 2
        if value < 1:
            raise r.error(key, f"{value}: at least 1 second, or false to skip")
        return int(value)

    return ProbeSpec(timing_s=seconds(timing, "timing"), fsync_s=seconds(fsync, "fsync"), fio=fio)


def _open_loop(r: _Reader) -> tuple[float | None, float | None]:
    rate = r.get("rate", float)
    limit = r.get("latency_limit_ms", float)
    if rate is not None and rate <= 0:
        raise r.error("rate", "must be a positive number of transactions per second")
    if limit is not None and rate is None:
        raise r.error("latency_limit_ms", "needs rate (an open-loop run at a fixed rate)")
    return rate, limit


def _threads(r: _Reader, clients: tuple[int, ...]) -> int | None:
    threads = r.get("threads", int)
    if threads is not None:
        if threads < 1:
            raise r.error("threads", f"{threads}: at least 1")
        if threads > max(clients):
            raise r.error(
                "threads",
                f"{threads} is greater than the largest client count {max(clients)}",
                hint="pgbench needs at least one client per thread "
                "(runs with fewer clients use one thread per client)",
            )
    return threads


def _tpcb(r: _Reader) -> TpcbSpec:
    clients = r.ints("clients", (1, 2, 4, 8))
    rate, limit = _open_loop(r)
    modes = tuple(r.get("modes", list, list(TPCB_MODES)))
    for m in modes:
        if m not in TPCB_MODES:
            raise r.error("modes", f"{m!r} is not one of {', '.join(TPCB_MODES)}")
    fillfactor = r.get("fillfactor", int)
    if fillfactor is not None and not 10 <= fillfactor <= 100:
        raise r.error("fillfactor", f"{fillfactor}: between 10 and 100")
    spec = TpcbSpec(
        name=r.get("name", str, "tpcb"),
        scales=r.ints("scales", (10,)),
        modes=modes,
        clients=clients,
        threads=_threads(r, clients),
        durations=r.ints("duration", (30,)),
        query_mode=r.choice("query_mode", ("simple", "extended", "prepared"), "prepared"),
        generate=r.choice("generate", ("client", "server"), "client"),
        partitions=r.ints("partitions", (0,), minimum=0)[0],
        unlogged=r.get("unlogged", bool, False),
        fillfactor=fillfactor,
        count=r.get("count", bool, True),
        rate=rate,
        latency_limit_ms=limit,
    )
    r.finish(
        (
            "type",
            "name",
            "scales",
            "modes",
            "clients",
            "threads",
            "duration",
            "query_mode",
            "generate",
            "partitions",
            "unlogged",
            "fillfactor",
            "count",
            "rate",
            "latency_limit_ms",
        )
    )
    return spec


def _custom(r: _Reader) -> CustomSpec:
    name = r.get("name", str)
    if not name:
        raise r.error("name", "a custom workload needs a name", hint='add name = "login"')
    raw_scripts = r.get("scripts", list)
    if not raw_scripts:
        raise r.error(
            "scripts",
            "a custom workload needs at least one pgbench script",
            hint='scripts = [{ file = "login.sql", weight = 1 }]',
        )
    scripts = []
    for item in raw_scripts:
        if isinstance(item, str):
            item = {"file": item}
        if not isinstance(item, dict):
            raise r.error("scripts", f"expected a file name or {{ file, weight }}, got {item!r}")
        s = _Reader(item, (*r.path, "scripts"), r.ctx)
        path = s.path_value("file")
        if path is None:
            raise r.error("scripts", "each script needs a file")
        if not path.is_file():
            raise r.error("scripts", f"script file {path} does not exist")
        weight = s.get("weight", int, 1)
        if weight < 0:
            raise r.error("scripts", f"weight {weight}: must be 0 or more")
        s.finish(("file", "weight"))
        scripts.append(ScriptSpec(path, weight))
    setup = []
    for item in r.get("setup", list, []):
        p = Path(item).expanduser()
        p = p if p.is_absolute() else r.ctx.base / p
        if not p.is_file():
            raise r.error("setup", f"setup file {p} does not exist")
        setup.append(p)
    defines = r.table("defines")
    clients = r.ints("clients", (1,))
    rate, limit = _open_loop(r)
    spec = CustomSpec(
        name=name,
        scripts=tuple(scripts),
        setup=tuple(setup),
        clients=clients,
        threads=_threads(r, clients),
        durations=r.ints("duration", (30,)),
        query_mode=r.choice("query_mode", ("simple", "extended", "prepared"), "prepared"),
        defines={k: str(v) for k, v in (defines.data.items() if defines else ())},
        rate=rate,
        latency_limit_ms=limit,
    )
    r.finish(
        (
            "type",
            "name",
            "scripts",
            "setup",
            "clients",
            "threads",
            "duration",
            "query_mode",
            "defines",
            "rate",
            "latency_limit_ms",
        )
    )
    return spec


def _durability(r: _Reader) -> DurabilitySpec:
    from pgrig.durability.model import METHODS

    spec = DurabilitySpec(
        name=r.get("name", str, "durability"),
        method=r.choice("method", tuple(METHODS), "immediate"),
        crashes=r.ints("crashes", (3,), minimum=1)[0],
        clients=r.ints("clients", (4,))[0],
        interval_s=r.get("interval", float, 5.0),
    )
    if spec.interval_s < 0.1:
        raise r.error("interval", f"{spec.interval_s}: at least 0.1 seconds of load per crash")
    r.finish(("type", "name", "method", "crashes", "clients", "interval"))
    return spec


def _tpcc(r: _Reader) -> TpccSpec:
    warehouses = r.ints("warehouses", (4,))[0]
    active = r.get("active", int)
    if active is not None and not 1 <= active <= warehouses:
        raise r.error("active", f"{active}: between 1 and the {warehouses} warehouses loaded")
    modes = tuple(r.get("modes", list, ["server", "client"]))
    for m in modes:
        if m not in ("server", "client"):
            raise r.error("modes", f"{m!r} is not one of server, client")
    connections = r.ints("connections", (4,))[0]
    spec = TpccSpec(
        name=r.get("name", str, "tpcc"),
        warehouses=warehouses,
        jobs=r.ints("jobs", (0,), minimum=0)[0],
        connections=connections,
        threads=_threads(r, (connections,)),
        duration_s=r.ints("duration", (60,))[0],
        modes=modes,
        active=active,
        isolation=r.choice(
            "isolation", ("read committed", "repeatable read", "serializable"), "read committed"
        ),
        max_tries=r.ints("max_tries", (10,))[0],
    )
    r.finish(
        (
            "type",
            "name",
            "warehouses",
            "jobs",
            "connections",
            "threads",
            "duration",
            "modes",
            "active",
            "isolation",
            "max_tries",
        )
    )
    return spec


def _policy(r: _Reader) -> tuple[str, str | None, RunPolicy]:
    name = r.get("name", str)
    if not name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name):
        raise r.error(
            "name",
            f"{name!r}: a campaign needs a name of letters, digits, . _ -",
            hint='name = "seed000-storage"',
        )
    repeat = r.get("repeat", (int, dict), 1)
    until, max_repeat, count = None, 10, 1
    if isinstance(repeat, dict):
        rr = _Reader(repeat, (*r.path, "repeat"), r.ctx)
        until = rr.get("until_ci_pct", float)
        if until is None or until <= 0:
            raise rr.error(
                "until_ci_pct",
                "give the wanted 95% confidence interval in %",
                hint="repeat = { until_ci_pct = 5, min = 3, max = 10 }",
            )
        count = rr.get("min", int, 3)
        max_repeat = rr.get("max", int, 10)
        if count < 2 or max_repeat < count:
            raise rr.error("min", "need 2 <= min <= max")
        rr.finish(("until_ci_pct", "min", "max"))
    elif repeat < 1:
        raise r.error("repeat", f"{repeat}: at least 1")
    else:
        count = repeat
    warmup = r.get("warmup", (int, str), 0)
    if isinstance(warmup, str) and warmup != "auto":
        raise r.error("warmup", f'{warmup!r}: seconds, or "auto" (until tps is steady)')
    if isinstance(warmup, int) and warmup < 0:
        raise r.error("warmup", f"{warmup}: 0 or more seconds")
    policy = RunPolicy(
        repeat=count,
        until_ci_pct=until,
        max_repeat=max_repeat,
        warmup=warmup,
        warmup_max_s=r.ints("warmup_max", (120,))[0],
        checkpoint=r.get("checkpoint", bool, True),
        reset=r.choice("reset", ("reuse", "restore"), "reuse"),
        interleave=r.get("interleave", bool, True),
        monitor=r.get("monitor", bool, True),
    )
    baseline = r.get("baseline", str)
    r.finish(
        (
            "name",
            "baseline",
            "repeat",
            "warmup",
            "warmup_max",
            "checkpoint",
            "reset",
            "interleave",
            "monitor",
        )
    )
    return name, baseline, policy


def parse(text: str, *, source: str, base: Path) -> Campaign:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(
            f"{source}: not valid TOML: {exc}", hint="see docs/campaigns.md for the format"
        ) from exc
    ctx = _Context(source=source, base=base, locator=_Locator(text))
    top = _Reader(data, (), ctx)
    campaign_table = top.table("campaign")
    if campaign_table is None:
        raise UsageError(
            f"{source}: no [campaign] table", hint='start the file with [campaign] and name = "..."'
        )
    name, baseline, policy = _policy(campaign_table)

    targets = []
    raw_targets = top.get("target", list, [])
    if not raw_targets:
        raise UsageError(
            f"{source}: no [[target]]",
            hint='add [[target]] with name = "..." and directory = "/data01"',
        )
    seen: dict[str, int] = {}
    for i, item in enumerate(raw_targets):
        r = _Reader(item, ("target", i), ctx)
        spec = _target(r)
        if spec.name in seen:
            raise r.error(
                "name",
                f"target name {spec.name!r} is used twice (also target {seen[spec.name] + 1})",
                hint="give each target its own name",
            )
        seen[spec.name] = i
        targets.append(spec)

    probes: ProbeSpec | None = ProbeSpec()
    probe_value = top.get("probes", (dict, bool), True)
    if probe_value is False:
        probes = None
    elif isinstance(probe_value, dict):
        probes = _probes(_Reader(probe_value, ("probes",), ctx))

    workloads: list[WorkloadSpec] = []
    for i, item in enumerate(top.get("workload", list, [])):
        r = _Reader(item, ("workload", i), ctx)
        kind = r.choice("type", ("tpcb", "custom", "tpcc", "durability"), "tpcb")
        workload: WorkloadSpec
        if kind == "tpcb":
            workload = _tpcb(r)
        elif kind == "custom":
            workload = _custom(r)
        elif kind == "tpcc":
            workload = _tpcc(r)
        else:
            workload = _durability(r)
        workloads.append(workload)
    names = [w.name for w in workloads]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise UsageError(
            f"{source}: workload name {sorted(dupes)[0]!r} is used twice",
            hint="give each [[workload]] its own name",
        )
    top.finish(("campaign", "target", "probes", "workload"))

    if baseline is not None and baseline not in seen:
        raise campaign_table.error(
            "baseline",
            f"baseline target {baseline!r} is not in the campaign",
            hint=f"targets: {', '.join(seen)}",
        )
    return Campaign(
        name=name,
        source=source,
        targets=tuple(targets),
        probes=probes,
        workloads=tuple(workloads),
        policy=policy,
        baseline=baseline or targets[0].name,
    )


def load(path: Path) -> Campaign:
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read campaign file {path}: {exc.strerror}") from exc
    return parse(text, source=str(path), base=path.resolve().parent)
