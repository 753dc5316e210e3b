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
1. **differs** - two targets, one workload mode: the one decision procedure
   (``stats.Comparison``) at each client count. A target is said to be faster or
   slower only where the interval excludes no change, with the intervals; where
   none does, "the same within ±5%" only where every interval shows it, else
   "not yet decided" with the runs that would decide it.
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

import contextlib
import re
import signal
import statistics
from collections.abc import Sequence
from dataclasses import replace

from pgrig import registry, stats
from pgrig.document import fmt
from pgrig.document.model import Figure, Section
from pgrig.monitor.model import MONITOR
from pgrig.registry.report import Conclusion
from pgrig.registry.shared import BUILTIN, PGBENCH_RUN
from pgrig.report.bounds import client_bound, fsync_bound, io_cap, vm_wakeup, wait_bound
from pgrig.report.evidence import Evidence, Rule, point_words
from pgrig.report.pointkey import Curve, PointKey, point_key
from pgrig.report.versus import TPS, Key
from pgrig.results import (
    PgbenchInit,
    PgbenchRun,
    SetupResult,
)

STALL_FRACTION = 0.10  # a second at or below 10% of the run's median tps is a stall
STALL_SECONDS = 2


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
    bad = [r for r in ev.index.other_than(MONITOR) if r.status == "failed"]
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


# A tool's progress in its stderr excerpt ("9700000 of 10000000 tuples (97%) done
# (elapsed ...)", "vacuuming...", the excerpt's cut "...s)"): how far it got,
# never why it stopped.
_PROGRESS = re.compile(r"\(\d+%\) done|^\.\.\.|\.\.\.$|done in [\d.]+ s")
_OOM = "; the kernel OOM-killed "


def _first_line(reason: str | None) -> str:
    """The cause of a failure in one line: its first line without the tool's
    progress lines, and the kernel's OOM kill when the recorder found one (it
    comes last, after the excerpt, and was cut off with it)."""
    line = (reason or "no reason recorded").strip().splitlines()[0]
    line, _, oom = line.partition(_OOM)
    head, excerpt = "", line
    if m := re.match(r"(.*?\(exit code -?\d+\)): (.*)", line):  # a ToolError: message, excerpt
        head, excerpt = m[1], m[2]
    parts = [p.strip() for p in excerpt.split(" | ") if not _PROGRESS.search(p.strip())]
    line = ": ".join(x for x in (head, " | ".join(parts)) if x) or line
    if m := re.search(r"\(exit code -(\d+)\)", line):
        with contextlib.suppress(ValueError):
            line = line.replace(m[0], f"(killed by {signal.Signals(int(m[1])).name})")
    if oom:
        killed = "the kernel OOM-killed " + oom.split(" during this step", 1)[0]
        room = REASON_CHARS - len(killed) - 2
        return f"{line if len(line) <= room else line[: max(0, room - 3)] + '...'}; {killed}"
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


# A curve's points against the baseline: (the curve, the other target, per client count).
Tested = tuple[PointKey, str, list[tuple[int, stats.Comparison]]]


def tested(ev: Evidence) -> list[Tested]:
    """Every pgbench point of every target against the baseline's, the study's one
    family of tests: the answer (pgrig.report.answer) and ``differs`` read the same
    comparisons, never a second statistic."""
    curves: dict[Curve, set[int]] = {}
    for key in ev.points():
        curves.setdefault(key.curve, set()).add(key.clients)
    found: list[Tested] = []
    for curve, by_clients in curves.items():
        for other in ev.targets:
            if other == ev.baseline:
                continue
            points: list[tuple[int, stats.Comparison]] = []
            for clients in sorted(by_clients):
                # The study's test, with the q-value every table shows (``Ledger``):
                # seed000's report said "pl3-latency runs 91% slower (p<=0.028)"
                # where its table said "not called: 2 vs 2 runs (q=0.16)".
                cmp = ev.ledger.get(Key(TPS, PointKey(*curve, clients=clients), other))
                if cmp is not None:
                    points.append((clients, cmp))
            if points:
                found.append((PointKey(*curve, clients=0), other, points))
    return found


def differs(ev: Evidence) -> list[Conclusion]:
    return [
        differs_sentence(point_words(key, ev.scaled(key)), other, ev.baseline, points)
        for key, other, points in tested(ev)
    ]


