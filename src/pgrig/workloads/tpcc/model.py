"""Typed TPC-C results: what the loader, the driver and the checks hand to the store.

Registered in ``pgrig.results.RESULT_TYPES`` as ``tpcc_load``, ``tpcc_run`` and
``tpcc_check``; frozen, and round-tripped through JSON by ``results.to_dict`` /
``results.from_dict`` like every other result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgrig.results import ProgressPoint

MODES = ("server", "client")
ISOLATIONS = ("read committed", "repeatable read", "serializable")

# pgbench script order: the script number in pgbench's transaction log is the
# index in this tuple, so it must match the order of the -f options.
TRANSACTIONS = ("new_order", "payment", "order_status", "delivery", "stock_level")
LABELS = {
    "new_order": "New-Order",
    "payment": "Payment",
    "order_status": "Order-Status",
    "delivery": "Delivery",
    "stock_level": "Stock-Level",
}
# Clause 5.2.3: the minimum mix; New-Order takes the rest (45%).
WEIGHTS = {"new_order": 45, "payment": 43, "order_status": 4, "delivery": 4, "stock_level": 4}
# SQL statements of one transaction of each type as the client-side scripts
# (scripts/client/*.sql) send them, BEGIN and COMMIT included, averaged over the
# specification's random choices; the server-side functions run the same work
# in one round trip. New-Order: 4 + ol_cnt x 3 (item, stock, order_line) with
# ol_cnt uniform in 5..15 (clause 2.4.1.3), 1% rolled back on an unused last item
# (2 statements fewer). Payment and Order-Status: 60% find the customer by name
# first (clauses 2.5.1.2, 2.6.1.2). Delivery: 10 districts x (find the oldest
# new order + 5 statements), every district having one undelivered order.
STATEMENTS = {
    "new_order": 2 + 4 + 10 * 3 - 0.01 * 2,
    "payment": 2 + 4 + 0.6,
    "order_status": 2 + 3 + 0.6,
    "delivery": 2 + 10 * 6,
    "stock_level": 2 + 2,
}


@dataclass(frozen=True)
class TpccLoad:
    """One population of the nine tables (clause 4.3.3)."""

    warehouses: int
    jobs: int  # parallel connections
    rows: int  # rows in the nine tables after the load
    database_bytes: int  # tables + indexes of the tpcc schema
    elapsed_s: float  # from the first row to the end of VACUUM ANALYZE
    rows_per_s: float
    mb_per_s: float  # database_bytes / elapsed_s, in MB (10^6 bytes) per second
    phases: dict[str, float] = field(default_factory=dict)  # generate/index/vacuum -> s
    per_warehouse_s: dict[str, float] = field(default_factory=dict)  # "w" -> s to finish it
    table_rows: dict[str, int] = field(default_factory=dict)
    c_last_load: int = 0  # the run-time constant C of clause 2.1.6 used for C_LAST
    # The wal_level pgrig restarted its server at for the copies and index builds
    # (minimal, then back to the profile's); None: loaded at the server's own.
    wal_level: str | None = None


@dataclass(frozen=True)
class TxnStats:
    """One transaction type of a run, from pgbench's per-script report and log."""

    name: str  # a key of TRANSACTIONS
    weight: int
    transactions: int  # completed, including New-Order's expected rollbacks
    failed: int
    retried: int  # transactions that needed more than one try
    latency_avg_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    samples: int = 0  # logged transactions behind the percentiles


@dataclass(frozen=True)
class TpmPoint:
    t_s: float  # end of the interval, from the start of the run
    tpmc: float
    tpm_total: float


@dataclass(frozen=True)
class TpccRun:
    """One timed run of the five transactions."""

    mode: str  # server (PL/pgSQL functions) | client (one statement per round trip)
    warehouses: int  # loaded
    active: int  # warehouses the terminals pick from (the first K)
    connections: int
    threads: int
    duration_s: float
    isolation: str
    transactions: int  # completed, all types
    failed: int
    retried: int
    retries: int  # total number of retries
    serialization_failures: int
    deadlock_failures: int
    tpmc: float  # New-Order transactions per minute
    tpm_total: float  # all transactions per minute
    tps: float
    rollbacks: int  # New-Order's expected 1% rollbacks, counted as completed (clause 2.4.2.3)
    latency_avg_ms: float
    types: tuple[TxnStats, ...] = ()
    timeline: tuple[TpmPoint, ...] = ()
    sampling_rate: float = 1.0
    pgbench_version: str = ""
    loaded_bytes: int | None = None  # tables and indexes right after the load
    active_bytes: int | None = None  # the active warehouses' share of it (active_share)
    # pgbench -P, one point per second: the monitor aligns its samples (and the
    # report's TPS-and-checkpoints figure) on it.
    progress: tuple[ProgressPoint, ...] = ()
    # The types' percentiles: nearest rank from an HdrHistogram at this many
    # significant digits; None: exact, from every sample sorted (runs recorded
    # before pgrig kept histograms).
    latency_digits: int | None = None
    # pgbench's command line (the first load host's when several ran); () in
    # records made before pgrig kept it.
    argv: tuple[str, ...] = ()

    @property
    def statements_per_txn(self) -> float | None:
        """SQL statements per transaction over the mix this run completed
        (``STATEMENTS`` weighted by each type's transactions); None: no types."""
        done = [(t.transactions, STATEMENTS[t.name]) for t in self.types if t.name in STATEMENTS]
        total = sum(n for n, _ in done)
        return sum(n * k for n, k in done) / total if total else None

    @property
    def qps(self) -> float | None:
        """Queries per second, as the seeds derive it: tps x statements per transaction."""
        per = self.statements_per_txn
        return self.tps * per if per is not None else None

    def stats(self, name: str) -> TxnStats | None:
        return next((t for t in self.types if t.name == name), None)


def active_share(loaded_bytes: int, active: int, warehouses: int) -> int:
    """The loaded bytes of the first ``active`` of ``warehouses``: every table but
    item grows with the warehouses, and item (100,000 rows, about 10 MB) is
    counted pro rata too - seed 003's "12 TB total, 1.2 TB active"."""
    return loaded_bytes * active // max(1, warehouses)


@dataclass(frozen=True)
class Condition:
    """One consistency condition of clause 3.3.2."""

    number: int
    title: str
    passed: bool
    offending: int  # rows (warehouses, districts, orders, customers) that break it
    checked: int  # rows examined
    skipped: str | None = None  # why it was not evaluated (e.g. 11 after a run)


@dataclass(frozen=True)
class TpccCheck:
    warehouses: int
    conditions: tuple[Condition, ...]
    elapsed_s: float

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.conditions)

    @property
    def failures(self) -> tuple[Condition, ...]:
        return tuple(c for c in self.conditions if not c.passed)
