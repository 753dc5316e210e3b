"""A cloud disk's per-I/O latency, added by a FUSE layer and calibrated here.

Throttling (throttle.py) caps IOPS and MB/s, but below the cap every I/O is as
fast as the local disk: it cannot show seed 000's central finding, an 8 kB WAL
fdatasync of 164 us on ESSD PL3 against 35 us on the local SSD beside it. This
module mounts the lossy filesystem's FUSE process (``pgrig.lossyfs``) over a
directory on the storage under test with a delay on every fsync, fdatasync and
O_DSYNC write, and calibrates that delay with fio (8 kB writes, fdatasync after
each, the median of 2 s: robust to a shared machine's noise); the target's own
pg_test_fsync probe then shows the result beside the local disk's.

1. ``local``: fio's fdatasync latency on the disk itself (beside the mount);
2. ``floor``: the same through the layer with no delay - the emulation's own cost;
3. ``target``: the class's published latency - or, where this disk is slower than
   the class (a shared VM disk), the disk's own latency times the class's ratio to
   the local disk it was measured beside, keeping the seed's direction and ratio;
4. a fast disk gets a fixed ``delay = target - floor`` (never below 0), measured
   (``achieved``) and corrected once by half the miss. A slow disk gets the ratio
   itself: each sync lasts ``factor`` times what the disk's own fdatasync of it
   took just then, less the layer's overhead (``floor - local``) - a shared
   disk's latency jumps tenfold within seconds, and a fixed delay taken from one
   moment would set the ratio to chance; ``local_after`` measures the disk again
   right after ``achieved``, so the ratio shown is to the disk of that moment.

All four are recorded with the lab target and shown in the report. What the
layer does not emulate is listed in ``NOT_CAPTURED``.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pgrig.cluster import workdir
from pgrig.errors import UsageError
from pgrig.lossyfs.mount import LossyMount
from pgrig.tools import fio

PREFIX = "pgrig-latency-"


@dataclass(frozen=True)
class DiskClass:
    """A disk's published (or measured) 8 kB fdatasync latency, and the local disk
    it was measured beside."""

    name: str
    fdatasync_us: float
    local_us: float
    source: str

    @property
    def ratio(self) -> float:
        return self.fdatasync_us / self.local_us

    def target_us(self, local_us: float) -> tuple[float, str]:
        """The latency to emulate over a disk whose own fdatasync takes ``local_us``."""
        if local_us * self.ratio <= self.fdatasync_us:
            return self.fdatasync_us, f"{self.name}'s {self.fdatasync_us:,.0f} us ({self.source})"
        return local_us * self.ratio, (
            f"this disk's {local_us:,.0f} us x {self.ratio:.1f} ({self.name} "
            f"{self.fdatasync_us:,.0f} us vs local {self.local_us:,.0f} us, {self.source}): "
            "the disk is slower than the class"
        )


CLASSES: dict[str, DiskClass] = {
    "essd-pl3": DiskClass(
        "ESSD PL3",
        164.0,
        35.0,
        "seed 000: pg_test_fsync fdatasync 6,087 ops/s on ESSD PL3, 28,217 on local SSD",
    ),
}

NOT_CAPTURED = (
    "reads: only syncs are delayed; a read that misses the page cache costs what the "
    "backing disk and the FUSE round trip cost",
    "queueing: concurrent syncs each wait their own delay at once (an unlimited queue "
    "depth); combine with disk = ... caps only on a target of its own",
    "every write also crosses the FUSE process (the floor below), which a cloud disk's "
    "page cache does not",
)


def parse_class(value: str) -> DiskClass:
    key = value.strip().lower()
    if key not in CLASSES:
        raise UsageError(
            f"latency {value!r} is not a disk class pgrig knows",
            hint=f"use one of {', '.join(CLASSES)}",
        )
    return CLASSES[key]


@dataclass(frozen=True)
class SyncLatency:
    """fio's latency of fdatasync after each 8 kB write, over ``seconds``."""

    p50_us: float
    p99_us: float

    def __str__(self) -> str:
        return f"{self.p50_us:,.0f} us (p99 {self.p99_us:,.0f})"


