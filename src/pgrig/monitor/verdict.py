"""The bottleneck verdict: one primary cause, chosen by documented rules, with its numbers.

Everything is a share, not an absolute: the machine may be shared, so "the
CPUs were busy" says nothing alone; "backends spent 91% of their time on
IO:DataFileRead" does. The rules (docs/monitor.md explains them):

1. **Stalls** - checkpoint or dirty-page stalls: at least 10% of the run's
   seconds (and at least 2) are dips below half the median tps, and most dips
   fall in a checkpoint or in a Writeback peak.
2. **Dominant wait** - where the client backends' time went, from
   pg_stat_activity once a second. The largest wait class above its threshold
   wins: lock contention (Lock:*), WAL / fsync (WALSync, WALWrite, WALInsert),
   storage read (DataFileRead), storage write (DataFileWrite/Extend/Sync),
   LWLock contention (other LWLocks).
3. **Load generator saturated** - the busiest pgbench thread was runnable
   (running or queued for a CPU) at least 90% of the time and most backends
   sat waiting for it (Client:ClientRead).
4. **CPU-bound in the server** - backends on a CPU at least half the time, or
   the machine's CPUs at least 85% busy and the server using more CPU than
   pgbench.
5. **Not saturated** - none of the above: backends mostly wait for the client
   while CPUs idle; the run is latency-bound (round trips) or rate-limited.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pgrig.monitor.model import Checkpoint, Limits, Sample, Verdict

if TYPE_CHECKING:
    from pgrig.results import PgbenchRun

CAUSES = {
    "stalls": "checkpoint / dirty-page stalls",
    "lock": "lock contention",
    "wal": "WAL / fsync bound",
    "read": "storage-read bound",
    "write": "storage-write bound",
    "lwlock": "LWLock contention",
    "client": "load generator saturated",
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

_WAL_EVENTS = {
    "IO:WALSync",
    "IO:WALWrite",
    "IO:WALInitSync",
    "IO:WALInitWrite",
    "LWLock:WALWrite",
    "LWLock:WALInsert",
    "LWLock:WALBufMapping",
}
_READ_EVENTS = {"IO:DataFileRead", "IO:DataFilePrefetch", "IO:BufFileRead", "IO:SLRURead"}
_WRITE_EVENTS = {
    "IO:DataFileWrite",
    "IO:DataFileExtend",
    "IO:DataFileFlush",
    "IO:DataFileSync",
    "IO:BufFileWrite",
    "IO:SLRUWrite",
    "IO:SLRUSync",
}


def wait_class(event: str) -> str:
    """Which cause a wait-event key (as PgSample.waits has them) counts towards."""
    if event == "CPU":
        return "cpu"
    if event.startswith("Client:") or event.startswith("idle"):
        return "client"
    if event in _WAL_EVENTS:
        return "wal"
    if event.startswith("Lock:"):
        return "lock"
    if event in _READ_EVENTS:
        return "read"
    if event in _WRITE_EVENTS:
        return "write"
    if event.startswith("LWLock:"):
        return "lwlock"
    return "other"


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
    """Aggregates over the samples inside the run."""

    def __init__(self, samples: Sequence[Sample], checkpoints: Sequence[Checkpoint]) -> None:
        self.samples = list(samples)
        self.checkpoints = list(checkpoints)
        self.waits: Counter[str] = Counter()
        for s in self.samples:
            if s.pg is not None:
                self.waits.update(s.pg.waits)
        self.backend_samples = sum(self.waits.values())
        self.classes: Counter[str] = Counter()
        for event, n in self.waits.items():
            self.classes[wait_class(event)] += n

    def share(self, cls: str) -> float:
        return self.classes[cls] / self.backend_samples if self.backend_samples else 0.0

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

    def cpu(self, field: str) -> float | None:
        return median([getattr(s.cpu, field) for s in self.samples])

    def pg(self, getter: Callable[..., float | None]) -> float | None:
        return median([getter(s.pg) for s in self.samples if s.pg is not None])

    def busiest_device(self) -> str | None:
        util: dict[str, list[float]] = {}
        for s in self.samples:
            for d in s.devices:
                util.setdefault(d.name, []).append(d.util_pct)
        if not util:
            return None
        return max(util, key=lambda n: statistics.median(util[n]))

    def device(self, name: str, field: str) -> float | None:
        return median(
            [getattr(d, field) for s in self.samples for d in s.devices if d.name == name]
        )

    def device_text(self, reads: bool) -> str | None:
        name = self.busiest_device()
        if name is None:
            return None
        util = self.device(name, "util_pct") or 0.0
        if reads:
            rate = self.device(name, "reads_s") or 0.0
            wait = self.device(name, "read_await_ms") or 0.0
            return f"{name} {util:.0f}% busy, {num(rate)} r/s, {wait:.2f} ms per read"
        rate = self.device(name, "writes_s") or 0.0
        flushes = self.device(name, "flushes_s") or 0.0
        wait = self.device(name, "write_await_ms") or 0.0
        text = f"{name} {util:.0f}% busy, {num(rate)} w/s, {wait:.2f} ms per write"
        return text + (f", {num(flushes)} flushes/s" if flushes else "")

    def hit_ratio(self) -> float | None:
        hit = sum(s.pg.blks_hit_s for s in self.samples if s.pg is not None)
        read = sum(s.pg.blks_read_s for s in self.samples if s.pg is not None)
        return hit / (hit + read) if hit + read else None


# --------------------------------------------------------------------------
# Rules


def stalls(ev: Evidence) -> Finding | None:
    tps = [(s, s.tps) for s in ev.samples if s.tps is not None]
    if len(tps) < 5:
        return None
    med = statistics.median(t for _, t in tps)
    dips = [s for s, t in tps if t < DIP_FRACTION * med]
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

    ckpt = [s for s in dips if in_checkpoint(s)]
    flush = [s for s in dips if flushing(s)]
    aligned = max(len(ckpt), len(flush))
    if aligned < len(dips) / 2:
        return None
    evidence = [
        f"{len(dips)} of {len(tps)} seconds below half the median tps ({num(med)} tps)",
    ]
    if ckpt:
        evidence.append(f"{len(ckpt)} of the dips during a checkpoint")
    if flush:
        peak = max(s.memory.writeback_mib for s in flush if s.memory)
        evidence.append(
            f"{len(flush)} during Dirty/Writeback peaks (Writeback up to {num(peak)} MiB)"
        )
    return Finding("stalls", len(dips) / len(tps), "; ".join(evidence), tuple(evidence))


def dominant_wait(ev: Evidence) -> list[Finding]:
    out = []
    for cls, threshold in WAIT_THRESHOLDS.items():
        share = ev.share(cls)
        if share < threshold:
            continue
        evidence = [f"{pct(share)} of sampled backends on {ev.class_text(cls)}"]
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


def load_generator(ev: Evidence) -> Finding | None:
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


def server_cpu(ev: Evidence) -> Finding | None:
    on_cpu = ev.share("cpu")
    busy = median([s.cpu.busy for s in ev.samples])
    server = ev.cpu("server")
    client = ev.cpu("client")
    saturated = busy is not None and busy >= CPU_BUSY_PCT
    server_leads = server is None or client is None or server >= client
    if not (on_cpu >= BACKEND_CPU_SHARE or (saturated and server_leads)):
        return None
    evidence = [f"CPUs {busy or 0:.0f}% busy" + _cpu_split(server, client, busy)]
    runq = ev.cpu("server_runq_pct")
    if runq is not None:
        evidence.append(
            f"server processes queued for a CPU {runq:.0f}% of the time they wanted one"
        )
    evidence.append(f"sampled backends: {ev.top_waits(3)}")
    return Finding("cpu", max(on_cpu, (busy or 0) / 100), "; ".join(evidence), tuple(evidence))


def _cpu_split(server: float | None, client: float | None, busy: float | None) -> str:
    if server is None or client is None or busy is None:
        return ""
    other = max(0.0, busy - server - client)
    return f" (server {server:.0f}%, pgbench {client:.0f}%, other processes {other:.0f}%)"


def not_saturated(ev: Evidence) -> Finding:
    busy = median([s.cpu.busy for s in ev.samples]) or 0.0
    server, client = ev.cpu("server"), ev.cpu("client")
    evidence = (
        f"CPUs {busy:.0f}% busy" + _cpu_split(server, client, busy),
        f"sampled backends: {ev.top_waits(3)}",
        "no wait class dominates and pgbench is not saturated: more clients (or no rate "
        "limit) would push further",
    )
    return Finding("idle", 0.0, "; ".join(evidence[:2]), evidence)


def against_limits(ev: Evidence, limits: Limits | None) -> tuple[str, ...]:
    if limits is None:
        return ()
    out = []
    name = ev.busiest_device()
    if limits.randread_iops and name is not None:
        reads = [d.reads_s for s in ev.samples for d in s.devices if d.name == name]
        if reads:
            peak, med = max(reads), statistics.median(reads)
            out.append(
                f"reads: {num(med)} r/s median, {num(peak)} peak on {name} = "
                f"{pct(med / limits.randread_iops)} / {pct(peak / limits.randread_iops)} of "
                f"the {num(limits.randread_iops)} IOPS fio measured (8k randread)"
            )
    if limits.randwrite_iops and name is not None:
        writes = [d.writes_s for s in ev.samples for d in s.devices if d.name == name]
        if writes:
            med = statistics.median(writes)
            out.append(
                f"writes: {num(med)} w/s median on {name} = {pct(med / limits.randwrite_iops)} of "
                f"the {num(limits.randwrite_iops)} IOPS fio measured (8k randwrite)"
            )
    if limits.fdatasync_ops:
        syncs = [s.pg.wal_syncs_s for s in ev.samples if s.pg and s.pg.wal_syncs_s is not None]
        if syncs:
            med, peak = statistics.median(syncs), max(syncs)
            out.append(
                f"WAL syncs: {num(med)}/s median, {num(peak)} peak = "
                f"{pct(med / limits.fdatasync_ops)} / {pct(peak / limits.fdatasync_ops)} of the "
                f"{num(limits.fdatasync_ops)} fdatasync ops/s pg_test_fsync measured"
            )
    return tuple(out)


def decide(
    samples: Sequence[Sample],
    checkpoints: Sequence[Checkpoint],
    limits: Limits | None,
    run: PgbenchRun | None,
) -> Verdict:
    """Apply the rules to the samples inside the run; see the module docstring."""
    inside = [s for s in samples if s.in_run]
    if len(inside) < 2:
        return Verdict(
            "unknown",
            CAUSES["unknown"],
            f"{CAUSES['unknown']}: {len(inside)} sample(s) inside the run, at least 2 needed",
        )
    ev = Evidence(inside, checkpoints)
    findings: list[Finding] = []
    if f := stalls(ev):
        findings.append(f)
    findings += dominant_wait(ev)
    for rule in (load_generator, server_cpu):
        if f := rule(ev):
            findings.append(f)
    primary = findings[0] if findings else not_saturated(ev)
    label = CAUSES[primary.cause]
    secondary = tuple(f"{CAUSES[f.cause]}: {f.summary}" for f in findings[1:])
    evidence = primary.evidence
    if ev.backend_samples and primary.cause not in ("cpu", "idle"):
        evidence += (f"sampled backends: {ev.top_waits()}",)
    if run is not None and run.progress:
        tps = [p.tps for p in run.progress]
        evidence += (f"pgbench: {num(run.tps)} tps; per second {num(min(tps))} to {num(max(tps))}",)
    return Verdict(
        cause=primary.cause,
        label=label,
        summary=f"{label}: {primary.summary}",
        evidence=evidence,
        secondary=secondary,
        against_limits=against_limits(ev, limits),
    )
