"""What the study found, in sentences drawn from the stored evidence by rules.

The seeds end with conclusions ("XFS loads 23% faster", "ext4 stalls to 0 tps
while the kernel flushes", "the cloud disk's 164 us fdatasync bounds
single-client commits", "reads are bound by DataFileRead"); the report opens
with the same, each sentence citing its numbers and how sure they are. Each
rule is a pure function of an ``Evidence`` (stored records only: nothing is
measured here), tested with records that provoke it and records that must not
(tests/test_conclusions.py); docs/report.md lists them. The rules, in the
order they are printed:

0. **disturbed** - the monitor saw other work share the machine during some
   runs: said first, since every difference is read in its light.
1. **differs** - two targets, one workload mode: Welch's t-test over the
   repeats at each client count. A target is said to be faster or slower only
   where p < 0.05, with the range of differences and the largest p; where no
   client count differs it says "no difference beyond the noise".
1b. **headline** - the figure of a workload that is not pgbench (a base
   backup's MB/s, TPC-C's tpmC), target against baseline, the same test.
2. **load** - the data load of each target: the times side by side; "faster"
   only when repeated loads pass the same test, else "one load each: no test".
3. **stalls** - a run whose per-second tps fell to at most 10% of its median
   for at least 2 seconds (pgbench -P 1), with the monitor's cause if it
   found one.
4. **fsync-bound** - one client, read-write, commits synchronous: the
   target's fdatasync (pg_test_fsync, one 8 kB write) takes at least half of
   the transaction's latency.
5. **wait-bound** - the monitor's verdict names one wait class (reads,
   writes, WAL, locks, LWLocks) for at least half of a point's runs.
6. **vm-wakeup** - 2 clients give more than 2.5 times the tps of 1 on a
   virtual machine, and (where the monitor sampled them) the CPUs were less
   than half busy at 1 client: the 1-client point pays for waking an idle vCPU
   on every round trip, so the curve is to be read from 2 clients on.
7. **io-cap** - a storage-lab target's I/O cap: "never bound" when fio
   reached less than 90% of it (the target measured the host disk), "bound"
   otherwise; and fdatasync within 10% of half the write-IOPS cap is the cap's
   rate (two I/Os per sync), not a per-I/O latency.
8. the plug-ins' rules, each workload's after the report's own (their names as
   docs/report.md lists them): **durable** - a crash check (pgrig.durability.report):
   commits acknowledged and lost, and whether every check (pgrig's and the
   workload's own) held after every recovery.
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pgrig import registry, stats
from pgrig.document import fmt
from pgrig.document.model import Figure, Section
from pgrig.meaning import Meaning
from pgrig.monitor.model import MONITOR, MonitorResult
from pgrig.monitor.verdict import CAUSES, CLASS_NOUNS
from pgrig.probe import FIO, FSYNC
from pgrig.registry import typed_result
from pgrig.registry.report import Conclusion
from pgrig.registry.shared import PGBENCH_INIT, PGBENCH_RUN, SQL_SETUP
from pgrig.report.compare import PointKey, point_key, runs_by_point
from pgrig.report.probes import FsyncRuns, fsync_headline
from pgrig.report.progress import Progress
from pgrig.report.samples import SampleReader, own_samples
from pgrig.results import (
    Environment,
    FioResult,
    FsyncResult,
    PgbenchInit,
    PgbenchRun,
    RunRecord,
    SetupResult,
)
from pgrig.storage.kinds import LAB
from pgrig.storage.model import LabInfo
from pgrig.storage.throttle import IoLimits

STALL_FRACTION = 0.10  # a second at or below 10% of the run's median tps is a stall
STALL_SECONDS = 2
FSYNC_SHARE = 0.5  # of the 1-client transaction latency
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


@dataclass(frozen=True)
class Evidence:
    """The stored records a study's conclusions are drawn from."""

    records: tuple[RunRecord, ...]
    targets: tuple[str, ...]
    baseline: str
    environment: Environment | None = None
    meanings: Mapping[str, Meaning] = field(default_factory=dict)
    samples: SampleReader = own_samples  # a watched run's per-second samples, when asked
    progress: Progress = field(default_factory=Progress)  # a run's -P points, when asked

    def points(self) -> dict[PointKey, dict[str, list[PgbenchRun]]]:
        return {
            key: {t: [run for _, run in pairs if run is not None] for t, pairs in per.items()}
            for key, per in runs_by_point(self.records).items()
        }

    def scaled(self, key: PointKey) -> bool:
        """Was this workload measured at several scales? Then a sentence names one."""
        scales = {k.scale for k in self.points() if k.workload == key.workload}
        return len(scales) > 1

    def monitors(self) -> dict[str, MonitorResult]:
        """The monitor's result of each run, by the run's key (without its
        samples, when the records were read without them: ``cpu_busy``)."""
        out = {}
        for rec in self.watched():
            if (mon := typed_result(rec)) is not None:
                out[rec.key.removesuffix("/monitor")] = mon
        return out

    def watched(self) -> list[RunRecord]:
        return [r for r in self.records if MONITOR.holds(r)]

    def cpu_busy(self) -> dict[tuple[str, PointKey], float]:
        """The machine's median CPU busy % inside the runs of each target and point,
        from the monitor's samples (absent where nothing was sampled)."""
        watched = {r.key.removesuffix("/monitor"): r for r in self.watched()}
        # doubles, not float objects: every second of every run of a point
        busy: dict[tuple[str, PointKey], array[float]] = {}
        for rec in self.records:
            mon = watched.get(rec.key) if PGBENCH_RUN.holds(rec) else None
            if mon is not None and mon.status == "ok":
                values = array("d", (s.cpu.busy for s in self.samples(mon) if s.in_run))
                if values:
                    busy.setdefault((rec.target, point_key(rec)), array("d")).extend(values)
        return {k: statistics.median(v) for k, v in busy.items() if v}

    def on_vm(self) -> str | None:
        env = self.environment
        return env.cpu.hypervisor if env is not None and env.cpu.hypervisor else None


