"""The storage lab: filesystem targets on loop devices, cloud-disk I/O caps and
memory limits with cgroups, and an audit of the kernel settings the seeds tune.

One cgroup can carry both an I/O cap and a memory limit (``limited``): on
cgroup v2 a process is in exactly one cgroup, so the server must be in one
that has both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgrig import lazily

if TYPE_CHECKING:
    from pgrig.storage.cgroups import Cgroup
    from pgrig.storage.errors import CgroupError, LeftoverError, OptionRefused, StorageError
    from pgrig.storage.fsinfo import FilesystemInfo
    from pgrig.storage.loopfs import FsSpec, LoopFilesystem, loop_filesystem
    from pgrig.storage.memcg import MemoryStats, memory_limited
    from pgrig.storage.target import LabSpec, LabTarget, lab_target, limited
    from pgrig.storage.throttle import IoLimits, essd, throttled

__getattr__ = lazily(
    __name__,
    {
        "Cgroup": "pgrig.storage.cgroups",
        "CgroupError": "pgrig.storage.errors",
        "LeftoverError": "pgrig.storage.errors",
        "OptionRefused": "pgrig.storage.errors",
        "StorageError": "pgrig.storage.errors",
        "FilesystemInfo": "pgrig.storage.fsinfo",
        "FsSpec": "pgrig.storage.loopfs",
        "LoopFilesystem": "pgrig.storage.loopfs",
        "loop_filesystem": "pgrig.storage.loopfs",
        "MemoryStats": "pgrig.storage.memcg",
        "memory_limited": "pgrig.storage.memcg",
        "LabSpec": "pgrig.storage.target",
        "LabTarget": "pgrig.storage.target",
        "lab_target": "pgrig.storage.target",
        "limited": "pgrig.storage.target",
        "IoLimits": "pgrig.storage.throttle",
        "essd": "pgrig.storage.throttle",
        "throttled": "pgrig.storage.throttle",
    },
)


def clean(study: str | None = None, left: list[str] | None = None) -> list[str]:
    """Undo what killed pgrig runs of ``study`` (None: of any) left: filesystem
    targets, then cgroups. Neither stops a process: run the work-directory cleanup
    (which stops orphan servers) first. Returns one line per thing removed or left
    behind; other studies' orphans are described in ``left``."""
    from pgrig.storage import cgroups, devices, kernel

    lines = [*devices.clean_orphans(study, left), *cgroups.clean_orphans(study, left)]
    # kernel settings are the machine's: whoever's killed run changed them, restore
    restored = kernel.restore_orphans()
    return [*lines, *restored]


__all__ = [
    "Cgroup",
    "CgroupError",
    "FilesystemInfo",
    "FsSpec",
    "IoLimits",
    "LabSpec",
    "LabTarget",
    "LeftoverError",
    "LoopFilesystem",
    "MemoryStats",
    "OptionRefused",
    "StorageError",
    "clean",
    "essd",
    "lab_target",
    "limited",
    "loop_filesystem",
    "memory_limited",
    "throttled",
]
