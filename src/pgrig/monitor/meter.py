"""What this machine's processes did between two looks (``ProcessMeter``): the
CPU time and storage bytes of the server's, the load generator's and pgrig's
processes, and who else ran (the interference ledger). The monitor's strategy
for this machine (``pgrig.monitor.sampling.ProcessesHere``) reads it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pgrig.monitor import interference, procfs

# Client programs a measured run drives the server with: their CPU is "client", and
# while one lives the run is on (a run without a duration of its own: a base backup).
LOAD_GENERATORS = ("pgbench", "pg_basebackup")


def _boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


Counters = dict[tuple[int, int], tuple[int, ...]]


@dataclass
class ProcCpu:
    """What our processes did since the previous sample: ns, ticks and bytes."""

    alive: int
    server_run: float | None = None  # ns
    server_wait: float | None = None
    client_run: float = 0.0
    thread_core: float | None = None
    thread_demand: float | None = None
    pgrig_ticks: float = 0.0
    kernel_ticks: float = 0.0
    io: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # bytes


class ProcessMeter:
    """CPU time and storage bytes of the server's, the load generator's and
    pgrig's processes on this machine, sample after sample: the counters each
    process had at the previous look, and who else ran (the interference ledger)."""

    def __init__(self, server_pid: Callable[[], int | None]) -> None:
        self.server_pid = server_pid  # the postmaster's, asked at every look
        self.started_at = 0.0  # the watch's start: processes born after it count whole
        self.primed = False  # the first look is taken: threads seen later are new
        self.client_start: float | None = None  # wall clock of the first pgbench start
        self.ledger = interference.Ledger.start()
        self._counters: dict[str, Counters] = {}
        self._threads: dict[int, tuple[int, int]] = {}

    def measure(self, seconds: float) -> ProcCpu:
        """CPU and storage bytes of the server's, the load generator's and pgrig's
        processes since the last sample; and of the kernel's threads (one walk of
        /proc, which also names everybody else for the interference ledger)."""
        postmaster = self.server_pid()
        walk = self.ledger.walk(postmaster)
        procs = walk.procs
        me = os.getpid()
        client = {pid for pid in walk.mine if pid != me and procs[pid].comm in LOAD_GENERATORS}
        pgrig = walk.mine - client
        for pid in client:
            started = wall_of(procs[pid].starttime)
            if self.client_start is None or started < self.client_start:
                self.client_start = started
        out = ProcCpu(alive=len(client), kernel_ticks=walk.kernel_ticks)
        if postmaster is not None:
            # PostgreSQL's processes are single-threaded: a process's schedstat is all of it.
            current = {}
            for pid in walk.server:
                st = procfs.read_schedstat(f"/proc/{pid}/schedstat")
                if st is None:  # no schedstat in this kernel: clock ticks, no queueing
                    st = (procs[pid].ticks * 1_000_000_000 // procfs.CLK_TCK, 0)
                current[(pid, procs[pid].starttime)] = st
            out.server_run, out.server_wait = self._delta("server", current, 2)
        (out.pgrig_ticks,) = self._delta(
            "pgrig", {(pid, procs[pid].starttime): (procs[pid].ticks,) for pid in pgrig}, 1
        )
        for group, pids in (("server", walk.server), ("client", client), ("pgrig", pgrig)):
            io = {(pid, procs[pid].starttime): procfs.read_pid_io(pid) for pid in pids}
            readable = {k: v for k, v in io.items() if v is not None}
            if pids and not readable:
                out.io[group] = None
                continue
            r, w = self._delta(f"io-{group}", readable, 2)
            out.io[group] = (r, w)
        self._client_threads(client, seconds, out)
        return out

    def _client_threads(self, client: set[int], seconds: float, out: ProcCpu) -> None:
        """pgbench -j runs one thread per -j, and /proc/<pid>/schedstat counts the
        main thread only: sum the threads, and find the busiest."""
        threads: dict[int, tuple[int, int]] = {}
        for pid in client:
            threads.update(procfs.thread_schedstats(pid))
        prev = self._threads
        wall_ns = seconds * 1e9
        for tid, (run, wait) in threads.items():
            # A thread first seen after the start was born since: all its time is new.
            run0, wait0 = prev.get(tid, (0, 0) if self.primed else (run, wait))
            out.client_run += max(0, run - run0)
            if tid not in prev:
                continue  # its share of this interval is unknown: not the busiest
            core = 100.0 * (run - run0) / wall_ns
            demand = 100.0 * (run - run0 + wait - wait0) / wall_ns
            out.thread_core = max(out.thread_core or 0.0, min(100.0, core))
            out.thread_demand = max(out.thread_demand or 0.0, min(100.0, demand))
        self._threads = threads

    def _delta(
        self, name: str, current: Mapping[tuple[int, int], tuple[int, ...]], width: int
    ) -> list[float]:
        """Sum over processes of what each counter grew since the previous call."""
        before_all = self._counters.get(name, {})
        total = [0.0] * width
        for key, values in current.items():
            before = before_all.get(key)
            if before is None:
                # New since the last look: if it was born after the watch started,
                # all its counts belong to the watch; if not (first look), none.
                born = wall_of(key[1])
                before = (0,) * width if born >= self.started_at else values
            for i in range(width):
                total[i] += max(0, values[i] - before[i])
        self._counters[name] = dict(current)
        return total


def wall_of(starttime_ticks: int) -> float:
    return time.time() - (_boottime() - starttime_ticks / procfs.CLK_TCK)
