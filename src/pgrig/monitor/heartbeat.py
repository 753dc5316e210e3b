"""The server's heartbeat: the monitor's statistics query, timed.

The server cancels that query after 2 s (``statement_timeout``), so one
unanswered for ``HUNG_AFTER_S`` means a server that stopped answering
(SIGSTOP, a hung host or disk). ``Heartbeat.check`` raises ``ServerHung``
then; the runner makes the run's waits call it (``proc.watched_by``): the run
fails in seconds, not "ok" with a minute at 0 tps.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import psycopg

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