Rule = Callable[[Evidence], list[Conclusion]]


def _what(key: PointKey, scaled: bool = False) -> str:
    """'TPC-B read-write' or 'login' (a custom script's mode is its name), with
    its scale when the study measured several."""
    if key.workload == "tpcb":
        name = f"TPC-B {key.mode}"
    else:
        name = (
            key.workload if key.mode in (key.workload, "custom") else f"{key.workload} {key.mode}"
        )
    return f"{name}, scale {key.scale}" if scaled and key.scale is not None else name


def _client_counts(counts: Sequence[int]) -> str:
    """'1 client', '4 clients', '4, 8 and 16 clients'."""
    ordered = sorted(set(counts))
    if len(ordered) == 1:
        return fmt.clients(ordered[0])
    return f"{', '.join(map(str, ordered[:-1]))} and {ordered[-1]} clients"


def _p(cmp: stats.Comparison) -> str:
    return f"p={cmp.p_value:.3f}" if cmp.p_value is not None else (cmp.no_test or "no test")


# --------------------------------------------------------------------------
# Rules


def disturbed(ev: Evidence) -> list[Conclusion]:
    """Said first: every other sentence is read in its light."""
    monitors = ev.monitors().values()
    hit = [m for m in monitors if m.disturbed is not None]
    if not hit:
        return []
    return [
        Conclusion(
            "disturbed",
            f"{len(hit)} of {len(monitors)} monitored runs shared the machine with other work "
            "(the monitor's attribution, see Bottlenecks): differences below may be the "
            "other work's, and runs on a quiet machine are needed to quote them.",
            f"{len(hit)} of {len(monitors)} runs",
        )
    ]


