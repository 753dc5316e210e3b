"""Populate the TPC-C tables from parallel connections, in binary COPY.

Order of business: refuse what cannot work (warehouses < 1, more jobs than
connections, an existing schema without ``replace``); create the schema and
functions; generate the rows in numpy (``generate``) and send them in binary
COPY, one unit per table - or, with more connections than the big tables can
keep busy, per range of warehouses of a big table. A unit that holds a whole
table truncates it and copies with ``FREEZE`` in the same transaction: its rows
are frozen and its pages all-visible from the start (PostgreSQL 14 and later),
so it needs ANALYZE only; a table loaded in ranges needs VACUUM. Then build the
indexes (in parallel, with the maintenance workers that fill the cores), turn them into
primary keys, analyze, and write the ``tpcc.meta`` row last, so that a load
that did not finish is never taken for one that did.

Given the cluster pgrig created, the copies and index builds run at
``wal_level = minimal`` (``pgrig.cluster.loadwal``): a whole table truncated
and copied in one transaction, and every index build, then write no WAL. The
two restarts are phases of the load, counted in its time.
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from pgrig.cluster import loadwal
from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.workloads.parallel import Unit, build_workers, load_settings, run_parallel
from pgrig.workloads.tpcc import TABLES, sqlfiles
from pgrig.workloads.tpcc.model import TpccLoad

__all__ = ["Unit", "load", "run_parallel"]

MB = 1_000_000
# Tables and indexes of one warehouse: 118 MB measured (bench/tpcc.py, PostgreSQL 15).
DATA_BYTES_PER_WAREHOUSE = 120 * MB
BIG_TABLES = ("stock", "customer", "order_line")  # split in warehouse ranges past 3 jobs
FREEZE_MAPS_FROM = 140000  # COPY FREEZE sets the visibility map
if TYPE_CHECKING:
    from pgrig.workloads import copybin

    Blocks = Callable[[copybin.Generator, int], Iterator[bytes]]

Progress = Callable[[str], None]


def timeout_for(warehouses: int) -> float:
    """statement_timeout of a call over the whole data (a load's statement, a
    check, a VACUUM, a copy of the database): 60 s per warehouse on top of 10
    minutes - about 50 times what a check took per warehouse on a loaded 2-core VM."""
    return 600.0 + 60.0 * warehouses


def schema_exists(db: psycopg.Connection) -> bool:
    row = db.execute("SELECT to_regnamespace('tpcc') IS NOT NULL").fetchone()
    return bool(row and row[0])


def free_connections(db: psycopg.Connection) -> int:
    """Connections still available to a non-superuser: max_connections minus the
    reserved ones minus the backends already connected."""
    row = db.execute(sqlfiles.sql("free_connections", db.info.server_version)).fetchone()
    assert row is not None
    return int(row[0])


def check_connections(db: psycopg.Connection, wanted: int, option: str) -> None:
    free = free_connections(db)
    if wanted > free:
        raise UsageError(
            f"{option} {wanted}: the server has only {free} free connections "
            "(max_connections minus reserved ones minus those in use)",
            hint=f"lower {option} to {max(free, 1)} or less, or raise max_connections "
            "(--set max_connections=N on a pgrig cluster)",
        )


class Timings:
    """Seconds each step took, summed over the connections (thread-safe)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - t0


def table_indexes() -> dict[str, list[str]]:
    """indexes.sql's statements by the table they index."""
    by_table: dict[str, list[str]] = {}
    for statement in sqlfiles.statements("indexes"):
        m = re.search(r" ON tpcc\.(\w+) ", statement)
        assert m is not None, statement
        by_table.setdefault(m.group(1), []).append(statement)
    return by_table


def _copy(table: str, first: int, last: int, blocks: Blocks, whole: bool, timings: Timings) -> Unit:
    """COPY warehouses ``first``..``last`` of ``table``. A ``whole`` table is
    truncated first in the same transaction - which is what makes FREEZE valid -
    analyzed in it while its pages are in memory, and indexed after the commit:
    its indexes build while other connections still copy."""

    def run(db: psycopg.Connection) -> None:
        from pgrig.workloads import copybin

        g = copybin.Generator()
        ident = sql.Identifier("tpcc", table)
        options = sql.SQL("FORMAT binary, FREEZE" if whole else "FORMAT binary")
        with db.transaction():
            if whole:
                db.execute(sql.SQL("TRUNCATE {}").format(ident))
            copy = sql.SQL("COPY {} FROM STDIN ({})").format(ident, options)
            with timings.step("copy"), db.cursor().copy(copy) as out:
                out.write(copybin.COPY_HEADER)
                for w in range(first, last + 1):
                    for block in blocks(g, w):
                        out.write(block)
                out.write(copybin.COPY_TRAILER)
            if whole:
                with timings.step("analyze"):
                    db.execute(sql.SQL("ANALYZE {}").format(ident))
        if whole:
            with timings.step("index"):
                for statement in table_indexes().get(table, []):
                    db.execute(statement)

    return Unit(f"{table} {first}-{last}", run=run)


