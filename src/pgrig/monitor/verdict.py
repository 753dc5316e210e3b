"""The bottleneck verdict: one primary cause, chosen by documented rules, with its numbers.

A verdict names a cause only from the server's own evidence: its processes'
CPU and storage bytes (/proc/<pid>), its wait events, its checkpoints and
buffer writes (pg_stat_*). Device-wide and host-wide figures (/proc/diskstats,
Dirty/Writeback) are shown as such, never as the database's. The rules
(docs/monitor.md explains them), first that holds wins:

1. **Stalls** - checkpoint or dirty-page stalls: at least 10% of the run's
   seconds (and at least 2) are dips below half the median tps, and most dips
   fall in a checkpoint, or in a Dirty/Writeback peak while the server itself
   wrote at least half of the bytes written to the device.
2. **Dominant wait** - where the client backends' time went, from
   pg_stat_activity once a second. The largest wait class above its threshold
   wins: lock contention (Lock:*), WAL / fsync (WALSync, WALWrite, WALInsert),
   storage read (DataFileRead), storage write (DataFileWrite/Extend/Sync),
   LWLock contention (other LWLocks). An I/O wait does not count when its
   backend was runnable when sampled (R in its /proc/<pid>/stat, which the
   server reads in the same statement) and the run's I/O of that kind never
   reached the storage (no WAL synced; no data read from or written to the
   device by the server): preempted inside a WAL write() with fsync off, a
   backend keeps IO:WALWrite set while it waits for a CPU, not for the write.
3. **Starved by other processes** - other processes (and steal) took at
   least 10% of the machine's CPU, and more than the server did, while the
   CPUs were saturated or the server's processes queued for a CPU a quarter
   of the time they wanted one. (Taking less than the server, it is listed
   under "also seen", after the rules below.)
   Load from other machines: **client-bound** (a load host's CPUs at least
   85% busy, or its busiest pgbench thread runnable 90%; pgrig.monitor.hosts)
   comes here, before the rules below; so does **shared host** (pgbench on a
   remote server's own host, whose CPUs at least 85% busy cannot be split
   between the two there).
4. **Latency / round-trip bound** - one client, CPUs not saturated, and the
   backend waited for the client at least a fifth of the time.
5. **Load generator saturated** - the busiest pgbench thread was runnable
   (running or queued for a CPU) at least 90% of the time and most backends
   sat waiting for it (Client:ClientRead).
6. **CPU-bound in the server** - backends on a CPU at least half the time, or
   the machine's CPUs at least 85% busy and the server using more CPU than
   pgbench; in both cases the server used more CPU than other processes did.
7. **Not saturated** - none of the above: backends mostly wait for the client
   while CPUs idle; more clients (or no rate limit) would push further.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from pgrig.monitor.interference import names
from pgrig.monitor.limits import wal_syncs_line
from pgrig.monitor.model import Checkpoint, Limits, OtherLoad, Sample, Verdict
from pgrig.monitor.spool import View
from pgrig.monitor.waits import wait_class

if TYPE_CHECKING:
    from pgrig.results import PgbenchRun

T = TypeVar("T")

CAUSES = {
    "starved": "starved by other processes",
    "stalls": "checkpoint / dirty-page stalls",
    "lock": "lock contention",
    "wal": "WAL / fsync bound",
    "read": "storage-read bound",
    "write": "storage-write bound",
    "lwlock": "LWLock contention",
    "latency": "latency / round-trip bound",
    "client": "load generator saturated",
    "client_host": "client-bound: a load host ran out of CPU",  # pgrig.monitor.hosts
    # pgrig.monitor.hosts: pgbench on the server's own (remote) host, its CPUs saturated
    "shared_host": "CPU-bound: the server and pgbench share the host's CPUs",
    "cpu": "CPU-bound in the server",
    "idle": "not saturated",
    "unknown": "no verdict",
}

# Wait classes of the dominant-wait rule: (cause, share of backend samples needed).
WAIT_THRESHOLDS = {"lock": 0.30, "wal": 0.30, "read": 0.25, "write": 0.25, "lwlock": 0.30}
CLASS_NOUNS = {
    "lock": "Lock waits",
    "wal": "WAL waits",
    "read": "data-file reads",
    "write": "data-file writes",
    "lwlock": "LWLock waits",
    "client": "waits for the client",
}
DIP_FRACTION = 0.5  # a second below half the median tps is a dip
STALL_SHARE = 0.10  # of the run's seconds
CLIENT_DEMAND_PCT = 90.0
CLIENT_WAIT_SHARE = 0.5
CPU_BUSY_PCT = 85.0
BACKEND_CPU_SHARE = 0.5
STARVED_OTHER_PCT = 10.0  # = interference.Thresholds.cpu_pct's default
STARVED_RUNQ_PCT = 25.0
SERVER_WRITE_SHARE = 0.5  # of the device's written bytes, for a Dirty peak to be the server's
LATENCY_CLIENT_SHARE = 0.2


@dataclass(frozen=True)
class Finding:
    cause: str
    strength: float  # to order findings: a share in [0, 1]
    summary: str  # numbers after the label
    evidence: tuple[str, ...]


def pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.1f}"


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


class Evidence:
    """Aggregates over the samples inside the run. ``samples`` may be a view of
    the spool (``pgrig.monitor.spool.View``): every rule reads it in passes and
    keeps numbers, never the samples themselves."""

    def __init__(
        self,
        samples: Collection[Sample],
        checkpoints: Sequence[Checkpoint],
        others: OtherLoad | None = None,
        clients: int | None = None,
    ) -> None:
        self.samples = samples
        # Each aggregate once: a pass over a spool's view decodes every sample.
        self._known: dict[tuple[str, ...], object] = {}
        self.checkpoints = list(checkpoints)
        self.others = others
        self.clients = clients
        self.waits: Counter[str] = Counter()
        # Of those, the backends whose process was runnable (on a CPU or queued
        # for one) with the event still set: not waiting on what it names.
        self.runnable: Counter[str] = Counter()
        for s in self.samples:
            if s.pg is not None:
                self.waits.update(s.pg.waits)
                for key, n in s.pg.states.items():
                    event, _, state = key.rpartition("|")
                    if state == "R":
                        self.runnable[event] += n
        self.backend_samples = sum(self.waits.values())
        self.classes: Counter[str] = Counter()
        self.runnable_classes: Counter[str] = Counter()
        for event, n in self.waits.items():
            self.classes[wait_class(event)] += n
            self.runnable_classes[wait_class(event)] += self.runnable[event]

    def share(self, cls: str) -> float:
        return self.classes[cls] / self.backend_samples if self.backend_samples else 0.0

    def reached_storage(self, cls: str) -> bool:
        """Did the run's I/O of this class reach the storage, by the server's own
        counters: WAL synced (pg_stat_wal), data read from the device
        (/proc/<pid>/io read_bytes), written to it? Unknown counts as yes."""
        if cls == "wal":
            syncs = [s.pg.wal_syncs_s for s in self.samples if s.pg is not None]
            known = [v for v in syncs if v is not None]
            return not known or statistics.fmean(known) > 0
        if cls in ("read", "write"):
            mine = self.server_bytes(cls)
            return mine is None or mine > 0
        return True  # a lock: no I/O, and its waiters sleep

    def left_out(self, cls: str) -> int:
        """Samples of ``cls`` that do not count as waiting: its backend runnable
        (on a CPU or queued for one) under an I/O wait whose I/O never left the
        page cache - preempted inside a WAL write() with fsync off keeps
        IO:WALWrite set while it waits for a CPU (issue 41). Where the I/O
        reached the storage a runnable backend was just woken from it: counted."""
        return 0 if self.reached_storage(cls) else self.runnable_classes[cls]

    def waiting_share(self, cls: str) -> float:
        """The share of sampled backends waiting in ``cls`` (``left_out`` not)."""
        if not self.backend_samples:
            return 0.0
        return (self.classes[cls] - self.left_out(cls)) / self.backend_samples

    def runnable_text(self, top: int = 3) -> str:
        """'31% IO:WALWrite': backends runnable under a wait event that
        ``left_out`` does not count."""
        own = [
            (event, n)
            for event, n in self.runnable.most_common()
            if (cls := wait_class(event)) in WAIT_THRESHOLDS and n and self.left_out(cls)
        ]
        return ", ".join(f"{pct(n / self.backend_samples)} {event}" for event, n in own[:top])

    def events_of(self, cls: str, top: int = 3) -> str:
        """'91% IO:DataFileRead, 3% IO:DataFilePrefetch' for one class."""
        parts = [
            f"{pct(n / self.backend_samples)} {event}"
            for event, n in self.waits.most_common()
            if wait_class(event) == cls and n
        ]
        return ", ".join(parts[:top])

    def class_text(self, cls: str) -> str:
        """'IO:DataFileRead' when one event makes the class, else
        'Lock waits (64% Lock:transactionid, 11% Lock:tuple)'."""
        events = [e for e, n in self.waits.items() if wait_class(e) == cls and n]
        if len(events) == 1:
            return events[0]
        return f"{CLASS_NOUNS.get(cls, cls)} ({self.events_of(cls)})"

    def top_waits(self, top: int = 4) -> str:
        if not self.backend_samples:
            return "no backend samples"
        return ", ".join(
            f"{pct(n / self.backend_samples)} {event}" for event, n in self.waits.most_common(top)
        )

    def _once(self, key: tuple[str, ...], work: Callable[[], T]) -> T:
        if key not in self._known:
            self._known[key] = work()
        value = cast("T", self._known[key])
        return value

    def busy(self) -> float | None:
        """The median of the machine's busy CPU share."""
        return self._once(("busy",), lambda: median([s.cpu.busy for s in self.samples]))

    def cpu(self, field: str) -> float | None:
        return self._once(
            ("cpu", field), lambda: median([getattr(s.cpu, field) for s in self.samples])
        )

    def mean_cpu(self, field: str) -> float | None:
        return self._once(("mean_cpu", field), lambda: self._mean_cpu(field))

    def _mean_cpu(self, field: str) -> float | None:
        values = [getattr(s.cpu, field) for s in self.samples]
        present = [v for v in values if v is not None]
        return statistics.fmean(present) if present else None

    def server_bytes(self, field: str) -> float | None:
        """The server's own MiB/s read or written (/proc/<pid>/io), median; None: unknown."""
        return self._once(("server_bytes", field), lambda: self._server_bytes(field))

    def _server_bytes(self, field: str) -> float | None:
        values = [getattr(s.io, f"server_{field}_mib_s") for s in self.samples if s.io]
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    def server_share(self, field: str) -> float | None:
        """The server's share of the device's bytes read or written over the run."""
        return self._once(("server_share", field), lambda: self._server_share(field))

    def _server_share(self, field: str) -> float | None:
        seen, server, device = 0, 0.0, 0.0
        for s in self.samples:
            x = s.io
            if x is None or x.device is None:
                continue
            mine = getattr(x, f"server_{field}_mib_s")
            if mine is None:
                return None
            seen += 1
            server += mine
            device += getattr(x, f"device_{field}_mib_s")
        if not seen:
            return None
        return min(1.0, server / device) if device > 0 else None

    def pg(self, getter: Callable[..., float | None]) -> float | None:
        return median([getter(s.pg) for s in self.samples if s.pg is not None])

    def busiest_device(self) -> str | None:
        return self._once(("busiest_device",), self._busiest_device)

    def _busiest_device(self) -> str | None:
        util: dict[str, list[float]] = {}
        for s in self.samples:
            for d in s.devices:
                util.setdefault(d.name, []).append(d.util_pct)
        if not util:
            return None
        return max(util, key=lambda n: statistics.median(util[n]))

    def device(self, name: str, field: str) -> float | None:
        return self._once(
            ("device", name, field),
            lambda: median(
                [getattr(d, field) for s in self.samples for d in s.devices if d.name == name]
            ),
        )

    def device_text(self, reads: bool) -> str | None:
        name = self.busiest_device()
        if name is None:
            return None
        util = self.device(name, "util_pct") or 0.0
        if reads:
            rate = self.device(name, "reads_s") or 0.0
            wait = self.device(name, "read_await_ms") or 0.0
            text = f"{name} (device-wide) {util:.0f}% busy, {num(rate)} r/s, {wait:.2f} ms per read"
        else:
            rate = self.device(name, "writes_s") or 0.0
            flushes = self.device(name, "flushes_s") or 0.0
            wait = self.device(name, "write_await_ms") or 0.0
            text = (
                f"{name} (device-wide) {util:.0f}% busy, {num(rate)} w/s, {wait:.2f} ms per write"
            )
            text += f", {num(flushes)} flushes/s" if flushes else ""
        return text + self.own_share_text("read" if reads else "write")

    def own_share_text(self, field: str) -> str:
        """'; the server's own reads: median 12.0 MiB/s, 93% of the device's bytes...'."""
        mine = self.server_bytes(field)
        if mine is None:
            return ""
        share = self.server_share(field)
        text = f"; the server's own {field}s: median {mine:.1f} MiB/s"
        if share is None or round(mine, 1) == 0:
            return text
        return text + f", {pct(share)} of the device's bytes over the run"

    def hit_ratio(self) -> float | None:
        hit = sum(s.pg.blks_hit_s for s in self.samples if s.pg is not None)
        read = sum(s.pg.blks_read_s for s in self.samples if s.pg is not None)
        return hit / (hit + read) if hit + read else None