def failed(ev: Evidence) -> list[Conclusion]:
    """Said before any comparison: a step that failed left its numbers (and
    what depended on it, e.g. a load's runs) out of every table below, so a
    comparison that reads complete may not be."""
    bad = [r for r in ev.records if r.status == "failed" and not MONITOR.holds(r)]
    if not bad:
        return []
    shown = "; ".join(f"{r.key} ({_first_line(r.reason)})" for r in bad[:FAILED_SHOWN])
    more = f"; {len(bad) - FAILED_SHOWN} more" if len(bad) > FAILED_SHOWN else ""
    targets = sorted({r.target for r in bad})
    it, obj = ("it", "it") if len(bad) == 1 else ("they", "them")
    return [
        Conclusion(
            "failed",
            f"{len(bad)} step{'' if len(bad) == 1 else 's'} failed on "
            f"{', '.join(targets)}: {shown}{more}. What {it} would have measured is "
            f"missing below: a comparison that includes {obj} compares what is left.",
            f"{len(bad)} failed",
        )
    ]


FAILED_SHOWN = 3  # steps named in the sentence; the rest are counted
REASON_CHARS = 160  # enough for libpq's 'connection ... failed: FATAL: ...' line


def _first_line(reason: str | None) -> str:
    line = (reason or "no reason recorded").strip().splitlines()[0]
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def differs(ev: Evidence) -> list[Conclusion]:
    curves: dict[tuple[str, int | None, int, str], dict[int, dict[str, list[float]]]] = {}
    for key, per in ev.points().items():
        curves.setdefault(key.curve, {})[key.clients] = {
            t: [r.tps for r in runs] for t, runs in per.items()
        }
    found: list[tuple[str, str, list[tuple[int, stats.Comparison]]]] = []
    for curve, by_clients in curves.items():
        key = PointKey(*curve, clients=0)
        for other in ev.targets:
            if other == ev.baseline:
                continue
            tested: list[tuple[int, stats.Comparison]] = []
            for clients, tps in sorted(by_clients.items()):
                base, mine = tps.get(ev.baseline, []), tps.get(other, [])
                if base and mine:
                    tested.append((clients, stats.welch(base, mine)))
            if tested:
                found.append((_what(key, ev.scaled(key)), other, tested))
    # One family, corrected together, and called as the summary's table calls
    # (``Comparison.called``): seed000's report said "pl3-latency runs 91% slower
    # (p<=0.028)" where its table said "not called: 2 vs 2 runs (q=0.16)".
    adjusted = iter(stats.adjust([cmp for _, _, tested in found for _, cmp in tested]))
    return [
        _differs_sentence(what, other, ev.baseline, [(c, next(adjusted)) for c, _ in tested])
        for what, other, tested in found
    ]


def _differs_sentence(
    what: str, other: str, baseline: str, tested: list[tuple[int, stats.Comparison]]
) -> Conclusion:
    real = [(c, cmp) for c, cmp in tested if cmp.called and cmp.diff_pct is not None]
    untested = [c for c, cmp in tested if cmp.p_value is None]
    at_all = (
        f"at {fmt.clients(tested[0][0])}"
        if len(tested) == 1
        else f"at any of {len(tested)} client counts"
    )
    if not real:
        if len(untested) == len(tested):
            why = tested[0][1].no_test or "no test"
            return Conclusion(
                "differs",
                f"{what}: {other} and {baseline} cannot be told apart yet ({why}).",
                "no test",
            )
        closest = min(
            ((c, cmp) for c, cmp in tested if cmp.p_value is not None),
            key=lambda item: item[1].p_value or 1.0,
        )
        if closest[1].significant:  # p < 0.05 alone, but not a call (too few runs, q)
            return Conclusion(
                "differs",
                f"{what}: no difference between {other} and {baseline} called {at_all}"
                + ("" if len(tested) == 1 else f"; at {fmt.clients(closest[0])}")
                + f": {closest[1].describe()}.",
                "not called",
            )
        worst = min(cmp.p_value for _, cmp in tested if cmp.p_value is not None)
        return Conclusion(
            "differs",
            f"{what}: no difference between {other} and {baseline} beyond the noise {at_all} "
            f"(Welch's t-test, smallest p={worst:.2f}).",
            f"within noise (p>={worst:.2f})",
        )
    faster = [(c, cmp) for c, cmp in real if (cmp.diff_pct or 0) > 0]
    slower = [(c, cmp) for c, cmp in real if (cmp.diff_pct or 0) < 0]
    parts = []
    for word, group in (("faster", faster), ("slower", slower)):
        if not group:
            continue
        diffs = [abs(cmp.diff_pct or 0.0) for _, cmp in group]
        span = (
            f"{min(diffs):.0f}%"
            if round(min(diffs)) == round(max(diffs))
            else (f"{min(diffs):.0f}-{max(diffs):.0f}%")
        )
        at = ", ".join(str(c) for c, _ in group)
        parts.append(f"{span} {word} at {at} client{'s' if at != '1' else ''}")
    worst = max(cmp.p_value or 0.0 for _, cmp in real)
    qs = [cmp.q_value for _, cmp in real if cmp.q_value is not None]
    corrected = f", q<={max(qs):.3f}" if qs and max(qs) != worst else ""
    rest = len(tested) - len(real)
    tail = f"; within noise at the other {rest}" if rest else ""
    return Conclusion(
        "differs",
        f"{what}: {other} runs {' and '.join(parts)} than {baseline} (median tps over the "
        f"repeats, Welch's t-test p<={worst:.3f}{corrected}){tail}.",
        f"p<={worst:.3f}",
    )


