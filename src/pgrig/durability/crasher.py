"""Crashing the server, and waiting until it accepts connections again.

Three methods (``model.METHODS``):

* ``immediate``: ``pg_ctl stop -m immediate`` - every process quits at once, no
  shutdown checkpoint; pgrig starts the server again (crash recovery);
* ``kill-postmaster``: SIGKILL of the postmaster; its backends notice and quit;
  pgrig starts the server again;
* ``kill-backend``: SIGKILL of one client backend; the postmaster then stops
  every other process, reinitialises shared memory and runs crash recovery by
  itself (``restart_after_crash``) - the only method that works on a server
  pgrig did not start, as long as it runs on this machine.

These kill processes, not the machine: what the server had written to the
kernel survives even if it was never fsynced. With ``power_loss`` (the
power-loss crash model) the cluster runs on the lossy filesystem, and after the
processes are gone its unsynced writes are thrown away too (``cut_power``):
the filesystem is unmounted, mounted again over what survived, and only then
is the server started.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import random
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg

from pgrig.cluster.server import Cluster, ServerLost
from pgrig.conninfo import Conn
from pgrig.durability.clients import APPLICATION_NAME
from pgrig.durability.model import IMMEDIATE, KILL_BACKEND, KILL_POSTMASTER, Cut
from pgrig.errors import ClusterError, PgrigError, UsageError
from pgrig.hosts.executor import Executor, Launch
from pgrig.hosts.local import HERE
from pgrig.lossyfs import LossyFsError, Mode, PowerLossReport
from pgrig.lossyfs.target import LossyTarget


@dataclass
class Server:
    """The server under test, as far as crashing it goes."""

    conn: Conn  # to the database the check uses
    cluster: Cluster | None  # None: an existing server (--dsn)
    lossy: LossyTarget | None = None  # the cluster's filesystem, when it can lose power

    @property
    def host(self) -> Executor:
        """Where its processes run: the cluster's executor; an existing server's is
        this machine (``check_method`` refuses one whose backends are not here)."""
        return self.cluster.ex if self.cluster is not None else HERE

    def describe(self) -> str:
        if self.cluster is not None:
            return f"the throwaway cluster in {self.cluster.datadir}"
        return self.conn.describe()


@dataclass(frozen=True)
class Signal:
    at: str  # ISO 8601 UTC
    wall: float  # time.time() when it was sent
    mono: float  # time.monotonic() when it was sent
    killed_pid: int | None


def _is_postgres(host: Executor, pid: int) -> bool:
    try:
        return host.read_text(f"/proc/{pid}/comm").strip() in ("postgres", "postmaster")
    except (OSError, PgrigError):
        return False


def check_method(server: Server, method: str) -> None:
    """Refuse a method that cannot work on this server, before anything starts."""
    if server.cluster is not None:
        return
    if method != KILL_BACKEND:
        raise UsageError(
            f"--crash {method} stops the postmaster, and pgrig can only start again a "
            "server it created",
            hint=f"use --crash {KILL_BACKEND} on an existing server (the postmaster "
            "restarts itself), or drop --dsn to let pgrig create a throwaway cluster",
        )
    with server.conn.connect() as db:
        host = db.info.host
        pid = db.info.backend_pid
        restart = db.execute("SELECT current_setting('restart_after_crash')").fetchone()
    local = host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")
    if not local or not _is_postgres(server.host, pid):
        raise UsageError(
            f"--crash {KILL_BACKEND} needs the server on this machine: its backend "
            f"process {pid} is not visible here (host {host})",
            hint="run pgrig on the database server, or drop --dsn to use a throwaway cluster",
        )
    if not restart or restart[0] != "on":
        raise UsageError(
            "the server has restart_after_crash = off: it would stay down after the crash",
            hint="set restart_after_crash = on, or drop --dsn to use a throwaway cluster",
        )


def crash(server: Server, method: str, rng: random.Random, watch: psycopg.Connection) -> Signal:
    """Crash the server now by ``method``; returns when the signal was sent."""
    cluster = server.cluster
    killed: int | None = None
    if method == KILL_BACKEND:
        rows = watch.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
            "AND pid <> pg_backend_pid() ORDER BY pid",
            (APPLICATION_NAME,),
        ).fetchall()
        pids = [r[0] for r in rows if _is_postgres(server.host, r[0])]
        if not pids:
            raise ClusterError("no client backend to kill: no client is connected")
        killed = rng.choice(pids)
    elif method == KILL_POSTMASTER:
        assert cluster is not None
        killed = cluster.postmaster_pid()
        if killed is None:
            raise ClusterError(f"no postmaster runs in {cluster.datadir}")
    wall, mono = time.time(), time.monotonic()
    at = datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds")
    if method == IMMEDIATE:
        assert cluster is not None
        cluster.ex.run(
            [str(cluster.bins.path("pg_ctl")), "stop", "-D", str(cluster.datadir)]
            + ["-m", "immediate", "-w", "-s"],
            timeout=60,
            launch=Launch(cluster.pm.user),
            what="pg_ctl stop -m immediate",
        )
    else:
        assert killed is not None
        server.host.signal(killed, signal.SIGKILL)
    return Signal(at=at, wall=wall, mono=mono, killed_pid=killed)


def wait_recovered(
    server: Server,
    method: str,
    sent: Signal,
    watch: psycopg.Connection,
    timeout: float,
    *,
    power_loss: str | None = None,
    seed: int = 0,
) -> tuple[float, float, Cut | None]:
    """Bring the server back (or wait for it to come back by itself); with
    ``power_loss`` (a mode), cut the power once the old processes are gone
    (``seed``: which unsynced pages a partial power loss keeps).

    Returns (downtime, recovery, what the power loss dropped): seconds from the
    crash signal, and from the restart, to the first accepted connection. Raises
    ``ServerLost`` when the server is not back within ``timeout`` seconds of the
    crash.
    """
    cut = None
    deadline = sent.mono + timeout
    cluster = server.cluster
    if method == KILL_BACKEND:
        # Until the postmaster has noticed the death, the old backends still
        # answer: wait for our own idle connection to be terminated first.
        _wait(lambda: not _answers(watch), deadline, server, "the crash to be noticed")
        restart = time.monotonic()
        _wait(lambda: _accepts(server.conn), deadline, server, "crash recovery")
    else:
        assert cluster is not None
        stale = cluster.pm.pid_in_lockfile()

        def gone() -> bool:  # on the server's host, through its executor
            if cluster.ex.processes_using(str(cluster.datadir)):
                return False
            return stale is None or not cluster.ex.exists(f"/proc/{stale}")

        # The dead postmaster (a zombie until reaped) and its backends must be
        # gone before a new one may start; not part of the recovery time.
        with contextlib.suppress(ServerLost):
            _wait(gone, min(deadline, time.monotonic() + 10), server, "the old processes")
        report = None
        if power_loss is not None:
            cut, report = cut_power(server, power_loss, seed=seed)
        restart = time.monotonic()
        try:
            cluster.restart_after_crash(timeout=max(1.0, deadline - restart))
        except PgrigError as exc:
            raise _lost(server, f"the server did not come back after the crash: {exc}") from exc
        said: list[str] = []  # the last refusal: a torn catalog page fails every connection
        try:
            _wait(lambda: _accepts(server.conn, said), deadline, server, "connections")
        except ServerLost as exc:
            # Started, then never answered (a torn page replayed into a crash loop):
            # the server's own log says why, as when it did not start at all - and
            # the connections' own error, which the log's tail may have scrolled by.
            tail = cluster.log_tail() if cluster is not None else ""
            message = f"the server did not come back after the crash: {exc}"
            if said:
                message += f" (the last connection: {said[0]})"
            raise _lost(server, message + (f": {tail}" if tail else "")) from exc
        except psycopg.errors.InvalidCatalogName as exc:
            message = f"the server came back without the check's database: {exc}"
            raise _lost(server, message) from exc
        if cut is not None and report is not None and report.torn_digest is not None:
            cut = dataclasses.replace(cut, torn_rewritten=_rewritten(server, report))
    ready = time.monotonic()
    return ready - sent.mono, ready - restart, cut


# A relation's main-fork segment under the data directory: what WAL replay reads
# and full_page_writes protects (the free-space and visibility maps are not
# WAL-logged page by page, and pg_wal, pg_xact... are not data pages).
DATA_PAGE = r"(^|/)(base/\d+|global|pg_tblspc/\d+/[^/]+/\d+)/\d+(\.\d+)?$"


def cut_power(server: Server, mode: str, *, seed: int = 0) -> tuple[Cut, PowerLossReport]:
    """Throw away what the server wrote and did not fsync, then mount again over
    what survived (the cluster is stopped: its processes are gone). A torn page is
    drawn among the data pages the tear changes, when there are any."""
    lossy = server.lossy
    if lossy is None:
        raise ClusterError("no power loss without the lossy filesystem")
    mode_: Mode = mode  # type: ignore[assignment]
    try:
        report = lossy.mount.power_loss(mode_, seed=seed, prefer=DATA_PAGE)
        lossy.mount.remount()
    except LossyFsError as exc:
        message = f"the lossy filesystem did not come back after the power loss: {exc}"
        raise _lost(server, message) from exc
    torn = None
    if report.torn is not None:
        path, offset, kept = report.torn
        torn = f"{path} at {offset:,}: {kept:,} of {report.page_size:,} bytes"
    cut = Cut(
        mode=report.mode,
        seed=report.seed,
        unsynced_pages=report.unsynced_pages,
        persisted_pages=report.persisted_pages,
        lost_files=report.lost_files,
        torn=torn,
        torn_data_page=report.torn is not None and re.search(DATA_PAGE, report.torn[0]) is not None,
        torn_changed=report.torn_changed,
    )
    return cut, report


def _rewritten(server: Server, report: PowerLossReport) -> bool | None:
    """Whether the torn page differs, once recovery is over (its end-of-recovery
    checkpoint has written every page it replayed), from how the tear left it."""
    assert server.lossy is not None and report.torn is not None
    path, offset, _kept = report.torn
    try:
        with open(server.lossy.root / path, "rb") as f:
            f.seek(offset)
            now = f.read(report.page_size)
    except OSError:
        return None  # the file is gone (a dropped relation): nothing to compare
    return hashlib.sha256(now).hexdigest() != report.torn_digest


def _answers(watch: psycopg.Connection) -> bool:
    try:
        watch.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _accepts(conn: Conn, said: list[str] | None = None) -> bool:
    """Whether a new connection gets an answer; ``said`` keeps the last refusal."""
    try:
        with psycopg.connect(conn.conninfo(), autocommit=True) as db:
            db.execute("SELECT 1")
    except psycopg.errors.InvalidCatalogName:
        raise  # the database itself is gone: it will not appear by waiting
    except psycopg.Error as exc:
        if said is not None:
            said[:] = [" ".join(str(exc).split())]
        return False
    return True


def _wait(ready: Callable[[], bool], deadline: float, server: Server, what: str) -> None:
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.02)
    raise _lost(server, f"timed out waiting for {what}")


def _lost(server: Server, message: str) -> ServerLost:
    cluster = server.cluster
    if cluster is None:
        return ServerLost(f"{server.describe()}: {message}", datadir=None, log=None)
    if server.lossy is not None:  # kept in the backing directory once unmounted
        on_disk = server.lossy.on_disk
        return ServerLost(message, datadir=on_disk(cluster.datadir), log=on_disk(cluster.logfile))
    return ServerLost(message, datadir=cluster.datadir, log=cluster.logfile)
