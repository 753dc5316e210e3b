"""Storage lab parsers and formulas, on real captured output (tests/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig import environment
from pgrig.errors import UsageError
from pgrig.storage import fsinfo, kmsg, memcg, throttle
from pgrig.storage.loopfs import FsSpec, _merge_option

DATA = Path(__file__).parent / "data"


def test_xfs_info_with_external_log() -> None:
    facts = fsinfo.xfs_facts((DATA / "xfs_info_logdev.txt").read_text())
    assert facts["block size"] == "4096"
    assert facts["allocation groups"] == "4"
    assert facts["stripe unit (blocks)"] == "16"  # su=64k in 4 KiB blocks
    assert facts["stripe width (blocks)"] == "32"  # sw=2
    assert facts["log"] == "/dev/loop1"
    assert facts["log size (blocks)"] == "32768"


def test_xfs_info_internal_log() -> None:
    raw = fsinfo.parse_xfs_info((DATA / "xfs_info_internal.txt").read_text())
    assert raw["log.device"] == "internal log"
    assert raw["meta-data.device"].startswith("/dev/loop")
    assert raw["naming"] == "version 2"


def test_dumpe2fs_external_journal_and_stripes() -> None:
    facts = fsinfo.ext4_facts((DATA / "dumpe2fs_h_journal_dev.txt").read_text())
    assert facts["stride (blocks)"] == "2"
    assert facts["stripe width (blocks)"] == "6"
    assert facts["log"] == "external journal device 0x0701"
    assert "has_journal" in facts["features"]


def test_dumpe2fs_internal_journal() -> None:
    facts = fsinfo.ext4_facts((DATA / "dumpe2fs_h_internal.txt").read_text())
    assert facts["log"] == "internal journal"
    assert "journal size" in facts
    assert "stride (blocks)" not in facts


def test_mountinfo_of_loop_targets() -> None:
    mounts = environment.parse_mountinfo((DATA / "mountinfo_loop_targets.txt").read_text())
    xfs, ext4 = mounts
    assert xfs.fstype == "xfs" and xfs.major_minor == "7:0"
    effective = fsinfo.effective_options(xfs.mount_options, xfs.super_options)
    assert "logdev=/dev/loop1" in effective and "noatime" in effective
    asked = ("noatime", "nodiratime", "logbufs=8", "logbsize=256k", "largeio")
    # nodiratime is implied by noatime; logbsize is shown with another value spelling.
    assert fsinfo.not_shown(asked, effective) == ("largeio",)
    assert "data=writeback" in fsinfo.effective_options(ext4.mount_options, ext4.super_options)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("unknown option -d foo=1\nUsage: mkfs.xfs", ("-d foo=1",)),
        ("mkfs.xfs: invalid option -- 'Z'\nunknown option -Z ", ("-Z", "Z")),
        ("mke2fs 1.47.0 (5-Feb-2023)\n\nBad option(s) specified: foo\n", ("foo",)),
        ("Invalid filesystem option set: bogus", ("bogus",)),
        ("xfs: Unknown parameter 'nobarrier'", ("nobarrier",)),
        ("ext4: Unknown parameter 'bogusopt'", ("bogusopt",)),
    ],
)
def test_refused_options_are_named(text: str, names: tuple[str, ...]) -> None:
    assert fsinfo.refused_options(text) == names


def test_kmsg_records() -> None:
    lines = (DATA / "kmsg_records.txt").read_text().splitlines()
    messages = [kmsg.parse_record(line) for line in lines]
    assert messages[0] is not None and messages[0].startswith("XFS (loop0): Mounting V5")
    assert kmsg.parse_record("no separator here") is None


def test_merge_log_option_for_mkfs_xfs() -> None:
    assert _merge_option(("-d", "su=64k,sw=2"), "-l", "logdev=/dev/loop1") == [
        "-d",
        "su=64k,sw=2",
        "-l",
        "logdev=/dev/loop1",
    ]
    assert _merge_option(("-l", "size=64m"), "-l", "logdev=/dev/loop1") == [
        "-l",
        "logdev=/dev/loop1,size=64m",
    ]


def test_fsspec_parse() -> None:
    spec = FsSpec.parse(
        "ext4", "2G", mkfs="-E stride=2,stripe-width=6", mount="noatime, data=writeback"
    )
    assert spec.size_bytes == 2 * 2**30
    assert spec.mkfs_options == ("-E", "stride=2,stripe-width=6")
    assert spec.mount_options == ("noatime", "data=writeback")
    with pytest.raises(UsageError, match="zfs"):
        FsSpec.parse("zfs", "1G")
    with pytest.raises(UsageError, match="stripes = 3 with ext4: .*device-mapper"):
        FsSpec.parse("ext4", "1G", stripes=3)
    assert FsSpec.parse("btrfs", "1G", stripes=4).stripe_bytes == 2**28


# ESSD: the published formula, and seed 000's measurement of a 1.8 TB PL3 disk
# (nominal 91,800 IOPS; fio measured 91.9k).
@pytest.mark.parametrize(
    ("pl", "gib", "iops", "mbps"),
    [
        ("PL0", 40, 2280, 110.0),
        ("PL0", 1000, 10000, 180.0),
        ("PL1", 20, 2800, 130.0),
        ("PL1", 100, 6800, 170.0),
        ("PL1", 2000, 50000, 350.0),
        ("PL2", 461, 24850, 350.5),
        ("PL2", 3000, 100000, 750.0),
        ("PL3", 1261, 64850, 750.5),
        ("PL3", 1800, 91800, 1020.0),
        ("PL3", 2400, 121800, 1320.0),  # seed 003: 1800 + 2400 x 50
        ("PL3", 32768, 1000000, 4000.0),
    ],
)
def test_essd_formula(pl: str, gib: int, iops: int, mbps: float) -> None:
    limits = throttle.essd(pl, gib)
    assert limits.read_iops == limits.write_iops == iops
    assert limits.read_bps == limits.write_bps == int(mbps * throttle.MB)
    assert limits.label == f"ESSD {pl} {gib:,} GiB"


def test_essd_refuses_sizes_not_sold() -> None:
    with pytest.raises(UsageError, match="1,261"):
        throttle.essd("PL3", 100)
    assert throttle.essd(3, 100, strict=False).read_iops == 6800
    with pytest.raises(UsageError, match="PL4"):
        throttle.essd("PL4", 100)


def test_io_limits_describe() -> None:
    assert throttle.IoLimits.generic(iops=500, mbps=4).describe() == (
        "500 IOPS, 4.0 MB/s (read and write each)"
    )
    split = throttle.IoLimits.generic(read_iops=1000, write_iops=200, label="mine")
    assert split.describe() == "mine: read 1,000 IOPS; write 200 IOPS"
    with pytest.raises(UsageError):
        throttle.IoLimits.generic()


def test_memory_stat_v1() -> None:
    stat = memcg.parse_stat((DATA / "memcg_v1_memory.stat.txt").read_text())
    assert {"cache", "rss", "shmem", "total_cache"} <= stat.keys()
    oom = memcg.parse_stat((DATA / "memcg_v1_oom_control.txt").read_text())
    assert oom["oom_kill"] >= 0
