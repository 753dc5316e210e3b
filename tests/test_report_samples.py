"""The report reads a watched run's per-second samples when it draws that run,
from the store, and lets them go after (issue 18.6): its memory must not grow
with the length of the runs. Tested without timing or measuring memory: a
wrapper around the real SQLite store counts which run's samples the report asks
for, and keeps weak references to what it handed out, to see them let go."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Collection, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from pgrig.monitor.model import Sample
from pgrig.report import samples as report_samples
from pgrig.report import writer
from pgrig.results import RunRecord, Study
from pgrig.storage.model import LabInfo
from pgrig.store import Store
from test_monitor_report import KEY, captured, record

STUDY = Study(id="s", name="quick", target="/var/tmp", started_at="x", status="finished")
RUNS = 3


class StoreView:
    """The real store, as the report reads it; a test overrides what it watches."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def runs(
        self,
        study_id: str,
        *,
        without_samples: Collection[str] = (),
        without_progress: Collection[str] = (),
    ) -> list[RunRecord]:
        return self.store.runs(
            study_id, without_samples=without_samples, without_progress=without_progress
        )

    def samples(self, run_id: int) -> Iterator[dict[str, Any]]:
        return self.store.samples(run_id)

    def progress(self, run_id: int) -> Iterator[dict[str, Any]]:
        return self.store.progress(run_id)


class Watching(StoreView):
    """The store as the report sees it, telling which run's samples it read."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.asked: list[int] = []
        self.handed: list[weakref.ref[Sample]] = []
        self.alive_at_each_read: list[int] = []

    def samples(self, run_id: int) -> Iterator[dict[str, Any]]:
        gc.collect()
        self.alive_at_each_read.append(sum(r() is not None for r in self.handed))
        self.asked.append(run_id)
        return self.store.samples(run_id)

    def reader(self) -> report_samples.SampleReader:
        read = report_samples.stored(self)

        def tracked(rec: RunRecord) -> Iterator[Sample]:
            for i, s in enumerate(read(rec)):
                if i == 0:
                    self.handed.append(weakref.ref(s))
                yield s

        return tracked


def _store(path: Path) -> Store:
    mon, run = captured()
    store = Store.open(path)
    store.begin_study(STUDY)
    # a memory limit: the report's Memory section reads the runs' samples too
    lab = LabInfo("ext4, 1 GiB of memory", "/var/tmp", memory_limit_bytes=2**30)
    store.record(replace(record("local/lab", "storage_lab", lab), id=None))
    for c in range(1, RUNS + 1):
        key = KEY.replace("c4", f"c{c}")
        # no two runs alike: each draws its own lines
        shifted = replace(mon, samples=tuple(replace(s, tps=(s.tps or 0) * c) for s in mon.samples))
        store.record(replace(record(key, "pgbench_run", run), id=None))
        store.record(replace(record(f"{key}/monitor", "monitor", shifted), id=None))
    return store


def test_the_report_reads_samples_run_by_run_and_draws_the_same(tmp_path: Path) -> None:
    with _store(tmp_path / "r.sqlite") as store:
        full = store.runs("s")
        _, whole = writer.write(STUDY, full, tmp_path / "whole")
        watching = Watching(store)
        records, _, progress = report_samples.read(watching, "s")
        watched = [r for r in records if r.kind == "monitor"]
        assert len(watched) == RUNS
        assert all(r.result is not None and r.result["samples"] == [] for r in watched)
        _, lean = writer.write(
            STUDY, records, tmp_path / "lean", samples=watching.reader(), progress=progress
        )
    # nothing lost: the same page, every run's figures and medians drawn
    assert lean.read_text() == whole.read_text()
    assert lean.read_text().count("<svg") >= 4 * RUNS
    assert "Page-cache hits" in lean.read_text()
    # each run's samples asked for by its own id, a few times (one per section
    # that needs them), never all runs' at once
    ids = {r.id for r in watched}
    assert set(watching.asked) == ids
    assert all(watching.asked.count(i) <= 4 for i in ids)
    # at each read, at most the previous run's samples still alive: nothing keeps them
    assert max(watching.alive_at_each_read) <= 1
    gc.collect()
    assert not any(r() is not None for r in watching.handed)


def test_records_made_in_memory_still_draw_their_own_samples(tmp_path: Path) -> None:
    """Records not read from a store (tests, ``pgrig compare``) carry their samples."""
    mon, _ = captured()
    rec = record(KEY + "/monitor", "monitor", mon)
    assert report_samples.own_samples(rec) == mon.samples
    with _store(tmp_path / "r.sqlite") as store:
        assert report_samples.stored(Watching(store))(rec) == mon.samples  # no id: its own
