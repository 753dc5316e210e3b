"""Where the report finds a watched run's per-second samples, one run at a time.

A monitor record's samples are most of its weight (about 2 kB of JSON a second
of run, several times that decoded): a report that decoded every run's at once
grew with the length of the runs (issue 18.6). ``read`` gives the records
without them and a ``SampleReader`` that reads one run's from the store when
the report draws that run; they are let go after.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from pgrig.monitor.model import MonitorResult, Sample
from pgrig.registry import MONITOR, typed_result
from pgrig.results import RunRecord, from_dict

# A monitor record -> its samples in time order (empty when it has none).
SampleReader = Callable[[RunRecord], tuple[Sample, ...]]


def own_samples(rec: RunRecord) -> tuple[Sample, ...]:
    """The samples the record carries itself (records read with their samples,
    or made in memory)."""
    mon = typed_result(rec)
    return mon.samples if isinstance(mon, MonitorResult) else ()


class _SampleStore(Protocol):
    def runs(self, study_id: str, *, without_samples: Collection[str] = ()) -> list[RunRecord]: ...

    def samples(self, run_id: int) -> Iterable[dict[str, Any]]: ...


def read(store: _SampleStore, study_id: str) -> tuple[list[RunRecord], SampleReader]:
    """A study's records for its report, without the monitor's samples, and
    where to read each run's."""
    return store.runs(study_id, without_samples=(MONITOR.name,)), stored(store)


def stored(store: _SampleStore) -> SampleReader:
    """Each run's samples read from the store when asked, decoded one by one
    (never all of a run's as dicts at once), and not kept."""

    def read(rec: RunRecord) -> tuple[Sample, ...]:
        if rec.id is None or rec.status != "ok":
            return own_samples(rec)
        return tuple(from_dict(Sample, s) for s in store.samples(rec.id))

    return read