# --------------------------------------------------------------------------
# Rules


def stalls(ev: Evidence) -> Finding | None:
    tps = [s.tps for s in ev.samples if s.tps is not None]
    if len(tps) < 5:
        return None
    med = statistics.median(tps)
    dips = View(lambda: (s for s in ev.samples if s.tps is not None and s.tps < DIP_FRACTION * med))
    if len(dips) < 2 or len(dips) < STALL_SHARE * len(tps):
        return None
    writeback = median([s.memory.writeback_mib for s in ev.samples if s.memory]) or 0.0
    dirty = median([s.memory.dirty_mib for s in ev.samples if s.memory]) or 0.0

    def in_checkpoint(s: Sample) -> bool:
        begin = s.t_s - s.interval_s
        return any(
            c.start_s <= s.t_s and (c.end_s is None or c.end_s >= begin) for c in ev.checkpoints
        )

    def flushing(s: Sample) -> bool:
        m = s.memory
        return m is not None and (
            m.writeback_mib > max(2 * writeback, 16.0) or m.dirty_mib > max(2 * dirty, 64.0)
        )

    ckpt = View(lambda: (s for s in dips if in_checkpoint(s)))
    # Dirty and Writeback are host-wide: a peak is the server's only when the
    # server itself wrote most of what reached the device.
    own = ev.server_share("write")
    theirs = own is None or own < SERVER_WRITE_SHARE
    flush = View(lambda: iter(()) if theirs else (s for s in dips if flushing(s)))
    aligned = max(len(ckpt), len(flush))
    if aligned < len(dips) / 2:
        return None
    evidence = [
        f"{len(dips)} of {len(tps)} seconds below half the median tps ({num(med)} tps)",
    ]
    if ckpt:
        evidence.append(f"{len(ckpt)} of the dips during a checkpoint")
    if flush:
        peak_wb = max(s.memory.writeback_mib for s in flush if s.memory)
        peak_dirty = max(s.memory.dirty_mib for s in flush if s.memory)
        evidence.append(
            f"{len(flush)} during host-wide Dirty/Writeback peaks (Dirty up to "
            f"{num(peak_dirty)} MiB, Writeback up to {num(peak_wb)} MiB) while the server "
            f"wrote {pct(own or 0.0)} of the bytes written to the device"
        )
    return Finding("stalls", len(dips) / len(tps), "; ".join(evidence), tuple(evidence))


