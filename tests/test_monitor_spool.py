"""The monitor's per-second samples live on disk while a run goes (issue 18.6):
pgrig's memory must not grow with the length of a run."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pgrig.monitor.model import CpuSample, DeviceSample, MemorySample, PgSample, Sample
from pgrig.monitor.spool import Spool

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
    from pgrig.cluster import binaries
    from pgrig.step import Context

    bins = binaries.PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15", 15)
    ctx = Context(bins=bins, target=Path("/var/tmp"), scratch=Path("/var/tmp"))
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
