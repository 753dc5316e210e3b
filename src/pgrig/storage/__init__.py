"""The storage lab: filesystem targets on loop devices, cloud-disk I/O caps and
memory limits with cgroups, and an audit of the kernel settings the seeds tune.

One cgroup can carry both an I/O cap and a memory limit (``limited``): on
cgroup v2 a process is in exactly one cgroup, so the server must be in one
that has both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pgrig.storage import cgroups, memcg, throttle
from pgrig.storage.cgroups import Cgroup
from pgrig.storage.errors import CgroupError, LeftoverError, OptionRefused, StorageError
from pgrig.storage.fsinfo import FilesystemInfo
from pgrig.storage.loopfs import FsSpec, LoopFilesystem, loop_filesystem
from pgrig.storage.memcg import MemoryStats, memory_limited
from pgrig.storage.throttle import IoLimits, essd, throttled


@contextmanager
def limited(
    *,
    io: IoLimits | None = None,
    device: str | None = None,
    memory_bytes: int | None = None,
) -> Iterator[Cgroup]:
    """One pgrig cgroup with an I/O cap on ``device`` and/or a memory limit."""
    controllers: list[str] = []
    if io is not None:
        if device is None:
            raise CgroupError("an I/O limit needs the device (major:minor) it applies to")
        controllers.append("io")
    if memory_bytes is not None:
        controllers.append("memory")
    if not controllers:
        raise CgroupError("limited() needs io= and device=, or memory_bytes=")
    what = []
    if io is not None:
        what.append(f"throttle {device}: {io.describe()}")
    if memory_bytes is not None:
        what.append(f"memory {memory_bytes // 2**20} MiB")
    with cgroups.owned(tuple(controllers), purpose="; ".join(what)) as cg:
        if io is not None and device is not None:
            throttle.apply(cg, io, device)
        if memory_bytes is not None:
            memcg.apply(cg, memory_bytes)
        yield cg


def clean() -> list[str]:
    """Undo what killed pgrig runs left: filesystem targets first (a mount may hold
    a cgroup's process), then cgroups. Returns one line per thing done or left."""
    from pgrig.storage import devices

    return [*devices.clean_orphans(), *cgroups.clean_orphans()]


__all__ = [
    "Cgroup",
    "CgroupError",
    "FilesystemInfo",
    "FsSpec",
    "IoLimits",
    "LeftoverError",
    "LoopFilesystem",
    "MemoryStats",
    "OptionRefused",
    "StorageError",
    "clean",
    "essd",
    "limited",
    "loop_filesystem",
    "memory_limited",
    "throttled",
]