def starved(ev: Evidence) -> Finding | None:
    """Other processes held CPUs the server or pgbench wanted."""
    other = ev.mean_cpu("other")
    if other is None:
        return None
    steal = ev.mean_cpu("steal") or 0.0
    busy = ev.busy() or 0.0
    runq = ev.cpu("server_runq_pct")
    if other + steal < STARVED_OTHER_PCT:
        return None
    if busy < CPU_BUSY_PCT and (runq is None or runq < STARVED_RUNQ_PCT):
        return None
    top = names(ev.others.top) if ev.others is not None and ev.others.top else ""
    evidence = [
        f"other processes took {other:.0f}% of the machine's CPU" + (f" ({top})" if top else ""),
    ]
    if steal >= 1:
        evidence.append(f"the hypervisor gave {steal:.0f}% to other guests (steal)")
    server, client, mine = ev.mean_cpu("server"), ev.mean_cpu("client"), ev.mean_cpu("pgrig")
    split = ", ".join(
        f"{name} {value:.0f}%"
        for name, value in (("server", server), ("pgbench", client), ("pgrig", mine))
        if value is not None
    )
    evidence.append(f"CPUs {busy:.0f}% busy" + (f"; the benchmark got {split}" if split else ""))
    if runq is not None:
        evidence.append(
            f"server processes queued for a CPU {runq:.0f}% of the time they wanted one"
        )
    evidence.append(f"sampled backends: {ev.top_waits(3)}")
    if preempted := ev.runnable_text():
        evidence.append(
            f"runnable under an I/O wait that never reached the storage (on or queued for "
            f"a CPU, not waiting on it): {preempted}"
        )
    evidence.append("the run measured the contention, not the server: rerun on a quiet machine")
    return Finding("starved", (other + steal) / 100, "; ".join(evidence[:-1]), tuple(evidence))


