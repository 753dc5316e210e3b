"""The conclusion rules that say what bounds a target: fsync latency, a wait
class, the load generator, an idle vCPU's wake-up, a storage-lab I/O cap
(rules 4-7 of pgrig.report.conclusions)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pgrig.document import fmt
from pgrig.monitor.verdict import CAUSES, CLASS_NOUNS
from pgrig.probe import FIO
from pgrig.registry.report import Conclusion
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report.evidence import Evidence, client_counts, point_words
from pgrig.report.pointkey import Curve, PointKey, point_key
from pgrig.report.probes import FsyncRuns, fsync_headline
from pgrig.results import (
    FioResult,
    FsyncResult,
    PgbenchRun,
)
from pgrig.storage.kinds import LAB
from pgrig.storage.model import LabInfo
from pgrig.storage.throttle import IoLimits

FSYNC_SHARE = 0.5  # of the 1-client transaction latency
UNSYNCED = ("synchronous_commit", "fsync")  # either off: commits wait for no sync
WAIT_CAUSES = ("read", "write", "wal", "lock", "lwlock")
# The monitor's verdicts that put the limit in pgbench, not in the server.
CLIENT_CAUSES = {
    "client": "pgbench, the load generator, was saturated",
    "client_host": "a load host ran out of CPU",
}
WAIT_SHARE = 0.5  # of a point's monitored runs
WAKEUP_RATIO = 2.5  # tps(2 clients) / tps(1 client); 2 is what twice the work gives
WAKEUP_BUSY_PCT = 50.0  # CPUs busier than this at 1 client: no idle vCPU to wake
CAP_BOUND = 0.9  # fio at 90% of a cap or more: the cap bound
CAP_SYNC_TOLERANCE = 0.1  # fdatasync within 10% of half the write-IOPS cap
# A run syncing faster than the probe by more than its noise refutes the probe.
SYNC_RATE_TOLERANCE = 0.1


def fsync_bound(ev: Evidence) -> list[Conclusion]:
    """One client's synchronous commits against the fdatasync pg_test_fsync
    measured: said only when the runs' own latency and sync rates agree
    (``sync_disagreement``); when they refute it, that is said instead."""
    out = []
    for key, per in ev.points().items():
        if key.clients != 1 or key.mode != "read-write":
            continue
        syncs = ev.wal_syncs(clients=1)
        for target, runs in per.items():
            probe = probe_sync(ev, target)
            if not runs or probe is None or not synchronous(ev, target):
                continue
            latency = statistics.median(r.latency_avg_ms for r in runs)
            share = probe.usecs / 1000 / latency if latency > 0 else 0.0
            if share < FSYNC_SHARE:
                continue
            refuted = sync_disagreement(probe, runs, syncs.get((target, key)))
            text = (
                _refuted(target, key, probe, share, latency, refuted)
                if refuted
                else f"{target}: single-client commits are bounded by fsync latency: one "
                f"{probe.method} takes {fmt.us(probe.usecs)} us (pg_test_fsync, one 8 kB write), "
                f"{share:.0%} of the {fmt.ms(latency)} ms a {point_words(key)} transaction "
                f"takes at 1 client (median of {len(runs)} run(s)); a faster-syncing disk, "
                "not more CPU, would raise it."
            )
            out.append(Conclusion("fsync-bound", text, f"median of {len(runs)} run(s)"))
    return out


def _refuted(
    target: str, key: PointKey, probe: Probe, share: float, latency: float, why: Sequence[str]
) -> str:
    of_it = (
        f"{share:.0%} of the {fmt.ms(latency)} ms"
        if share <= 1
        else f"more than the {fmt.ms(latency)} ms"
    )
    return (
        f"{target}: the {probe.method} pg_test_fsync measured ({fmt.us(probe.usecs)} us"
        + (f", {fmt.rate(probe.ops)} ops/s" if probe.ops else "")
        + f") would be {of_it} a {point_words(key)} transaction takes at 1 client, but the "
        f"runs themselves refute that each commit waited that long: {'; '.join(why)}. The "
        "disk synced faster during the runs than during the probe, so no fsync bound is "
        "named: repeat pg_test_fsync (fsync_repeat) or run it on a quiet machine."
    )


@dataclass(frozen=True)
class Probe:
    """The median sync of one 8 kB write that pg_test_fsync measured on a target, by
    the method its server syncs the WAL with (seed 001's open_datasync)."""

    usecs: float
    ops: float | None
    method: str = "fdatasync"


def sync_method(ev: Evidence, target: str) -> str:
    """The target server's wal_sync_method (fdatasync, Linux's default, when it
    reported none other)."""
    meaning = ev.meanings.get(target)
    return dict(meaning.rest).get("wal_sync_method", "fdatasync") if meaning else "fdatasync"


def probe_sync(ev: Evidence, target: str) -> Probe | None:
    median = FsyncRuns.of(ev.index.target(target)).median()
    method = sync_method(ev, target)
    head = fsync_headline(median, method) if median is not None else None
    if head is None or head.usecs_per_op is None:  # a method pg_test_fsync gave n/a
        return None
    return Probe(head.usecs_per_op, head.ops_per_sec, method)


def synchronous(ev: Evidence, target: str) -> bool:
    """Do the target's commits wait for their WAL to reach the disk?"""
    meaning = ev.meanings.get(target)
    return meaning is None or not any(meaning.settings.get(k) == "off" for k in UNSYNCED)


def sync_disagreement(
    probe: Probe, runs: Sequence[PgbenchRun], syncs: Sequence[float] | None = None
) -> list[str]:
    """What one client's own runs measured that a commit waiting for one
    probe-sized fdatasync cannot give: transactions shorter than the sync, more
    commits (one sync each, one client) or WAL syncs a second than the probe's rate.
    seed000-latency said "bounded by fsync, 2,141 us = 88% of 2.444 ms" while its
    median transaction took 0.841 ms and WAL syncs ran at 115% of the probe's rate."""
    out = []
    sync_ms = probe.usecs / 1000
    latency = statistics.median(r.latency_avg_ms for r in runs)
    if latency < sync_ms:
        out.append(f"a whole transaction took {fmt.ms(latency)} ms on average")
    p50 = [r.latency.p50_ms for r in runs if r.latency is not None]
    if p50 and statistics.median(p50) < sync_ms:
        out.append(f"the median transaction took {fmt.ms(statistics.median(p50))} ms")
    if probe.ops:
        limit = probe.ops * (1 + SYNC_RATE_TOLERANCE)
        tps = statistics.median(r.tps for r in runs)
        if tps > limit:
            out.append(
                f"one client committed {fmt.rate(tps)} transactions a second, "
                f"{tps / probe.ops:.0%} of the probe's rate"
            )
        if syncs:
            med, peak = statistics.median(syncs), max(syncs)
            if med > limit:
                out.append(
                    f"the server synced WAL {fmt.rate(med)} times a second (median; "
                    f"{fmt.rate(peak)} peak, pg_stat_wal), {med / probe.ops:.0%} of the "
                    "probe's rate"
                )
    return out


# (targets, the curve's point key, client counts, the cause, runs with it, runs)
Bound = tuple[list[str], PointKey, tuple[int, ...], str, int, int]


def _bound(ev: Evidence, causes_asked: Sequence[str]) -> list[Bound]:
    """The points whose monitor verdict names one of ``causes_asked`` for at least
    half of their runs: one entry per curve and cause, the targets bound at the
    same client counts together (seed 004's four versions at 4-32 clients are one
    finding)."""
    monitors = ev.monitors()
    if not monitors:
        return []
    groups: dict[tuple[str, PointKey], list[str]] = {}
    for rec in ev.index.kind(PGBENCH_RUN):
        if (mon := monitors.get(rec.key)) is not None:
            key = point_key(rec)
            groups.setdefault((rec.target, key), []).append(mon.verdict.cause)
    found: dict[tuple[Curve, str], dict[str, list[tuple[int, int, int]]]]
    found = {}
    for (target, key), causes in groups.items():
        for cause in causes_asked:
            n = causes.count(cause)
            if n and n >= WAIT_SHARE * len(causes):
                per = found.setdefault((key.curve, cause), {})
                per.setdefault(target, []).append((key.clients, n, len(causes)))
    out = []
    for (curve, cause), per_target in found.items():
        together: dict[tuple[int, ...], list[str]] = {}
        for target, points in per_target.items():
            together.setdefault(tuple(sorted(c for c, _, _ in points)), []).append(target)
        for counts, targets in together.items():
            n = sum(n for t in targets for _, n, _ in per_target[t])
            total = sum(total for t in targets for _, _, total in per_target[t])
            out.append((targets, PointKey(*curve, clients=0), counts, cause, n, total))
    return out


def wait_bound(ev: Evidence) -> list[Conclusion]:
    return [
        Conclusion(
            "wait-bound",
            f"{', '.join(targets)}: {point_words(key, ev.scaled(key))} at "
            f"{client_counts(counts)} is bound by {CLASS_NOUNS[cause]} "
            f"({CAUSES[cause]}): the monitor's verdict for {n} of {total} run(s), "
            "from the backends' wait events.",
            f"{n} of {total} runs",
        )
        for targets, key, counts, cause, n, total in _bound(ev, WAIT_CAUSES)
    ]


def client_bound(ev: Evidence) -> list[Conclusion]:
    """The figure measured pgbench's machine, not the server: the first thing to
    know before quoting it (a remote study's load host out of CPU said nothing)."""
    return [
        Conclusion(
            "client-bound",
            f"{', '.join(targets)}: {point_words(key, ev.scaled(key))} at "
            f"{client_counts(counts)} measured the load generator, not the server - "
            f"{CLIENT_CAUSES[cause]} in {n} of {total} run(s) (the monitor's verdict): the "
            "tps is a floor of what the server can do; more load hosts or pgbench threads "
            "would raise it.",
            f"{n} of {total} runs",
        )
        for targets, key, counts, cause, n, total in _bound(ev, tuple(CLIENT_CAUSES))
    ]


def vm_wakeup(ev: Evidence) -> list[Conclusion]:
    hypervisor = ev.on_vm()
    if hypervisor is None:
        return []
    out = []
    points = ev.points()
    idle_cpu = ev.cpu_busy()
    for key, per in points.items():
        if key.clients != 1:
            continue
        two = points.get(PointKey(*key.curve, clients=2), {})
        for target, runs in per.items():
            pair = two.get(target)
            if not runs or not pair:
                continue
            one_tps = statistics.median(r.tps for r in runs)
            two_tps = statistics.median(r.tps for r in pair)
            if one_tps <= 0 or two_tps / one_tps <= WAKEUP_RATIO:
                continue
            busy = idle_cpu.get((target, key))
            if busy is not None and busy >= WAKEUP_BUSY_PCT:
                continue  # busy CPUs wake nothing: the steep curve has another cause
            seen = f" (the monitor: CPUs {busy:.0f}% busy at 1 client)" if busy is not None else ""
            one_ms = statistics.median(r.latency_avg_ms for r in runs)
            two_ms = statistics.median(r.latency_avg_ms for r in pair)
            out.append(
                Conclusion(
                    "vm-wakeup",
                    f"{target}: {point_words(key)} at 1 client pays for the virtual machine "
                    f"({hypervisor}), not the database: {fmt.rate(one_tps)} tps against "
                    f"{fmt.rate(two_tps)} at 2 clients ({two_tps / one_tps:.1f}x for twice the "
                    f"clients; {fmt.ms(one_ms)} vs {fmt.ms(two_ms)} ms per transaction). With "
                    f"one client the CPUs idle between round trips{seen} and each round trip "
                    "wakes an idle vCPU; read the curve from 2 clients on.",
                    f"medians of {len(runs)} and {len(pair)} run(s)",
                )
            )
    return out


def io_cap(ev: Evidence) -> list[Conclusion]:
    """A storage-lab target's I/O cap against what fio and pg_test_fsync reached on it."""
    caps: dict[str, IoLimits] = {}
    lab = set(ev.index.by_target(LAB))
    for rec, info in ev.index.ok(LAB, LabInfo):
        if (whole := info.cap()) is not None:
            caps[rec.target] = whole
    # What the disk gave with no cap at all (a plain target beside the capped ones),
    # per fio pattern: the slowest, the one a cap is judged against.
    plain: dict[str, tuple[str, float]] = {}
    for rec, fio in ev.index.ok(FIO, FioResult):
        if rec.target not in lab and (fio.pattern not in plain or fio.iops < plain[fio.pattern][1]):
            plain[fio.pattern] = (rec.target, fio.iops)
    out = []
    # The probes' runs in their order (a FioResult is fio's, an FsyncResult pg_test_fsync's)
    for rec, _, res in ev.index.succeeded():
        cap = caps.get(rec.target)
        if isinstance(res, FioResult) and cap is not None:
            limit = cap.write_iops if "write" in res.pattern else cap.read_iops
            if not limit:
                continue
            share = res.iops / limit
            what = f"fio 8k {res.pattern} reached {fmt.rate(res.iops)} IOPS, {share:.0%} of the cap"
            ref = plain.get(res.pattern)
            if share < CAP_BOUND:
                text = (
                    f"{rec.target}: the cap of {fmt.rate(limit)} IOPS never bound: {what}; "
                    "this target measured the host disk, as an uncapped one would."
                )
            elif ref is not None and ref[1] < CAP_BOUND * limit:
                # seed000 here: essd-pl1 at 93% of its cap, the uncapped local at 89%
                text = (
                    f"{rec.target}: whether the cap of {fmt.rate(limit)} IOPS bound cannot be "
                    f"told: {what}, and the uncapped {ref[0]} reached {fmt.rate(ref[1])} "
                    f"({ref[1] / limit:.0%}) on the same disk: the disk alone gives about the cap."
                )
            else:
                text = f"{rec.target}: the cap of {fmt.rate(limit)} IOPS bound: {what}."
            out.append(Conclusion("io-cap", text, "one fio run"))
        elif isinstance(res, FsyncResult) and cap is not None and cap.write_iops:
            head = fsync_headline(res)
            half = cap.write_iops / 2
            if head is None or head.ops_per_sec is None:
                continue
            if abs(head.ops_per_sec - half) <= CAP_SYNC_TOLERANCE * half:
                out.append(
                    Conclusion(
                        "io-cap",
                        f"{rec.target}: fdatasync ran {fmt.rate(head.ops_per_sec)} ops/s, half "
                        f"the cap of {fmt.rate(cap.write_iops)} write IOPS: each sync is two "
                        "I/Os (the data and the flush), so this is the cap's rate, not a "
                        "cloud disk's per-I/O latency (the throttle adds no latency).",
                        "one pg_test_fsync run",
                    )
                )
    return out