def headline(ev: Evidence) -> list[Conclusion]:
    """The figure of a workload that is not pgbench (a base backup's MB/s, TPC-C's
    tpmC: ``ResultKind.summary``), target against baseline, called as ``differs``
    calls: seed 002 ended on "backups: XFS 2.2x faster"."""
    found: list[tuple[str, str, str, stats.Comparison]] = []
    for kind in registry.kinds().values():
        if kind.summary is None or kind.metric is None:
            continue
        values: dict[str, dict[str, list[float]]] = {}
        for rec in ev.records:
            if rec.kind == kind.name and (res := typed_result(rec)) is not None:
                workload = str(rec.params.get("workload", kind.name))
                values.setdefault(workload, {}).setdefault(rec.target, []).append(kind.metric(res))
        for workload, per in values.items():
            base = per.get(ev.baseline)
            what = kind.summary if workload == kind.name else f"{kind.summary} ({workload})"
            for other in ev.targets:
                mine = per.get(other)
                if other == ev.baseline or not base or not mine:
                    continue
                both = (
                    f"median {fmt.rate(stats.headline(mine))} {kind.unit} on {other}, "
                    f"{fmt.rate(stats.headline(base))} on {ev.baseline}"
                )
                found.append((what, other, both, stats.welch(base, mine)))
    adjusted = stats.adjust([cmp for *_, cmp in found])
    out = []
    for (what, other, both, _), cmp in zip(found, adjusted, strict=True):
        if cmp.p_value is None:
            text = (
                f"{what}: {other} and {ev.baseline} cannot be told apart yet ({both}; {_p(cmp)})."
            )
        elif cmp.called and cmp.diff_pct is not None:
            word = "higher" if cmp.diff_pct > 0 else "lower"
            p = f"p={cmp.p_value:.3f}" if cmp.p_value >= 0.001 else "p<0.001"
            text = f"{what}: {other} {abs(cmp.diff_pct):.0f}% {word} than {ev.baseline} "
            text += f"({both}; Welch's t-test {p})."
        elif cmp.significant:
            text = f"{what}: no difference between {other} and {ev.baseline} called ({both}): "
            text += f"{cmp.describe()}."
        else:
            text = f"{what}: no difference between {other} and {ev.baseline} beyond the noise "
            text += f"({both}; Welch's t-test p={cmp.p_value:.2f})."
        out.append(Conclusion("headline", text, _p(cmp)))
    return out


