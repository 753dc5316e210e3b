"""The database workloads run in, and its pristine copy for ``reset = "restore"``:
the runner saves it after a load, a workload restores it before each run."""

from __future__ import annotations

import psycopg
from psycopg import sql

from pgrig.conninfo import Conn
from pgrig.step import Context

DATABASE = "pgrig"  # the database workloads run in, in a cluster pgrig creates
PRISTINE = "pgrig_pristine"


def conn(ctx: Context) -> Conn:
    assert ctx.conn is not None, "the server must be up before workload steps run"
    return ctx.conn


SLOW_DISK_BYTES_PER_S = 10_000_000  # what a server call over the data may not be slower than


def limit_by_size(
    db: psycopg.Connection, timeout_s: float | None = None, database: str | None = None
) -> None:
    """Give ``db``'s later statements a statement_timeout: ``timeout_s``, else
    sized from the database (10 minutes plus 1 s per 10 MB: a slow disk's pace
    for a CHECKPOINT or a copy of every byte), so a hung server call fails
    instead of hanging the study."""
    if timeout_s is None:
        timeout_s = size_timeout_s(database_bytes(db, database))
    db.execute(f"SET statement_timeout = {int(timeout_s * 1000)}")


def size_timeout_s(database_bytes: int) -> float:
    """How long a server call over a database of this size may take (``limit_by_size``)."""
    return 600.0 + database_bytes / SLOW_DISK_BYTES_PER_S


def database_bytes(db: psycopg.Connection, database: str | None = None) -> int:
    """The size of ``database``, else of ``db``'s own."""
    row = db.execute("SELECT pg_database_size(%s)", (database or db.info.dbname,)).fetchone()
    return int(row[0]) if row else 0


def _admin(ctx: Context) -> Conn:
    return conn(ctx).with_dbname("postgres")


def _strategy(db: object) -> sql.Composable:
    # FILE_COPY (a plain file copy, cheap for a freshly loaded dataset) is the
    # only strategy before PostgreSQL 15 and must be named from 15 on.
    version = db.execute("SHOW server_version_num").fetchone()[0]  # type: ignore[attr-defined]
    return sql.SQL(" STRATEGY FILE_COPY") if int(version) >= 150000 else sql.SQL("")


def save_pristine(ctx: Context, timeout_s: float | None = None) -> None:
    """Keep a copy of the freshly loaded database to restore before every run."""
    with _admin(ctx).connect() as db:
        limit_by_size(db, timeout_s, DATABASE)
        db.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(PRISTINE)))
        db.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(PRISTINE), sql.Identifier(DATABASE)
            )
            + _strategy(db)
        )


def restore_pristine(ctx: Context, timeout_s: float | None = None) -> None:
    """Replace the working database by the pristine copy, so run 5 does not
    inherit run 4's bloat, dead tuples and grown history table."""
    with _admin(ctx).connect() as db:
        limit_by_size(db, timeout_s, PRISTINE)
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        db.execute(drop.format(sql.Identifier(DATABASE)))
        db.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(DATABASE), sql.Identifier(PRISTINE)
            )
            + _strategy(db)
        )
