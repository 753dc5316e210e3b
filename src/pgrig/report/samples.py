"""Where the report finds a watched run's per-second samples, one run at a time.

A monitor record's samples are most of its weight (about 2 kB of JSON a second
of run, about 3 kB decoded): a report that decoded every run's at once grew
with the length of the runs (issue 18.6). ``read`` gives the records without
them and a ``SampleReader`` that streams one run's from the store, decoded one
sample at a time, when the report draws that run. The monitor section gathers
the run's ``Columns`` in one pass: floats, not ``Sample`` objects.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from pgrig.monitor.model import MONITOR, MonitorResult, Sample
from pgrig.registry import typed_result
from pgrig.report import progress
from pgrig.results import RunRecord, from_dict

# A monitor record -> its samples in time order (none when it has none), to be
# read once: from a store they are decoded as they are iterated.
SampleReader = Callable[[RunRecord], Iterable[Sample]]


def own_samples(rec: RunRecord) -> tuple[Sample, ...]:
    """The samples the record carries itself (records read with their samples,
    or made in memory)."""
    mon = typed_result(rec)
    return mon.samples if isinstance(mon, MonitorResult) else ()


class _SampleStore(Protocol):
    def runs(
        self,
        study_id: str,
        *,
        without_samples: Collection[str] = (),
        without_progress: Collection[str] = (),
    ) -> list[RunRecord]: ...

    def samples(self, run_id: int) -> Iterable[Mapping[str, object]]: ...

    def progress(self, run_id: int) -> Iterable[Mapping[str, object]]: ...


def read(
    store: _SampleStore, study_id: str
) -> tuple[list[RunRecord], SampleReader, progress.ProgressReader]:
    """A study's records for its report, without the monitor's samples and
    pgbench's -P points, and where to read each run's."""
    records = store.runs(
        study_id, without_samples=(MONITOR.name,), without_progress=progress.kinds()
    )
    return records, stored(store), progress.stored(store)


def stored(store: _SampleStore) -> SampleReader:
    """Each run's samples read from the store when asked, decoded one by one
    (never all of a run's as dicts at once), and not kept."""

    def read(rec: RunRecord) -> Iterable[Sample]:
        if rec.id is None or rec.status != "ok":
            return own_samples(rec)
        return (from_dict(Sample, s) for s in store.samples(rec.id))

    return read


# The measures the monitor section reads, by the part of a sample they are in.
CPU = (
    "busy",
    "server",
    "client",
    "pgrig",
    "other",
    "kernel",
    "irq",
    "iowait",
    "steal",
    "user",
    "system",
    "client_thread_demand_pct",
    "server_runq_pct",
    "ctxt_s",
    "runq",
)
IO = ("server_read_mib_s", "server_write_mib_s", "server_dirtied_mib_s")
MEMORY = ("dirty_mib", "writeback_mib")
PG = (
    "commits_s",
    "rollbacks_s",
    "blks_read_s",
    "temp_mib_s",
    "wal_mib_s",
    "wal_syncs_s",
    "wal_writes_s",
    "buffers_checkpoint_s",
    "buffers_clean_s",
    "buffers_backend_s",
)
DEVICE = (
    "reads_s",
    "writes_s",
    "read_mib_s",
    "write_mib_s",
    "read_await_ms",
    "write_await_ms",
    "flushes_s",
    "util_pct",
)


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


class Columns:
    """One run's samples gathered in one pass as columns of floats (``array``:
    8 bytes a value, NaN where a sample has none), about 0.5 kB a sample
    against 3 kB for a decoded ``Sample``: what the monitor section's medians
    and figures read. Columns are named ``part.field`` (``cpu.busy``,
    ``io.server_read_mib_s`` capped at the device's, ``pg.hit_pct``,
    ``dev.<name>.reads_s``) besides ``t_s``, ``tps`` and ``net_mib_s``."""

    def __init__(self, samples: Iterable[Sample], devices: Sequence[str] = ()) -> None:
        names = ["t_s", "tps", "net_mib_s", "pg.hit_pct"]
        names += [f"cpu.{f}" for f in CPU] + [f"io.{f}" for f in IO]
        names += [f"memory.{f}" for f in MEMORY] + [f"pg.{f}" for f in PG]
        names += [f"dev.{d}.{f}" for d in devices for f in DEVICE]
        self._cols = {name: array("d") for name in names}
        self.devices = tuple(devices)
        self.in_run = bytearray()
        # Client backends by wait event: per sample with any, its counts in the
        # order pg_stat_activity gave them (event index, backends); totals in
        # order of first appearance, as a Counter of the samples would hold.
        self.events: list[str] = []
        self._event: dict[str, int] = {}
        self.wait_totals: Counter[str] = Counter()
        # flat, not a tuple per sample: the sample, where its pairs end, the pairs
        self._wait_at, self._wait_end, self._wait_pairs = array("l"), array("l"), array("l")
        for s in samples:
            self._add(s)

    def __len__(self) -> int:
        return len(self.in_run)

    def _add(self, s: Sample) -> None:
        c = self._cols
        i = len(self.in_run)
        self.in_run.append(s.in_run)
        c["t_s"].append(s.t_s)
        c["tps"].append(_nan(s.tps))
        c["net_mib_s"].append(s.net_rx_mib_s + s.net_tx_mib_s)
        for f in CPU:
            c[f"cpu.{f}"].append(_nan(getattr(s.cpu, f)))
        io = s.io.capped() if s.io is not None else None
        for f in IO:
            c[f"io.{f}"].append(math.nan if io is None else _nan(getattr(io, f)))
        for f in MEMORY:
            c[f"memory.{f}"].append(math.nan if s.memory is None else getattr(s.memory, f))
        pg = s.pg
        for f in PG:
            c[f"pg.{f}"].append(math.nan if pg is None else _nan(getattr(pg, f)))
        ratio = pg.hit_ratio if pg is not None else None
        c["pg.hit_pct"].append(math.nan if ratio is None else ratio * 100)
        for name in self.devices:
            dev = next((d for d in s.devices if d.name == name), None)
            for f in DEVICE:
                c[f"dev.{name}.{f}"].append(math.nan if dev is None else getattr(dev, f))
        if pg is not None and pg.waits:
            self.wait_totals.update(pg.waits)
            for e in pg.waits:
                if e not in self._event:
                    self._event[e] = len(self.events)
                    self.events.append(e)
                self._wait_pairs.extend((self._event[e], pg.waits[e]))
            self._wait_at.append(i)
            self._wait_end.append(len(self._wait_pairs))

    def waits(self) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """Each sample with backends by wait event: its index, and its (event's
        index in ``events``, backends) pairs in the order it gave them."""
        start = 0
        for i, end in zip(self._wait_at, self._wait_end, strict=True):
            pairs = self._wait_pairs[start:end]
            yield i, list(zip(pairs[::2], pairs[1::2], strict=True))
            start = end

    @property
    def wait_rows(self) -> int:
        return len(self._wait_at)

    def get(self, name: str) -> array[float]:
        return self._cols[name]

    def inside(self) -> list[int]:
        """The samples inside pgbench's timed run (all when none is)."""
        return [i for i, flag in enumerate(self.in_run) if flag] or list(range(len(self)))

    def present(self, name: str, rows: Iterable[int]) -> list[float]:
        """The column's values at ``rows``, those the samples had."""
        col = self._cols[name]
        return [v for v in (col[i] for i in rows) if not math.isnan(v)]
