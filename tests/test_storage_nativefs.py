"""The native latency layer (pgrig-latencyfs, C on libfuse3) on real FUSE mounts:
a cloud disk's total caps - reads and writes together - an instance cap that two
disks share, burst credits, the read delay a cold read waits, and the
calibration's convergence and refusal, and a study's emulated disks measured
again at its end. The rate and timing tests are `exclusive` and ask the
monitor (tests/disturbance.py) whether other work took the CPUs while they
measured: a disturbed measurement is made again, and the test is skipped with
the monitor's reasons when every one was; an excess over a cap fails whatever
the machine did."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import mmap
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from rich.console import Console

from conftest import full_report, make_disk_dir
from disturbance import undisturbed, unless_met, watched_by
from pgrig import campaign, lossyfs, plan, storage
from pgrig.cluster import workdir
from pgrig.errors import PgrigError
from pgrig.lossyfs.mount import LossyFsUnavailable, LossyMount
from pgrig.runner import run_campaign
from pgrig.storage import emulator, latency, nativefs
from pgrig.storage.nativefs import Caps, Instance, NativeMount
from pgrig.store import Store
from pgrig.ui import Ui
from test_storage_campaign import NO_PROBES, STOCK, TINY_TPCB, runs, write
from test_storage_latency import _cold_read_s, _fdatasync_s

REASON = nativefs.unavailable()
needs_native = pytest.mark.skipif(REASON is not None, reason=f"{REASON}")
FIO = shutil.which("fio")


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_disk_dir("pgrig-test-nativefs-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def shm() -> Iterator[Path]:
    """A directory on tmpfs: a sync costs nothing there, so the only disk under a
    layer is what the test makes of it (``set_backing_extra``)."""
    path = Path(tempfile.mkdtemp(prefix="pgrig-test-nativefs-", dir="/dev/shm"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _mount(base: Path, name: str, **kw: object) -> NativeMount:
    (base / f"{name}-backing").mkdir()
    return NativeMount(base / f"{name}-backing", base / f"{name}-mnt", **kw)  # type: ignore[arg-type]


def _fio(directory: Path, rw: str, seconds: int, depth: int) -> subprocess.Popen[str]:
    """fio's 8 kB random I/O, O_DIRECT (every I/O reaches the layer), JSON out."""
    argv = [
        str(FIO), "--name=t", f"--directory={directory}", f"--rw={rw}", "--rwmixread=50",
        "--bs=8k", "--size=16M", "--direct=1", "--ioengine=libaio", f"--iodepth={depth}",
        f"--runtime={seconds}", "--time_based", "--ramp_time=1", "--output-format=json",
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _iops(run: subprocess.Popen[str]) -> tuple[float, float]:
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    job = json.loads(out)["jobs"][0]
    return job["read"]["iops"], job["write"]["iops"]


def _ios(mount: NativeMount) -> int:
    stats = mount.stats()
    return stats["reads"] + stats["writes"]


@needs_native
@pytest.mark.skipif(FIO is None, reason="fio is not installed")
@pytest.mark.exclusive  # it judges a rate: alone, after the parallel part
def test_a_3000_total_iops_class_gives_3000_in_total_under_a_50_50_load(base: Path) -> None:
    gp3 = latency.CLASSES["gp3"]
    assert gp3.caps.iops == 3000
    with _mount(base, "gp3", caps=gp3.caps) as disk:

        def measure() -> tuple[float, float, int]:
            held = disk.stats()["throttled"]
            read, write = _iops(_fio(disk.mountpoint, "randrw", 3, 16))
            # a cap is never exceeded, whatever else ran meanwhile
            assert read + write <= 3000 * 1.10
            assert read <= 3000 * 0.6 and write <= 3000 * 0.6  # together, not 3,000 each
            return read, write, disk.stats()["throttled"] - held

        read, write, held = undisturbed(measure, unless_met(watched_by(base), _at(3000, 0, 1)))
    total = read + write
    print(f"3,000-IOPS class, 50/50 randrw qd16: {read:,.0f} read + {write:,.0f} write "
          f"= {total:,.0f} IOPS; {held:,} I/Os held by the cap")  # fmt: skip
    assert held > 0
    assert total >= 3000 * 0.90


@needs_native
@pytest.mark.skipif(FIO is None, reason="fio is not installed")
@pytest.mark.exclusive
def test_two_disks_of_one_target_share_the_instance_cap(base: Path) -> None:
    with Instance(Caps(iops=2000)) as instance:
        a = _mount(base, "a", caps=Caps(iops=3000), instance=instance)
        b = _mount(base, "b", caps=Caps(iops=3000), instance=instance)
        with a, b:
            each = undisturbed(lambda: _both(a, b, 2000), unless_met(watched_by(base), _at(2000)))
    print(f"two 3,000-IOPS disks under a 2,000-IOPS instance: {each[0]:,.0f} + {each[1]:,.0f}"
          f" = {sum(each):,.0f} IOPS")  # fmt: skip
    assert sum(each) >= 2000 * 0.90


def _at(cap: float, *parts: int) -> Callable[[Sequence[float]], bool]:
    """Whether a measurement's rates (``parts`` of it: all by default) reached
    90% of ``cap`` together: then no disturbance explains anything away."""
    return lambda got: sum(got[i] for i in parts or range(len(got))) >= cap * 0.90


def _both(a: NativeMount, b: NativeMount, cap: float) -> list[float]:
    """Both disks read at once: each one's IOPS by the layer's own counts over one
    window of both - two fio processes' windows need not line up, the
    instance's does (fio's laying out of its file counts too: writes draw from
    the same caps). Never over the instance's cap, whatever else ran meanwhile."""
    started = [_fio(m.mountpoint, "randread", 4, 8) for m in (a, b)]
    time.sleep(1.5)  # both started, past fio's ramp
    first, t0 = [_ios(m) for m in (a, b)], time.monotonic()
    time.sleep(2.0)
    last, t1 = [_ios(m) for m in (a, b)], time.monotonic()
    for run in started:
        _iops(run)
    each = [(y - x) / (t1 - t0) for x, y in zip(first, last, strict=True)]
    assert sum(each) <= cap * 1.10
    assert max(each) <= cap * 0.8  # shared: neither disk took the whole instance
    return each


@needs_native
@pytest.mark.exclusive  # it times I/Os: alone, after the parallel part
def test_a_burst_class_runs_over_its_baseline_only_while_its_credits_last(base: Path) -> None:
    caps = Caps(iops=100, burst_iops=5000, credits=400)
    attempt = itertools.count()

    def measure() -> tuple[float, float]:
        # a disk of its own each attempt: a full bucket of credits
        with _mount(base, f"burst{next(attempt)}", caps=caps) as disk:
            path = disk.mountpoint / "f"
            path.write_bytes(os.urandom(8192 * 64))
            aligned = mmap.mmap(-1, 8192)  # O_DIRECT: a page-aligned buffer
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                started = time.monotonic()
                for i in range(400):  # the credits: at the burst rate, not 100/s
                    os.preadv(fd, [aligned], (i % 64) * 8192)
                burst_s = time.monotonic() - started
                started = time.monotonic()
                for i in range(50):  # spent: the baseline, 10 ms apart
                    os.preadv(fd, [aligned], (i % 64) * 8192)
                after_s = time.monotonic() - started
            finally:
                os.close(fd)
        return burst_s, after_s

    def baseline_s(burst_s: float) -> float:
        # the baseline binds once the credits are spent: 50 I/Os at 100/s, less
        # the credits it refilled meanwhile (one per 10 ms), at least half that
        # (quiet: 0.42 s against 0.46; without the baseline the 50 take ~5 ms)
        return (50 - (burst_s * 100 + 1)) / 100 * 0.5

    def met(got: tuple[float, float]) -> bool:
        return got[0] < 400 / 100 / 2 and got[1] >= baseline_s(got[0])

    # Beside two CPU hogs (ci17) the 50 took 0.41 s (the bound was then 90%:
    # 0.414). An attempt that misses is made again, and judged only where the
    # monitor saw no other load.
    burst_s, after_s = undisturbed(measure, unless_met(watched_by(base), met))
    print(f"400 I/Os on credits: {burst_s:.2f} s; 50 more: {after_s:.2f} s")
    assert burst_s < 400 / 100 / 2  # far faster than the 100-IOPS baseline
    assert after_s >= baseline_s(burst_s), (burst_s, after_s)


@needs_native
def test_a_cold_read_through_the_layer_waits_at_least_the_class_latency(base: Path) -> None:
    pl3 = latency.CLASSES["essd-pl3"]
    with _mount(base, "pl3") as disk:
        with open(disk.mountpoint / "base", "wb") as f:
            f.write(os.urandom(8192 * 64))
            os.fsync(f.fileno())
        beside = base / "pl3-backing" / "base"
        disk.set_read_delay(pl3.read_us)
        through = [_cold_read_s(disk.mountpoint / "base", beside) for _ in range(10)]
        delayed = disk.stats()["reads"]
        (disk.mountpoint / "base").read_bytes()  # into the page cache ...
        missed = disk.stats()["reads"]
        (disk.mountpoint / "base").read_bytes()  # ... where a read reaches no layer
        assert disk.stats()["reads"] == missed
    print(f"cold 8 kB reads through the native layer at {pl3.read_us:.0f} us: "
          f"{min(through) * 1e6:,.0f}-{max(through) * 1e6:,.0f} us")  # fmt: skip
    assert min(through) >= pl3.read_us / 1e6
    assert delayed >= 10


@needs_native
def test_syncs_wait_the_delay_and_the_factor_keeps_the_ratio(base: Path) -> None:
    with _mount(base, "sync") as disk:
        fd = os.open(disk.mountpoint / "wal", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            disk.set_sync_delay(20_000)
            took = []
            for i in range(5):
                os.pwrite(fd, b"x" * 8192, i * 8192)
                started = time.perf_counter()
                os.fdatasync(fd)
                took.append(time.perf_counter() - started)
            disk.set_sync_delay(0, factor=3.0)
            before = disk.stats()
            for i in range(10):
                os.pwrite(fd, b"y" * 8192, i * 8192)
                os.fdatasync(fd)
            after = disk.stats()
        finally:
            os.close(fd)
    assert min(took) >= 0.020
    backing = after["backing_sync_ns"] - before["backing_sync_ns"]
    in_layer = after["sync_delay_ns"] - before["sync_delay_ns"]
    assert in_layer >= 3 * backing * 0.99  # each sync lasted 3x the disk's own
    assert (base / "sync-backing" / "wal").stat().st_size == 10 * 8192


def _laid_out_and_fsynced(disk: NativeMount) -> tuple[dict[str, int], dict[str, int]]:
    """A 16 MiB file written then fsynced through the layer (a bulk flush): the
    layer's counters before and after."""
    before = disk.stats()
    with open(disk.mountpoint / "laid-out", "wb") as f:
        f.write(os.urandom(16 * 2**20))
        os.fsync(f.fileno())
    return before, disk.stats()


@needs_native
def test_in_proportion_a_bulk_flush_adds_one_latency_not_the_factor_times_its_time(
    base: Path,
) -> None:
    """A checkpoint's fsync (or fio's laid-out file) is mostly moving data, which
    the MB/s cap charged as it was written: it lasts its own time plus the
    class's extra latency, (factor - 1) x the disk's small sync - not factor x
    a 16 MiB flush, which starved the instance test of 0.7 s of its 2 s window."""
    with _mount(base, "bulk") as disk:
        disk.set_sync_delay(0, factor=20.0)
        disk.set_small_sync(200.0)  # the disk's small sync, as calibrated
        before, bulk = _laid_out_and_fsynced(disk)
        fd = os.open(disk.mountpoint / "wal", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for i in range(5):  # small syncs: still 20x the disk's own
                os.pwrite(fd, b"w" * 8192, i * 8192)
                os.fdatasync(fd)
        finally:
            os.close(fd)
        after = disk.stats()
    backing = (bulk["backing_sync_ns"] - before["backing_sync_ns"]) / 1e9
    extra = (bulk["sync_delay_ns"] - before["sync_delay_ns"]) / 1e9 - backing
    print(f"a 16 MiB fsync at factor 20: the disk's {backing * 1e3:.1f} ms + {extra * 1e3:.1f} ms")
    assert bulk["bulk_syncs"] - before["bulk_syncs"] == 1 and after["bulk_syncs"] == 1
    assert bulk["bulk_sync_ns"] == bulk["sync_delay_ns"] - before["sync_delay_ns"]
    assert extra >= 19 * 200e-6 * 0.99  # one latency of the class over the disk's
    assert extra < 19 * backing / 2  # not 20x the flush
    small = after["sync_delay_ns"] - bulk["sync_delay_ns"]
    assert small >= 20 * (after["backing_sync_ns"] - bulk["backing_sync_ns"]) * 0.99


@needs_native
@pytest.mark.exclusive  # it times syncs: alone, after the parallel part
def test_on_a_deadline_a_sync_lasts_the_aim_whatever_the_disks_own_below_it(shm: Path) -> None:
    """A cloud disk's sync latency is its own, not a multiple of the disk under
    the layer: with the delay at 3 ms, a backing sync made slower by 0, 1 or 2
    ms (the layer's own injection, counted as the disk's) leaves each sync at
    about 3 ms; a disk slower than the aim (6 ms) gives its own time. In
    proportion (issue 44's seeds) the same moves of the disk went straight
    through: -36% to +101% off the aim."""
    aim_s, attempt = 0.003, itertools.count()

    def measure() -> dict[float, float]:
        medians = {}
        with _mount(shm, f"deadline-{next(attempt)}") as disk:
            disk.set_sync_delay(aim_s * 1e6)
            for extra in (0.0, 0.001, 0.002, 0.006):
                disk.set_backing_extra(extra * 1e6)
                before = disk.stats()
                took = _fdatasync_s(disk.mountpoint / f"wal-{extra}", 12)
                after = disk.stats()
                backing = (after["backing_sync_ns"] - before["backing_sync_ns"]) / 12 / 1e9
                assert backing >= extra  # the injection is counted as the disk's own
                medians[extra] = sorted(took)[len(took) // 2]
        return medians

    def met(medians: dict[float, float]) -> bool:
        return all(m <= aim_s * 1.25 for x, m in medians.items() if x < aim_s)

    medians = undisturbed(measure, unless_met(watched_by(shm), met))
    print("a sync on a 3 ms deadline over a disk slowed by 0/1/2/6 ms: "
          + ", ".join(f"{m * 1e3:.2f} ms" for m in medians.values()))  # fmt: skip
    for extra, median in medians.items():
        assert median >= max(aim_s, extra)  # never less than the aim, nor the disk's own
        if extra < aim_s:
            assert median <= aim_s * 1.25  # the aim, whatever the disk below it
    assert medians[0.006] <= 0.006 * 1.25  # the disk's own, nothing added on top


@needs_native
def test_on_a_deadline_a_bulk_flush_adds_the_class_latency_over_the_disks_small_sync(
    base: Path,
) -> None:
    """A 16 MiB fsync on a deadline is not over once the deadline passed (which
    gave a checkpoint's flush no latency of the class at all), nor the deadline
    after its own time: its own time plus the class's extra latency over the
    disk's small sync - as in proportion."""
    with _mount(base, "bulk-deadline") as disk:
        disk.set_sync_delay(2_000.0)
        disk.set_small_sync(200.0)  # the disk's small sync, as calibrated
        before, bulk = _laid_out_and_fsynced(disk)
    backing = (bulk["backing_sync_ns"] - before["backing_sync_ns"]) / 1e9
    extra = (bulk["sync_delay_ns"] - before["sync_delay_ns"]) / 1e9 - backing
    print(f"a 16 MiB fsync on a 2 ms deadline: the disk's {backing * 1e3:.1f} ms "
          f"+ {extra * 1e3:.1f} ms")  # fmt: skip
    assert bulk["bulk_syncs"] - before["bulk_syncs"] == 1
    assert extra >= (2_000 - 200) * 1e-6 * 0.99


@contextlib.contextmanager
def _over_a_slow_disk(shm: Path, extra_us: float) -> Iterator[tuple[NativeMount, NativeMount]]:
    """A disk slower than the class's local SSD, made of a native mount over tmpfs
    whose backing syncs take ``extra_us`` more (``slow``; its directory ``disk``
    is where the calibration times it), and a layer over it (``layer``)."""
    (shm / "slow-backing").mkdir()
    with NativeMount(shm / "slow-backing", shm / "slow") as slow:
        slow.set_backing_extra(extra_us)
        (shm / "slow" / "backing").mkdir()
        (shm / "slow" / "disk").mkdir()
        with NativeMount(shm / "slow" / "backing", shm / "layer") as layer:
            yield slow, layer


@needs_native
@pytest.mark.skipif(FIO is None, reason="fio is not installed")
@pytest.mark.exclusive  # it times syncs: alone, after the parallel part
def test_over_a_slower_disk_the_calibration_sets_a_deadline_that_holds_when_the_disk_moves(
    shm: Path,
) -> None:
    """The class over a disk slower than its local SSD: the calibration aims at
    the ratio times the disk's median sync and sets a deadline (not a factor).
    The disk is itself a native mount whose backing syncs the test slows by 300
    us, then by 600 and 150 as this VM's disk moves between seconds: fio
    through the class's layer stays on the aim while the disk under it doubles
    and halves (in proportion it followed the disk)."""
    pl3 = latency.CLASSES["essd-pl3"]
    with _over_a_slow_disk(shm, 300.0) as (slow, layer):
        try:
            cal = latency.checked(
                lambda: latency.calibrate_syncs(layer, shm / "slow" / "disk", pl3, 1)
            )
        except latency.CalibrationRefused as refused:  # a busy CPU: not judged, said why
            pytest.skip(f"not judged: {refused.message}")
        print(cal.describe())
        assert cal.target.ratio_kept and cal.sync_mode == latency.DEADLINE
        assert cal.factor == 1.0 and cal.delay_us > 0 and "on a deadline" in cal.describe()
        assert cal.aimed_us == cal.target.us >= 300 * pl3.ratio

        def measure() -> dict[float, float]:
            seen = {}
            for extra in (600.0, 150.0):
                slow.set_backing_extra(extra)
                seen[extra] = latency.measure(layer.mountpoint, 1).p50_us
            return seen

        def met(seen: dict[float, float]) -> bool:
            return all(abs(x / cal.aimed_us - 1) <= latency.TOLERANCE for x in seen.values())

        seen = undisturbed(measure, unless_met(watched_by(shm), met))
    print(f"aim {cal.aimed_us:,.0f} us: the disk slowed by 600 us -> {seen[600.0]:,.0f} us, "
          f"by 150 us -> {seen[150.0]:,.0f} us")  # fmt: skip
    assert met(seen)


@needs_native
@pytest.mark.skipif(FIO is None, reason="fio is not installed")
def test_a_disk_over_the_aim_while_calibrating_does_not_take_the_deadline_away(
    shm: Path,
) -> None:
    """The disk's own sync over the aim during the loop's windows (this VM's disk
    at 4.5 ms under an aim of 1.6): fio is over the aim whatever the delay, and
    the loop took the delay to 0 - every run then got the disk's own sync. It
    now takes at most the tolerance off the aim, and the miss is reported."""
    pl3 = latency.CLASSES["essd-pl3"]
    with _over_a_slow_disk(shm, 300.0) as (slow, layer):

        class Spiking:
            """The layer, but the disk under it spikes to 6 ms once the loop starts."""

            mountpoint = layer.mountpoint

            def set_sync_delay(self, us: float, **kw: float) -> None:
                if us > 0:  # the loop's steps, not the reset before the disk's windows
                    slow.set_backing_extra(6_000.0)
                layer.set_sync_delay(us, **kw)

            def set_read_delay(self, us: float) -> None:
                layer.set_read_delay(us)

        cal = latency.calibrate_syncs(Spiking(), shm / "slow" / "disk", pl3, 1)
    print(cal.describe())
    assert cal.sync_mode == latency.DEADLINE and cal.aimed_us < 6_000
    assert cal.delay_us >= cal.aimed_us * (1 - latency.TOLERANCE)
    assert cal.miss > latency.TOLERANCE  # said, and refused by latency.check
    assert "was over the aim: on a deadline a sync lasts the disk's own then" in cal.describe()


def test_in_proportion_the_loop_holds_what_fio_sees_not_the_layers_own_count() -> None:
    """A layer whose disk, paced by its waits, syncs in twice what fio times on
    it back to back (measured here, quiet): the layer's own ratio says 4.7x
    from the start, fio through it 2x that; the gain on the factor finds 0.5."""
    factor, disk_us = latency.CLASSES["essd-pl3"].ratio, 120.0
    gains: list[float] = []

    def through() -> latency.Latency:
        return latency.Latency(factor * gains[-1] * 2 * disk_us, 3000.0)

    gain, got, steps = latency.converge(
        gains.append, through, lambda: factor * disk_us, 1.0,
        nudge=lambda g, goal, seen: g * goal / seen, lowest=1 / factor,
    )  # fmt: skip
    assert gain == pytest.approx(0.5) and len(steps) == 2
    assert got.p50_us == pytest.approx(factor * disk_us)
    aim = latency.CLASSES["essd-pl3"].target(latency.SYNC, disk_us)
    at = latency.Latency(disk_us, 400.0)
    cal = latency.Calibration(
        "ESSD PL3", at, latency.Latency(150, 400), aim, 0.0, got, 2, latency.SYNC, factor,
        25.0, at, steps, in_layer_ratio=factor * gain, gain=gain, local_before=at,
    )  # fmt: skip
    assert cal.converged and cal.aimed_us == pytest.approx(factor * disk_us)
    assert "the layer applied 2.34x (gain 0.50)" in cal.describe()
    assert "over the aim" not in cal.describe()  # the report's "missed the calibration"
    # the first version: the layer's own count on the factor, fio 2x over
    first = replace(cal, achieved=latency.Latency(2 * factor * disk_us, 3000.0),
                    steps=((1.0, 2 * factor * disk_us),), gain=1.0)  # fmt: skip
    assert "2.0x over the aim" in first.describe()
    with pytest.raises(latency.CalibrationRefused, match=r"\+100% off its aim 562 us") as err:
        latency.check(first)
    assert "gain on the factor -> fio's median: 1.00 -> 1,125 us" in err.value.message


def test_the_calibration_converges_or_refuses_naming_every_step() -> None:
    # a layer whose reads take the delay plus 80 us (its wake-ups): one step to
    # learn the 80 us, then on the target
    delays: list[float] = []

    def measured() -> latency.Latency:
        return latency.Latency(delays[-1] + 80.0, delays[-1] * 3)

    delay, got, steps = latency.converge(delays.append, measured, lambda: 300.0, 290.0)
    assert steps[0] == (290.0, 370.0) and len(steps) == 2 and got.p50_us == 300.0
    assert delay == 220.0
    # a floor over the target: the delay reaches 0 and still overshoots - refused
    delays.clear()
    delay, got, steps = latency.converge(delays.append, measured, lambda: 50.0, 40.0)
    assert delay == 0.0 and got.p50_us == 80.0 and len(steps) == 2
    aim = latency.CLASSES["essd-pl3"].target(latency.READ, 9.0)
    cal = latency.Calibration(
        "ESSD PL3", latency.Latency(9, 30), latency.Latency(80, 200), aim, delay, got, 2,
        latency.READ, steps=steps,
    )  # fmt: skip
    assert not cal.converged
    with pytest.raises(latency.CalibrationRefused, match=r"\+?-51% off its aim 164 us") as err:
        latency.check(cal)
    assert "40 -> 120 us, 0 -> 80 us" in err.value.message


def test_a_missing_binary_falls_back_to_the_python_layer_and_names_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(nativefs.ENV, str(tmp_path / "no-such-binary"))
    reason = nativefs.unavailable()
    assert reason is not None and "scripts/build-native.sh" in reason
    (tmp_path / "b").mkdir()
    mount, kind, note = latency._mount(tmp_path / "b", tmp_path / "m",
                                       latency.CLASSES["essd-pl3"], None)  # fmt: skip
    assert isinstance(mount, LossyMount) and kind == latency.PYTHON
    assert "caps are not applied" in note and "build-native.sh" in note
    with pytest.raises(LossyFsUnavailable, match="instance cap needs the native") as err:
        latency._mount(tmp_path / "b", tmp_path / "m", latency.CLASSES["essd-pl3"],
                       Instance(Caps(iops=10)))  # fmt: skip
    assert err.value.exit_code == 3 and "build-native.sh" in (err.value.hint or "")


def test_a_binary_built_for_an_older_control_file_is_named_out_of_date(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The control file grew a field (the backing sync's injected slowness): a
    binary built before it would refuse the file after its mount began; it is
    named stale up front, with the fix, and the Python layer stands in."""
    built = nativefs.binary()
    old = tmp_path / "pgrig-latencyfs"
    old.write_text("#!/bin/sh\necho 'pgrig-latencyfs 1 (libfuse 3.14.0)'\n")
    old.chmod(0o755)
    monkeypatch.setenv(nativefs.ENV, str(old))
    reason = nativefs.unavailable()
    assert reason is not None
    assert f"out of date (control file version 1, this pgrig writes {nativefs.VERSION})" in reason
    assert "rebuild it with scripts/build-native.sh" in reason
    if REASON is None and built is not None:  # the venv's own build speaks this version
        monkeypatch.setenv(nativefs.ENV, str(built))
        assert nativefs.unavailable() is None


def test_the_classes_caps_follow_their_published_formulas() -> None:
    assert latency.parse_class("essd-pl1:100GiB").caps == Caps(6800, 170.0, None, 0)
    assert latency.parse_class("essd-pl3").caps.iops == 91_800  # seed 000's 1.8 TB
    assert latency.parse_class("hyperdisk-balanced").caps.iops == 3000
    gp2 = latency.parse_class("gp2:200GiB").caps
    assert (gp2.iops, gp2.burst_iops, gp2.credits) == (600, 3000, 5_400_000)
    assert "reads and writes together" in latency.CLASSES["gp3"].caps.describe()


def test_a_run_records_the_emulators_cpu_share_and_what_it_did() -> None:
    a = emulator.EmulatorReading("native", 7, 1.0, 100.0, 10.0, (("reads", 0), ("syncs", 0)))
    b = emulator.EmulatorReading(
        "native", 7, 3.0, 110.0, 20.0,
        (("reads", 9000), ("read_delay_ns", 9000 * 250_000), ("syncs", 1000),
         ("sync_delay_ns", 1000 * 900_000)), read_aim_us=240.0,
    )  # fmt: skip
    use = emulator.EmulatorUse.between(a, b)
    ncpu = os.cpu_count() or 1
    assert use.cpu_s == 2.0 and use.share_of_machine == pytest.approx(2.0 / (10 * ncpu))
    assert use.share_of_busy == pytest.approx(0.2) and use.ios == 10_000
    assert use.cpu_us_per_io == pytest.approx(200.0) and use.read_in_layer_us == 250.0
    assert "a delayed read 250 us in the layer (aim 240)" in use.headline()
    assert use.dominates == (use.share_of_machine > emulator.MAX_SHARE)
    # a checkpoint's bulk flush is its data's time: the per-sync figure held to
    # the aim is the other syncs' (1,000 of 900 us, not 3,000 with a 2.1 s flush)
    more = {"syncs": 1, "sync_delay_ns": 2_100_000_000}
    c = replace(b, counters=(*((k, v + more.get(k, 0)) for k, v in b.counters),
                             ("bulk_syncs", 1), ("bulk_sync_ns", 2_100_000_000)))  # fmt: skip
    assert emulator.EmulatorUse.between(a, c).sync_in_layer_us == pytest.approx(900.0)


@needs_native
def test_pgrig_clean_undoes_a_native_mount_whose_pgrig_was_killed(base: Path) -> None:
    (base / "b").mkdir()
    code = (
        "import os\n"
        "from pathlib import Path\n"
        "from pgrig.storage.nativefs import NativeMount\n"
        f"m = NativeMount(Path({str(base / 'b')!r}), Path({str(base / 'm')!r}))\n"
        "m.start()\n"
        "print(m.pid, flush=True)\n"
        "os._exit(0)  # as a kill -9 would: no unmount\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    layer = int(done.stdout.split()[-1])
    assert os.path.ismount(base / "m") and Path(f"/proc/{layer}").exists()
    cleaned = lossyfs.clean_orphans()
    assert str(base / "m") in cleaned
    assert not os.path.ismount(base / "m")
    deadline = time.monotonic() + 10
    while Path(f"/proc/{layer}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{layer}").exists() or "Z" in Path(f"/proc/{layer}/stat").read_text()


@dataclass(frozen=True)
class Studied:
    """One finished study on a latency target, which the tests below only read."""

    path: Path  # its campaign file
    results: Path
    said: str  # the console's lines
    refused: str | None  # why the study stopped, if it did


@pytest.fixture(scope="module")
def studied() -> Iterator[Studied]:
    """A real tiny study (TPC-B select-only, 2 s) on a target whose data disk and
    tablespace's disk are each a gp3 under one instance cap, run in this
    process as `pgrig run` runs it, over tmpfs, each disk's delays set at the
    class's own figures (as a calibration over a disk faster than the class's
    local SSD aims; the fio steps that converge on them are
    test_storage_latency's). What is judged here - the per-run emulator
    record, the caps and instance keys as built, the end-of-study measurement
    (fio through the layer, 1-s windows) - is the same either way; the
    proportional measurement at the end has its own test."""
    if REASON is not None:
        pytest.skip(REASON)
    base = Path(tempfile.mkdtemp(prefix="pgrig-test-nativefs-", dir="/dev/shm"))
    base.chmod(0o755)  # the server's OS user reaches its data directory
    console = io.StringIO()
    refused = None
    try:
        path = write(
            base,
            f"""
            [campaign]
            name = "emu"
            monitor = false
            [[target]]
            name = "gp3"
            directory = "{base}"
            latency = "gp3"
            tablespace = {{ latency = "gp3" }}  # a second emulated disk: the instance's
            instance_iops = 5000
            {STOCK}
            {NO_PROBES}
            {TINY_TPCB}
            """,
        )
        ui = Ui(console=Console(file=console, width=1000, highlight=False))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(latency, "CALIBRATION_S", 1)  # the end's fio windows
            # each disk set at the class's figures without the calibration's
            # fio steps (up to five a kind and disk; ~20 of this study's ~38 s):
            # its convergence is test_storage_latency's subject
            patch.setattr(latency, "calibrate_syncs", _uncalibrated(latency.SYNC))
            patch.setattr(latency, "calibrate_reads", _uncalibrated(latency.READ))
            try:
                results = base / "r"
                run_campaign(campaign.load(path), ui, results=results,
                             store=results / "results.sqlite", yes=False, keep=False)  # fmt: skip
            except PgrigError as exc:
                refused = f"{exc.message} {console.getvalue()}"
        yield Studied(path, base / "r", console.getvalue(), refused)
    finally:
        workdir.clean_orphans()
        storage.clean()
        subprocess.run(["rm", "-rf", "--one-file-system", str(base)], check=False)


def _finished(studied: Studied) -> dict[str, tuple[str, str | None, dict[str, object] | None]]:
    if studied.refused is not None and "calibration" in studied.refused:
        # the layer's figures did not converge on this shared machine: refused
        # with every step named, which is what a refusal must say
        assert "step(s)" in studied.refused
        pytest.skip("the calibration was refused on a busy machine (its figures are named)")
    assert studied.refused is None, studied.refused
    return runs(studied.results)


def test_each_run_on_a_latency_target_records_what_the_emulator_took(studied: Studied) -> None:
    found = _finished(studied)
    status, reason, result = found["gp3/tpcb/s1/select-only/c1/d2/r1/emulator"]
    assert status == "ok" and result is not None, reason
    assert result["layer"] == "native" and result["ios"] > 0  # type: ignore[operator]
    assert 0 < result["share_of_machine"] <= 1 and result["cpu_s"] > 0  # type: ignore[operator]
    built = found["gp3/lab"][2]
    assert built is not None and "Caps: AWS gp3 100 GiB: 3,000 IOPS" in str(built["latency"])
    # the campaign's instance keys: the tablespace on a layer of its own, both capped
    assert "the instance: 5,000 IOPS" in str(built["latency"])
    assert "The tablespace's disk: AWS gp3 fdatasync" in str(built["latency"])
    assert "tablespace pgrig_tables in " in studied.said
    assert not any(studied.results.parent.glob("pgrig-latency-*/mnt/*"))  # unmounted, removed


def test_the_end_of_a_study_measures_each_emulated_disk_again(studied: Studied) -> None:
    """After the last run, before the layers are unmounted, each emulated disk is
    measured as its build calibrated it (fio through the layer, nothing
    adjusted): a record of its own, in the plan, on the console and in the
    report beside "Built as"."""
    found = _finished(studied)
    assert "gp3/lab/end" in plan.step_ids(campaign.load(studied.path))
    status, reason, end = found["gp3/lab/end"]
    assert status == "ok" and end is not None, reason
    each = end["each"]
    assert isinstance(each, list)
    assert [(x["disk"], x["what"]) for x in each] == [
        ("", "fdatasync"), ("", "read"), ("tablespace", "fdatasync"), ("tablespace", "read"),
    ]  # fmt: skip
    gp3 = latency.CLASSES["gp3"]
    for x in each:
        # over tmpfs the build aimed at the class's own figures: so does the end
        assert x["aimed_us"] == (gp3.fdatasync_us if x["what"] == latency.SYNC else gp3.read_us)
        assert x["disk_us"] is None
        # the build's delay is still there: a delayed I/O never returns before it,
        # and the build set it within the calibration's tolerance of the aim
        assert x["p50_us"] >= x["aimed_us"] * 0.5, x
    with Store.open(studied.results / "results.sqlite") as store:
        (study,) = store.studies()
        records = {r.key: r for r in store.runs(study.id)}
    last_run = records["gp3/tpcb/s1/select-only/c1/d2/r1"]
    assert records["gp3/lab/end"].started_at >= last_run.finished_at
    said = studied.said
    assert "gp3: the emulated disks measured again" in said and ": at the end, fdatasync " in said
    report = full_report(studied.results).read_text()
    assert "| Emulation at the end | fdatasync " in report
    assert "At the end of the study, fio through the layer: fdatasync " in report


@needs_native
@pytest.mark.skipif(FIO is None, reason="fio is not installed")
def test_at_the_end_a_sync_in_proportion_is_aimed_at_the_ratio_times_the_disk_around_it(
    base: Path,
) -> None:
    """Over this disk (slower than the class's local SSD) a sync lasts the class's
    ratio times the disk's own: measured again, its aim is the ratio times the
    disk fio timed just before and just after, as the calibration's step was."""
    pl3 = latency.CLASSES["essd-pl3"]
    (base / "disk").mkdir()
    at = latency.Latency(500.0, 900.0)  # the build's figures (this disk slower than 35 us)
    aim = pl3.target(latency.SYNC, at.p50_us)
    assert aim.ratio_kept
    built = latency.Calibration(
        pl3.name, at, at, aim, 0.0, latency.Latency(2_600.0, 9_000.0), 1, latency.SYNC,
        pl3.ratio, 0.0, at, ((0.5, 2_600.0),), gain=0.5, local_before=at,
    )  # fmt: skip
    with _mount(base, "pl3") as disk:
        disk.set_sync_delay(0.0, factor=pl3.ratio * built.gain)
        before = disk.stats()
        got = latency.remeasure(disk, base / "disk", built, 1, "tablespace")
        after = disk.stats()
    print(f"at the end: {got.describe()}")
    assert (got.disk, got.what) == ("tablespace", latency.SYNC)
    assert got.disk_us is not None and got.disk_us > 0
    assert got.aimed_us == pytest.approx(pl3.ratio * got.disk_us)
    assert got.built_miss == pytest.approx(built.miss)
    assert got.miss == pytest.approx(got.p50_us / got.aimed_us - 1)
    # fio's syncs went through the layer, each at the factor the build left on it
    # (8 kB writes, each synced: none a bulk flush, which adds one latency instead)
    assert after["syncs"] > before["syncs"] and after["bulk_syncs"] == before["bulk_syncs"]
    backing = after["backing_sync_ns"] - before["backing_sync_ns"]
    in_layer = after["sync_delay_ns"] - before["sync_delay_ns"]
    assert in_layer >= pl3.ratio * built.gain * backing * 0.99


@needs_native
@pytest.mark.skipif(FIO is None, reason="fio is not installed")
@pytest.mark.exclusive
def test_a_targets_data_disk_and_tablespace_disk_share_its_instance_cap(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The campaign's keys, built as `pgrig run` builds them (storage.lab_target):
    the data disk and the tablespace's disk are each a 3,000-IOPS gp3, the
    instance allows 2,000 between them (issue 44: seed 000's 8-disk stripe hit
    its instance's cap, not its disks'). fio lays its files out and fsyncs them
    inside the window: at gp3's factor 28.6 over this disk, that 16 MiB fsync
    once lasted 28.6x the disk's own (24 ms -> 705 ms, the disk idle meanwhile:
    1,467-1,567 IOPS); a bulk flush now adds one latency of the class."""
    from pgrig.storage import LabSpec, lab_target

    # The caps are judged, not the latency: each disk's delays set at its
    # class's figures without fio's calibration (two gp3 disks calibrated in
    # proportion took ~30 of this test's 40 s, quiet; the calibration is
    # test_storage_latency's subject, its use by a study
    # test_each_run_on_a_latency_target_records_what_the_emulator_took's).
    monkeypatch.setattr(latency, "calibrate_syncs", _uncalibrated(latency.SYNC))
    monkeypatch.setattr(latency, "calibrate_reads", _uncalibrated(latency.READ))

    spec = LabSpec.from_mapping({"latency": "gp3", "tablespace": {"latency": "gp3"},
                                 "instance_iops": 2000})  # fmt: skip
    assert spec.instance == Caps(iops=2000) and spec.emulated == 2
    with lab_target(base, spec) as built:
        assert built.emulator is not None
        disks = [e.mount for e in built.emulator.each]
        assert all(isinstance(d, NativeMount) for d in disks)
        where = [built.directory, dict(built.tablespaces)["tablespace"]]
        assert [d.mountpoint for d in disks] == where
        data, space = disks
        assert isinstance(data, NativeMount) and isinstance(space, NativeMount)
        # the instance's, never the disks' 6,000 together
        each = undisturbed(lambda: _both(data, space, 2000),
                           unless_met(watched_by(base), _at(2000)))  # fmt: skip
        info = built.info()
    print(f"a target's two gp3 disks (3,000 IOPS each) under its 2,000-IOPS instance: "
          f"{each[0]:,.0f} + {each[1]:,.0f} = {sum(each):,.0f} IOPS")  # fmt: skip
    assert "the instance: 2,000 IOPS" in str(info.latency)
    assert "The tablespace's disk: AWS gp3 fdatasync" in str(info.latency)
    assert "an instance cap of 2,000 IOPS" in spec.describe()
    assert not any(base.glob("pgrig-latency-*/mnt/*"))  # both unmounted, removed
    assert sum(each) >= 2000 * 0.90


def _uncalibrated(what: str) -> Callable[..., latency.Calibration]:
    """calibrate_syncs/calibrate_reads without fio: the layer's delay set at the
    class's own figure, recorded as if fio had measured exactly that."""

    def calibrate(
        mount: NativeMount, disk: Path, disk_class: latency.DiskClass, seconds: int,
        layer: str = latency.NATIVE,
    ) -> latency.Calibration:  # fmt: skip
        if what == latency.SYNC:
            us = disk_class.fdatasync_us
            mount.set_sync_delay(us)
        else:
            us = disk_class.read_us
            mount.set_read_delay(us)
        at = latency.Latency(us, us)
        aim = disk_class.target(what, 0.0)  # the class's own figure: no ratio kept
        return latency.Calibration(disk_class.name, at, at, aim, us, at, seconds, what,
                                   layer=layer)  # fmt: skip

    return calibrate


def test_an_instance_cap_without_the_native_layer_is_refused_before_a_study(
    tmp_path: Path,
) -> None:
    """The Python layer has no caps to share: `pgrig run` refuses the target's
    instance keys up front (exit 3, the install hint), before any study exists."""
    path = write(
        tmp_path,
        f"""
        [campaign]
        name = "inst"
        [[target]]
        name = "essd"
        directory = "{tmp_path}"
        latency = "essd-pl3"
        instance_iops = 106000
        {STOCK}
        {NO_PROBES}
        {TINY_TPCB}
        """,
    )
    missing = str(tmp_path / "no-such-binary")
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "run", str(path), "--results", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, COLUMNS="1000", **{nativefs.ENV: missing}),
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "target essd: an instance cap (instance_iops, instance_mbps) needs the native " \
           "latency layer" in done.stderr  # fmt: skip
    assert "build-native.sh" in done.stderr
    assert not (tmp_path / "r" / "results.sqlite").exists()  # refused before a study
    assert not any(tmp_path.glob("pgrig-latency-*"))


def test_a_targets_layers_are_read_as_one_emulator() -> None:
    """A tablespace's layer is a process of its own: a run's record sums their CPU
    and counters (the data disk's PID and aims), and none when one is gone."""

    class Layer:  # a running layer's reading, without mounting one
        def __init__(self, got: emulator.EmulatorReading | None) -> None:
            self.got = got

        def reading(self) -> emulator.EmulatorReading | None:
            return self.got

    data = emulator.EmulatorReading("native", 11, 2.0, 10.0, 5.0,
                                    (("reads", 3), ("syncs", 1)), 200.0, 700.0)  # fmt: skip
    space = emulator.EmulatorReading("native", 12, 0.5, 10.1, 5.1, (("reads", 4),), 300.0)
    both = latency.Emulators((Layer(data), Layer(space)))  # type: ignore[arg-type]
    got = both.reading()
    assert got is not None and got.cpu_s == 2.5 and got.pid == 11
    assert dict(got.counters) == {"reads": 7, "syncs": 1} and got.read_aim_us == 200.0
    gone = latency.Emulators((Layer(data), Layer(None)))  # type: ignore[arg-type]
    assert gone.reading() is None
