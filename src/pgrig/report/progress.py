"""Where the report finds a run's pgbench ``-P`` points, one run at a time.

pgbench prints one progress line a second; a record keeps each as a point
(about 0.4 kB a second of run as JSON, 0.1 kB more decoded). Carried in every
record the whole report long, they made its memory grow with the length of the
runs (issue 18.6), as the monitor's samples did (``pgrig.report.samples``).
The report reads the records without them and a ``Progress`` reads one run's
from the store when a section asks, keeping only what it computed from them:
each run's count of points, its span and its per-second noise.
"""

from __future__ import annotations

import dataclasses
import statistics
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pgrig import registry
from pgrig.monitor import noise
from pgrig.monitor.model import Noise
from pgrig.report import decimate
from pgrig.results import ProgressPoint, RunRecord, from_dict

# A record -> its -P points in time order (none when it has none), read once:
# from a store they are decoded as they are iterated.
ProgressReader = Callable[[RunRecord], Iterable[ProgressPoint]]


def own_progress(rec: RunRecord) -> tuple[ProgressPoint, ...]:
    """The points the record carries itself (records read with them, or made
    in memory)."""
    points = getattr(registry.typed_result(rec), "progress", ())
    return points if isinstance(points, tuple) else ()


def kinds() -> tuple[str, ...]:
    """The kinds of record whose results hold ``progress`` points."""
    return tuple(
        name
        for name, kind in registry.kinds().items()
        if dataclasses.is_dataclass(kind.type)
        and any(f.name == "progress" for f in dataclasses.fields(kind.type))
    )


class _ProgressStore(Protocol):
    def progress(self, run_id: int) -> Iterable[Mapping[str, object]]: ...


def stored(store: _ProgressStore) -> ProgressReader:
    """Each run's points read from the store when asked, decoded one by one,
    and not kept."""

    def read(rec: RunRecord) -> Iterable[ProgressPoint]:
        if rec.id is None or rec.status != "ok":
            return own_progress(rec)
        return (from_dict(ProgressPoint, p) for p in store.progress(rec.id))

    return read


@dataclass(frozen=True)
class Seconds:
    """What the report keeps of one run's points."""

    n: int
    low: float  # the first and last second (finite ones), 0 when none
    high: float
    noise: Noise | None  # of the per-second tps (``pgrig.monitor.noise``)
    median: float | None = None  # tps, None without points


class Progress:
    """The runs' ``-P`` points as the report's sections ask for them: a run's
    ``Seconds`` worked out in one pass and kept (a few numbers a run), its tps
    and its line read again when drawn and let go."""

    def __init__(self, read: ProgressReader = own_progress) -> None:
        self._read = read
        self._seconds: dict[tuple[str, str, str], Seconds] = {}

    def line(self, rec: RunRecord) -> tuple[array[float], array[float]]:
        """The run's seconds and tps, as doubles."""
        t, tps = array("d"), array("d")
        for p in self._read(rec):
            t.append(p.t_s)
            tps.append(p.tps)
        return t, tps

    def tps(self, rec: RunRecord) -> array[float]:
        return self.line(rec)[1]

    def seconds(self, rec: RunRecord) -> Seconds:
        key = (rec.study, rec.target, rec.key)
        found = self._seconds.get(key)
        if found is None:
            t, tps = self.line(rec)
            median = statistics.median(tps) if tps else None
            found = Seconds(len(t), *decimate.span(t), noise.noise(tps), median)
            self._seconds[key] = found
        return found

    def noise(self, rec: RunRecord) -> Noise | None:
        return self.seconds(rec).noise
