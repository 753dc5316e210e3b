"""The stored evidence a study's conclusions are drawn from (``Evidence``) and
the words the rules share (pgrig.report.conclusions)."""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from pgrig import registry
from pgrig.document import fmt
from pgrig.meaning import Meaning
from pgrig.monitor.model import MONITOR, MonitorResult, Sample
from pgrig.registry.report import Conclusion
from pgrig.report import index
from pgrig.report.index import StudyIndex
from pgrig.report.pointkey import PointKey
from pgrig.report.progress import Progress
from pgrig.report.samples import SampleReader, own_samples
from pgrig.report.versus import Ledger
from pgrig.results import (
    SCRIPTS_MODE,
    Environment,
    PgbenchRun,
    RunRecord,
)


@dataclass(frozen=True)
class Evidence:
    """The stored records a study's conclusions are drawn from, read through the
    study's index (the report passes the one it built; else built from ``records``)."""

    records: Sequence[RunRecord]  # the study's index, when the report built one
    targets: tuple[str, ...]
    baseline: str
    environment: Environment | None = None
    meanings: Mapping[str, Meaning] = field(default_factory=dict)
    samples: SampleReader = own_samples  # a watched run's per-second samples, when asked
    progress: Progress = field(default_factory=Progress)  # a run's -P points, when asked
    indexed: StudyIndex | None = None  # ``records`` indexed (``pgrig.report.index``)

    @cached_property
    def index(self) -> StudyIndex:
        return self.indexed if self.indexed is not None else index.read(self.records)

    @cached_property
    def ledger(self) -> Ledger:
        """The study's comparisons with their q-values, as every table reads them."""
        return Ledger.of_index(self.index, self.baseline)

    def points(self) -> Mapping[PointKey, Mapping[str, list[PgbenchRun]]]:
        """Each pgbench point's runs by target (read, never changed: the index's)."""
        return self.index.runs

    def scaled(self, key: PointKey) -> bool:
        """Was this workload measured at several scales? Then a sentence names one."""
        scales = {k.scale for k in self.points() if k.workload == key.workload}
        return len(scales) > 1

    def monitors(self) -> dict[str, MonitorResult]:
        """The monitor's result of each run, by the run's key (without its
        samples, when the records were read without them: ``cpu_busy``)."""
        return dict(self.index.monitors)

    def watched(self) -> list[RunRecord]:
        return list(self.index.kind(MONITOR))

    def cpu_busy(self) -> dict[tuple[str, PointKey], float]:
        """The machine's median CPU busy % inside the runs of each target and point,
        from the monitor's samples (absent where nothing was sampled)."""
        per = self.per_second(lambda s: s.cpu.busy)
        return {k: statistics.median(v) for k, v in per.items()}

    def wal_syncs(self, clients: int | None = None) -> dict[tuple[str, PointKey], array[float]]:
        """The server's WAL syncs per second (pg_stat_wal) inside the runs of each
        target and point, every second of every run (none before PostgreSQL 14)."""
        return self.per_second(
            lambda s: s.pg.wal_syncs_s if s.pg is not None else None, clients=clients
        )

    def per_second(
        self, pick: Callable[[Sample], float | None], clients: int | None = None
    ) -> dict[tuple[str, PointKey], array[float]]:
        """One measure of the monitor's samples inside the runs of each target and
        point (of ``clients`` only, when given: a sample read is a sample decoded)."""
        watched = {r.key.removesuffix("/monitor"): r for r in self.watched()}
        # doubles, not float objects: every second of every run of a point
        out: dict[tuple[str, PointKey], array[float]] = {}
        for key, per_target in self.index.points.items():
            if clients is not None and key.clients != clients:
                continue
            for target, pairs in per_target.items():
                for rec, _ in pairs:
                    mon = watched.get(rec.key)
                    if mon is None or mon.status != "ok":
                        continue
                    values = array("d")
                    for s in self.samples(mon):
                        if s.in_run and (v := pick(s)) is not None:
                            values.append(v)
                    if values:
                        out.setdefault((target, key), array("d")).extend(values)
        return out

    def on_vm(self) -> str | None:
        env = self.environment
        return env.cpu.hypervisor if env is not None and env.cpu.hypervisor else None


Rule = Callable[[Evidence], list[Conclusion]]


def point_words(key: PointKey, scaled: bool = False) -> str:
    """'TPC-B read-write' or 'login' (a custom script's mode is its name), with
    its scale when the study measured several."""
    titled = registry.title(key.workload)
    if titled != key.workload:
        name = f"{titled} {key.mode}"
    else:
        name = (
            key.workload
            if key.mode in (key.workload, SCRIPTS_MODE)
            else f"{key.workload} {key.mode}"
        )
    return f"{name}, scale {key.scale}" if scaled and key.scale is not None else name


def client_counts(counts: Sequence[int]) -> str:
    """'1 client', '4 clients', '4, 8 and 16 clients'."""
    ordered = sorted(set(counts))
    if len(ordered) == 1:
        return fmt.clients(ordered[0])
    return f"{', '.join(map(str, ordered[:-1]))} and {ordered[-1]} clients"


# --------------------------------------------------------------------------
# Rules