def load(ev: Evidence) -> list[Conclusion]:
    loads: dict[str, dict[str, list[float]]] = {}
    for rec in ev.records:
        res = typed_result(rec) if (PGBENCH_INIT.holds(rec) or SQL_SETUP.holds(rec)) else None
        if isinstance(res, PgbenchInit):
            label = f"Loading TPC-B scale {res.scale}"
        elif isinstance(res, SetupResult) and res.files:
            label = f"Setting up {rec.params.get('workload', 'the workload')}"
        else:
            continue
        loads.setdefault(label, {}).setdefault(rec.target, []).append(res.elapsed_s)
    out = []
    for label, per in loads.items():
        base = per.get(ev.baseline)
        if not base:
            continue
        for other in ev.targets:
            mine = per.get(other)
            if other == ev.baseline or not mine:
                continue
            cmp = stats.welch(base, mine)
            times = f"{fmt.seconds(stats.headline(mine))} on {other}, " + (
                f"{fmt.seconds(stats.headline(base))} on {ev.baseline}"
            )
            if cmp.significant and cmp.diff_pct is not None:
                word = "faster" if cmp.diff_pct < 0 else "slower"
                text = f"{label}: {other} loads {abs(cmp.diff_pct):.0f}% {word} ({times})."
            elif max(len(base), len(mine)) == 1:
                # a campaign's repeat repeats the runs, never the load: no advice to raise it
                text = f"{label} took {times}: once each, no test, no winner named."
            else:
                why = _p(cmp) if cmp.p_value is None else f"within noise (p={cmp.p_value:.2f})"
                text = f"{label} took {times}: {why}, no winner named."
            out.append(Conclusion("load", text, _p(cmp)))
    return out


def stalls(ev: Evidence) -> list[Conclusion]:
    monitors = ev.monitors()
    out = []
    for rec in ev.records:
        if not PGBENCH_RUN.holds(rec):
            continue
        run: PgbenchRun | None = typed_result(rec)
        if run is None or (seconds := ev.progress.seconds(rec)).n < 5:
            continue
        # no second at or below the stall line: the run's points are not read again
        if seconds.noise is not None and seconds.noise.min > STALL_FRACTION * (seconds.median or 0):
            continue
        tps = ev.progress.tps(rec)
        median = statistics.median(tps)
        low = [t for t in tps if t <= STALL_FRACTION * median]
        if median <= 0 or len(low) < STALL_SECONDS:
            continue
        mon = monitors.get(rec.key)
        why = ""
        if mon is not None and mon.verdict.cause == "stalls":
            why = f"; the monitor: {mon.verdict.summary}"
        key = point_key(rec)
        out.append(
            Conclusion(
                "stalls",
                f"{rec.target}: {_what(key)} at {fmt.clients(run.clients)} stalled to "
                f"{fmt.rate(min(low))} tps: {len(low)} of {len(tps)} seconds at or below "
                f"{STALL_FRACTION:.0%} of the median {fmt.rate(median)} tps "
                f"(pgbench -P 1, run {rec.key}){why}.",
                "per-second tps of one run",
            )
        )
    return out


