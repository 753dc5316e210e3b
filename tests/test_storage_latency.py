"""The latency layer: a cloud disk's per-sync latency added on a real FUSE mount,
and the calibration's arithmetic. (The whole calibration - fio on the disk, the
layer's floor, the achieved latency - runs in examples/seed000-latency.toml: it
takes about 15 s, too long for the suite.)"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_disk_dir
from pgrig import lossyfs
from pgrig.errors import UsageError
from pgrig.lossyfs import LossyMount
from pgrig.storage import latency
from pgrig.storage.target import LabSpec

REASON = lossyfs.available()


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    base = make_disk_dir("pgrig-test-latency-")
    (base / "backing").mkdir()
    try:
        yield base / "backing", base / "mnt"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _fdatasync_s(path: Path, n: int) -> list[float]:
    took = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for i in range(n):
            os.pwrite(fd, b"x" * 8192, i * 8192)
            started = time.perf_counter()
            os.fdatasync(fd)
            took.append(time.perf_counter() - started)
    finally:
        os.close(fd)
    return took


@pytest.mark.skipif(REASON is not None, reason=f"no FUSE here: {REASON}")
def test_every_sync_waits_the_delay_and_the_delay_can_change(dirs: tuple[Path, Path]) -> None:
    with LossyMount(*dirs, metadata="journal", sync_delay_us=30_000) as fs:
        slow = _fdatasync_s(fs.mountpoint / "wal", 8)
        assert min(slow) >= 0.030  # never less than the delay
        fs.set_sync_delay(0)
        fast = _fdatasync_s(fs.mountpoint / "wal2", 8)
        assert statistics.median(fast) < statistics.median(slow) - 0.020
        stats = fs.stats()
        assert stats["delays"] == 8 and stats["delay_seconds"] >= 8 * 0.030
    assert (dirs[0] / "wal").stat().st_size == 8 * 8192  # the data went to the disk


@pytest.mark.skipif(REASON is not None, reason=f"no FUSE here: {REASON}")
def test_in_proportion_each_sync_lasts_the_factor_times_the_disks_own(
    dirs: tuple[Path, Path],
) -> None:
    with LossyMount(*dirs, metadata="journal") as fs:
        fs.set_sync_delay(0, factor=3.0, overhead_us=0)
        _fdatasync_s(fs.mountpoint / "wal", 10)
        stats = fs.stats()
    assert stats["delays"] == 10
    # each sync waited twice what the disk's own fdatasync of it took (3x in all)
    assert stats["delay_seconds"] >= 2 * stats["backing_sync_seconds"] * 0.99


def test_the_class_keeps_its_latency_or_its_ratio_over_a_slower_disk() -> None:
    pl3 = latency.CLASSES["essd-pl3"]
    assert pl3.ratio == pytest.approx(164 / 35)
    fast_disk, why = pl3.target_us(20.0)  # a disk faster than the seed's local SSD
    assert fast_disk == 164.0 and "164 us" in why
    slow_disk, why = pl3.target_us(1000.0)  # this VM's disk: the seed's ratio over it
    assert slow_disk == pytest.approx(1000 * 164 / 35) and "slower than the class" in why


def test_the_delay_never_goes_below_zero() -> None:
    assert latency.delay_for(target_us=1000, through_us=300) == 700
    assert latency.delay_for(target_us=1000, through_us=1200, delay_us=700) == 500
    assert latency.delay_for(target_us=100, through_us=400) == 0  # the floor is over it


def test_latency_keys_are_checked_with_the_campaign() -> None:
    assert LabSpec.from_mapping({"latency": "essd-pl3"}).latency == "essd-pl3"
    with pytest.raises(UsageError, match="latency.*'ssd'.*not a disk class") as err:
        LabSpec.from_mapping({"latency": "ssd"})
    assert "essd-pl3" in (err.value.hint or "")
    with pytest.raises(UsageError, match="cannot be combined with an I/O cap"):
        LabSpec.from_mapping({"latency": "essd-pl3", "disk": "essd-pl1:100GiB"})
