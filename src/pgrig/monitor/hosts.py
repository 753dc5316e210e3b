"""Each load host watched: its CPUs, its network, and how runnable its pgbench was.

Once a second, through the host's executor, read ``/proc/stat``,
``/proc/net/dev`` (the network namespace of the SSH session: the host's own
interfaces) and ``/proc/<pgbench>/task/*/schedstat``, and turn them into rates
with the monitor's own parsers (``pgrig.monitor.procfs``). The verdict rule
``client_bound`` reads these: a load host that ran out of CPU measured itself,
not the server.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pgrig.errors import PgrigError
from pgrig.hosts.executor import Executor
from pgrig.monitor import procfs
from pgrig.monitor.verdict import CLIENT_DEMAND_PCT, CPU_BUSY_PCT, Finding

INTERVAL_S = 1.0


@dataclass(frozen=True)
class LoadHostSample:
    at_s: float  # seconds after the watch began
    cpu_busy_pct: float  # all CPUs = 100, steal included
    steal_pct: float
    net_rx_mib_s: float
    net_tx_mib_s: float
    # The busiest pgbench thread: % of the wall time it was runnable (on a CPU or
    # queued for one), and % on a CPU. None: pgbench was not running.
    client_demand_pct: float | None
    client_core_pct: float | None


@dataclass(frozen=True)
class LoadHostWatch:
    host: str
    cpus: int
    samples: tuple[LoadHostSample, ...]
    errors: tuple[str, ...] = ()  # reads that failed (the host went away mid-run)

    def median(self, field: str) -> float | None:
        values = [getattr(s, field) for s in self.samples if getattr(s, field) is not None]
        return statistics.median(values) if values else None


def _threads(ex: Executor, pid: int) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    try:
        tids = ex.listdir(f"/proc/{pid}/task")
    except PgrigError:
        return out
    for tid in tids:
        try:
            out[int(tid)] = procfs.parse_schedstat(
                ex.read_text(f"/proc/{pid}/task/{tid}/schedstat")
            )
        except (PgrigError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
    return out


def _busiest(
    a: dict[int, tuple[int, int]], b: dict[int, tuple[int, int]], seconds: float
) -> tuple[float, float] | None:
    """(runnable %, on-CPU %) of the thread that wanted a CPU most in the interval."""
    best: tuple[float, float] | None = None
    for tid, (run_b, wait_b) in b.items():
        if tid not in a:
            continue
        run = (run_b - a[tid][0]) / 1e9 / seconds * 100
        wait = (wait_b - a[tid][1]) / 1e9 / seconds * 100
        if best is None or run + wait > best[0]:
            best = (min(100.0, run + wait), min(100.0, run))
    return best


class Watcher:
    """Samples one load host in a background thread until ``stop()``."""

    def __init__(self, ex: Executor, pid: int | None = None, interval_s: float = INTERVAL_S):
        self.ex = ex
        self.pid = pid
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._samples: list[LoadHostSample] = []
        self._errors: list[str] = []
        self._cpus = 0
        self._final = True  # read once more when stopped (not a lost host's)
        self._thread = threading.Thread(target=self._loop, name=f"watch-{ex.name}", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def _read(
        self,
    ) -> tuple[float, procfs.Stat, dict[str, tuple[int, int]], dict[int, tuple[int, int]]]:
        at = time.monotonic()
        stat = procfs.parse_stat(self.ex.read_text("/proc/stat"))
        net = procfs.parse_net_dev(self.ex.read_text("/proc/net/dev"))
        threads = _threads(self.ex, self.pid) if self.pid else {}
        return at, stat, net, threads

    def _loop(self) -> None:
        began = time.monotonic()
        prev = None
        while True:
            stopping = self._stop.is_set()
            if stopping and (prev is None or not self._final):
                return
            try:
                now = self._read()
            except Exception as exc:  # noqa: BLE001 - a host gone mid-run: noted, never a traceback
                self._errors.append(str(exc) if isinstance(exc, PgrigError) else repr(exc))
                prev = None
            else:
                self._cpus = now[1].ncpu
                if prev is not None:
                    self._samples.append(_sample(prev, now, began))
                prev = now
            if stopping:
                return
            self._stop.wait(self.interval_s)

    def stop(self, wait: float = 30, final: bool = True) -> LoadHostWatch:
        """The samples so far, the last one up to now: the run's end is read too
        (ci32: a 3-s run on a busy machine ended between two reads a second
        apart over SSH, its host unsampled), unless ``final`` is False (a lost
        host). Waits up to ``wait`` s for a read under way (a lost host's may
        hang: its daemon thread is then left to end alone)."""
        self._final = final
        self._stop.set()
        self._thread.join(timeout=wait)
        return LoadHostWatch(self.ex.name, self._cpus, tuple(self._samples), tuple(self._errors))


def _sample(prev: tuple, now: tuple, began: float) -> LoadHostSample:  # type: ignore[type-arg]
    seconds = max(now[0] - prev[0], 1e-3)
    cpu = procfs.cpu_rates(prev[1], now[1], seconds)
    rx, tx = procfs.net_rates(prev[2], now[2], seconds)
    busiest = _busiest(prev[3], now[3], seconds)
    return LoadHostSample(
        at_s=now[0] - began,
        cpu_busy_pct=100.0 - cpu.idle - cpu.iowait,
        steal_pct=cpu.steal,
        net_rx_mib_s=rx,
        net_tx_mib_s=tx,
        client_demand_pct=busiest[0] if busiest else None,
        client_core_pct=busiest[1] if busiest else None,
    )


def client_bound(
    watches: list[LoadHostWatch] | tuple[LoadHostWatch, ...], shared: Sequence[str] = ()
) -> Finding | None:
    """Client-bound: a load host ran out of CPU - its CPUs at least ``CPU_BUSY_PCT``
    busy (median over the run), or its busiest pgbench thread runnable at least
    ``CLIENT_DEMAND_PCT`` of the time. Such a run measured the load host, not the
    server: add load hosts or threads (``-j``) before reading its tps. A host in
    ``shared`` also runs the server: its busy CPUs are the server's too, so only
    its pgbench threads' demand counts; its CPUs saturated otherwise give the
    finding ``shared_host``: neither is measured alone (seed 000 ran so)."""
    found = []
    together = []
    for w in watches:
        busy = w.median("cpu_busy_pct")
        demand = w.median("client_demand_pct")
        if len(w.samples) < 2 or busy is None:
            continue
        busy_says = busy >= CPU_BUSY_PCT and w.host not in shared
        if busy >= CPU_BUSY_PCT and w.host in shared:
            together.append((busy, f"host {w.host}: CPUs {busy:.0f}% busy ({w.cpus} CPUs)"))
        if busy_says or (demand is not None and demand >= CLIENT_DEMAND_PCT):
            text = f"load host {w.host}: CPUs {busy:.0f}% busy ({w.cpus} CPUs)"
            if demand is not None:
                text += f", busiest pgbench thread runnable {demand:.0f}% of the time"
            found.append((max(busy, demand or 0.0), text))
    if not found and together:
        evidence = tuple(t for _, t in together) + (
            "the server and pgbench share these CPUs and are not told apart there: "
            "load hosts of their own (load_hosts) measure the server alone",
        )
        return Finding("shared_host", together[0][0] / 100, together[0][1], evidence)
    if not found:
        return None
    found.sort(reverse=True)
    evidence = tuple(t for _, t in found) + (
        "a saturated load generator measures itself, not the server: "
        "add load hosts or pgbench threads (-j)",
    )
    return Finding("client_host", found[0][0] / 100, "; ".join(t for _, t in found), evidence)
