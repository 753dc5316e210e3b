"""Disks and filesystems: /sys/block, the mount table, and the filesystem holding a path."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pgrig.environment.sources import ROOT, Files, bracketed, read_text, sys_path
from pgrig.results import Disk, Filesystem

MOUNTINFO = "/proc/self/mountinfo"
# What the parsers below read.
FILES: tuple[str, ...] = (
    MOUNTINFO,
    "/sys/block/*/size",
    "/sys/block/*/queue/scheduler",
    "/sys/block/*/queue/rotational",
    "/sys/block/*/device/model",
)
_DISK_SIZE = re.compile(r"/sys/block/([^/]+)/size")


def parse_disks(files: Files) -> tuple[Disk, ...]:
    """Every block device with media (size 0: none, e.g. an unused loop or zram);
    loop devices with a backing file are kept."""
    disks = []
    for name in sorted(m[1] for path in files.texts if (m := _DISK_SIZE.fullmatch(path))):
        block = f"/sys/block/{name}/"
        try:
            sectors = int(files.texts[block + "size"])
        except ValueError:
            continue
        if not sectors:
            continue
        scheduler = files.texts.get(block + "queue/scheduler")
        disks.append(
            Disk(
                name=name,
                # /sys/block/*/size counts 512-byte sectors whatever the device's block size.
                size_bytes=sectors * 512,
                rotational=files.texts.get(block + "queue/rotational") == "1",
                scheduler=bracketed(scheduler) if scheduler else None,
                model=files.texts.get(block + "device/model") or None,
            )
        )
    return tuple(disks)


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
        return _disk_name(str(device), (device / "partition").exists())
    return None


def _disk_name(device: str, partition: bool) -> str:
    # A partition's sysfs directory sits in its disk's.
    return Path(device).parent.name if partition else Path(device).name


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


def describe_filesystem(path: Path, *, root: Path = ROOT) -> Filesystem | None:
    """The filesystem holding ``path`` on this machine; None when the mount table
    cannot be read."""
    st = stat_path(path)
    mount = _mount_of(read_text(sys_path(root, MOUNTINFO)), st)
    if mount is None:
        return None
    block_device = block_device_for(root, mount.major_minor, mount.source)
    return _filesystem(str(path), st, mount, block_device)


def parse_filesystem(files: Files, path: str, st: PathStat) -> Filesystem | None:
    """The filesystem holding ``path`` on the host ``files`` and ``st`` were read on."""
    mount = _mount_of(files.texts.get(MOUNTINFO), st)
    if mount is None:
        return None
    link = files.links.get(f"/sys/dev/block/{mount.major_minor}")
    return _filesystem(path, st, mount, _disk_name(*link) if link else None)


def _mount_of(mountinfo: str | None, st: PathStat) -> Mount | None:
    if mountinfo is None:
        return None
    return find_mount(parse_mountinfo(mountinfo), st.existing, dev=st.dev)


def _filesystem(path: str, st: PathStat, mount: Mount, block_device: str | None) -> Filesystem:
    return Filesystem(
        path=path,
        device=mount.source,
        mountpoint=mount.mountpoint,
        fstype=mount.fstype,
        options=mount.options,
        size_bytes=st.size_bytes,
        free_bytes=st.free_bytes,
        block_device=block_device,
    )
