"""Statements spread over parallel connections: the TPC-C and TPC-B loaders'
one worker pool. Each connection takes the next unit as it frees up."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg

from pgrig import proc
from pgrig.conninfo import Conn
from pgrig.errors import ClusterError, PgrigError

JIT_FROM = 110000  # the jit setting
PARALLEL_BUILDS_FROM = 110000  # max_parallel_maintenance_workers


def load_settings(
    server_version: int, *, timeout_s: float, workers: int, superuser: bool = False
) -> tuple[str, ...]:
    """A loader's session settings (``server_version`` as server_version_num): its
    statement_timeout first, then up to ``workers`` parallel workers per index
    build - a setting PostgreSQL 11 introduced, which an older server refuses
    as unknown (its builds are serial anyway) - and, for a ``superuser`` (only
    one may change it for a session), no WAL compression: an index build logs
    every page whole, and compressing those images took 13% of a 4-warehouse
    TPC-C load's CPU (perf), more than the I/O it saves."""
    return (
        f"SET statement_timeout = {int(timeout_s * 1000)}",
        *(
            (f"SET max_parallel_maintenance_workers = {workers}",)
            if server_version >= PARALLEL_BUILDS_FROM
            else ()
        ),
        *(("SET wal_compression = off",) if superuser else ()),
    )


def build_workers(jobs: int, builds: int) -> int:
    """Parallel workers per index build for ``builds`` builds running at once on
    ``jobs`` connections' worth of cores. Each build's own backend takes part, so
    a build with ``jobs - 1`` workers fills ``jobs`` cores. The primary key of
    pgbench_accounts at scale 100 on this 2-core machine, three builds each
    after a fresh COPY: 1.75-1.86 s with 1 worker, 1.89-2.07 s with none,
    1.86-1.87 s with 2 (load average 1, 2026-11-25)."""
    return max(0, jobs // max(1, builds) - 1)


@dataclass(frozen=True)
class Unit:
    """One piece of work for the pool: a statement, or ``run`` given the
    connection (a COPY); ``warehouse`` set for a part of one (TPC-C)."""

    label: str
    statement: str = ""
    params: tuple[object, ...] = ()  # the statement's parameters
    warehouse: int | None = None
    run: Callable[[psycopg.Connection], None] | None = None


def run_parallel(
    conn: Conn,
    jobs: int,
    units: Sequence[Unit],
    on_done: Callable[[Unit], None] | None = None,
    *,
    what: str = "loading",
    setup: Sequence[str] = (),
) -> None:
    """Run ``units`` in ``jobs`` connections, in order of the list as connections
    free up. The first error cancels the statements still running and is raised;
    so is Ctrl-C."""
    work: queue.Queue[Unit] = queue.Queue()
    for unit in units:
        work.put(unit)
    errors: list[BaseException] = []
    finished: queue.Queue[Unit] = queue.Queue()
    connections: list[psycopg.Connection] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            db = conn.connect()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            return
        with lock:
            connections.append(db)
        try:
            # Commits wait for their WAL (whatever the profile says): VACUUM sets
            # no hint bit, and so no page all-visible, for a transaction whose
            # commit - or any commit sharing its slot of commit LSNs - is not
            # flushed yet. One flush per unit costs nothing.
            db.execute("SET synchronous_commit = on")
            if db.info.server_version >= JIT_FROM:
                db.execute("SET jit = off")  # compiling costs more than it saves here
            for statement in setup:
                db.execute(statement)
            while not errors:
                try:
                    unit = work.get_nowait()
                except queue.Empty:
                    return
                if unit.run is not None:
                    unit.run(db)
                else:
                    db.execute(unit.statement, unit.params)
                finished.put(unit)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            db.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    join_s = 30.0
    try:
        _collect(threads, finished, on_done)
    except PgrigError:  # the heartbeat's ServerHung: a cancel would wait as the workers do
        errors.append(KeyboardInterrupt())
        join_s = 0.0
        raise
    except BaseException:
        errors.append(KeyboardInterrupt())
        _cancel(connections, lock)
        raise
    finally:
        for t in threads:
            t.join(timeout=join_s)
    if errors:
        _cancel(connections, lock)
        exc = errors[0]
        if isinstance(exc, psycopg.Error):
            raise ClusterError(
                f"{what} failed: {str(exc).strip()}",
                hint="see the server log; a full disk or too little memory are the usual causes",
            ) from exc
        raise exc


def _collect(
    threads: list[threading.Thread],
    finished: queue.Queue[Unit],
    on_done: Callable[[Unit], None] | None,
) -> None:
    """Wait for the workers, telling ``on_done`` of each unit as it finishes;
    the waits ask the server's heartbeat (``proc.raise_if_cancelled``). Its
    ServerHung leaves the workers parked until the server is stopped or goes on:
    a cancel request to a stopped postmaster would wait as long as they do."""
    while any(t.is_alive() for t in threads) or not finished.empty():
        proc.raise_if_cancelled()
        try:
            unit = finished.get(timeout=0.1)
        except queue.Empty:
            continue
        if on_done is not None:
            on_done(unit)


def _cancel(connections: list[psycopg.Connection], lock: threading.Lock) -> None:
    with lock:
        for db in connections:
            with contextlib.suppress(psycopg.Error):
                db.cancel()
