"""The client's heartbeat: pgbench's ``-P`` progress lines, watched as the
server's heartbeat watches the server.

A pgbench stopped (SIGSTOP), hung or starved mid-run prints nothing while the
server answers every query the monitor asks: a SIGSTOP of 60 s, 4 s into a
15-s run, was recorded "ok" at a fifth of the undisturbed tps (issue 40.2).
pgbench prints a progress line every interval even at 0 tps (its thread 0
wakes on a timer), so a silence of the interval plus ``SILENT_GRACE_S`` means
the client itself stopped: ``ClientWatch.check`` (asked by the run's waits
through ``proc.watched_by``) then fails the run, naming the client.

A shorter stop slips under the silence but not under the clock:
``check_duration`` compares the time pgbench measured (its transactions over
its tps) with the planned ``-T``, and a run that took longer than planned plus
``overrun_tolerance_s`` is failed, never recorded ok.
"""

from __future__ import annotations

import threading
import time

from pgrig.errors import PgrigError

# Silence past the -P interval that means the client stopped (load.py's load
# hosts use the same grace for a host's progress).
SILENT_GRACE_S = 4.0
# Before the first progress line pgbench connects its clients: many clients on a
# loaded machine take seconds, so the first line is given longer.
FIRST_LINE_GRACE_S = 20.0


class ClientStalled(PgrigError):
    """The benchmark client stopped progressing, or its run took longer than planned."""

    def __init__(self, message: str) -> None:
        super().__init__(
            message,
            hint="the run was failed, not recorded: look for what stopped the client "
            "(a SIGSTOP, a debugger, swapping, a CPU quota) before resuming",
        )


class ClientWatch:
    """``heard`` on each ``-P`` line; ``check`` raises ``ClientStalled`` when none
    came for the interval plus ``SILENT_GRACE_S`` while the run should still be
    printing them, or when the client outlived its planned duration by more than
    the tolerance (it stopped printing lines once -T ended, finishing its
    transactions in flight)."""

    def __init__(self, what: str, interval_s: float, duration_s: float) -> None:
        self.what = what
        self._interval = max(1.0, interval_s)
        self._duration = duration_s
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._first: float | None = None
        self._last: float | None = None

    def heard(self) -> None:
        now = time.monotonic()
        with self._lock:
            if self._first is None:
                self._first = now
            self._last = now

    def check(self) -> None:
        now = time.monotonic()
        with self._lock:
            first, last = self._first, self._last
        if first is None or last is None:
            silent = now - self._started
            if silent > FIRST_LINE_GRACE_S + self._interval:
                raise ClientStalled(
                    f"{self.what} printed no progress line in its first {silent:.0f} s "
                    "(stopped, hung, or unable to connect its clients)"
                )
            return
        if now - first < self._duration:
            silent = now - last
            if silent > self._interval + SILENT_GRACE_S:
                raise ClientStalled(
                    f"{self.what} stopped progressing: no progress line for {silent:.0f} s "
                    f"(every {self._interval:.0f} s expected; the client was stopped, hung "
                    "or starved of CPU)"
                )
            return
        over = now - first - self._duration
        if over > overrun_tolerance_s(self._duration) + SILENT_GRACE_S:
            raise ClientStalled(
                f"{self.what} ran {over:.0f} s past its planned {self._duration:.0f} s "
                "and has not ended (stopped or hung while finishing)"
            )


def overrun_tolerance_s(duration_s: float, latency_avg_ms: float = 0.0) -> float:
    """How much longer than ``-T`` a healthy run may take: its transactions in
    flight at the end (a few average latencies) and a margin for a loaded machine."""
    return max(3.0, 0.1 * duration_s) + 3 * latency_avg_ms / 1000.0


def check_duration(
    what: str, planned_s: float, transactions: int, tps: float, latency_avg_ms: float
) -> None:
    """Raise ``ClientStalled`` when the run pgbench measured (its transactions
    over its tps, the connection time excluded as pgbench excludes it) took
    longer than ``planned_s`` plus ``overrun_tolerance_s``: its figures are
    over a time it did not plan, with a stop inside."""
    if tps <= 0 or transactions <= 0 or planned_s <= 0:
        return
    measured = transactions / tps
    if measured > planned_s + overrun_tolerance_s(planned_s, latency_avg_ms):
        raise ClientStalled(
            f"{what} measured {measured:.1f} s for a planned {planned_s:.0f} s run "
            "(the client was stopped or starved part of the time; its figures "
            "are not the planned run's)"
        )
