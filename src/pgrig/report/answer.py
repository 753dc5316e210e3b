"""The answer to the study's question, said first and with its numbers.

HammerDB opens with "System achieved N NOPM"; a pgrig report opens with what
its study measured, with the spread HammerDB lacks:

- one target (the quick study, a sweep): each workload's peak tps and where it
  was reached, with the spread of its repeats; where throughput stops growing
  and the monitor's verdict there; what the storage probes say about commits,
  checked against the runs' own rates (``bounds.sync_disagreement``);
- several targets (filesystems, versions, settings): each side's median at the
  points measured, the difference of the medians and its test, as the summary
  table's family of tests computed them (``conclusions.tested``; never a
  second statistic);
- the headline figure of the other workloads (a base backup's MB/s, TPC-C's tpmC).

The artefacts (other work on the machine, a VM's wake-up at 1 client) follow in
Conclusions; they do not replace the answer. One summary chart: tps against
clients, one line per target and mode.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

from pgrig import stats
from pgrig.document import fmt
from pgrig.document.model import Figure, Section
from pgrig.registry.report import Conclusion
from pgrig.report import figures
from pgrig.report.bounds import UNSYNCED, probe_sync, sync_disagreement, synchronous
from pgrig.report.conclusions import differs_sentence, headline, tested
from pgrig.report.evidence import Evidence, point_words
from pgrig.report.pointkey import PointKey, point_order
from pgrig.results import PgbenchRun

POINTS_SHOWN = 3  # client counts stated per curve and target; the table has every one


def section(ev: Evidence) -> Section | None:
    """The answer, or None when the study measured nothing it can state (its
    conclusions then lead, as for a crash check)."""
    if len(ev.targets) > 1:
        paragraphs = comparison_lines(ev) + [c.text for c in headline(ev)]
    else:
        paragraphs = peak_lines(ev) + probe_lines(ev) + medians_lines(ev)
    if not paragraphs:
        return None
    chart = summary_chart(ev)
    return Section("Answer", "answer", tuple(paragraphs), (chart,) if chart else ())


def summary_chart(ev: Evidence) -> Figure | None:
    figure = figures.tps_vs_clients_summary(ev.index.points, list(ev.targets))
    return figure if figure is not None and figure.x_points >= 2 else None


# --------------------------------------------------------------------------
# One target: peaks, saturation, the probes


def _curves(ev: Evidence, target: str) -> dict[PointKey, dict[int, list[PgbenchRun]]]:
    """Each curve of ``target`` (its key with clients=0) -> client count -> runs."""
    out: dict[PointKey, dict[int, list[PgbenchRun]]] = {}
    for key, per in sorted(ev.points().items(), key=point_order):
        runs = per.get(target)
        if runs:
            out.setdefault(PointKey(*key.curve, clients=0), {})[key.clients] = runs
    return out


def _tps(runs: Sequence[PgbenchRun]) -> str:
    """'20,603 tps (2 runs 18,829–22,377)', 'one run' when measured once."""
    spread = fmt.spread([r.tps for r in runs])
    said = spread.describe()
    return f"{fmt.rate(spread.median)} tps ({said or 'one run'})"


def _at(clients: int, runs: Sequence[PgbenchRun]) -> str:
    """'4 clients', or '2 clients on each of 2 load hosts (4 in all)' where the
    runs counted more than the point's key (issue 40.16: "at 2 clients" beside a
    table of 4)."""
    total = runs[0].clients if runs else clients
    if clients <= 0 or total == clients or total % clients:
        return fmt.clients(clients)
    return f"{fmt.clients(clients)} on each of {total // clients} load hosts ({total} in all)"


def peak_lines(ev: Evidence) -> list[str]:
    if not ev.targets:
        return []
    target = ev.targets[0]
    out = []
    for curve, by_clients in _curves(ev, target).items():
        medians = {c: statistics.median(r.tps for r in runs) for c, runs in by_clients.items()}
        peak = max(medians, key=lambda c: medians[c])
        text = (
            f"{point_words(curve, ev.scaled(curve))}: peak {_tps(by_clients[peak])} at "
            f"{_at(peak, by_clients[peak])}"
        )
        if len(medians) > 1:
            text += "; " + _growth(ev, target, curve, by_clients, medians)
        out.append(text + ".")
    return out


def _growth(
    ev: Evidence,
    target: str,
    curve: PointKey,
    by_clients: dict[int, list[PgbenchRun]],
    medians: dict[int, float],
) -> str:
    """Where throughput stops growing, and the monitor's verdict there. Each step
    up the curve is a comparison like any other: decided by ``stats.decide`` over
    the runs, said in its words, so "still growing" is a difference shown and
    "stops" is no later count shown higher (issue 39: one procedure)."""
    counts = sorted(by_clients)
    tps = {c: [r.tps for r in by_clients[c]] for c in counts}
    last, before = counts[-1], counts[-2]
    grew = stats.decide(tps[before], tps[last])
    if grew.verdict == stats.BETTER:
        return (
            f"still growing at {fmt.clients(last)}, the most measured ({grew.describe()} "
            f"over {before}): more clients may give more" + _verdict(ev, target, curve, last)
        )
    later = {c: {d: stats.decide(tps[c], tps[d]) for d in counts if d > c} for c in counts}
    # The first count no later one is shown to beat (the last two are not: it exists).
    stop = next(c for c in counts if all(v.verdict != stats.BETTER for v in later[c].values()))
    beyond = later[stop]
    widest = max(beyond, key=lambda d: abs(beyond[d].log_diff or 0.0))
    if all(cmp.verdict in (stats.SAME, stats.WORSE) for cmp in beyond.values()):
        head = f"throughput stops growing at {fmt.clients(stop)}"
    else:
        head = f"throughput is not shown to grow past {fmt.clients(stop)}"
    return (
        f"{head} ({fmt.rate(medians[stop])} tps); {fmt.clients(widest)} against it: "
        f"{beyond[widest].describe()}" + _verdict(ev, target, curve, stop)
    )


def _verdict(ev: Evidence, target: str, curve: PointKey, clients: int) -> str:
    """'; the monitor's verdict there: CPU-bound in the server (2 of 2 runs)'."""
    monitors = ev.monitors()
    point = PointKey(*curve.curve, clients=clients)
    labels = Counter(
        mon.verdict.label
        for rec, _ in ev.index.points.get(point, {}).get(target, ())
        if (mon := monitors.get(rec.key)) is not None
    )
    if not labels:
        return ""
    label, n = labels.most_common(1)[0]
    return f"; the monitor's verdict there: {label} ({n} of {sum(labels.values())} runs)"