def differs_sentence(
    what: str,
    other: str,
    baseline: str,
    tested: list[tuple[int, stats.Comparison]],
    *,
    brief: bool = False,
) -> Conclusion:
    """One curve's verdict, target against baseline, in the four words of
    ``stats.Comparison``: better / worse where its interval excludes no change,
    the same within the margin, or not yet with the runs that would decide it.
    ``brief``: the verdict alone, for a line that gives each point's interval."""
    real = [(c, cmp) for c, cmp in tested if cmp.called]
    same = [c for c, cmp in tested if cmp.verdict == stats.SAME]
    open_ = [(c, cmp) for c, cmp in tested if cmp.verdict == stats.NOT_YET]
    at_all = (
        f"at {fmt.clients(tested[0][0])}"
        if len(tested) == 1
        else f"at all {len(tested)} client counts"
    )
    if not real:
        if not open_:
            widest = max((cmp for _, cmp in tested), key=_width)
            return Conclusion(
                "differs",
                f"{what}: {other} and {baseline} are the same within "
                f"±{widest.margin_pct:g}% {at_all} (widest: {widest.describe()}).",
                "the same",
            )
        c, cmp = max(open_, key=lambda item: _width(item[1]))
        where = "" if len(tested) == 1 else f"at {fmt.clients(c)}"
        rest = f"; the same within ±{cmp.margin_pct:g}% at {_clients(same)}" if same else ""
        if brief:
            return Conclusion(
                "differs",
                f"{what}: {other} against {baseline}: not yet decided at "
                f"{_clients([c for c, _ in open_])}{rest}.",
                "not yet",
            )
        return Conclusion(
            "differs",
            f"{what}: {other} against {baseline}: not yet decided {where or at_all}"
            f"{' (of ' + str(len(open_)) + ' undecided)' if len(open_) > 1 else ''}: "
            f"{cmp.describe()}{rest}.",
            "not yet",
        )
    parts, intervals = [], []
    for word, up in (("faster", True), ("slower", False)):
        group = [(c, cmp) for c, cmp in real if ((cmp.diff_pct or 0) > 0) == up]
        if not group:
            continue
        diffs = [abs(cmp.diff_pct or 0.0) for _, cmp in group]
        span = (
            f"{min(diffs):.0f}%"
            if round(min(diffs)) == round(max(diffs))
            else f"{min(diffs):.0f}-{max(diffs):.0f}%"
        )
        parts.append(f"{span} {word} at {_clients([c for c, _ in group])}")
        intervals += [
            (f"at {c}: " if len(real) > 1 else "")
            + "; ".join(filter(None, (cmp.interval_text(), cmp.p_words())))
            for c, cmp in group
        ]
    tail = []
    if same:
        tail.append(f"the same within ±{real[0][1].margin_pct:g}% at {_clients(same)}")
    if open_:
        tail.append(f"not yet decided at {_clients([c for c, _ in open_])}")
    shown = "" if brief else f" ({', '.join(intervals)}; the runs' geometric means)"
    return Conclusion(
        "differs",
        f"{what}: {other} runs {' and '.join(parts)} than {baseline}{shown}"
        + (f"; {', '.join(tail)}" if tail else "")
        + ".",
        "better" if any((cmp.diff_pct or 0) > 0 for _, cmp in real) else "worse",
    )


def _width(cmp: stats.Comparison) -> float:
    bounds = cmp.log_interval()
    return bounds[1] - bounds[0] if bounds is not None else float("inf")


def _clients(counts: Sequence[int]) -> str:
    return ", ".join(str(c) for c in counts) + (" clients" if counts != [1] else " client")


def _at_most(p: float) -> str:
    """'<=0.013', '<0.001' (never '<=0.000')."""
    return "<0.001" if p < 0.001 else f"<={p:.3f}"


def headline(ev: Evidence) -> list[Conclusion]:
    """The figure of a workload that is not pgbench (a base backup's MB/s, TPC-C's
    tpmC: ``ResultKind.summary``), target against baseline, called as ``differs``
    calls: seed 002 ended on "backups: XFS 2.2x faster"."""
    found: list[tuple[str, str, str, stats.Comparison]] = []
    # One comparison per workload and point (TPC-C's mode and active set): runs
    # of two points measure different things and never share a test.
    for kind, values in ev.index.metrics:
        assert kind.summary is not None  # the index keeps the kinds with a summary alone
        points: dict[str, int] = {}
        for workload, _ in values:
            points[workload] = points.get(workload, 0) + 1
        for (workload, at), per in values.items():
            base = per.get(ev.baseline)
            what = kind.summary if workload == kind.name else f"{kind.summary} ({workload})"
            if points[workload] > 1 and at:  # one point: said as before
                what = f"{what}, {at}"
            for other in ev.targets:
                mine = per.get(other)
                if other == ev.baseline or not base or not mine:
                    continue
                both = (
                    f"median {fmt.rate(stats.headline(mine))} {kind.unit} on {other}, "
                    f"{fmt.rate(stats.headline(base))} on {ev.baseline}"
                )
                cmp = ev.ledger.get(Key(kind.name, (workload, at), other))
                if cmp is not None:
                    found.append((what, other, both, cmp))
    out = []
    for what, other, both, cmp in found:
        out.append(Conclusion("headline", f"{what}: {other} vs {ev.baseline} "
                              f"{cmp.describe()} ({both}).", cmp.verdict))  # fmt: skip
    return out


