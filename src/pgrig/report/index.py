"""A study's records read once: each decoded into its kind's result and grouped
the ways the report asks for them (by kind, by target, by pgbench point, by a
kind's summary point), built at the report's start. The answer and the sections
read these groups rather than asking each record its kind and its result (a
record asked by every section was decoded and selected again by each: issue 43)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, overload

from pgrig import registry
from pgrig.monitor.model import MONITOR, MonitorResult
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report.pointkey import PointKey, point_key
from pgrig.results import PgbenchRun, ResultKind, RunRecord

T = TypeVar("T")

# A pgbench point's runs per target, each with its result (None: the run failed).
PointRuns = Mapping[str, list[tuple[RunRecord, PgbenchRun | None]]]
# A summary kind's metrics: (workload, point) -> target -> the metric of each run
# that succeeded, in the order the runs ran (``ResultKind.summary``, ``metric``).
Metrics = Mapping[tuple[str, str], Mapping[str, list[float]]]


@dataclass(frozen=True, eq=False)
class StudyIndex(Sequence[RunRecord]):
    """The study's records, decoded once, and their groups. It is the sequence of
    its records too, so a section that is handed it where it took the records
    reads its groups (``read``) and one handed plain records still works."""

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
    # the monitor's record (whatever its status) by the watched run's key
    watching: Mapping[str, RunRecord] = field(default_factory=dict)
    by_key: Mapping[str, object] = field(default_factory=dict)  # a record's key -> its result
    # kind name -> target -> its records
    kind_target: Mapping[str, Mapping[str, tuple[RunRecord, ...]]] = field(default_factory=dict)
    # each target's own index, built when first asked
    _targets: dict[str, StudyIndex] = field(default_factory=dict, repr=False)

    def kind(self, kind: ResultKind) -> tuple[RunRecord, ...]:
        """The records of ``kind``, in their order."""
        return self.of_kind.get(kind.name, ())

    def ok(self, kind: ResultKind, cls: type[T]) -> list[tuple[RunRecord, T]]:
        """Each record of ``kind`` whose run succeeded, with its result (a ``cls``)."""
        return [(r, res) for r, res in self.results.get(kind.name, ()) if isinstance(res, cls)]

    def result(self, record: RunRecord, cls: type[T]) -> T | None:
        """The result of one of the study's records, decoded when the index was
        built (None: its run did not succeed, or its result is no ``cls``)."""
        res = self.by_key.get(record.key)
        return res if isinstance(res, cls) else None

    def by_target(self, kind: ResultKind) -> Mapping[str, tuple[RunRecord, ...]]:
        """The records of ``kind`` by target, in their order."""
        return self.kind_target.get(kind.name, {})

    def succeeded(self) -> list[tuple[RunRecord, ResultKind, object]]:
        """Every record whose run succeeded, with its kind and its result, in the
        records' order."""
        return [
            (r, self.kinds[r.kind], res)
            for r in self.records
            if (res := self.by_key.get(r.key)) is not None and r.kind in self.kinds
        ]

    def only(self, *kinds: ResultKind) -> tuple[RunRecord, ...]:
        """The records of these kinds, in their order."""
        return self.named(*(k.name for k in kinds))

    def named(self, *names: str) -> tuple[RunRecord, ...]:
        """The records of the kinds of these names (a plug-in's own), in their order."""
        return tuple(r for r in self.records if r.kind in names)

    def other_than(self, *kinds: ResultKind) -> tuple[RunRecord, ...]:
        """The records of every other kind, in their order (``other_than(MONITOR)``:
        the study's runs, the monitor's records of them left out)."""
        names = {k.name for k in kinds}
        return tuple(r for r in self.records if r.kind not in names)

    def target(self, target: str) -> StudyIndex:
        """The index of one target's records (their results decoded already)."""
        if target not in self._targets:
            self._targets[target] = of(self.of_target.get(target, ()))
        return self._targets[target]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[RunRecord]:
        return iter(self.records)

    @overload
    def __getitem__(self, at: int) -> RunRecord: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[RunRecord]: ...
    def __getitem__(self, at: int | slice) -> RunRecord | Sequence[RunRecord]:
        return self.records[at]


def ordered(records: Sequence[RunRecord]) -> StudyIndex:
    """The index of a study's records in the order they ran (an index given is
    returned as it is: it was built so)."""
    if isinstance(records, StudyIndex):
        return records
    return of(sorted(records, key=_record_order))


def _record_order(rec: RunRecord) -> tuple[int, str]:
    # Store ids follow execution order; records not yet stored keep their timestamps.
    return (rec.id if rec.id is not None else 1 << 62, rec.started_at)


def read(records: Sequence[RunRecord], *kinds: ResultKind) -> StudyIndex:
    """The index a section reads: the report's own when it was handed that (a
    study read once), else one of the records it was given (a test's, a caller's;
    of ``kinds`` alone when given: a caller after one kind decodes no other)."""
    if isinstance(records, StudyIndex):
        return records
    names = {k.name for k in kinds}
    return of([r for r in records if r.kind in names] if kinds else records)


def of(records: Iterable[RunRecord]) -> StudyIndex:
    """The index of ``records``, in the order given (a report sorts them first)."""
    decoded = tuple(registry.decoded(records))
    kinds = registry.kinds()
    of_kind: dict[str, list[RunRecord]] = {}
    of_target: dict[str, list[RunRecord]] = {}
    results: dict[str, list[tuple[RunRecord, object]]] = {}
    points: dict[PointKey, dict[str, list[tuple[RunRecord, PgbenchRun | None]]]] = {}
    monitors: dict[str, MonitorResult] = {}
    watching: dict[str, RunRecord] = {}
    by_key: dict[str, object] = {}
    kind_target: dict[str, dict[str, list[RunRecord]]] = {}
    for rec in decoded:
        kind_target.setdefault(rec.kind, {}).setdefault(rec.target, []).append(rec)
        of_kind.setdefault(rec.kind, []).append(rec)
        of_target.setdefault(rec.target, []).append(rec)
        res = registry.typed_result(rec)
        if res is not None:
            results.setdefault(rec.kind, []).append((rec, res))
            by_key[rec.key] = res
        if rec.kind == PGBENCH_RUN.name:
            points.setdefault(point_key(rec), {}).setdefault(rec.target, []).append((rec, res))
        elif rec.kind == MONITOR.name:
            watching[rec.key.removesuffix("/monitor")] = rec
            if res is not None:
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
        watching=watching,
        by_key=by_key,
        kind_target={k: {t: tuple(rs) for t, rs in per.items()} for k, per in kind_target.items()},
    )
