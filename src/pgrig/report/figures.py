"""The comparison's figures: tps against clients per target (seed 004), against
scale, and over time."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pgrig import registry
from pgrig.document import fmt
from pgrig.document.model import Figure, Series, median_line
from pgrig.report import decimate, index
from pgrig.report.index import PointRuns
from pgrig.report.pointkey import Curve, PointKey
from pgrig.report.progress import Progress
from pgrig.results import (
    RunRecord,
)

Curve = Curve  # workload, scale, duration, mode


def _curves(
    points: Mapping[PointKey, PointRuns],
) -> dict[Curve, dict[str, dict[int, list[float]]]]:
    """Each curve's tps per target and client count, from the runs that finished."""
    curves: dict[Curve, dict[str, dict[int, list[float]]]] = {}
    for key, pairs_by_target in points.items():
        for t, pairs in pairs_by_target.items():
            values = [run.tps for _, run in pairs if run is not None]
            if values:
                curves.setdefault(key.curve, {}).setdefault(t, {})[key.clients] = values
    return curves


def _name(prefix: str, workload: str, what: str, duration: int) -> str:
    """A figure's file name: the prefix, the workload, what varies, the duration."""
    return f"{prefix}_{fmt.slug(workload, '_')}_{fmt.slug(what, '_')}_{duration}s"


def tps_vs_clients(by_point: Mapping[PointKey, PointRuns], targets: list[str]) -> list[Figure]:
    """Seed 004's charts: one line per target, one chart per workload/scale/mode,
    from the study's pgbench runs by point (``StudyIndex.points``)."""
    curves = _curves(by_point)
    figures = []
    for (workload, scale, duration, mode, rate), per_target in sorted(
        curves.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2], kv[0][3], kv[0][4] or 0)
    ):
        series = []
        for t in targets:
            points = per_target.get(t)
            if not points:
                continue
            series.append(median_line(t, points))
        what = f"{mode}" + (f", scale {scale}" if scale is not None else "")
        what += f", {rate:,g} tps offered" if rate is not None else ""
        figures.append(
            _tps_vs_clients(
                _name("compare_tps_vs_clients", workload, what, duration),
                f"TPS vs clients, {what}",
                series,
                "One line per target: median tps per client count, bars from min to max "
                "of the repeats.",
                [x for pts in per_target.values() for x in pts],
            )
        )
    return figures


def tps_vs_clients_summary(
    by_point: Mapping[PointKey, PointRuns], targets: list[str]
) -> Figure | None:
    """The report's one summary chart: tps against clients, one line per target
    and workload/mode (a colour per target, a dash per mode), from the study's
    pgbench runs by point (``StudyIndex.points``); None without a curve of two
    client counts."""
    curves = _curves(by_point)
    drawn = {c: per for c, per in curves.items() if any(len(p) > 1 for p in per.values())}
    if not drawn:
        return None
    order = sorted(drawn, key=lambda c: (c[0], c[1] or 0, c[2], c[3]))
    scales = {c[1] for c in order}
    series = []
    for dash, curve in enumerate(order):
        workload, scale, _, mode, _rate = curve
        titled = workload != registry.title(workload)  # TPC-B's curves: by mode alone
        what = mode if titled or workload == mode else f"{workload} {mode}"
        what += f", scale {scale}" if len(scales) > 1 and scale is not None else ""
        for t in targets:
            if points := drawn[curve].get(t):
                label = t if len(order) == 1 else (what if len(targets) == 1 else f"{t} {what}")
                line = median_line(label, points)
                group = what if len(targets) == 1 else t
                series.append(replace(line, group=group, dash=0 if len(targets) == 1 else dash))
    clients = [x for per in drawn.values() for pts in per.values() for x in pts]
    return _tps_vs_clients(
        "answer_tps_vs_clients",
        "TPS vs clients",
        series,
        "Median tps of the repeats per client count, one line per "
        + ("mode" if len(targets) == 1 else "target and mode")
        + "; bars span min to max of the runs.",
        clients,
    )