def round_trips(ev: Evidence, run: object) -> Finding | None:
    """One client, nothing saturated: each transaction waits for its round trips."""
    if ev.clients != 1:
        return None
    busy = ev.busy() or 0.0
    waiting = ev.share("client")
    if busy >= CPU_BUSY_PCT or waiting < LATENCY_CLIENT_SHARE:
        return None
    evidence = [
        f"1 client: the backend waited for it {pct(waiting)} of the samples, on a CPU "
        f"{pct(ev.share('cpu'))}",
        f"CPUs {busy:.0f}% busy" + _cpu_split(ev, busy),
    ]
    latency = getattr(run, "latency_avg_ms", None)
    if latency:
        evidence.append(f"{latency:.3f} ms per transaction, round trips included")
    evidence.append("more clients would use the idle CPUs: round-trip latency is the limit")
    return Finding("latency", waiting, "; ".join(evidence[:-1]), tuple(evidence))


def dominant_wait(ev: Evidence) -> list[Finding]:
    out = []
    for cls, threshold in WAIT_THRESHOLDS.items():
        share = ev.waiting_share(cls)
        if share < threshold:
            continue
        evidence = [f"{pct(share)} of sampled backends on {ev.class_text(cls)}"]
        if runnable := ev.left_out(cls):
            evidence[0] += (
                f" (another {pct(runnable / ev.backend_samples)} runnable with it set and "
                "none of its I/O on the storage: on or queued for a CPU, not counted)"
            )
        if cls == "lock":
            rb = ev.pg(lambda p: p.rollbacks_s)
            deadlocks = sum(s.pg.deadlocks for s in ev.samples if s.pg is not None)
            if rb:
                evidence.append(f"{num(rb)} rollbacks/s")
            if deadlocks:
                evidence.append(f"{deadlocks} deadlocks")
        elif cls == "wal":
            syncs = ev.pg(lambda p: p.wal_syncs_s)
            commits = ev.pg(lambda p: p.commits_s)
            if syncs is not None:
                evidence.append(f"{num(syncs)} WAL syncs/s for {num(commits or 0)} commits/s")
            if text := ev.device_text(reads=False):
                evidence.append(text)
        elif cls == "read":
            ratio = ev.hit_ratio()
            if ratio is not None:
                evidence.append(f"hit ratio {pct(ratio)}")
            if text := ev.device_text(reads=True):
                evidence.append(text)
        elif cls == "write" and (text := ev.device_text(reads=False)):
            evidence.append(text)
        out.append(Finding(cls, share, "; ".join(evidence), tuple(evidence)))
    return sorted(out, key=lambda f: -f.strength)


