"""Populate the TPC-C tables inside the server, in parallel connections.

Order of business: refuse what cannot work (warehouses < 1, more jobs than
connections, an existing schema without ``replace``); create the schema and
functions; generate the rows - the items, then per warehouse its stock, its
customers (with warehouse, districts and history) and its orders (with lines
and new orders), each part one transaction in whichever connection is free;
build the indexes (again in parallel), turn them into primary keys; VACUUM
ANALYZE every table; write the ``tpcc.meta`` row last, so that a load that did
not finish is never taken for one that did.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import psycopg

from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.workloads.parallel import Unit, run_parallel
from pgrig.workloads.tpcc import TABLES, sqlfiles
from pgrig.workloads.tpcc.model import TpccLoad

__all__ = ["Unit", "load", "run_parallel"]

PARTS = ("stock", "orders", "customers")
MB = 1_000_000

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


def load(
    conn: Conn,
    warehouses: int,
    *,
    jobs: int = 2,
    replace: bool = False,
    on_progress: Progress | None = None,
) -> TpccLoad:
    if warehouses < 1:
        raise UsageError(
            f"--warehouses {warehouses}: must be at least 1",
            hint="TPC-C scales by warehouse: 1 is about 100 MB of data",
        )
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: must be at least 1")
    say = on_progress or (lambda _msg: None)
    with conn.connect() as db:
        if schema_exists(db) and not replace:
            raise UsageError(
                "the database already holds a tpcc schema",
                hint="pass --yes to drop it and load again, or use another database",
            )
        jobs = min(jobs, warehouses * len(PARTS) + 1)
        check_connections(db, jobs + 1, "--jobs")
        db.execute(sqlfiles.sql("schema"))
        db.execute(sqlfiles.sql("functions", db.info.server_version))
        db.execute(sqlfiles.sql("load"))
    setup = (f"SET statement_timeout = {int(timeout_for(warehouses) * 1000)}",)
    c_last = random.randint(0, 255)
    units = [Unit("item", "SELECT tpcc.load_items()")]
    for w in range(1, warehouses + 1):
        units += [
            Unit(f"stock {w}", "SELECT tpcc.load_stock(%s)", (w,), w),
            Unit(f"orders {w}", "SELECT tpcc.load_orders(%s)", (w,), w),
            Unit(f"customers {w}", "SELECT tpcc.load_customers(%s, %s)", (w, c_last), w),
        ]
    t0 = time.monotonic()
    remaining = {w: len(PARTS) for w in range(1, warehouses + 1)}
    per_warehouse: dict[str, float] = {}

    def done(unit: Unit) -> None:
        if unit.warehouse is None:
            return
        remaining[unit.warehouse] -= 1
        if remaining[unit.warehouse] == 0:
            per_warehouse[str(unit.warehouse)] = round(time.monotonic() - t0, 3)
            finished = len(per_warehouse)
            say(f"warehouse {unit.warehouse} loaded ({finished} of {warehouses})")

    run_parallel(conn, jobs, units, done, what="TPC-C load", setup=setup)
    t_generated = time.monotonic()
    say("building indexes")
    run_parallel(
        conn,
        jobs,
        [Unit("index", s) for s in sqlfiles.statements("indexes")],
        what="TPC-C load",
        setup=setup,
    )
    with conn.connect() as db:
        db.execute(sqlfiles.sql("keys"))
    t_indexed = time.monotonic()
    say("vacuum analyze")
    run_parallel(
        conn,
        jobs,
        [Unit(t, f"VACUUM ANALYZE tpcc.{t}") for t in TABLES],
        what="TPC-C load",
        setup=setup,
    )
    elapsed = time.monotonic() - t0
    phases = {
        "generate": round(t_generated - t0, 3),
        "index": round(t_indexed - t_generated, 3),
        "vacuum analyze": round(time.monotonic() - t_indexed, 3),
    }
    with conn.connect() as db:
        db.execute(
            "INSERT INTO tpcc.meta (warehouses, c_last_load, c_id, ol_i_id, load_seconds)"
            " VALUES (%s, %s, %s, %s, %s)",
            (warehouses, c_last, random.randint(0, 1023), random.randint(0, 8191), elapsed),
        )
        table_rows = {name: int(n) for name, n in db.execute(sqlfiles.sql("table_rows")).fetchall()}
        size = schema_bytes(db)
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
    )


def schema_bytes(db: psycopg.Connection) -> int:
    """Tables, indexes and TOAST of the tpcc schema."""
    row = db.execute(
        "SELECT coalesce(sum(pg_total_relation_size(oid)), 0) FROM pg_class"
        " WHERE relnamespace = 'tpcc'::regnamespace AND relkind = 'r'"
    ).fetchone()
    return int(row[0]) if row else 0