def probe_lines(ev: Evidence) -> list[str]:
    """What pg_test_fsync says about commits, against the 1-client read-write runs."""
    if not ev.targets:
        return []
    target = ev.targets[0]
    probe = probe_sync(ev, target)
    if probe is None or not probe.ops:
        return []
    text = (
        f"Commits: one {probe.method} of 8 kB takes {fmt.us(probe.usecs)} us on this storage "
        f"({fmt.rate(probe.ops)} ops/s, pg_test_fsync), so one client's synchronous commits "
        f"cannot exceed about {fmt.rate(probe.ops)} a second"
    )
    if not synchronous(ev, target):
        meaning = ev.meanings.get(target)
        settings = meaning.settings if meaning is not None else {}
        off = " and ".join(f"{k}=off" for k in UNSYNCED if settings.get(k) == "off")
        return [
            text + f"; this server's commits do not wait for it ({off}), so its write tps "
            "is not bounded by it."
        ]
    one = next(
        (
            (key, runs)
            for key, per in ev.points().items()
            if key.clients == 1 and key.mode == "read-write" and (runs := per.get(target))
        ),
        None,
    )
    if one is None:
        return [text + "."]
    key, runs = one
    syncs = ev.wal_syncs(clients=1).get((target, key))
    refuted = sync_disagreement(probe, runs, syncs)
    tps = statistics.median(r.tps for r in runs)
    if refuted:
        return [
            text + f"; but the runs refute it ({'; '.join(refuted)}): the disk synced faster "
            "during the runs than during the probe, whose figure does not describe these commits."
        ]
    return [
        text + f"; {point_words(key)} at 1 client committed {fmt.rate(tps)} a second, "
        f"{tps / probe.ops:.0%} of that."
    ]


def medians_lines(ev: Evidence) -> list[str]:
    """The headline figure of each workload that is not pgbench, one target."""
    out = []
    for kind, by_point in ev.index.metrics:
        for (workload, at), per_target in by_point.items():
            got = [v for values in per_target.values() for v in values]  # one target's
            what = kind.summary if workload == kind.name else f"{kind.summary} ({workload})"
            spread = fmt.spread(got)
            out.append(
                f"{what}{', ' + at if at else ''}: {fmt.rate(spread.median)} {kind.unit} "
                f"({spread.describe() or 'one run'})."
            )
    return out


# --------------------------------------------------------------------------
# Several targets: each side's median, the difference and its test


def comparison_lines(ev: Evidence) -> list[str]:
    """Per curve and target: one point said whole; a curve of several, its call
    (``conclusions.differs_sentence``) and then the medians of its key points."""
    points = ev.points()
    out = []
    for curve, other, tests in tested(ev):
        what = point_words(curve, ev.scaled(curve))
        shown = _shown(tests, points, curve, ev.baseline)
        medians = []
        for clients, cmp in shown:
            per = points[PointKey(*curve.curve, clients=clients)]
            medians.append(
                f"{other} {_tps(per[other])}, {ev.baseline} {_tps(per[ev.baseline])} "
                f"at {fmt.clients(clients)}: {other} vs {ev.baseline} {cmp.describe()}"
            )
        if len(tests) == 1:
            out.append(f"{what}: {medians[0]}.")
            continue
        said: Conclusion = differs_sentence(what, other, ev.baseline, tests, brief=True)
        rest = len(tests) - len(shown)
        tail = f" ({rest} more client counts in the table below)" if rest else ""
        out.append(f"{said.text} Medians: {'; '.join(medians)}{tail}.")
    return out


def _shown(
    tests: list[tuple[int, stats.Comparison]],
    points: Mapping[PointKey, Mapping[str, list[PgbenchRun]]],
    curve: PointKey,
    baseline: str,
) -> list[tuple[int, stats.Comparison]]:
    """Every point of a short curve; of a long one, the baseline's peak and the
    points whose difference was called."""
    if len(tests) <= POINTS_SHOWN:
        return tests

    def base_median(clients: int) -> float:
        runs = points[PointKey(*curve.curve, clients=clients)][baseline]
        return statistics.median(r.tps for r in runs)

    peak = max((c for c, _ in tests), key=base_median)
    keep = {peak} | {c for c, cmp in tests if cmp.called}
    return [(c, cmp) for c, cmp in tests if c in keep][:POINTS_SHOWN]
