"""The result kinds several plug-ins record and the report's own tables read:
pgbench's (a TPC-B and a custom workload both run it), the data a workload
loads, and the relations' sizes. The report selects records by these objects
(``ResultKind.holds``), never by a kind's name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgrig.document import fmt
from pgrig.results import (
    CountResult,
    PgbenchInit,
    PgbenchRun,
    RelationSizes,
    ResultKind,
    SetupResult,
)
from pgrig.units import size_text

# The workload of a pgbench record that names none (``params["workload"]``): those
# recorded before records named it are of pgbench's built-in TPC-B. The report
# reads it here and names no workload itself.
BUILTIN = "tpcb"


def _run_columns(res: PgbenchRun) -> dict[str, Any]:
    row: dict[str, Any] = {
        "tps": res.tps,
        "qps": res.qps,
        "latency_avg_ms": res.latency_avg_ms,
        "failed": res.failed,
    }
    if res.latency is not None:
        row |= {
            "latency_p50_ms": res.latency.p50_ms,
            "latency_p95_ms": res.latency.p95_ms,
            "latency_p99_ms": res.latency.p99_ms,
            "latency_max_ms": res.latency.max_ms,
        }
        if res.latency.p90_ms is not None:  # runs recorded before pgrig kept it: empty
            row["latency_p90_ms"] = res.latency.p90_ms
    return row


PGBENCH_RUN = ResultKind(
    "pgbench_run",
    PgbenchRun,
    # fmt.rate: a 1.46 tps sequential scan of seed pg18-aio's said "1 tps"
    headline=lambda r: f": {fmt.rate(r.tps)} tps",
    columns=_run_columns,
    metric=lambda r: float(r.tps),
)


def _init_headline(r: PgbenchInit) -> str:
    """': 8.0 s in all, generating the rows 3.4 s (290,698 rows/s)': the rate is
    over the generate step only."""
    text = f": {r.elapsed_s:.1f} s in all"
    if r.generate_s is not None:
        text += f", generating the rows {r.generate_s:.1f} s ({r.rows_per_s:,.0f} rows/s)"
    if r.wal_level is not None:
        text += f", at wal_level={r.wal_level}"
    return text


def init_again(params: Mapping[str, object], _result: object) -> list[str]:
    """``pgbench -i`` as it made this data (the options that change what it makes)."""
    argv = ["pgbench", "-i", "-s", str(params.get("scale", 1))]
    if params.get("generate") == "server":
        argv.append("--init-steps=dtGvp")
    if params.get("partitions"):
        argv.append(f"--partitions={params['partitions']}")
    if params.get("unlogged"):
        argv.append("--unlogged-tables")
    if params.get("fillfactor"):
        argv += ["-F", str(params["fillfactor"])]
    return argv


PGBENCH_INIT = ResultKind(
    "pgbench_init",
    PgbenchInit,
    headline=_init_headline,
    columns=lambda r: {"elapsed_s": r.elapsed_s, "rows_per_s": r.rows_per_s},
    rerun=init_again,
)
COUNT = ResultKind("count", CountResult, headline=lambda r: f": {r.execution_ms:,.0f} ms")

SQL_SETUP = ResultKind("sql_setup", SetupResult, columns=lambda r: {"elapsed_s": r.elapsed_s})


def _sizes_headline(r: RelationSizes) -> str:
    tables = sum(1 for x in r.relations if x.kind == "table")
    indexes = len(r.relations) - tables
    table_bytes, index_bytes = r.total("table"), r.total("index")
    return f": {tables} tables {size_text(table_bytes)}, {indexes} indexes {size_text(index_bytes)}"


RELATION_SIZES = ResultKind(
    "relation_sizes",
    RelationSizes,
    headline=_sizes_headline,
    columns=lambda r: {
        "table_bytes": r.total("table"),
        "index_bytes": r.total("index"),
        "database_bytes": r.database_bytes,
    },
)


# A remote target's measured run from its load hosts (pgrig.targets.loadhosts
# records it; the report's Load hosts section reads it).
@dataclass(frozen=True)
class LoadHost:
    """One load host's part of a measured run."""

    host: str
    tps: float
    transactions: int
    p50_ms: float | None  # from this host's own log
    p99_ms: float | None
    started_ms: float  # after the common start, this machine's clock
    offset_ms: float  # its clock minus this machine's
    offset_uncertainty_ms: float  # half the best ping's round trip
    cpu_busy_pct: float | None  # median over the run
    log_files: tuple[str, ...]  # its per-transaction logs, copied here
    figure: float | None = None  # the workload's own figure (``LoadHostsRun.figure_name``)
    # Read on the host once per study (older records: None): its pgbench's
    # ``--version``, its logical CPUs and the ``-j`` its pgbench ran with.
    pgbench: str | None = None
    cpus: int | None = None
    threads: int | None = None


@dataclass(frozen=True)
class LoadHostsRun:
    """A measured run from several load hosts: each host's figures and the merged ones."""

    server: str
    hosts: tuple[LoadHost, ...]
    tps: float  # the hosts' sum
    p50_ms: float | None  # from every host's log pooled (never from per-host percentiles)
    p99_ms: float | None
    samples: int
    start_spread_ms: float
    start_spread_uncertainty_ms: float
    client_bound: str | None = None  # the verdict rule's summary when a load host ran out of CPU
    figure_name: str | None = None  # a workload's figure per host besides tps (TPC-C: tpmC)
    figure: float | None = None  # its sum over the hosts
    server_version: str | None = None  # the server's PostgreSQL (older records: None)
    # A host whose share of the sum is not the others' (``imbalance``); None: none
    imbalance: str | None = None


def _hosts_headline(r: LoadHostsRun) -> str:
    return (
        f": {fmt.rate(r.tps)} tps from {len(r.hosts)} hosts, started within "
        f"{r.start_spread_ms:.2f} ms"
    )


LOAD_HOSTS = ResultKind("load_hosts", LoadHostsRun, headline=_hosts_headline)