def fsync_bound(ev: Evidence) -> list[Conclusion]:
    fsyncs: dict[str, list[RunRecord]] = {}
    for rec in ev.records:
        if FSYNC.holds(rec):
            fsyncs.setdefault(rec.target, []).append(rec)
    out = []
    for key, per in ev.points().items():
        if key.clients != 1 or key.mode != "read-write":
            continue
        for target, runs in per.items():
            meaning = ev.meanings.get(target)
            if meaning is not None and (
                meaning.settings.get("synchronous_commit") == "off"
                or meaning.settings.get("fsync") == "off"
            ):
                continue
            median = FsyncRuns.of(fsyncs.get(target, [])).median()
            head = fsync_headline(median) if median is not None else None
            if not runs or head is None or head.usecs_per_op is None:
                continue
            latency = statistics.median(r.latency_avg_ms for r in runs)
            share = head.usecs_per_op / 1000 / latency if latency > 0 else 0.0
            if share < FSYNC_SHARE:
                continue
            # seed000-latency here: a 908 us probe beside 0.470 ms transactions, "100%":
            # a sync cannot outlast the commit that waits for it - the disk moved
            of_it = (
                f"{share:.0%} of the {fmt.ms(latency)} ms a {_what(key)} transaction takes"
                if share <= 1.0
                else f"longer than the {fmt.ms(latency)} ms a whole {_what(key)} transaction "
                "took (the disk synced faster during the runs than during the probe)"
            )
            out.append(
                Conclusion(
                    "fsync-bound",
                    f"{target}: single-client commits are bounded by fsync latency: one "
                    f"fdatasync takes {fmt.us(head.usecs_per_op)} us (pg_test_fsync, one 8 kB "
                    f"write), {of_it} at 1 client (median of {len(runs)} run(s)); a "
                    "faster-syncing disk, not more CPU, would raise it.",
                    f"median of {len(runs)} run(s)",
                )
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
    for rec in ev.records:
        if PGBENCH_RUN.holds(rec) and (mon := monitors.get(rec.key)) is not None:
            key = point_key(rec)
            groups.setdefault((rec.target, key), []).append(mon.verdict.cause)
    found: dict[tuple[tuple[str, int | None, int, str], str], dict[str, list[tuple[int, int, int]]]]
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
            f"{', '.join(targets)}: {_what(key, ev.scaled(key))} at "
            f"{_client_counts(counts)} is bound by {CLASS_NOUNS[cause]} "
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
            f"{', '.join(targets)}: {_what(key, ev.scaled(key))} at "
            f"{_client_counts(counts)} measured the load generator, not the server - "
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
        two = points.get(PointKey(key.workload, key.scale, key.duration, key.mode, 2), {})
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
                    f"{target}: {_what(key)} at 1 client pays for the virtual machine "
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
    lab = {rec.target for rec in ev.records if LAB.holds(rec)}
    for rec in ev.records:
        info = typed_result(rec) if LAB.holds(rec) else None
        if isinstance(info, LabInfo) and info.io is not None:
            caps[rec.target] = info.io
    # What the disk gave with no cap at all (a plain target beside the capped ones),
    # per fio pattern: the slowest, the one a cap is judged against.
    plain: dict[str, tuple[str, float]] = {}
    for rec in ev.records:
        res = typed_result(rec) if FIO.holds(rec) and rec.target not in lab else None
        if isinstance(res, FioResult) and (
            res.pattern not in plain or res.iops < plain[res.pattern][1]
        ):
            plain[res.pattern] = (rec.target, res.iops)
    out = []
    for rec in ev.records:
        cap = caps.get(rec.target)
        res = (
            typed_result(rec) if cap is not None and (FIO.holds(rec) or FSYNC.holds(rec)) else None
        )
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


RULES: tuple[Rule, ...] = (
    disturbed,
    failed,
    differs,
    headline,
    load,
    stalls,
    fsync_bound,
    wait_bound,
    client_bound,
    vm_wakeup,
    io_cap,
)


def draw(ev: Evidence) -> list[Conclusion]:
    """Every rule's conclusions, in the rules' order: the report's own, then the
    plug-ins' (a workload's own rules: the durability check's ``durable``)."""
    return [c for rule in (*RULES, *registry.rules()) for c in rule(ev)]


def evidence_of(
    records: Sequence[RunRecord],
    targets: Sequence[str],
    baseline: str,
    environment: Environment | None,
    meanings: Mapping[str, Meaning] | None = None,
    *,
    samples: SampleReader = own_samples,
    progress: Progress | None = None,
) -> Evidence:
    return Evidence(
        tuple(records),
        tuple(targets),
        baseline,
        environment,
        dict(meanings or {}),
        samples,
        progress or Progress(),
    )


def section(ev: Evidence, sections: Sequence[Section]) -> tuple[Section, list[Section]]:
    """The report's first screen: the conclusions, then one summary chart - the
    first drawn figure with at least two x points, moved here from its section
    (drawn once: a report's weight is its plots)."""
    found = draw(ev)
    paragraphs = tuple(c.text for c in found) or (
        "No rule drew a conclusion from these records (docs/report.md lists the rules); "
        "the tables below hold the numbers.",
    )
    chart: Figure | None = None
    rest = []
    for s in sections:
        if chart is None and (pick := next((b for b in s.blocks if _chartable(b)), None)):
            assert isinstance(pick, Figure)
            chart = pick
            s = replace(s, blocks=tuple(b for b in s.blocks if b is not pick))
        rest.append(s)
    blocks = (chart,) if chart is not None else ()
    return Section("Conclusions", "conclusions", paragraphs, blocks), rest


def _chartable(block: object) -> bool:
    return isinstance(block, Figure) and block.x_points >= 2
