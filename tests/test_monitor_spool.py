"""The monitor's per-second samples live on disk while a run goes (issue 18.6):
pgrig's memory must not grow with the length of a run."""

from __future__ import annotations

import gc
import json
import threading
import tracemalloc
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pgrig.monitor.model import CpuSample, DeviceSample, IoSample, MemorySample, PgSample, Sample
from pgrig.monitor.spool import Spool
from pgrig.recorder import Execution, Recorder
from pgrig.results import to_dict
from pgrig.store import Store
from pgrig.ui import Ui

SAMPLES = 3000  # fifty minutes of one sample a second


def _sample(t_s: float) -> Sample:
    return Sample(
        t_s=t_s,
        wall=1.7e9 + t_s,
        interval_s=1.0,
        cpu=CpuSample(user=40.1, system=9.2, iowait=0.3, irq=0.1, steal=0.0, idle=50.3),
        devices=(DeviceSample("vda", 120.0, 800.5, 0.9, 12.5, 0.4, 1.2, 35.0, 0.8),),
        memory=MemorySample(cached_mib=5e3, dirty_mib=80.0, writeback_mib=0.0, available_mib=9e3),
        pg=PgSample(waits={"CPU": 3, "Client:ClientRead": 5, "LWLock:WALWrite": 1}),
        tps=1234.5 + t_s,
    )


def _traced_growth(keep: Callable[[Sample], None]) -> int:
    """Bytes still allocated after handing ``SAMPLES`` new samples to ``keep``,
    each made and dropped as the sampler does."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(SAMPLES):
            keep(_sample(float(i)))
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_spool_holds_thousands_of_samples_in_constant_memory_and_gives_them_back() -> None:
    spool: Spool[Sample]
    with Spool() as spool:
        grew = _traced_growth(spool.append)
        assert len(spool) == SAMPLES
        # Every one, in order, equal field by field.
        assert list(spool) == [_sample(float(i)) for i in range(SAMPLES)]
        spool.append(replace(_sample(0.0), t_s=-1.0))  # after a read: goes on at the end
        assert [s.t_s for s in spool][-2:] == [SAMPLES - 1.0, -1.0]
    # The control: the same samples kept in a list, as the monitor kept them.
    kept: list[Sample] = []
    listed = _traced_growth(kept.append)
    assert listed > 2_000_000, f"a list of {SAMPLES} samples held only {listed} bytes"
    assert grew < 64 * 1024, f"the spool held {grew} bytes for {SAMPLES} samples"


def _sizes(watch: object) -> dict[str, int]:
    return {
        name: len(value)
        for name, value in vars(watch).items()
        if isinstance(value, list | tuple | dict | set)
    }


def test_the_watch_keeps_no_container_that_grows_with_the_run() -> None:
    from pgrig import monitor
    from pgrig.clients import OneHost
    from pgrig.pgsource import binaries
    from pgrig.step import Context

    bins = binaries.PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15", 15)
    ctx = Context(
        clients=OneHost(bins.client_bin_dir),
        bins=bins,
        target=Path("/var/tmp"),
        scratch=Path("/var/tmp"),
    )
    with monitor.Watch(ctx, interval=0.1) as watch:
        threading.Event().wait(0.3)
        before = _sizes(watch)
        threading.Event().wait(1.0)
        after = _sizes(watch)
    mon = watch.result(None)
    assert len(mon.samples) >= 5
    # A second of sampling adds about ten samples; no attribute may gain that many.
    growing = {n: (before[n], after[n]) for n in after if after[n] - before.get(n, 0) >= 5}
    assert growing == {}, f"Watch attributes that gain an entry per sample: {growing}"


def _raw(i: int) -> Any:
    """One second as the sampler spools it, numbers varying from second to second."""
    from pgrig.monitor.watch import _Raw

    return _Raw(
        wall=1.7e9 + i,
        interval_s=1.0,
        cpu=CpuSample(
            user=40.0 + i % 7,
            system=9.0,
            iowait=0.3,
            irq=0.1,
            steal=0.0,
            idle=50.0 - i % 7,
            server=30.0 + i % 5,
            client=8.0,
            pgrig=0.5,
            other=2.0 + i % 3,
            kernel=0.4,
        ),  # fmt: skip
        devices=(DeviceSample("vda", 120.0 + i % 11, 800.0, 0.9, 12.5, 0.4, 1.2, 35.0, 0.8),),
        memory=MemorySample(cached_mib=5e3, dirty_mib=80.0, writeback_mib=0.0, available_mib=9e3),
        net=(0.1, 0.2),
        pg=PgSample(
            waits={"CPU": 1 + i % 2, "Client:ClientRead": 1, "LWLock:WALWrite": i % 2},
            commits_s=1000.0 + i % 13,
            checkpoint_active=i % 300 < 20,
            checkpoints=int(i % 300 == 0),
        ),
        clients_alive=1,
        io=IoSample(device="vda", device_write_mib_s=12.5, server_write_mib_s=10.0 + i % 3),
    )


def _watched_run(samples: int) -> tuple[Any, Any]:
    """A Watch that has spooled ``samples`` seconds, and the pgbench run it watched
    (its -P points: one a second)."""
    from pgrig import monitor
    from pgrig.clients import OneHost
    from pgrig.pgsource import binaries
    from pgrig.step import Context

    bins = binaries.PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15", 15)
    ctx = Context(
        clients=OneHost(bins.client_bin_dir),
        bins=bins,
        target=Path("/var/tmp"),
        scratch=Path("/var/tmp"),
    )
    ctx.running.client_started = 1.7e9
    with monitor.Watch(ctx, interval=60) as watch:  # entered for real; sampled by hand
        pass
    for i in range(1, samples + 1):
        watch._raw.append(_raw(i))
    points = tuple(SimpleNamespace(t_s=float(i), tps=1000.0 + i % 13) for i in range(1, samples))
    run = SimpleNamespace(progress=points, duration_s=samples, tps=1006.0, clients=2)
    return watch, run


class _LiveSamples:
    """How many ``Sample`` objects live at once, at most: each counted as it is
    made and again when it goes (the real class, only its constructor wrapped)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.live = self.peak = 0
        init = Sample.__init__

        def counted(obj: Sample, *args: Any, **kwargs: Any) -> None:
            init(obj, *args, **kwargs)
            self.live += 1
            self.peak = max(self.peak, self.live)
            weakref.finalize(obj, self._gone)

        monkeypatch.setattr(Sample, "__init__", counted)

    def _gone(self) -> None:
        self.live -= 1