def tps_vs_clients_by_scale(records: Sequence[RunRecord]) -> list[Figure]:
    """Seed 004's sweep on one target: one chart per workload/mode, one line per scale."""
    curves: dict[tuple[str, int, str], dict[int, dict[int, list[float]]]] = {}
    for key, pairs_by_target in index.read(records).points.items():
        if key.scale is None:
            continue
        for pairs in pairs_by_target.values():
            values = [run.tps for _, run in pairs if run is not None]
            if values:
                curve = curves.setdefault((key.workload, key.duration, key.mode), {})
                curve.setdefault(key.scale, {}).setdefault(key.clients, []).extend(values)
    figures = []
    for (workload, duration, mode), by_scale in sorted(curves.items()):
        if len(by_scale) < 2:
            continue
        series = []
        for scale in sorted(by_scale):
            series.append(median_line(f"scale {scale}", by_scale[scale]))
        figures.append(
            _tps_vs_clients(
                _name("scale_sweep", workload, mode, duration),
                f"TPS vs clients per scale, {mode}",
                series,
                "One line per scale (seed 004's charts): small scales with many "
                "clients fight over the same rows (lock waits); large scales read from disk.",
                [x for pts in by_scale.values() for x in pts],
            )
        )
    return figures


def _tps_vs_clients(
    name: str, title: str, series: Sequence[Series], caption: str, clients: Sequence[int]
) -> Figure:
    """A chart of tps against client count; the x axis logarithmic when the
    counts span a factor of 8 or more."""
    return Figure(
        name=name,
        title=title,
        x_label="clients",
        y_label="transactions/s",
        series=tuple(series),
        caption=caption,
        log_x=bool(clients) and max(clients) >= 8 * min(clients),
    )


def tps_over_time(
    records: Sequence[RunRecord], targets: list[str], progress: Progress | None = None
) -> list[Figure]:
    """Seed 002's chart: per-second tps of each target overlaid, at the most clients
    of each workload/scale/mode (the run closest to the median tps of its repeats)."""
    progress = progress or Progress()
    best: dict[Curve, tuple[int, dict[str, RunRecord]]] = {}
    which: dict[Curve, dict[str, str]] = {}
    for key, per_target in index.read(records).points.items():
        chosen: dict[str, RunRecord] = {}
        repeats: dict[str, str] = {}
        for t, pairs in per_target.items():
            ok = [(rec, run) for rec, run in pairs if run is not None and progress.seconds(rec).n]
            if ok:
                median = statistics.median(run.tps for _, run in ok)
                chosen[t], _ = min(ok, key=lambda p: abs(p[1].tps - median))
                if len(ok) > 1:
                    repeats[t] = f"{t} repeat {chosen[t].params.get('repeat', '?')} of {len(ok)}"
        if not chosen:
            continue
        current = best.get(key.curve)
        if current is None or key.clients > current[0]:
            best[key.curve] = (key.clients, chosen)
            which[key.curve] = repeats
    figures = []
    for (workload, scale, duration, mode, rate), (clients, chosen) in sorted(
        best.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2], kv[0][3], kv[0][4] or 0)
    ):
        drawn = [t for t in targets if t in chosen]
        # one run's points read at a time, each line reduced before the next is read
        spans = [progress.seconds(chosen[t]) for t in drawn]
        buckets = decimate.Buckets.across((s.n, s.low, s.high) for s in spans)
        series = tuple(buckets.line(t, *progress.line(chosen[t]), group=t) for t in drawn)
        what = f"{mode}" + (f", scale {scale}" if scale is not None else "")
        what += f", {rate:,g} tps offered" if rate is not None else ""
        figures.append(
            Figure(
                name=_name("compare_tps_over_time", workload, what, duration),
                title=f"TPS over time, {what}, {fmt.clients(clients)}",
                x_label="seconds since start",
                y_label="transactions/s",
                series=series,
                caption=buckets.caption(
                    "pgbench -P 1 of each target overlaid: stalls (tps near 0) and "
                    "drift show what a single average hides."
                    + _drawn_runs(which[(workload, scale, duration, mode, rate)])
                ),
            )
        )
    return figures


def _drawn_runs(repeats: dict[str, str]) -> str:
    """Which repeat each line is: the run closest to the median tps of its point."""
    if not repeats:
        return ""
    return " Each line is the run closest to its median tps: " + ", ".join(repeats.values()) + "."