def _others_lead(ev: Evidence) -> bool:
    server = ev.mean_cpu("server")
    other = (ev.mean_cpu("other") or 0.0) + (ev.mean_cpu("steal") or 0.0)
    return server is None or other >= server


def load_generator(ev: Evidence, run: object = None) -> Finding | None:
    demand = ev.cpu("client_thread_demand_pct")
    waiting = ev.share("client")
    if demand is None or demand < CLIENT_DEMAND_PCT or waiting < CLIENT_WAIT_SHARE:
        return None
    core = ev.cpu("client_thread_core_pct") or 0.0
    evidence = (
        f"busiest pgbench thread runnable {demand:.0f}% of the time "
        f"(on a CPU {core:.0f}%, the rest queued for one)",
        f"{pct(waiting)} of sampled backends waiting for pgbench ({ev.events_of('client', 2)})",
    )
    return Finding("client", demand / 100, "; ".join(evidence), evidence)


def server_cpu(ev: Evidence, run: object = None) -> Finding | None:
    on_cpu = ev.share("cpu")
    busy = ev.busy()
    server = ev.cpu("server")
    client = ev.cpu("client")
    other = ev.mean_cpu("other")
    saturated = busy is not None and busy >= CPU_BUSY_PCT
    server_leads = server is None or client is None or server >= client
    if not (on_cpu >= BACKEND_CPU_SHARE or (saturated and server_leads)):
        return None
    if other is not None and (_others_lead(ev) or starved(ev) is not None):
        # Backends "on a CPU" include those queued for one: others held the CPUs,
        # and the server's share of them was set by the contention.
        return None
    evidence = [f"CPUs {busy or 0:.0f}% busy" + _cpu_split(ev, busy)]
    runq = ev.cpu("server_runq_pct")
    if runq is not None:
        evidence.append(
            f"server processes queued for a CPU {runq:.0f}% of the time they wanted one"
        )
    evidence.append(f"sampled backends: {ev.top_waits(3)}")
    return Finding("cpu", max(on_cpu, (busy or 0) / 100), "; ".join(evidence), tuple(evidence))