@dataclass(frozen=True)
class Calibration:
    """How the layer was set: fio's fdatasync latency (median, p99) on the disk,
    through the layer without a delay (its floor) and with it (achieved)."""

    disk_class: str
    local: SyncLatency
    floor: SyncLatency
    target_us: float
    target_why: str
    delay_us: float  # fixed, per sync
    achieved: SyncLatency
    seconds: int
    # proportional instead (a disk slower than the class): each sync lasts factor x
    # the disk's own sync of that moment, less the layer's overhead (floor - local)
    factor: float = 1.0
    overhead_us: float = 0.0
    local_after: SyncLatency | None = None  # the disk again, right after ``achieved``

    def describe(self) -> str:
        added = (
            f"each sync {self.factor:.1f}x the disk's own, less the layer's "
            f"{self.overhead_us:,.0f} us"
            if self.factor > 1.0
            else f"+{self.delay_us:,.0f} us per sync"
        )
        if self.local_after is not None:
            ratio = self.achieved.p50_us / self.local_after.p50_us
            added += f"; the disk right after: {self.local_after} ({ratio:.1f}x)"
        return (
            f"{self.disk_class} latency: fdatasync {self.achieved} through the layer "
            f"(target {self.target_us:,.0f} us: {self.target_why}); this disk {self.local}; "
            f"the layer's own floor {self.floor}; {added} "
            f"(fio 8 kB writes with fdatasync=1, {self.seconds} s each)"
        )


def measure(directory: Path, seconds: int) -> SyncLatency:
    """fdatasync after every 8 kB write, as a WAL flush does (fio, buffered, QD1)."""
    job = fio.FioJob(
        directory, "write", ioengine="sync", direct=False, iodepth=1, size="16M",
        runtime_s=seconds, fdatasync=1,
    )  # fmt: skip
    result, _raw = fio.run(job)
    if result.sync_p50_us is None or result.sync_p99_us is None:
        raise UsageError(f"fio in {directory} reported no fdatasync latency")
    return SyncLatency(result.sync_p50_us, result.sync_p99_us)


def delay_for(target_us: float, through_us: float, delay_us: float = 0.0) -> float:
    """The delay that brings a sync measured at ``through_us`` (with ``delay_us``
    added) to ``target_us``; never below 0 (the layer's floor is over the target:
    the description says so)."""
    return max(0.0, delay_us + target_us - through_us)


@contextlib.contextmanager
def latency_layer(
    base: Path, disk_class: DiskClass, *, seconds: int = 2
) -> Iterator[tuple[Path, Calibration]]:
    """Mount the calibrated layer in a marked holder under ``base``; yields the
    mounted directory (for the cluster and the probes) and the calibration. The
    mount is recorded before it exists, so ``pgrig clean`` undoes it after a kill."""
    holder = base / f"{PREFIX}{secrets.token_hex(4)}"
    workdir.create(holder, study="storage-lab latency")
    mount: LossyMount | None = None
    try:
        backing = holder / "backing"
        backing.mkdir(mode=0o755)
        disk = holder / "disk"  # the disk itself, beside (never inside) the mount's backing
        disk.mkdir(mode=0o755)
        local = measure(disk, seconds)
        mount = LossyMount(backing, holder / "mnt", metadata="journal")
        with mount:
            floor = measure(mount.mountpoint, seconds)
            target, why = disk_class.target_us(local.p50_us)
            factor, overhead, delay, local_after = 1.0, 0.0, 0.0, None
            if target > disk_class.fdatasync_us:
                # A shared disk's latency jumps by 10x between minutes: a fixed delay
                # from one moment's median would set the ratio to chance. In
                # proportion, every sync keeps the ratio to the disk's own sync.
                factor, overhead = disk_class.ratio, max(0.0, floor.p50_us - local.p50_us)
                mount.set_sync_delay(0.0, factor=factor, overhead_us=overhead)
                achieved = measure(mount.mountpoint, seconds)
                # the disk again, right after: the ratio is to the disk of that moment
                local_after = measure(disk, seconds)
            else:
                delay = delay_for(target, floor.p50_us)
                mount.set_sync_delay(delay)
                achieved = measure(mount.mountpoint, seconds)
                if abs(achieved.p50_us - target) > 0.1 * target:
                    # once, and by half the miss: on a shared machine one median is noisy
                    delay = (delay + delay_for(target, achieved.p50_us, delay)) / 2
                    mount.set_sync_delay(delay)
                    achieved = measure(mount.mountpoint, seconds)
            calibration = Calibration(
                disk_class.name, local, floor, target, why, delay, achieved, seconds,
                factor, overhead, local_after,
            )  # fmt: skip
            yield mount.mountpoint, calibration
    finally:
        if mount is not None and mount.mounted:
            workdir.unregister(holder)  # never rmtree through a live mount
        else:
            with contextlib.suppress(OSError):
                workdir.remove(holder)
