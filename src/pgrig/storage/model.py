"""A lab target as recorded in the store (kind "storage_lab"): what was built,
as the system reports it, and what the emulation leaves out - so the report
can state it beside the results without measuring anything itself."""

from __future__ import annotations

from dataclasses import dataclass

from pgrig.storage.fsinfo import FilesystemInfo
from pgrig.storage.throttle import IoLimits

LOOP_NOT_CAPTURED = (
    "a loop device adds a layer: every I/O of the filesystem goes through the loop "
    "driver into a file on the host's filesystem, so absolute numbers are those of that "
    "stack, and differences between filesystems are smaller than on a raw device",
    "the host's own filesystem and disk are shared with everything else on this machine",
)
IO_NOT_CAPTURED = (
    "per-I/O latency of a network disk (150-250 us for one 8 kB write on seed 000's ESSD "
    "against 30 us locally): throttling only spaces I/Os out above the cap, below it each "
    "I/O is as fast as the local disk",
    "ESSD counts reads and writes together; the throttle caps each direction on its own, "
    "so a mixed load can reach the cap in both at once",
    "bursts and credits, latency jitter under contention, the instance type's own I/O "
    "cap, three-replica durability",
)
V1_WRITEBACK = (
    "cgroup v1: buffered writes the kernel's flusher writes back on its own are charged "
    "to no cgroup and escape the cap (writes flushed by fsync are capped)"
)


@dataclass(frozen=True)
class LabInfo:
    """One storage-lab target as built."""

    description: str  # one line: filesystem, cap, memory limit
    directory: str  # where the cluster and the probes went
    filesystem: FilesystemInfo | None = None
    io: IoLimits | None = None
    io_device: str | None = None  # major:minor the cap applies to ("7:0, 7:1": each of them)
    disk: str | None = None  # the class asked for, e.g. "essd-pl1:100GiB"
    memory_limit_bytes: int | None = None
    cgroup: str | None = None  # e.g. "cgroup v1 (blkio, memory)"
    host: str | None = None  # the host filesystem and device under the emulation
    not_captured: tuple[str, ...] = ()
    latency: str | None = None  # how a latency layer was calibrated (storage/latency.py)
    io_devices: tuple[str, ...] = ()  # each device capped at ``io`` (the stripes: one disk each)

    def cap(self) -> IoLimits | None:
        """The target's whole cap: ``io`` on each of its devices adds up (btrfs raid0
        over N capped loop devices, as the seeds' LVM stripes over N cloud disks)."""
        n = len(self.io_devices)
        if self.io is None or n <= 1:
            return self.io

        def times(value: int | None) -> int | None:
            return None if value is None else value * n

        io = self.io
        label = f"{n} x {io.label}" if io.label else f"{n} stripes together"
        return IoLimits(times(io.read_iops), times(io.write_iops), times(io.read_bps),
                        times(io.write_bps), label)  # fmt: skip

    def headline(self) -> str:
        return f": {self.description}"