def _cpu_split(ev: Evidence, busy: float | None) -> str:
    """' (server 40%, pgbench 12%, pgrig 1%, other processes 3%)': means over the run."""
    server, client = ev.mean_cpu("server"), ev.mean_cpu("client")
    other = ev.mean_cpu("other")
    if server is None or client is None or busy is None:
        return ""
    if other is None:  # stored by a pgrig that did not attribute the rest
        rest = max(0.0, busy - server - client)
        return f" (server {server:.0f}%, pgbench {client:.0f}%, the rest {rest:.0f}%)"
    mine = ev.mean_cpu("pgrig") or 0.0
    return (
        f" (server {server:.0f}%, pgbench {client:.0f}%, pgrig {mine:.0f}%, "
        f"other processes {other:.0f}%)"
    )


def not_saturated(ev: Evidence) -> Finding:
    busy = ev.busy() or 0.0
    evidence = (
        f"CPUs {busy:.0f}% busy" + _cpu_split(ev, busy),
        f"sampled backends: {ev.top_waits(3)}",
        "no wait class dominates and pgbench is not saturated: more clients (or no rate "
        "limit) would push further",
    )
    return Finding("idle", 0.0, "; ".join(evidence[:2]), evidence)


def against_limits(ev: Evidence, limits: Limits | None) -> tuple[str, ...]:
    """The run against the probes. Device counters are every process's traffic:
    they are labelled device-wide, next to the server's own bytes."""
    if limits is None:
        return ()
    out = []
    name = ev.busiest_device()
    if limits.randread_iops and name is not None:
        reads = [d.reads_s for s in ev.samples for d in s.devices if d.name == name]
        if reads:
            peak, med = max(reads), statistics.median(reads)
            out.append(
                f"device-wide reads on {name} (every process): {num(med)} r/s median, "
                f"{num(peak)} peak = {pct(med / limits.randread_iops)} / "
                f"{pct(peak / limits.randread_iops)} of the {num(limits.randread_iops)} IOPS "
                f"fio measured (8k randread)" + ev.own_share_text("read")
            )
    if limits.randwrite_iops and name is not None:
        writes = [d.writes_s for s in ev.samples for d in s.devices if d.name == name]
        if writes:
            med = statistics.median(writes)
            out.append(
                f"device-wide writes on {name} (every process): {num(med)} w/s median = "
                f"{pct(med / limits.randwrite_iops)} of the {num(limits.randwrite_iops)} IOPS "
                f"fio measured (8k randwrite)" + ev.own_share_text("write")
            )
    if limits.fdatasync_ops:
        syncs = [s.pg.wal_syncs_s for s in ev.samples if s.pg and s.pg.wal_syncs_s is not None]
        if syncs:
            out.append(wal_syncs_line(syncs, limits.fdatasync_ops))
    return tuple(out)


