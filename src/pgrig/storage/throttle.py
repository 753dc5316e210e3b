"""Cap a target's IOPS and bandwidth with cgroup I/O throttling, e.g. as a cloud disk.

cgroup v2 ``io.max`` where the io controller is on the unified hierarchy, else
cgroup v1 ``blkio.throttle.{read,write}_{iops,bps}_device``. Limits apply to one
block device (``major:minor``: the loop device of a filesystem target, or the
whole disk under a directory) and to the processes inside the cgroup.

What holds (measured on this kernel, see docs/storage-lab.md): direct I/O,
reads, and writes flushed by ``fsync``/``fdatasync`` from a process in the
cgroup are capped. On cgroup v1, buffered writes that the kernel's flusher
threads write back on their own (dirty_expire, dirty_background) are charged to
no cgroup and are not capped; on v2 with the memory controller, writeback is
attributed to the cgroup that dirtied the pages and is capped.

ESSD limits are per disk and count reads and writes together; throttling has
separate read and write limits, so a mixed workload can reach the cap in each
direction at once (see ``IoLimits.describe``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pgrig import environment, proc
from pgrig.errors import UsageError
from pgrig.hosts.executor import Launch
from pgrig.hosts.local import HERE
from pgrig.storage import cgroups
from pgrig.storage.cgroups import Cgroup
from pgrig.storage.errors import CgroupError

MB = 1_000_000  # the MB of "MB/s" in cloud disk specifications


@dataclass(frozen=True)
class EssdClass:
    """One Alibaba Cloud ESSD performance level: its published formula and limits."""

    name: str
    min_gib: int
    max_gib: int
    iops_base: int
    iops_per_gib: float
    iops_cap: int
    mbps_base: float
    mbps_per_gib: float
    mbps_cap: int

    def iops(self, size_gib: int) -> int:
        return int(min(self.iops_base + self.iops_per_gib * size_gib, self.iops_cap))

    def mbps(self, size_gib: int) -> float:
        return min(self.mbps_base + self.mbps_per_gib * size_gib, self.mbps_cap)


# Alibaba Cloud ECS documentation "ESSDs", specifications table (checked 2026):
# IOPS = min{1,800 + 50 x GiB, cap}; MB/s = min{120 + 0.5 x GiB, cap}; PL0 has its own.
ESSD: dict[str, EssdClass] = {
    "PL0": EssdClass("PL0", 40, 32768, 1800, 12, 10_000, 100, 0.25, 180),
    "PL1": EssdClass("PL1", 20, 32768, 1800, 50, 50_000, 120, 0.5, 350),
    "PL2": EssdClass("PL2", 461, 32768, 1800, 50, 100_000, 120, 0.5, 750),
    "PL3": EssdClass("PL3", 1261, 32768, 1800, 50, 1_000_000, 120, 0.5, 4000),
}


@dataclass(frozen=True)
class IoLimits:
    """Read and write caps for one device; None means not capped."""

    read_iops: int | None = None
    write_iops: int | None = None
    read_bps: int | None = None
    write_bps: int | None = None
    label: str = ""  # e.g. "ESSD PL1 100 GiB"

    def __post_init__(self) -> None:
        for name in ("read_iops", "write_iops", "read_bps", "write_bps"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(f"I/O limit {name}={value} must be positive (or unset)")

    @classmethod
    def generic(
        cls,
        iops: int | None = None,
        mbps: float | None = None,
        *,
        read_iops: int | None = None,
        write_iops: int | None = None,
        read_mbps: float | None = None,
        write_mbps: float | None = None,
        label: str = "",
    ) -> IoLimits:
        """``iops``/``mbps`` cap both directions; the ``read_``/``write_`` forms override."""

        def bps(value: float | None) -> int | None:
            return None if value is None else int(value * MB)

        limits = cls(
            read_iops=read_iops if read_iops is not None else iops,
            write_iops=write_iops if write_iops is not None else iops,
            read_bps=bps(read_mbps if read_mbps is not None else mbps),
            write_bps=bps(write_mbps if write_mbps is not None else mbps),
            label=label,
        )
        if not limits.any():
            raise UsageError("no I/O limit given", hint="give iops=, mbps= or a read_/write_ one")
        return limits

    def any(self) -> bool:
        return any(
            v is not None for v in (self.read_iops, self.write_iops, self.read_bps, self.write_bps)
        )

    def describe(self) -> str:
        def side(iops: int | None, bps: int | None) -> str:
            parts = []
            if iops is not None:
                parts.append(f"{iops:,} IOPS")
            if bps is not None:
                parts.append(f"{bps / MB:,.1f} MB/s")
            return ", ".join(parts) or "uncapped"

        read = side(self.read_iops, self.read_bps)
        write = side(self.write_iops, self.write_bps)
        body = f"{read} (read and write each)" if read == write else f"read {read}; write {write}"
        return f"{self.label}: {body}" if self.label else body

    def to_dict(self) -> dict[str, str | float | None]:
        return {
            "label": self.label,
            "read_iops": self.read_iops,
            "write_iops": self.write_iops,
            "read_bps": self.read_bps,
            "write_bps": self.write_bps,
        }


def essd(pl: str | int, size_gib: int, *, strict: bool = True) -> IoLimits:
    """The throttle that makes a device behave like an ESSD of class ``pl`` and size.

    ``strict`` refuses sizes the class is not sold in (PL3 starts at 1,261 GiB):
    a smaller PL3 would be a disk that does not exist.
    """
    key = f"PL{pl}" if isinstance(pl, int) or str(pl).isdigit() else str(pl).upper()
    cls = ESSD.get(key)
    if cls is None:
        raise UsageError(
            f"unknown ESSD performance level {pl!r}", hint=f"use one of {', '.join(ESSD)}"
        )
    if strict and not cls.min_gib <= size_gib <= cls.max_gib:
        raise UsageError(
            f"ESSD {key} is sold from {cls.min_gib:,} to {cls.max_gib:,} GiB, not {size_gib:,}",
            hint="choose a size in that range, or set iops = ... and mbps = ... for a disk "
            "that is not sold",
        )
    iops = cls.iops(size_gib)
    mbps = cls.mbps(size_gib)
    return IoLimits.generic(iops=iops, mbps=mbps, label=f"ESSD {key} {size_gib:,} GiB")


# --------------------------------------------------------------------------
# Devices


def whole_disk(major_minor: str) -> str:
    """Throttling applies to whole disks: map a partition's ``8:1`` to its disk's ``8:0``."""
    link = Path(f"/sys/dev/block/{major_minor}")
    try:
        device = link.resolve(strict=True)
    except OSError as exc:
        raise CgroupError(f"no block device {major_minor} on this machine") from exc
    if (device / "partition").exists():
        return (device.parent / "dev").read_text().strip()
    return major_minor


def device_of(path: Path) -> str:
    """``major:minor`` of the whole disk holding ``path`` (what a throttle is keyed by)."""
    st = os.stat(path)
    number = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if Path(f"/sys/dev/block/{number}").exists():
        return whole_disk(number)
    # btrfs, overlay and others report an anonymous device: use the mount's source.
    fs = environment.describe_filesystem(path)
    if fs is not None and fs.block_device:
        dev = environment.read_text(Path(f"/sys/block/{fs.block_device}/dev"))
        if dev:
            return dev.strip()
    raise CgroupError(
        f"cannot tell which block device holds {path} ({number} is not a block device)",
        hint="throttle a filesystem target (loop device) or a directory on a real disk",
    )


# --------------------------------------------------------------------------
# Applying


V1_FILES = {
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
}
V2_KEYS = {"read_iops": "riops", "write_iops": "wiops", "read_bps": "rbps", "write_bps": "wbps"}


def apply(cgroup: Cgroup, limits: IoLimits, device: str) -> dict[str, str]:
    """Write ``limits`` for ``device`` into the cgroup; return what the kernel now holds."""
    device = whole_disk(device)
    if cgroup.version("io") == 2:
        fields = [f"{V2_KEYS[name]}={getattr(limits, name) or 'max'}" for name in V2_KEYS]
        cgroup.write("io", "io.max", f"{device} {' '.join(fields)}")
    else:
        for name, filename in V1_FILES.items():
            value = getattr(limits, name)
            if value is not None:
                cgroup.write("io", filename, f"{device} {value}")
    return effective(cgroup, device)


def effective(cgroup: Cgroup, device: str) -> dict[str, str]:
    """The limits the kernel reports for ``device``: ``{"read_iops": "500", ...}``."""
    found: dict[str, str] = {}
    if cgroup.version("io") == 2:
        for line in cgroup.read("io", "io.max").splitlines():
            dev, *fields = line.split()
            if dev == device:
                back = {v: k for k, v in V2_KEYS.items()}
                for item in fields:
                    key, _, value = item.partition("=")
                    if value != "max" and key in back:
                        found[back[key]] = value
        return found
    for name, filename in V1_FILES.items():
        for line in cgroup.read("io", filename).splitlines():
            dev, _, value = line.partition(" ")
            if dev == device:
                found[name] = value.strip()
    return found


@contextmanager
def throttled(
    limits: IoLimits, device: str, *, extra_controllers: Sequence[str] = ()
) -> Iterator[Cgroup]:
    """A pgrig cgroup capping ``device`` at ``limits``; put processes in with
    ``cgroup.preexec()`` (at start) or ``cgroup.add(pid)``."""
    controllers = ("io", *extra_controllers)
    with cgroups.owned(controllers, purpose=f"throttle {device}: {limits.describe()}") as cg:
        held = apply(cg, limits, device)
        wanted = {k: str(v) for k, v in limits.to_dict().items() if k != "label" and v is not None}
        if held != wanted:
            raise CgroupError(
                f"the kernel holds {held} for {device}, not the limits asked ({wanted})"
            )
        yield cg


def run_in(
    cgroup: Cgroup, argv: Sequence[str], *, timeout: float, user: proc.OsUser | None = None
) -> proc.Completed:
    """``argv`` run here as ``user``, the child (and all it forks) inside ``cgroup``
    from the start: joined before the switch to ``user``, while still root."""
    launch = Launch(user.name if user is not None else None)
    return HERE.stream(
        argv, timeout=timeout, what=Path(argv[0]).name, launch=launch, preexec=cgroup.preexec()
    )
