"""The lab's one entry point for campaign targets: a table -> LabSpec -> LabTarget."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_disk_dir
from pgrig.errors import UsageError
from pgrig.storage import LabSpec, devices, lab_target, state, throttle
from pgrig.tools import fio


def test_tables_become_specs() -> None:
    spec = LabSpec.from_mapping(
        {"fs": "ext4", "size": "1G", "mkfs": "-E stride=2", "disk": "essd-pl1:100GiB"}
    )
    assert spec.fs is not None and spec.fs.mkfs_options == ("-E", "stride=2")
    assert spec.io == throttle.essd("PL1", 100)
    assert spec.base == "/var/tmp" and spec.disk == "essd-pl1:100GiB"
    listed = LabSpec.from_mapping({"fs": "xfs", "size": "1G", "mkfs": ["-d", "su=64k,sw=2"]})
    assert listed.fs is not None and listed.fs.mkfs_options == ("-d", "su=64k,sw=2")
    assert spec.memory_bytes is None
    generic = LabSpec.from_mapping({"iops": 3000, "mbps": 50, "memory": "512M"})
    assert generic.fs is None and generic.memory_bytes == 512 * 2**20
    assert generic.io is not None and generic.io.write_bps == 50_000_000
    assert generic.io.read_bps == 50_000_000 and generic.io.read_iops == 3000
    assert "memory limit 512 MiB" in generic.describe()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"fs": "xfs"}, "needs size"),
        ({"fs": "zfs", "size": "1G"}, "not one of xfs, ext4"),
        ({"mount": "noatime"}, "without fs"),
        ({"disk": "essd-pl1"}, "expected essd-pl0..essd-pl3 and a size"),
        ({"disk": "essd-pl1:100GiB", "iops": 5}, "not both"),
        ({"fs": "xfs", "size": "1G", "stripe": 4}, "unknown key 'stripe'"),
        ({"disk": "essd-pl3:100GiB"}, "1,261"),
        ({"memory": "lots"}, "cannot read size"),
        ({"fs": "xfs", "size": "1G", "stripes": 4}, "stripes.*device-mapper.*btrfs raid0"),
        ({"fs": "btrfs", "size": "1G", "log_size": "64M"}, "log_size.*no external log"),
    ],
)
def test_bad_tables_are_named(table: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        LabSpec.from_mapping(table, where="targets.cloud")


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_disk_dir("pgrig-test-labtarget-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and cgroups need root")
def test_filesystem_with_cap_and_memory_limit(base: Path) -> None:
    spec = LabSpec.from_mapping(
        {"fs": "xfs", "size": "320M", "mount": "noatime", "iops": 400, "memory": "128M"}
    )
    with lab_target(base, spec) as target:
        assert target.filesystem is not None
        assert target.devices == (target.filesystem.major_minor,)
        assert target.directory == Path(target.filesystem.data_dir)
        assert target.cgroup is not None and set(target.cgroup.dirs) == {"io", "memory"}
        assert throttle.effective(target.cgroup, target.devices[0]) == {
            "read_iops": "400",
            "write_iops": "400",
        }
        job = fio.FioJob(directory=target.directory, pattern="randread", size="16M", runtime_s=2)
        result, _ = fio.run(job, preexec=target.preexec)
        assert result.iops <= 400 * 1.1
        stats = target.memory_stats()
        assert stats is not None and stats.limit_bytes == 128 * 2**20
        assert "400 IOPS" in target.describe() and "memory limit 128 MiB" in target.describe()
        dirs = list(target.cgroup.dirs.values())
    assert not any(d.exists() for d in dirs)
    assert devices.mounts_under(str(base.resolve())) == []
    assert list(base.iterdir()) == [] and state.orphans() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and cgroups need root")
def test_a_tablespace_disk_gets_its_own_cap(base: Path) -> None:
    """Seed 004's tbs1 and tbs2, each on a disk of its own cap: the caps go to the
    tablespaces' loop devices, in the server's cgroup, and fio there is held to it."""
    spec = LabSpec.from_mapping(
        {"memory": "256M", "tablespace": {"fs": "ext4", "size": "128M", "iops": 300},
         "index_tablespace": {"fs": "ext4", "size": "128M"}}
    )  # fmt: skip
    assert spec.tablespace_io == (("tablespace", throttle.IoLimits.generic(iops=300)),)
    assert "tablespace on ext4" in spec.describe() and "300 IOPS" in spec.describe()
    with lab_target(base, spec) as target:
        assert target.cgroup is not None and set(target.cgroup.dirs) == {"io", "memory"}
        where = dict(target.tablespaces)
        capped, free = (_device(where[o]) for o in ("tablespace", "index_tablespace"))
        assert throttle.effective(target.cgroup, capped) == {
            "read_iops": "300",
            "write_iops": "300",
        }
        assert throttle.effective(target.cgroup, free) == {}
        job = fio.FioJob(where["tablespace"], "randread", size="16M", runtime_s=2)
        result, _ = fio.run(job, preexec=target.preexec)
        assert result.iops <= 300 * 1.1
        dirs = list(target.cgroup.dirs.values())
    assert not any(d.exists() for d in dirs)
    assert list(base.iterdir()) == [] and state.orphans() == []


def test_a_tablespace_cap_is_named_when_wrong() -> None:
    with pytest.raises(UsageError, match="not both"):
        LabSpec.from_mapping(
            {"tablespace": {"fs": "xfs", "size": "1G", "disk": "essd-pl1:100GiB", "iops": 5}}
        )


def _device(path: Path) -> str:
    """major:minor of the filesystem ``path`` is on (a loop device here)."""
    dev = path.stat().st_dev
    return f"{os.major(dev)}:{os.minor(dev)}"