def clients_of(run: object, samples: Collection[Sample]) -> int | None:
    """Clients of the run (pgbench -c, TPC-C connections), else the most
    client backends seen in one sample."""
    for attr in ("clients", "connections"):
        value = getattr(run, attr, None)
        if isinstance(value, int):
            return value
    seen = [sum(s.pg.waits.values()) for s in samples if s.pg is not None]
    return max(seen) if seen else None


def decide(
    samples: Collection[Sample],
    checkpoints: Sequence[Checkpoint],
    limits: Limits | None,
    run: PgbenchRun | None,
    others: OtherLoad | None = None,
    load_hosts: Finding | None = None,
) -> Verdict:
    """Apply the rules to the samples inside the run; see the module docstring.

    ``load_hosts``: the client-bound finding of the run's load hosts, when the
    load came from other machines (``pgrig.monitor.hosts.client_bound``). It
    comes after the server's own waits and a starved server host, and before
    every rule that reads the server's CPU or its waits for the client: those
    describe a run held back by its load generators."""
    inside = View(lambda: (s for s in samples if s.in_run))
    if len(inside) < 2:
        return Verdict(
            "unknown",
            CAUSES["unknown"],
            f"{CAUSES['unknown']}: {len(inside)} sample(s) inside the run, at least 2 needed",
        )
    ev = Evidence(inside, checkpoints, others, clients_of(run, inside))
    findings: list[Finding] = []
    if f := stalls(ev):
        findings.append(f)
    # The server's own waits stand whoever else runs: they come first.
    findings += dominant_wait(ev)
    # CPU-shaped evidence (backends on a CPU or waiting for the client) is what
    # others distort: once they starved the run, the contention leads - even
    # when the server got more CPU than they did, its share was set by the
    # contention, so "CPU-bound in the server" is not said at all.
    if starving := starved(ev):
        findings.append(starving)
    if load_hosts is not None:
        findings.append(load_hosts)
    for rule in (round_trips, load_generator, server_cpu):
        if f := rule(ev, run):
            findings.append(f)
    primary = findings[0] if findings else not_saturated(ev)
    label = CAUSES[primary.cause]
    secondary = tuple(f"{CAUSES[f.cause]}: {f.summary}" for f in findings[1:])
    evidence = primary.evidence
    if ev.backend_samples and primary.cause not in ("cpu", "idle", "starved"):
        evidence += (f"sampled backends: {ev.top_waits()}",)
    if progress := getattr(run, "progress", None):
        tps = [p.tps for p in progress]
        mean = getattr(run, "tps", statistics.fmean(tps))
        evidence += (f"pgbench: {num(mean)} tps; per second {num(min(tps))} to {num(max(tps))}",)
    return Verdict(
        cause=primary.cause,
        label=label,
        summary=f"{label}: {primary.summary}",
        evidence=evidence,
        secondary=secondary,
        against_limits=against_limits(ev, limits),
    )