@dataclass(frozen=True)
class Copies:
    """A load's COPY units, slowest first, the warehouses each one fills, the
    tables loaded whole (frozen, analyzed and indexed by their unit), and the
    seconds each step takes, which the units and the steps after them add to."""

    units: tuple[Unit, ...]
    spans: Mapping[str, range]  # a unit's label: its warehouses
    whole: frozenset[str]
    timings: Timings


def copy_units(warehouses: int, jobs: int, c_last: int, seed: int) -> Copies:
    """The COPY units of ``warehouses`` for ``jobs`` connections."""
    # The rows' generators (numpy) imported when a load is planned, not with
    # this module: the registry imports it in every pgrig process (docs/bench.md,
    # "Starting a pgrig process").
    from pgrig.workloads.tpcc import generate

    now = datetime.now()
    blocks: dict[str, Blocks] = {
        "order_line": lambda g, w: iter((generate.order_lines(g, w, seed, now),)),
        "stock": generate.stock,
        "customer": lambda g, w: iter((generate.customers(g, w, c_last, now),)),
        "history": lambda g, w: iter((generate.history(g, w, now),)),
        "orders": lambda g, w: iter((generate.orders(g, w, seed, now),)),
        "item": lambda g, w: iter((generate.items(g),) if w == 1 else ()),
        "new_order": lambda _g, w: iter((generate.new_orders(w),)),
        "district": lambda g, w: iter((generate.districts(g, w, w),)),
        "warehouse": lambda g, w: iter((generate.warehouses(g, w, w),)),
    }
    # Past three connections, the big tables load in warehouse ranges: more
    # parallel, but not frozen (VACUUM after) - see docs/tpcc.md.
    ranges = max(1, min(warehouses, -(-jobs // len(BIG_TABLES))))
    timings = Timings()
    units: list[Unit] = []
    spans: dict[str, range] = {}
    whole: set[str] = set()
    for table, make in blocks.items():
        parts = ranges if table in BIG_TABLES else 1
        size = -(-warehouses // parts)
        for first in range(1, warehouses + 1, size):
            last = min(warehouses, first + size - 1)
            units.append(_copy(table, first, last, make, parts == 1, timings))
            spans[units[-1].label] = range(first, last + 1)
        if parts == 1:
            whole.add(table)
    return Copies(tuple(units), spans, frozenset(whole), timings)


def load(
    conn: Conn,
    warehouses: int,
    *,
    jobs: int = 2,
    replace: bool = False,
    on_progress: Progress | None = None,
    minimal_wal: loadwal.Restartable | None = None,
) -> TpccLoad:
    """Load ``warehouses``; ``minimal_wal``: the cluster (pgrig's own) to restart
    at ``wal_level = minimal`` for the copies and index builds; None: load at the
    server's settings."""
    _check_sizes(warehouses, jobs)
    say = on_progress or (lambda _msg: None)
    c_last = random.randint(0, 255)
    copies = copy_units(warehouses, jobs, c_last, random.getrandbits(63))
    with conn.connect() as db:
        if schema_exists(db) and not replace:
            raise UsageError(
                "the database already holds a tpcc schema",
                hint="pass --yes to drop it and load again, or use another database",
            )
        jobs = min(jobs, len(copies.units))
        check_connections(db, jobs + 1, "--jobs")
        db.execute(sqlfiles.sql("schema"))
        db.execute(sqlfiles.sql("functions", db.info.server_version))
        maps = db.info.server_version >= FREEZE_MAPS_FROM
        superuser = db.execute("SELECT current_setting('is_superuser')").fetchone() == ("on",)
        version = db.info.server_version
    # Each connection builds its tables' indexes while the others still copy: a
    # build gets the workers that fill the cores beside them - none when every
    # connection is busy. 8 warehouses, 2 connections, 4 rounds alternated
    # (2026-11-26, load average 0.2-1.4): 3.93 s with none, 4.22 s with one,
    # 4.37 s with two (docs/bench.md).
    setup = load_settings(
        version,
        timeout_s=timeout_for(warehouses),
        workers=build_workers(jobs, jobs),
        superuser=superuser,
    )
    pool = _Pool(conn, jobs, setup)
    t0 = time.monotonic()
    restarts: dict[str, float] = {}
    with loadwal.minimal_wal(minimal_wal, restarts) if minimal_wal else contextlib.nullcontext():
        per_warehouse = _run_copies(pool, copies, say, t0)
        t_copied = time.monotonic()
        _index_and_vacuum(pool, copies, maps, say)
    elapsed = time.monotonic() - t0
    phases = _phases(restarts, t0, t_copied, copies.timings)
    with conn.connect() as db:
        # Measured before the meta row (8 kB) so that the runs can tell what they used.
        size = schema_bytes(db)
        db.execute(
            "INSERT INTO tpcc.meta (warehouses, c_last_load, c_id, ol_i_id, load_seconds,"
            " load_bytes) VALUES (%s, %s, %s, %s, %s, %s)",
            (warehouses, c_last, random.randint(0, 1023), random.randint(0, 8191), elapsed, size),
        )
        table_rows = {name: int(n) for name, n in db.execute(sqlfiles.sql("table_rows")).fetchall()}
        t_checkpoint = time.monotonic()
        db.execute(setup[0])
        db.execute("CHECKPOINT")
        phases["checkpoint (not in elapsed)"] = round(time.monotonic() - t_checkpoint, 3)
    rows = sum(table_rows.values())
    return TpccLoad(
        warehouses=warehouses,
        jobs=jobs,
        rows=rows,
        database_bytes=size,
        elapsed_s=round(elapsed, 3),
        rows_per_s=rows / elapsed,
        mb_per_s=size / MB / elapsed,
        phases=phases,
        per_warehouse_s=per_warehouse,
        table_rows=table_rows,
        c_last_load=c_last,
        wal_level=loadwal.MINIMAL if minimal_wal is not None else None,
    )


def _check_sizes(warehouses: int, jobs: int) -> None:
    if warehouses < 1:
        raise UsageError(
            f"--warehouses {warehouses}: must be at least 1",
            hint="TPC-C scales by warehouse: 1 is about 100 MB of data",
        )
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: must be at least 1")


def _phases(
    restarts: dict[str, float], t0: float, t_copied: float, timings: Timings
) -> dict[str, float]:
    """Wall-clock times first (up to now); then the seconds per step summed over
    the connections, which overlap (a table's index builds while others copy)."""
    return {
        **{k: v for k, v in restarts.items() if k == loadwal.RESTART_MINIMAL},
        "copy, analyze and index whole tables": round(
            t_copied - t0 - restarts.get(loadwal.RESTART_MINIMAL, 0.0), 3
        ),
        "the rest (ranges, vacuum, keys)": round(
            time.monotonic() - t_copied - restarts.get(loadwal.RESTART_PROFILE, 0.0), 3
        ),
        **{k: v for k, v in restarts.items() if k == loadwal.RESTART_PROFILE},
        **{f"{k} (connection-s)": round(v, 3) for k, v in timings.seconds.items()},
    }


@dataclass(frozen=True)
class _Pool:
    """The load's connections: ``jobs`` of them to ``conn``, each set up with ``setup``."""

    conn: Conn
    jobs: int
    setup: tuple[str, ...]

    def run(self, units: Sequence[Unit], on_done: Callable[[Unit], None] | None = None) -> None:
        run_parallel(self.conn, self.jobs, units, on_done, what="TPC-C load", setup=self.setup)


def _run_copies(pool: _Pool, copies: Copies, say: Progress, t0: float) -> dict[str, float]:
    """The copies; returns when each warehouse was complete (seconds after ``t0``)."""
    remaining = Counter(w for span in copies.spans.values() for w in span)  # units unfinished
    per_warehouse: dict[str, float] = {}

    def done(unit: Unit) -> None:
        say(f"{unit.label} loaded")
        for w in copies.spans[unit.label]:
            remaining[w] -= 1
            if remaining[w] == 0:
                per_warehouse[str(w)] = round(time.monotonic() - t0, 3)

    pool.run(copies.units, done)
    return per_warehouse


def _index_and_vacuum(pool: _Pool, copies: Copies, maps: bool, say: Progress) -> None:
    """After the copies: the indexes of the tables loaded in ranges, VACUUM for
    them or for every table where FREEZE does not set the visibility map (not
    ``maps``), then the primary keys."""
    vacuum = [t for t in TABLES if t not in copies.whole or not maps]
    later = [t for t in TABLES if t not in copies.whole]
    if later or vacuum:
        say("building indexes, vacuum")
    indexes = table_indexes()
    timings = copies.timings

    def finish(table: str) -> Callable[[psycopg.Connection], None]:
        def run(db: psycopg.Connection) -> None:
            if table in later:
                with timings.step("index"):
                    for statement in indexes.get(table, []):
                        db.execute(statement)
            if table in vacuum:
                with timings.step("vacuum analyze"):
                    db.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier("tpcc", table)))

        return run

    pool.run([Unit(t, run=finish(t)) for t in TABLES if t in later or t in vacuum])
    with pool.conn.connect() as db:
        db.execute(sqlfiles.sql("keys"))


def schema_bytes(db: psycopg.Connection) -> int:
    """Tables, indexes and TOAST of the tpcc schema."""
    row = db.execute(
        "SELECT coalesce(sum(pg_total_relation_size(oid)), 0) FROM pg_class"
        " WHERE relnamespace = 'tpcc'::regnamespace AND relkind = 'r'"
    ).fetchone()
    return int(row[0]) if row else 0
