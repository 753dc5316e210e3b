"""The interference ledger's memory stays bounded by the live processes
(issue 18: pgrig's memory the same for a 60-second and a 30-minute run).

/proc is replaced by a scripted sequence of walks: what the test needs is a
machine that starts and ends a process every second for an hour, which this
shared test machine cannot be made to do on demand."""

from __future__ import annotations

import pytest

from pgrig.monitor import interference, procfs
from pgrig.monitor.interference import Ledger


def _proc(pid: int, comm: str, ticks: int, start: int) -> procfs.ProcStat:
    return procfs.ProcStat(pid, comm, "R", 1, ticks, 0, 0, 0, 1, start)


def test_exited_processes_are_folded_into_totals_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[dict[int, procfs.ProcStat]] = []
    for second in range(3600):
        # A long-lived hog, and a short-lived job every second: each runs one
        # walk, burning 5 ticks, then exits.
        procs = {10: _proc(10, "hog", 50 * second, 1)}
        job = 1000 + second
        procs[job] = _proc(job, "job", 5, 100 + second)
        walks.append(procs)
    feed = iter(walks)
    monkeypatch.setattr(procfs, "all_processes", lambda: next(feed))
    monkeypatch.setattr(procfs, "read_pid_io", lambda pid: (0, 4096))
    monkeypatch.setattr(interference.time, "monotonic", iter(range(3600)).__next__)
    ledger = Ledger(born_after_ticks=0)
    for _ in range(3600):
        ledger.walk(None, me=-1)
    assert len(ledger.last) == len(ledger.first) == 2, "only the live processes are kept"
    top = {p.name: p for p in ledger.top(ncpu=1)}
    # The hog: 50 ticks a second. The jobs born after the first walk count from
    # zero: 5 ticks each, 3,599 of them (the first was running at the first walk).
    assert top["hog"].processes == 1
    assert top["hog"].cpu_pct == pytest.approx(100 * 50 * 3599 / procfs.CLK_TCK / 3599)
    assert top["job"].processes == 3600
    assert top["job"].cpu_pct == pytest.approx(100 * 5 * 3599 / procfs.CLK_TCK / 3599)
