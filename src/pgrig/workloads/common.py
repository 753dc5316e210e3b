"""What every measured pgbench run does around the measurement: reset the data,
warm up, checkpoint - so each run starts from the same state (seeds 000 and
004 checkpoint before every run)."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from pgrig.conninfo import Conn
from pgrig.policy import RunPolicy
from pgrig.results import ProgressPoint, RelationSize, RelationSizes, ResultKind
from pgrig.sql import load as load_sql
from pgrig.step import Action, Call, Context, Step, StepKey
from pgrig.tools import pgbench
from pgrig.ui import Step as ProgressLine
from pgrig.units import size_text

if TYPE_CHECKING:
    from pgrig.cluster.server import Cluster

DATABASE = "pgrig"  # the database workloads run in, in a cluster pgrig creates
PRISTINE = "pgrig_pristine"
# Auto warm-up: steady once the last STEADY_WINDOW per-second tps values vary by
# less than STEADY_CV (coefficient of variation); give up after the policy's
# warmup_max_s (a noisy machine may never look steady).
STEADY_WINDOW = 5
STEADY_CV = 0.03


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
        name = database or db.info.dbname
        row = db.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
        timeout_s = 600.0 + (int(row[0]) if row else 0) / SLOW_DISK_BYTES_PER_S
    db.execute(f"SET statement_timeout = {int(timeout_s * 1000)}")


def checkpoint(ctx: Context, timeout_s: float | None = None) -> None:
    with conn(ctx).connect() as db:
        limit_by_size(db, timeout_s)
        db.execute("CHECKPOINT")


@contextlib.contextmanager
def load_restarts(ctx: Context, load_wal: str, data_bytes: int) -> Iterator[Cluster | None]:
    """The cluster a load of about ``data_bytes`` may restart at ``wal_level =
    minimal`` (as a workload's ``load_wal`` says: ``pgrig.cluster.loadwal``), or
    None: not asked, too little data for two restarts to pay, a server pgrig did
    not create (never restarted), or the lossy filesystem of a power-loss study
    (every write goes through the WAL as configured there). After the load the
    monitor is told the server's new PID."""
    from pgrig.cluster import loadwal  # the cluster code only where a load restarts

    asked = loadwal.wanted(load_wal, data_bytes)
    cluster = ctx.cluster if asked and ctx.lossy is None else None
    try:
        yield cluster
    finally:
        if cluster is not None:
            ctx.server_pid = cluster.postmaster_pid()


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


def _sizes_headline(r: RelationSizes) -> str:
    tables = sum(1 for x in r.relations if x.kind == "table")
    indexes = len(r.relations) - tables
    return (
        f": {tables} tables {size_text(r.total('table'))}, "
        f"{indexes} indexes {size_text(r.total('index'))}"
    )


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
SIZES_TIMEOUT_S = 60.0  # sizes come from the catalog and a stat() per file


def relation_sizes(when: str) -> Action:
    """An action listing the database's tables and indexes with their sizes."""

    def action(ctx: Context, line: ProgressLine) -> tuple[RelationSizes, str]:
        with conn(ctx).connect() as db:
            limit_by_size(db, SIZES_TIMEOUT_S)
            rows = db.execute(load_sql("relation_sizes")).fetchall()
            size = db.execute("SELECT pg_database_size(current_database())").fetchone()
        result = RelationSizes(
            when=when,
            relations=tuple(
                RelationSize(name=str(n), kind=str(k), bytes=int(b), table=t) for n, k, b, t in rows
            ),
            database_bytes=int(size[0]) if size else 0,
        )
        raw = "".join(f"{r.kind}\t{r.name}\t{r.bytes}\n" for r in result.relations)
        return result, raw

    return action


def sizes_step(key: StepKey, when: str, params: dict[str, object]) -> Step:
    """Table and index sizes (``\\dt+``, ``\\di+``) as a recorded step: after a
    load (``when`` = "after load") and once per target after its runs."""
    return Step(
        key=key.below("sizes", when.replace(" ", "-")),
        kind="relation_sizes",
        label=f"{key.target}: table and index sizes {when}",
        params={**params, "when": when},
        action=Call("relation_sizes", {"when": when}),
        estimate_s=0.25,  # a catalog query: 0.05-0.23 s measured on seed000 and seed002
    )


class Steady(Exception):  # noqa: N818 - a signal, not an error
    """Raised from the progress callback to stop a warm-up that has settled."""


def steady(points: list[ProgressPoint]) -> bool:
    if len(points) < STEADY_WINDOW:
        return False
    window = [p.tps for p in points[-STEADY_WINDOW:]]
    mean = statistics.fmean(window)
    return mean > 0 and statistics.pstdev(window) / mean < STEADY_CV


@dataclass(frozen=True)
class Prepared:
    warmup_s: float  # how long the warm-up ran
    restored: bool


def prepare_run(
    ctx: Context, opts: pgbench.RunOptions, policy: RunPolicy, line: ProgressLine
) -> Prepared:
    """Reset (if asked), warm up (fixed or until steady), then CHECKPOINT."""
    restored = False
    if policy.reset == "restore":
        line.update(detail="restoring the freshly loaded data")
        restore_pristine(ctx)
        restored = True
    warmed = 0.0
    if policy.warmup:
        quiet = replace(opts, statement_latencies=False, transaction_log=False)
        if policy.warmup == "auto":
            seen: list[ProgressPoint] = []

            def on_progress(point: ProgressPoint) -> None:
                seen.append(point)
                line.update(detail=f"warming up: {point.tps:,.0f} tps")
                if steady(seen):
                    raise Steady

            with contextlib.suppress(Steady):
                pgbench.run_bench(
                    ctx.bins.client_bin_dir,
                    conn(ctx),
                    replace(quiet, duration_s=policy.warmup_max_s),
                    ctx.scratch,
                    on_progress=on_progress,
                )
            warmed = float(len(seen))
        else:
            line.update(detail=f"warming up for {policy.warmup} s")
            pgbench.run_bench(
                ctx.bins.client_bin_dir,
                conn(ctx),
                replace(quiet, duration_s=int(policy.warmup)),
                ctx.scratch,
            )
            warmed = float(policy.warmup)
    if policy.checkpoint:
        checkpoint(ctx)
    line.update(detail="")
    return Prepared(warmup_s=warmed, restored=restored)
