"""What every measured pgbench run does around the measurement: reset the data,
warm up, checkpoint - so each run starts from the same state (seeds 000 and
004 checkpoint before every run)."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pgrig.load import LoadJob
from pgrig.policy import RunPolicy
from pgrig.registry.shared import RELATION_SIZES as RELATION_SIZES
from pgrig.results import ProgressPoint, RelationSize, RelationSizes
from pgrig.sql import load as load_sql
from pgrig.step import Action, Call, Context, Prepare, Step, StepKey
from pgrig.tools import pgbench
from pgrig.ui import Step as ProgressLine
from pgrig.workdb import DATABASE as DATABASE
from pgrig.workdb import PRISTINE as PRISTINE
from pgrig.workdb import conn as conn
from pgrig.workdb import database_bytes
from pgrig.workdb import limit_by_size as limit_by_size
from pgrig.workdb import restore_pristine as restore_pristine
from pgrig.workdb import save_pristine as save_pristine

if TYPE_CHECKING:
    from pgrig.cluster.loadwal import Restartable

# Auto warm-up: steady once the last STEADY_WINDOW per-second tps values vary by
# less than STEADY_CV (coefficient of variation); give up after the policy's
# warmup_max_s (a noisy machine may never look steady).
STEADY_WINDOW = 5
STEADY_CV = 0.03


def checkpoint(ctx: Context, timeout_s: float | None = None) -> None:
    with conn(ctx).connect() as db:
        limit_by_size(db, timeout_s)
        db.execute("CHECKPOINT")


@contextlib.contextmanager
def load_restarts(ctx: Context, load_wal: str, data_bytes: int) -> Iterator[Restartable | None]:
    """The server a load of about ``data_bytes`` may restart at ``wal_level =
    minimal`` (as a workload's ``load_wal`` says: ``pgrig.cluster.loadwal``) - the
    cluster here or pgrig's server on another host -, or None: not asked, too
    little data for two restarts to pay, a server pgrig did not create (never
    restarted), or the lossy filesystem of a power-loss study (every write goes
    through the WAL as configured there). After the load the monitor is told the
    server's new PID (a cluster here: the monitor sees no PID on another host)."""
    from pgrig.cluster import loadwal  # the cluster code only where a load restarts

    asked = loadwal.wanted(load_wal, data_bytes)
    server = ctx.restartable if asked and ctx.lossy is None else None
    try:
        yield server
    finally:
        if ctx.cluster is not None and server is ctx.cluster:
            ctx.running.server_pid = ctx.cluster.postmaster_pid()


SIZES_TIMEOUT_S = 60.0  # sizes come from the catalog and a stat() per file


def relation_sizes(when: str) -> Action:
    """An action listing the database's tables and indexes with their sizes."""

    def action(ctx: Context, line: ProgressLine) -> tuple[RelationSizes, str]:
        with conn(ctx).connect() as db:
            limit_by_size(db, SIZES_TIMEOUT_S)
            size = database_bytes(db)
            rows = db.execute(load_sql("relation_sizes")).fetchall()
        result = RelationSizes(
            when=when,
            relations=tuple(
                RelationSize(name=str(n), kind=str(k), bytes=int(b), table=t) for n, k, b, t in rows
            ),
            database_bytes=size,
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
        action=Call("common.relation_sizes", {"when": when}),
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


def prepare_action(
    opts: pgbench.RunOptions, policy: RunPolicy, auto_threads: bool = False
) -> Prepare:
    """Reset / warm-up / CHECKPOINT before a measured pgbench run, as the policy
    says (``prepare_run``): what TPC-B's and a custom workload's runs register."""

    def prepare(ctx: Context, line: ProgressLine) -> None:
        prepare_run(ctx, opts, policy, line, auto_threads)

    return prepare


def prepare_run(
    ctx: Context,
    opts: pgbench.RunOptions,
    policy: RunPolicy,
    line: ProgressLine,
    auto_threads: bool = False,
) -> Prepared:
    """Reset (if asked), warm up (fixed or until steady) from the target's
    clients, then CHECKPOINT. ``auto_threads``: as ``bench_action``'s."""
    restored = False
    if policy.reset == "restore":
        line.update(detail="restoring the freshly loaded data")
        restore_pristine(ctx)
        restored = True
    warmed = 0.0
    if policy.warmup:
        # From the clients the measured run comes from: a remote target's load
        # hosts warm up its server as the run will load it.
        quiet = replace(opts, statement_latencies=False, transaction_log=False)
        if policy.warmup == "auto":
            seen: list[ProgressPoint] = []

            def on_progress(point: ProgressPoint) -> None:
                seen.append(point)
                line.update(detail=f"warming up: {point.tps:,.0f} tps")
                if steady(seen):
                    raise Steady

            job = LoadJob(replace(quiet, duration_s=policy.warmup_max_s), ctx.scratch, conn(ctx),
                          on_progress=on_progress, auto_threads=auto_threads)  # fmt: skip
            with contextlib.suppress(Steady):
                ctx.clients.warm(job)
            warmed = float(len(seen))
        else:
            line.update(detail=f"warming up for {policy.warmup} s")
            job = LoadJob(replace(quiet, duration_s=int(policy.warmup)), ctx.scratch, conn(ctx),
                          auto_threads=auto_threads)  # fmt: skip
            ctx.clients.warm(job)
            warmed = float(policy.warmup)
    if policy.checkpoint:
        checkpoint(ctx)
    line.update(detail="")
    return Prepared(warmup_s=warmed, restored=restored)
