"""The server's heartbeat: the monitor's statistics query, timed.

The server cancels that query after 2 s (``statement_timeout``), so one
unanswered for ``HUNG_AFTER_S`` means a server that stopped answering
(SIGSTOP, a hung host or disk). ``Heartbeat.check`` raises ``ServerHung``
then; the runner makes the run's waits call it (``proc.watched_by``): the run
fails in seconds, not "ok" with a minute at 0 tps.

Outside measured runs (a load, a setup, a probe while the server is up) no
monitor samples; ``Pulse`` asks ``SELECT 1`` once a second on a connection of
its own, with the same ``Heartbeat``: a server stopped during ``pgbench -i``
failed the load only at its timeout (an hour), now in seconds.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator

import psycopg

from pgrig.conninfo import Conn
from pgrig.errors import PgrigError

# An unanswered statistics query this old: the server stopped answering (3x its
# statement_timeout, so that a busy machine's slow answer is not taken for it).
HUNG_AFTER_S = 6.0


class ServerHung(PgrigError):
    """The server stopped answering the monitor mid-run."""

    def __init__(self, where: str, seconds: float) -> None:
        super().__init__(
            f"the server at {where} stopped answering for {seconds:.0f} s "
            "(stopped, hung, or its host is)",
            hint="the run was stopped and failed; look at the server's host "
            "(a SIGSTOP, a hung disk or network) before resuming",
        )


class ServerHostLost(PgrigError):
    """The SSH connection to the server's host closed mid-run (its sshd killed,
    the host gone): nothing reads the host or could revive its server now."""

    def __init__(self, host: str) -> None:
        super().__init__(
            f"lost the SSH connection to {host}, the server's host, mid-run: the server "
            "and its host went unwatched, so the run is not counted",
            hint=f"pgrig reconnects to {host} before the next step (PGRIG_RECONNECT_S "
            "bounds the wait); pgrig run --retry-failed measures this run again",
        )


class Heartbeat:
    """When the server query under way was sent (``asking``), and whether it has
    gone unanswered too long (``check``); ``where`` names the server."""

    def __init__(self, where: Callable[[], str]) -> None:
        self._where = where
        self._asked: float | None = None

    @contextlib.contextmanager
    def asking(self) -> Iterator[None]:
        self._asked = time.monotonic()
        try:
            yield
        finally:
            self._asked = None

    def silent_s(self) -> float:
        asked = self._asked
        return 0.0 if asked is None else time.monotonic() - asked

    def hung(self) -> bool:
        return self.silent_s() > HUNG_AFTER_S

    def check(self) -> None:
        """Raise ``ServerHung`` when the query has had no answer for ``HUNG_AFTER_S``."""
        if self.hung():
            raise ServerHung(self._where(), self.silent_s())


class LastCloses:
    """A connection held by the caller and by a sampler thread that may be stuck
    in a query to a hung server: closed by whichever lets go last, never under
    the other's feet (libpq's connection is not to be closed from another thread
    mid-query)."""

    def __init__(self, holders: int = 2) -> None:
        self._holders = holders
        self._lock = threading.Lock()

    def release(self, conn: psycopg.Connection | None, holders: int = 1) -> None:
        with self._lock:
            self._holders -= holders
            last = self._holders <= 0
        if last and conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


PULSE_INTERVAL_S = 1.0
PULSE_APPLICATION_NAME = "pgrig-heartbeat"
# A step that waits in a query or a connect of its own to the stopped server
# asks no watchdog: this signal, sent to the main thread, raises ServerHung
# there (Python runs handlers in the main thread; psycopg's waits let them
# raise). A step on another thread (targets run side by side) has the watchdog.
WAKE = signal.SIGUSR2
_ARMED: list[Pulse] = []
_ARMED_LOCK = threading.Lock()


def _on_wake(_signum: int, _frame: object) -> None:
    with _ARMED_LOCK:
        armed = list(_ARMED)
    for pulse in armed:  # none once the step is over: a late signal does nothing
        pulse.check()


class Pulse:
    """Context manager: ``SELECT 1`` on its own connection every second while the
    block runs; ``check`` (for ``proc.watched_by``) raises ``ServerHung`` once a
    connect or a query has gone unanswered ``HUNG_AFTER_S``, and the main
    thread, when it runs the block, is woken to raise it (``WAKE``). A
    connection that fails (a server restarted by the load at ``wal_level =
    minimal``, shutting down) is no hang: it is opened again at the next beat."""

    def __init__(self, conn: Conn, interval: float = PULSE_INTERVAL_S) -> None:
        self._server = conn
        self._beat = Heartbeat(conn.describe)
        self._interval = interval
        self._stop = threading.Event()
        self._conn: psycopg.Connection | None = None
        self._closer = LastCloses()
        self._thread = threading.Thread(target=self._loop, name="pgrig-heartbeat", daemon=True)
        self._waker: threading.Thread | None = None

    def __enter__(self) -> Pulse:
        if threading.current_thread() is threading.main_thread():
            signal.signal(WAKE, _on_wake)  # kept after: a signal still on its way is ignored
            with _ARMED_LOCK:
                _ARMED.append(self)
            self._waker = threading.Thread(
                target=self._wake, args=(threading.main_thread().ident,), daemon=True
            )
            self._waker.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with _ARMED_LOCK:
            if self in _ARMED:
                _ARMED.remove(self)
        self._stop.set()
        if self._waker is not None:
            self._waker.join(timeout=5)
        self._thread.join(timeout=1 if self._beat.hung() else 10)
        # a thread stuck on a stopped server closes the connection itself when freed
        self._closer.release(self._conn)

    def check(self) -> None:
        self._beat.check()

    def _wake(self, main: int | None) -> None:
        while not self._stop.wait(self._interval / 2):
            if self._beat.hung() and main is not None:
                signal.pthread_kill(main, WAKE)
                return  # once: the step fails, the next step has a pulse of its own

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._once()
                self._stop.wait(self._interval)
        finally:
            self._closer.release(self._conn)

    def _once(self) -> None:
        try:
            with self._beat.asking():
                if self._conn is None or self._conn.closed:
                    # Named in pg_stat_activity, apart from the step's own sessions.
                    info = self._server.with_params(application_name=PULSE_APPLICATION_NAME)
                    self._conn = info.connect()
                self._conn.execute("SELECT 1")
        except (PgrigError, psycopg.Error):
            conn, self._conn = self._conn, None  # refused or broken: asked again next beat
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