def _traced_peak(work: Callable[[], object]) -> int:
    """Bytes of Python memory ``work`` took at its peak."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def _record_monitor(tmp_path: Path, samples: int, live: _LiveSamples) -> tuple[int, int, Any]:
    """Record a watched run's monitor record as the recorder does: the most
    samples alive at once, the peak of Python memory it took, and the result
    the watch would give in memory.

    The same record is written untraced first, the collector off: CPython keeps
    freed tuples, floats and dicts for reuse (thousands of tuples of each size,
    emptied by a full collection), and filling those lists under the tracer
    would look like growth."""
    from test_recorder import _step, _target
    from test_store import study

    gc.disable()
    try:
        for traced in (False, True):
            store = Store.open(tmp_path / f"r{samples}-{traced}.sqlite")
            store.begin_study(study())
            recorder = Recorder(store, study(), Ui(quiet=True))
            watch, run = _watched_run(samples)
            live.peak = live.live

            ran = Execution(_step(1), _target("t"), "t0", watched=watch)

            def record() -> None:
                recorder._record_monitor(ran, run)  # noqa: B023

            peak = _traced_peak(record) if traced else record()
            (rec,) = store.runs(study().id, without_samples=("monitor",))
            store.close()
    finally:
        gc.enable()
    assert rec.status == "ok", rec.reason
    return live.peak - live.live, peak, watch.result(run)


def test_recording_a_long_run_takes_no_more_memory_than_a_short_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The monitor record of a run goes from the spool to the store one sample
    at a time (issue 18.6): its verdict, checkpoints and other load from
    passes over the spool, its samples streamed into the run's transaction.
    Ten times the seconds: no more samples alive at once, and a peak of Python
    memory that grows by a small part of what the whole result in memory, as
    the recorder built it before (samples, dicts, one JSON text), grows by."""
    live = _LiveSamples(monkeypatch)
    # 60 and 600 samples: each is read back from the spool in every pass the
    # summary makes (about 19), unpickled under the tracer; 100 and 1,000 took
    # 28 s at load 5 (ci20: 202 s beside two hogs), these 10 s, with the same
    # margin (372 kB against a bound of 777 kB; 491 against 953 before).
    few, short, whole = _record_monitor(tmp_path, 60, live)
    many, long_, whole_long = _record_monitor(tmp_path, 600, live)
    assert many <= 3 and few <= 3, f"{many} samples alive at once of 600, {few} of 60"
    # The control: the whole result in memory (7-8 kB a sample).
    held = [_traced_peak(lambda m=m: json.dumps(to_dict(m))) for m in (whole, whole_long)]
    # What is left grows by the medians' lists of floats, and by the free lists
    # CPython keeps of freed objects: under 0.6 MB for 900 more samples.
    assert long_ - short < (held[1] - held[0]) / 6, (
        f"peak {long_} B for 600 samples, {short} B for 60; in memory {held[1]} B and {held[0]} B"
    )
    # What was stored is what the in-memory result says, sample for sample.
    assert len(whole.samples) == 60 and whole.checkpoints and whole.others
    with Store.open(tmp_path / "r60-True.sqlite") as store:
        (rec,) = store.runs("quick-1")
        assert rec.result == json.loads(json.dumps(to_dict(whole)))
        lean = store.runs("quick-1", without_samples=("monitor",))[0].result
        assert lean == json.loads(json.dumps(to_dict(replace(whole, samples=()))))
