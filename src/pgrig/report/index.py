"""A study's records read once: each decoded into its kind's result and grouped
the ways the report asks for them (by kind, by target, by pgbench point, by a
kind's summary point), built at the report's start. The answer and the sections
read these groups rather than asking each record its kind and its result (a
record asked by every section was decoded and selected again by each: issue 43)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pgrig import registry
from pgrig.monitor.model import MONITOR, MonitorResult
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report.pointkey import PointKey, point_key
from pgrig.results import PgbenchRun, ResultKind, RunRecord

# A pgbench point's runs per target, each with its result (None: the run failed).
PointRuns = Mapping[str, list[tuple[RunRecord, PgbenchRun | None]]]
# A summary kind's metrics: (workload, point) -> target -> the metric of each run
# that succeeded, in the order the runs ran (``ResultKind.summary``, ``metric``).
Metrics = Mapping[tuple[str, str], Mapping[str, list[float]]]


@dataclass(frozen=True)
class StudyIndex:
    """The study's records, decoded once, and their groups."""

    records: tuple[RunRecord, ...]  # each decoded (``registry.decoded``), in their order
    kinds: Mapping[str, ResultKind]  # every registered result kind, by name
    of_kind: Mapping[str, tuple[RunRecord, ...]]  # kind name -> its records
    of_target: Mapping[str, tuple[RunRecord, ...]]  # target -> its records
    # kind -> (record, its typed result) of the runs that succeeded
    results: Mapping[str, tuple[tuple[RunRecord, object], ...]]
    points: Mapping[PointKey, PointRuns]  # pgbench runs by point, then target
    runs: Mapping[PointKey, Mapping[str, list[PgbenchRun]]]  # the same, the results alone
    monitors: Mapping[str, MonitorResult]  # the monitor's result by the watched run's key
    metrics: tuple[tuple[ResultKind, Metrics], ...]  # the summary kinds', in the kinds' order

    def kind(self, kind: ResultKind) -> tuple[RunRecord, ...]:
        """The records of ``kind``, in their order."""
        return self.of_kind.get(kind.name, ())


def of(records: Iterable[RunRecord]) -> StudyIndex:
    """The index of ``records``, in the order given (a report sorts them first)."""
    decoded = tuple(registry.decoded(records))
    kinds = registry.kinds()
    of_kind: dict[str, list[RunRecord]] = {}
    of_target: dict[str, list[RunRecord]] = {}
    results: dict[str, list[tuple[RunRecord, object]]] = {}
    points: dict[PointKey, dict[str, list[tuple[RunRecord, PgbenchRun | None]]]] = {}
    monitors: dict[str, MonitorResult] = {}
    for rec in decoded:
        of_kind.setdefault(rec.kind, []).append(rec)
        of_target.setdefault(rec.target, []).append(rec)
        res = registry.typed_result(rec)
        if res is not None:
            results.setdefault(rec.kind, []).append((rec, res))
        if rec.kind == PGBENCH_RUN.name:
            points.setdefault(point_key(rec), {}).setdefault(rec.target, []).append((rec, res))
        elif rec.kind == MONITOR.name and res is not None:
            monitors[rec.key.removesuffix("/monitor")] = res
    metrics: list[tuple[ResultKind, Metrics]] = []
    for kind in kinds.values():
        if kind.summary is None or kind.metric is None:
            continue
        by_point: dict[tuple[str, str], dict[str, list[float]]] = {}
        for rec, res in results.get(kind.name, ()):
            at = kind.point(rec.params) if kind.point is not None else ""
            row = (str(rec.params.get("workload", kind.name)), at)
            by_point.setdefault(row, {}).setdefault(rec.target, []).append(kind.metric(res))
        metrics.append((kind, by_point))
    return StudyIndex(
        records=decoded,
        kinds=kinds,
        of_kind={k: tuple(v) for k, v in of_kind.items()},
        of_target={t: tuple(v) for t, v in of_target.items()},
        results={k: tuple(v) for k, v in results.items()},
        points=points,
        runs={
            key: {t: [run for _, run in pairs if run is not None] for t, pairs in per.items()}
            for key, per in points.items()
        },
        monitors=monitors,
        metrics=tuple(metrics),
    )
