"""Disks and filesystems: /sys/block, the mount table, and the filesystem holding a path."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pgrig.environment.sources import (
    ROOT,
    bracketed,
    read_int,
    read_line,
    read_text,
    sys_path,
)
from pgrig.results import Disk, Filesystem


def read_disk(path: Path) -> Disk | None:
    """One /sys/block entry; None when it has no media (size 0), e.g. unused loop or zram."""
    sectors = read_int(path / "size")
    if not sectors:
        return None
    scheduler_text = read_text(path / "queue" / "scheduler")
    return Disk(
        name=path.name,
        # /sys/block/*/size counts 512-byte sectors whatever the device's block size.
        size_bytes=sectors * 512,
        rotational=read_line(path / "queue" / "rotational") == "1",
        scheduler=bracketed(scheduler_text) if scheduler_text else None,
        model=read_line(path / "device" / "model"),
    )


def read_disks(root: Path = ROOT) -> tuple[Disk, ...]:
    """Every block device with media; loop devices with a backing file are kept."""
    try:
        entries = sorted(sys_path(root, "sys/block").iterdir())
    except OSError:
        return ()
    return tuple(disk for entry in entries if (disk := read_disk(entry)) is not None)


def _unescape_mount(text: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    major_minor: str
    root: str
    mountpoint: str
    mount_options: str
    fstype: str
    source: str
    super_options: str

    @property
    def options(self) -> str:
        """Per-mount then superblock options, duplicates (``rw``) once."""
        seen: dict[str, None] = {}
        for opt in f"{self.mount_options},{self.super_options}".split(","):
            if opt:
                seen.setdefault(opt, None)
        return ",".join(seen)


def parse_mountinfo(text: str) -> list[Mount]:
    """/proc/self/mountinfo (see proc(5)); malformed lines are skipped."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        try:
            sep = fields.index("-", 6)
            mounts.append(
                Mount(
                    major_minor=fields[2],
                    root=_unescape_mount(fields[3]),
                    mountpoint=_unescape_mount(fields[4]),
                    mount_options=fields[5],
                    fstype=fields[sep + 1],
                    source=_unescape_mount(fields[sep + 2]),
                    super_options=fields[sep + 3] if len(fields) > sep + 3 else "",
                )
            )
        except (ValueError, IndexError):
            continue
    return mounts


def _under(path: str, mountpoint: str) -> bool:
    return mountpoint == "/" or path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


def find_mount(mounts: Sequence[Mount], path: str, *, dev: str | None = None) -> Mount | None:
    """The mount holding ``path`` (absolute, symlinks resolved): the longest mount point.

    When two mounts share a mount point the later one is on top. ``dev`` (the
    path's ``major:minor`` from stat) breaks ties the mount table alone cannot,
    such as a parent mounted over after a child.
    """
    candidates = [m for m in mounts if _under(path, m.mountpoint)]
    if dev is not None:
        same_dev = [m for m in candidates if m.major_minor == dev]
        candidates = same_dev or candidates
    best: Mount | None = None
    for mount in candidates:
        if best is None or len(mount.mountpoint) >= len(best.mountpoint):
            best = mount
    return best


def block_device_for(root: Path, major_minor: str, source: str | None = None) -> str | None:
    """The /sys/block name behind a device number: ``"259:0"`` (loop0p1) -> ``"loop0"``.

    Partitions resolve to their disk. Filesystems on anonymous device numbers
    (btrfs, overlay) fall back to the mount source when it is a /dev node.
    """
    candidates = [sys_path(root, f"sys/dev/block/{major_minor}")]
    if source and source.startswith("/dev/"):
        name = Path(os.path.realpath(source)).name if root == ROOT else Path(source).name
        candidates.append(sys_path(root, f"sys/class/block/{name}"))
    for link in candidates:
        try:
            device = link.resolve(strict=True)
        except OSError:
            continue
        if (device / "partition").exists():
            return device.parent.name
        return device.name
    return None


def _existing_ancestor(path: Path) -> Path:
    # A study directory may not exist yet; its filesystem is its nearest parent's.
    path = Path(os.path.abspath(path)).resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


@dataclass(frozen=True)
class PathStat:
    """What ``describe_filesystem`` needs of a path beyond the mount table: its
    nearest existing ancestor (symlinks resolved), device number and sizes.
    Read here with ``os``; on another host by ``pgrig.environment.remote``."""

    existing: str
    dev: str | None  # "major:minor"
    size_bytes: int = 0
    free_bytes: int = 0  # for an unprivileged writer


def stat_path(path: Path) -> PathStat:
    target = _existing_ancestor(path)
    try:
        st = os.stat(target)
        vfs = os.statvfs(target)
    except OSError:
        return PathStat(str(target), None)
    return PathStat(
        str(target),
        f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}",
        vfs.f_blocks * vfs.f_frsize,
        vfs.f_bavail * vfs.f_frsize,
    )


def describe_filesystem(
    path: Path, *, root: Path = ROOT, stat: PathStat | None = None
) -> Filesystem | None:
    """The filesystem holding ``path``; None when the mount table cannot be read.
    ``stat``: the path as another host sees it (``root`` then holds that host's
    /proc and /sys); None: stat it here."""
    st = stat or stat_path(path)
    text = read_text(sys_path(root, "proc/self/mountinfo"))
    if text is None:
        return None
    mount = find_mount(parse_mountinfo(text), st.existing, dev=st.dev)
    if mount is None:
        return None
    return Filesystem(
        path=str(path),
        device=mount.source,
        mountpoint=mount.mountpoint,
        fstype=mount.fstype,
        options=mount.options,
        size_bytes=st.size_bytes,
        free_bytes=st.free_bytes,
        block_device=block_device_for(root, mount.major_minor, mount.source),
    )
