"""The ``type = "tpcb"`` campaign table (docs/tpcb.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pgrig.cluster.loadwal import LOAD_WAL
from pgrig.schema import (
    Checked,
    Schema,
    Table,
    choice,
    choices,
    custom,
    flag,
    integer,
    integers,
    number,
    text,
)
from pgrig.tools.pgbench.init import ROWS_PER_SCALE

TPCB_MODES = ("select-only", "read-write")
QUERY_MODES = ("simple", "extended", "prepared")
GENERATE = ("client", "server", "parallel")


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
    load_jobs: int | None = None  # generate = "parallel": connections; None: CPUs
    load_wal: str = "auto"  # generate = "parallel": restart pgrig's server for the load
    partitions: int = 0
    unlogged: bool = False
    fillfactor: int | None = None
    count: bool = True
    reuse: bool = False  # reuse tables an earlier study loaded the same way
    count_workers: int = 0  # max_parallel_workers_per_gather for count(*) (seed 000: 16)
    rate: float | None = None  # open loop: pgbench -R (transactions/s in total)
    latency_limit_ms: float | None = None  # pgbench -L, with rate
    rates: tuple[float, ...] = ()  # a sweep of offered rates: one open-loop run each

    kind: ClassVar[str] = "tpcb"


# -- keys several pgbench workloads share --------------------------------------


def _threads(t: Table, key: str, threads: int | None) -> int | None:
    if threads is not None and threads < 1:
        raise t.error(key, f"{threads}: at least 1")
    return threads


def _rate(t: Table, key: str, rate: float | None) -> float | None:
    if rate is not None and rate <= 0:
        raise t.error(key, "must be a positive number of transactions per second")
    return rate


THREADS = custom(
    "threads", None, "pgbench `-j`", _threads, kind=int, shown_default="min(clients, CPUs)"
)
QUERY_MODE = choice("query_mode", QUERY_MODES, "prepared", "pgbench `-M`")
RATE = custom(
    "rate", None, "open loop: pgbench `-R`, transactions per second in total", _rate, kind=float
)


def _rates(t: Table, key: str, values: list[Any] | None) -> tuple[float, ...]:
    if values is None:
        return ()
    if not values or not all(isinstance(v, int | float) and v > 0 for v in values):
        raise t.error(key, f"{values!r}: a list of positive transactions per second",
                      hint="rates = [200, 400, 800]")  # fmt: skip
    if t.data.get("rate") is not None:
        raise t.error(key, "rate and rates together: one offered rate, or a sweep of them",
                      hint="keep one of the two")  # fmt: skip
    return tuple(sorted({float(v) for v in values}))


RATES = custom(
    "rates", None, "a sweep of offered rates (pgbench `-R`, transactions per second in total): "
    "each point runs once per rate, open loop; the report draws latency against the offered "
    "rate per target and, with the campaign's `latency_target`, the highest throughput "
    "within it (docs/report.md)", _rates, kind=list, shown_default="[]",
)  # fmt: skip
LATENCY_LIMIT = number(
    "latency_limit_ms", None, "pgbench `-L` (with `rate`): late and skipped transactions"
)


def check_pgbench(t: Table, clients: tuple[int, ...], threads: int | None,
                  rate: float | None, limit: float | None) -> None:  # fmt: skip
    """Checks across keys, named on the key that must change."""
    if threads is not None and threads > max(clients):
        raise t.error(
            "threads",
            f"{threads} is greater than the largest client count {max(clients)}",
            hint="pgbench needs at least one client per thread "
            "(runs with fewer clients use one thread per client)",
        )
    if limit is not None and rate is None and not t.data.get("rates"):
        raise t.error("latency_limit_ms", "needs rate (an open-loop run at a fixed rate)")


def _fillfactor(t: Table, key: str, value: int | None) -> int | None:
    if value is not None and not 10 <= value <= 100:
        raise t.error(key, f"{value}: between 10 and 100")
    return value


SCHEMA = Schema(
    'type = "tpcb"',
    text("name", "tpcb", "the workload's name in step keys and the report"),
    integers("scales", (10,), "pgbench scale factors (100,000 accounts, about 16 MB each)"),
    choices("modes", TPCB_MODES, TPCB_MODES, "built-in scripts to run"),
    integers("clients", (1, 2, 4, 8), "client counts (`-c`)"),
    THREADS,
    integers("duration", (30,), "seconds per run (`-T`); a list sweeps durations",
             field="durations"),
    QUERY_MODE,
    choice("generate", GENERATE, "client",
           "`pgbench -i` data generation, or `parallel`: pgrig's loader, the same rows "
           "in `load_jobs` connections (docs/tpcb.md)"),
    integer("load_jobs", None, "connections of the `parallel` loader", shown_default="CPUs"),
    choice("load_wal", LOAD_WAL, "auto",
           "the `parallel` loader on a cluster pgrig creates: `minimal` restarts it at "
           "`wal_level = minimal` for the load (the COPY and the key builds write no WAL) "
           "and back to the profile's settings before anything is measured; `auto`: so from "
           "about 300 MB of data (scale 19), where that pays for the two restarts; `profile`: "
           "never. A server pgrig did not create (`dsn`) is never restarted, nor a "
           "power-loss study's (docs/tpcb.md)"),
    integer("partitions", 0, "`pgbench -i --partitions`", minimum=0),
    flag("unlogged", False, "`pgbench -i --unlogged-tables` (seed 004)"),
    custom("fillfactor", None, "`pgbench -i --fillfactor`", _fillfactor, kind=int),
    flag("reuse", False, "reuse the tables an earlier study loaded at this scale with the same "
         "layout, loader, PostgreSQL version and settings, instead of loading again; "
         "works on a server pgrig did not create (`dsn`): a cluster pgrig creates is new "
         "in every study (docs/tpcb.md)"),
    flag("count", True, "time `count(*)` by index-only and by seq scan after the load"),
    integer("count_workers", 0, "parallel workers per gather for `count(*)` (seed 000: 16), "
            "at most the CPU count", minimum=0),
    RATE,
    RATES,
    LATENCY_LIMIT,
    also=("type",),
)  # fmt: skip


def parse(t: Table, read: Checked) -> TpcbSpec:
    spec = TpcbSpec(**(read.values | {k.attr: k.read(t, k.name, v) for k, v in read.owned}))
    if spec.load_jobs is not None and spec.generate != "parallel":
        raise t.error(
            "load_jobs", f"{spec.load_jobs}: only pgrig's loader takes it",
            hint='set generate = "parallel", or remove load_jobs',
        )  # fmt: skip
    if "load_wal" in t.data and spec.load_wal != "profile" and spec.generate != "parallel":
        raise t.error(
            "load_wal", f"{spec.load_wal}: only pgrig's loader takes it (pgbench -i always "
            "loads at the server's settings)",
            hint='set generate = "parallel", or remove load_wal',
        )  # fmt: skip
    rows = min(spec.scales) * ROWS_PER_SCALE
    if spec.partitions > rows:  # pgbench takes up to 2^31-1 and makes them all, empty
        raise t.error(
            "partitions", f"{spec.partitions:,}: more partitions than the {rows:,} rows of "
            f"scale {min(spec.scales)} (each costs about 11 ms to load, empty or not)",
            hint=f"at most {rows:,}; a few per CPU, or as many as the seed partitioned",
        )  # fmt: skip
    check_pgbench(t, spec.clients, spec.threads, spec.rate, spec.latency_limit_ms)
    return spec
