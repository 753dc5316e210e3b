"""Stripes: btrfs raid0 over several loop devices (no device-mapper or md here),
an I/O cap on each device adding up as on the seeds' striped cloud disks."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_disk_dir
from disturbance import undisturbed, watched_by
from pgrig import proc
from pgrig.errors import ToolError
from pgrig.storage import LabSpec, btrfs, devices, lab_target, state, throttle
from pgrig.storage.loopfs import FsSpec, loop_filesystem
from pgrig.storage.model import LabInfo
from pgrig.tools import fio

DATA = Path(__file__).parent / "data"
ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and mounts need root")


def test_btrfs_facts_name_each_profile_and_device() -> None:
    text = (DATA / "btrfs_show_df_raid0_4.txt").read_text()
    facts = btrfs.facts(text)
    assert facts["data profile"] == "RAID0 (256.00MiB)"
    assert facts["metadata profile"] == "RAID0 (128.00MiB)"
    assert facts["devices"] == "4"
    assert facts["device 4"] == "/dev/loop3, 256.00MiB"


def test_a_cap_on_each_stripe_adds_up_in_the_record() -> None:
    io = throttle.essd("PL3", 1800)
    info = LabInfo("x", "/d", io=io, io_devices=("7:1", "7:2", "7:3", "7:4"))
    whole = info.cap()
    assert whole is not None and io.read_iops is not None
    assert whole.read_iops == 4 * io.read_iops and whole.label == "4 x ESSD PL3 1,800 GiB"
    assert LabInfo("x", "/d", io=io, io_devices=("7:1",)).cap() == io


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_disk_dir("pgrig-test-stripes-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def ours(base: Path) -> list[str]:
    prefix = str(base.resolve()) + "/"
    return sorted(d for d, f in devices.loop_backing_files().items() if f.startswith(prefix))


def nothing_left(base: Path) -> bool:
    records = [r for r in state.load_all() if r.directory and r.directory.startswith(str(base))]
    return not ours(base) and not devices.mounts_under(str(base)) and not records


@ROOT
def test_four_stripes_are_built_used_and_removed(base: Path) -> None:
    spec = FsSpec.parse("btrfs", "512M", stripes=4)
    with loop_filesystem(base, spec) as info:
        assert sorted(info.stripes) == ours(base) and len(info.stripes) == 4
        assert info.facts["data profile"].startswith("RAID0")
        assert info.facts["metadata profile"].startswith("RAID0")
        assert len(set(info.io_devices)) == 4 and all(d.startswith("7:") for d in info.io_devices)
        assert info.options_not_shown == ()  # device= is never listed, and said so
        data = Path(info.data_dir) / "by-postgres"
        argv = ["/usr/bin/dd", "if=/dev/zero", f"of={data}", "bs=1M", "count=8", "oflag=direct"]
        proc.run(argv, timeout=60, user=proc.OsUser.lookup("postgres"))
    assert nothing_left(base) and list(base.iterdir()) == []


@ROOT
def test_stripes_below_btrfs_minimum_fail_with_mkfs_words_and_leave_nothing(base: Path) -> None:
    too_small = FsSpec.parse("btrfs", "256M", stripes=4)  # 64 MiB each
    with pytest.raises(ToolError) as caught, loop_filesystem(base, too_small):
        pass
    assert "minimum size for each btrfs device" in (caught.value.stderr or "")
    assert nothing_left(base) and list(base.iterdir()) == []


@ROOT
@pytest.mark.exclusive
def test_a_cap_on_each_of_four_stripes_adds_up(base: Path) -> None:
    """200 IOPS per loop device: random reads over four reach more than one
    device's cap and stay within the four caps' sum."""
    spec = LabSpec.from_mapping({"fs": "btrfs", "size": "512M", "stripes": 4, "iops": 200})
    with lab_target(base, spec) as target:
        assert target.cgroup is not None and len(target.devices) == 4
        for device in target.devices:
            assert throttle.effective(target.cgroup, device) == {
                "read_iops": "200",
                "write_iops": "200",
            }
        job = fio.FioJob(
            directory=target.directory, pattern="randread", size="32M", iodepth=16, runtime_s=3
        )
        # More than one cap is judged on a run pgrig's monitor saw undisturbed:
        # another process's I/O or CPU only slows it (tests/disturbance.py).
        result, _ = undisturbed(
            lambda: fio.run(job, preexec=target.preexec), watched_by(target.directory)
        )
        assert 1.5 * 200 < result.iops <= 4 * 200 * 1.1
        assert "on each of the 4 stripes" in target.describe()
    assert nothing_left(base)
