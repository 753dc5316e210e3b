"""The studies of a series and each point's median over them.

A series is every study of one campaign name (``Study.name``): ``pgrig run FILE
--new`` adds one, the quick study adds one each time, and ``pgrig import`` pools
the series of many machines. A point is (workload, mode, clients, target) plus
the scale and duration it ran at: a changed scale is a new point, not a step.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pgrig.document import fmt
from pgrig.errors import UsageError
from pgrig.monitor.interference import disturbed_run_keys
from pgrig.registry import typed_result
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report.pointkey import PointKey, point_key
from pgrig.results import SCRIPTS_MODE, PgbenchRun, RunRecord, Study
from pgrig.stats import Interval, median_interval
from pgrig.store import Store


@dataclass(frozen=True, order=True)
class Point:
    """One measured point of a series: a pgbench point on one target."""

    key: PointKey
    target: str

    @property
    def label(self) -> str:
        return f"{self.key.label} on {self.target}"

    @property
    def short(self) -> str:
        """'select-only at 8 clients' (the point as a sentence names it)."""
        mode = self.key.mode if self.key.mode != SCRIPTS_MODE else self.key.workload
        plural = "s" if self.key.clients != 1 else ""
        return f"{mode} at {self.key.clients} client{plural} on {self.target}"


@dataclass(frozen=True)
class Observation:
    """A point's repeats in one study."""

    study: str
    values: tuple[float, ...]  # tps of each repeat that finished
    disturbed: int = 0  # repeats the monitor saw disturbed by other work
    # tps of the repeats the monitor saw undisturbed (None: as ``values``, none was)
    undisturbed: tuple[float, ...] | None = None

    @property
    def quiet(self) -> tuple[float, ...]:
        """The repeats a comparison across studies decides on: a disturbed run
        says how busy the machine was, not how fast the study was."""
        return self.values if self.undisturbed is None else self.undisturbed

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def interval(self) -> Interval | None:
        """The median's own interval (order statistics: [min, max] with 75% at 3
        repeats, 95% from 6); None with one repeat."""
        return median_interval(self.values)

    def interval_text(self) -> str:
        """'75% CI 2,428–3,582', or why there is none."""
        found = self.interval
        if found is None:
            return "n/a (1 repeat)"
        if found.too_noisy(self.median):
            return "too noisy for an interval"
        return f"{found.confidence:.0%} CI {fmt.rate(found.low)}–{fmt.rate(found.high)}"


@dataclass(frozen=True)
class Series:
    """The studies of one name in the order they started, and each point's
    observations in those studies (a study that did not measure a point has none)."""

    name: str
    studies: tuple[Study, ...]
    points: dict[Point, tuple[Observation, ...]]


def observations(records: Sequence[RunRecord]) -> dict[Point, Observation]:
    """A study's pgbench points: the tps of their finished repeats."""
    disturbed = disturbed_run_keys(records)
    values: dict[Point, list[float]] = {}
    quiet: dict[Point, list[float]] = {}
    for rec in records:
        if not PGBENCH_RUN.holds(rec) or rec.status != "ok":
            continue
        run = typed_result(rec)
        if not isinstance(run, PgbenchRun):
            continue
        point = Point(point_key(rec), rec.target)
        values.setdefault(point, []).append(run.tps)
        if rec.key not in disturbed:
            quiet.setdefault(point, []).append(run.tps)
    out = {}
    for p, v in values.items():
        calm = tuple(quiet.get(p, ()))
        out[p] = Observation(
            "", tuple(v), len(v) - len(calm), None if len(calm) == len(v) else calm
        )
    return out


def studies_of(store: Store, name: str) -> list[Study]:
    """The studies of series ``name`` (a campaign name) in the order they started."""
    found = store.series(name)
    if not found:
        names = sorted({s.name for s in store.studies()})
        raise UsageError(
            f"no study of series {name!r} in {store.path}",
            hint=f"series there: {', '.join(names) or 'none'}; a series is a campaign's "
            "name (`pgrig list` shows each study's)",
        )
    return found


def read(store: Store, name: str) -> Series:
    """The series ``name`` from the store."""
    studies = studies_of(store, name)
    points: dict[Point, list[Observation]] = {}
    for study in studies:
        records = store.runs(study.id, without_progress=(PGBENCH_RUN.name,))
        for point, obs in observations(records).items():
            points.setdefault(point, []).append(replace(obs, study=study.id))
    return Series(name, tuple(studies), {p: tuple(o) for p, o in sorted(points.items())})