def load(ev: Evidence) -> list[Conclusion]:
    loads: dict[str, dict[str, list[float]]] = {}
    # The loads in their order: pgbench -i's (a PgbenchInit), a workload's setup (SetupResult)
    for rec, _, res in ev.index.succeeded():
        if isinstance(res, PgbenchInit):
            titled = registry.title(str(rec.params.get("workload") or BUILTIN))
            label = f"Loading {titled} scale {res.scale}"
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
            cmp = stats.decide(base, mine, higher_is_better=False)
            times = f"{fmt.seconds(stats.headline(mine))} on {other}, " + (
                f"{fmt.seconds(stats.headline(base))} on {ev.baseline}"
            )
            if max(len(base), len(mine)) == 1:
                # a campaign's repeat repeats the runs, never the load: no advice to raise it
                text = f"{label} took {times}: once each, no verdict, no winner named."
            else:
                text = f"{label} took {times}: {other} vs {ev.baseline} {cmp.describe()}."
            out.append(Conclusion("load", text, cmp.verdict))
    return out


def stalls(ev: Evidence) -> list[Conclusion]:
    monitors = ev.monitors()
    out = []
    for rec, run in ev.index.ok(PGBENCH_RUN, PgbenchRun):
        if (seconds := ev.progress.seconds(rec)).n < 5:
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
                f"{rec.target}: {point_words(key)} at {fmt.clients(run.clients)} stalled to "
                f"{fmt.rate(min(low))} tps: {len(low)} of {len(tps)} seconds at or below "
                f"{STALL_FRACTION:.0%} of the median {fmt.rate(median)} tps "
                f"(pgbench -P 1, run {rec.key}){why}.",
                "per-second tps of one run",
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


def section(
    ev: Evidence, sections: Sequence[Section], answer: Section | None = None
) -> list[Section]:
    """The report's first screen: the answer (pgrig.report.answer) when the study
    has one, then the conclusions - the artefacts and bounds that qualify it, the
    comparisons the answer already states left out. Without an answer chart, the
    first drawn figure with at least two x points moves here from its section
    (drawn once: a report's weight is its plots)."""
    answered = {"differs", "headline"} if answer is not None else set()
    found = [c for c in draw(ev) if c.rule not in answered]
    charted = answer is not None and any(isinstance(b, Figure) for b in answer.blocks)
    chart: Figure | None = None
    drawn = _lines(answer.blocks[0]) if answer is not None and charted else None
    rest = []
    for s in sections:
        if drawn and (same := next((b for b in s.blocks if _lines(b) == drawn), None)):
            s, drawn = replace(s, blocks=tuple(b for b in s.blocks if b is not same)), None
        if chart is None and not charted and (pick := _first_chart(s)) is not None:
            chart = pick
            s = replace(s, blocks=tuple(b for b in s.blocks if b is not pick))
        rest.append(s)
    if answer is not None and chart is not None:
        answer, chart = replace(answer, blocks=(*answer.blocks, chart)), None
    if answer is not None and not found:
        return [answer, *rest]
    if answer is not None:
        # The chart after the conclusions: the first screen reads the answer and
        # what qualifies it (other work on the machine) before the picture.
        chart = next((b for b in answer.blocks if isinstance(b, Figure)), None)
        answer = replace(answer, blocks=tuple(b for b in answer.blocks if b is not chart))
    paragraphs = tuple(c.text for c in found) or (
        "No rule drew a conclusion from these records (docs/report.md lists the rules); "
        "the tables below hold the numbers.",
    )
    blocks = (chart,) if chart is not None else ()
    first = Section("Conclusions", "conclusions", paragraphs, blocks)
    return [answer, first, *rest] if answer is not None else [first, *rest]


def _lines(block: object) -> list[tuple[tuple[float, ...], tuple[float, ...]]] | None:
    """What a figure draws, whatever its labels: the answer's summary chart is not
    drawn a second time in its section (a single target's tps-vs-clients)."""
    if not isinstance(block, Figure):
        return None
    return sorted((tuple(s.x), tuple(s.y)) for s in block.series)


def _first_chart(s: Section) -> Figure | None:
    pick = next((b for b in s.blocks if _chartable(b)), None)
    return pick if isinstance(pick, Figure) else None


def _chartable(block: object) -> bool:
    return isinstance(block, Figure) and block.x_points >= 2
