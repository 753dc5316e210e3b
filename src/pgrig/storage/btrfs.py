"""btrfs on loop devices, and the lab's stripes: btrfs raid0 over N of them.

Seeds 000 and 002 striped their filesystems over several disks with LVM
(``lvcreate -i 8 -I 8``, ``-i 3 -I 8``). LVM stripes through device-mapper,
software RAID through md; this kernel has neither (no ``device-mapper`` in
/proc/misc, no /proc/mdstat), so XFS or ext4 over several loop devices cannot
be built here. btrfs stripes by itself: ``mkfs.btrfs -d raid0 -m raid0`` over
N loop devices spreads data and metadata over all of them, and an I/O cap on
each device (one cloud disk each) then adds up as the seeds' striped disks
did. What that does not capture is in ``NOT_CAPTURED`` (docs/storage-lab.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pgrig.hosts.executor import C_LOCALE
from pgrig.hosts.local import HERE
from pgrig.storage.devices import tool

RAID0 = ("-d", "raid0", "-m", "raid0")
TIMEOUT = 120.0

NOT_CAPTURED = (
    "btrfs raid0 stripes in 64 KiB elements, fixed; the seeds' LVM stripes were 8 KiB "
    "(-I 8): an 8 kB random I/O lands on one device either way, but a 64 kB sequential "
    "I/O spans 8 devices under LVM and one here",
    "the filesystem on the stripes is btrfs (copy-on-write, checksums), not the seeds' "
    "XFS or ext4: compare stripe counts with each other, not with an XFS or ext4 target",
)


def why_not_striped(fstype: str) -> str:
    """Why ``stripes`` needs btrfs here, with what this kernel has."""
    misc = Path("/proc/misc").read_text() if Path("/proc/misc").exists() else ""
    have = []
    if "device-mapper" in misc:
        have.append("device-mapper")
    if Path("/proc/mdstat").exists():
        have.append("md")
    kernel = (
        f"this kernel has {' and '.join(have)}, but the lab does not drive LVM or md"
        if have
        else "this kernel has neither (no device-mapper in /proc/misc, no /proc/mdstat)"
    )
    return (
        f"{fstype} over several devices needs LVM (device-mapper) or md to stripe them, and "
        f"{kernel}; btrfs raid0 stripes over the loop devices by itself"
    )


def mkfs_argv(devices: Sequence[str], options: Sequence[str]) -> list[str]:
    """raid0 for data and metadata over several devices; btrfs's defaults on one.
    The user's options come after ours: mkfs.btrfs takes the last one given."""
    profile = RAID0 if len(devices) > 1 else ()
    return [tool("mkfs.btrfs"), *profile, *options, *devices]


def mount_options(devices: Sequence[str]) -> list[str]:
    """No udev here to register the other devices with the kernel: the mount names
    them (``device=``), or it would find only the first and refuse."""
    return [f"device={d}" for d in devices[1:]]


def details(mountpoint: Path) -> str:
    """``btrfs filesystem show`` then ``btrfs filesystem df``: its devices, and the
    profile data and metadata were really given."""
    btrfs = tool("btrfs")
    show, df = (
        HERE.run(
            [btrfs, "filesystem", part, str(mountpoint)],
            timeout=TIMEOUT,
            env=C_LOCALE,
            what="btrfs",
        )
        for part in ("show", "df")
    )
    return show.stdout.rstrip() + "\n" + df.stdout.rstrip() + "\n"


_PROFILE = re.compile(r"^(Data|Metadata|System), (\w+): total=([^,\s]+)", re.MULTILINE)
_DEVICES = re.compile(r"Total devices (\d+)")
_STRIPE = re.compile(r"devid\s+(\d+) size (\S+) used \S+ path (\S+)")


def facts(text: str) -> dict[str, str]:
    """The facts a report needs from ``details``: each block group's profile and
    the devices (``{"data profile": "RAID0", "devices": "4", ...}``)."""
    out: dict[str, str] = {}
    for group, profile, total in _PROFILE.findall(text):
        out[f"{group.lower()} profile"] = f"{profile} ({total})"
    count = _DEVICES.search(text)
    if count:
        out["devices"] = count.group(1)
    for devid, size, path in _STRIPE.findall(text):
        out[f"device {devid}"] = f"{path}, {size}"
    return out
