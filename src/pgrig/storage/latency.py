"""A cloud disk's per-I/O latency, added by a FUSE layer and calibrated here.

Throttling (throttle.py) caps IOPS and MB/s, but below the cap every I/O is as
fast as the local disk: it cannot show seed 000's findings, an 8 kB WAL
fdatasync of 164 us on ESSD PL3 against 35 us on the local SSD beside it, and
select-only on data larger than memory at 21k qps against 158k, every backend
in DataFileRead. This module mounts the lossy filesystem's FUSE process
(``pgrig.lossyfs``) over a directory on the storage under test with a delay on
every fsync, fdatasync and O_DSYNC write, and on every read that reaches the
process (a miss in the kernel's page cache, or O_DIRECT), and calibrates both
with fio (the median of 2 s: robust to a shared machine's noise). Per kind of
I/O (``SYNC``: 8 kB writes, fdatasync after each; ``READ``: 8 kB random reads,
O_DIRECT, queue depth 1):

1. ``local``: fio on the disk itself (beside the mount);
2. ``floor``: the same through the layer with no delay - the emulation's own cost;
3. ``target``: the class's latency - or, where this disk is slower than the
   local disk the class was measured beside, this disk's latency times the
   class's ratio to that disk, keeping the seed's direction and ratio (``aim``);
4. a fixed ``delay = target - floor`` (never below 0), measured (``achieved``)
   and corrected once by half the miss. Syncs over a disk slower than the class
   get the ratio itself instead: each sync lasts ``factor`` times what the
   disk's own fdatasync of it took just then, less the layer's overhead
   (``floor - local``) - a shared disk's sync latency jumps tenfold within
   seconds, and a fixed delay from one moment would set the ratio to chance;
   ``local_after`` measures the disk again right after ``achieved``. (Reads
   through the layer come from the backing file in the host's page cache, so
   there is no backing read to be in proportion to: reads get a fixed delay.)

A calibration that contradicts itself (``contradictions``: through the layer
faster than its own floor, or than the disk under it; a disk called slower than
a class it beats) is measured once more, then refused (``CalibrationRefused``,
exit 1) with every figure measured - never shown as a result. All figures are
recorded with the lab target and shown in the report; what the layer does not
emulate is listed in ``NOT_CAPTURED``.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pgrig.cluster import workdir
from pgrig.errors import UsageError
from pgrig.lossyfs.mount import LossyMount
from pgrig.storage.errors import StorageError
from pgrig.tools import fio

PREFIX = "pgrig-latency-"
OVER = 1.5  # achieved this far over the target: the description says why
SYNC = "fdatasync"
READ = "read"

# Seed 000's local SSD, beside its ESSD PL3: pg_test_fsync's fdatasync of 8 kB
# (28,217 ops/s) and "the latency of a single I/O ... (164us vs. 30us)".
SEED_LOCAL_SYNC_US = 35.0
SEED_LOCAL_IO_US = 30.0
ALIBABA = (
    "Alibaba Cloud ECS documentation, ESSDs / block storage performance: "
    "'average one-way random write latency' 0.2 ms (4 KB, one connection) for PL1, "
    "PL2 and PL3, up to {iops} IOPS per disk; no read latency is published, so "
    "reads take the same figure"
)
SEED_SIDE = "the local disk beside it: seed 000's local SSD (fdatasync 35 us, one I/O 30 us)"


class CalibrationRefused(StorageError):
    """The latency layer's calibration contradicts itself twice in a row: the
    message names what was measured; nothing is reported as a result."""


@dataclass(frozen=True)
class Aim:
    """The latency to emulate for one kind of I/O over this disk, and why."""

    us: float
    why: str
    class_us: float  # the class's own figure
    ratio_kept: bool  # this disk is slower than the class's own local disk
    disk_slower: bool  # ... and slower than the class itself


def aim(name: str, what: str, class_us: float, beside_us: float, local_us: float) -> Aim:
    """The class's ``class_us`` (measured beside a local disk of ``beside_us``)
    over this disk, whose own latency is ``local_us``: the class's figure, or -
    where this disk is slower than the class's local disk - this disk's latency
    times the class's ratio, so the comparison keeps its direction and ratio."""
    ratio = class_us / beside_us
    if local_us <= beside_us:
        return Aim(class_us, f"{name}'s {what} {class_us:,.0f} us", class_us, False, False)
    slower = local_us >= class_us
    than = (
        f"slower than {name} itself ({class_us:,.0f} us)"
        if slower
        else f"slower than the local disk {name} was measured beside "
        f"({beside_us:,.0f} us), though faster than {name} ({class_us:,.0f} us)"
    )
    return Aim(
        local_us * ratio,
        f"this disk's {what} {local_us:,.0f} us x {ratio:.1f}: the disk is {than}, "
        "so the class keeps its ratio over it",
        class_us,
        True,
        slower,
    )


@dataclass(frozen=True)
class DiskClass:
    """A disk's published (or measured) per-I/O latency - an 8 kB fdatasync and
    one read - and the local disk's it was measured beside."""

    name: str
    fdatasync_us: float
    local_us: float
    read_us: float
    local_read_us: float
    iops: int  # the class's cap per disk, published; the layer does not enforce it
    source: str

    @property
    def ratio(self) -> float:
        return self.fdatasync_us / self.local_us

    @property
    def read_ratio(self) -> float:
        return self.read_us / self.local_read_us

    def target(self, what: str, local_us: float) -> Aim:
        """The ``SYNC`` or ``READ`` latency to emulate over a disk of ``local_us``."""
        if what == SYNC:
            return aim(self.name, what, self.fdatasync_us, self.local_us, local_us)
        return aim(self.name, what, self.read_us, self.local_read_us, local_us)


CLASSES: dict[str, DiskClass] = {
    "essd-pl1": DiskClass(
        "ESSD PL1", 200.0, SEED_LOCAL_SYNC_US, 200.0, SEED_LOCAL_IO_US, 50_000,
        f"{ALIBABA.format(iops='50,000')}; {SEED_SIDE}",
    ),
    "essd-pl2": DiskClass(
        "ESSD PL2", 200.0, SEED_LOCAL_SYNC_US, 200.0, SEED_LOCAL_IO_US, 100_000,
        f"{ALIBABA.format(iops='100,000')}; {SEED_SIDE}",
    ),
    # seed 000 measured its PL3 under the published 0.2 ms: its figures are used
    "essd-pl3": DiskClass(
        "ESSD PL3", 164.0, SEED_LOCAL_SYNC_US, 164.0, SEED_LOCAL_IO_US, 1_000_000,
        "seed 000: pg_test_fsync fdatasync 6,087 ops/s on ESSD PL3, 28,217 on local SSD; "
        "'the latency of a single I/O is higher (164us vs. 30us)' for reads "
        f"(published: {ALIBABA.format(iops='1,000,000')})",
    ),
}  # fmt: skip

NOT_CAPTURED = (
    "queueing: concurrent I/Os each wait their own delay at once (an unlimited queue "
    "depth), and the class's IOPS and MB/s caps are not applied; combine with "
    "disk = ... caps only on a target of its own",
    "a read through the layer comes from the backing file in the host's page cache, "
    "outside the target's memory limit: a miss costs the FUSE round trip plus the "
    "class's delay, not this disk's read",
    "every I/O also crosses the FUSE process (the floor below), which a cloud disk's "
    "page cache does not",
    "the page-cache hit share of the server's reads: the kernel counts no read_bytes for "
    "reads a FUSE process serves, so it reads 100%; the layer's read_delays are the misses",
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
class Latency:
    """fio's latency (median and p99) of one kind of I/O over ``seconds``."""

    p50_us: float
    p99_us: float

    def __str__(self) -> str:
        return f"{self.p50_us:,.0f} us (p99 {self.p99_us:,.0f})"


@dataclass(frozen=True)
class Calibration:
    """How the layer was set for one kind of I/O (``what``: ``SYNC`` or ``READ``):
    fio's latency on the disk, through the layer without a delay (its floor) and
    with it (achieved)."""

    disk_class: str
    local: Latency
    floor: Latency
    target: Aim
    delay_us: float  # fixed, per I/O
    achieved: Latency
    seconds: int
    what: str = SYNC
    # proportional instead (syncs over a disk slower than the class): each sync
    # lasts factor x the disk's own sync of that moment, less the layer's
    # overhead (floor - local)
    factor: float = 1.0
    overhead_us: float = 0.0
    local_after: Latency | None = None  # the disk again, right after ``achieved``

    def contradictions(self) -> list[str]:
        """What these figures say against each other; empty when they agree."""
        out = []
        through = f"{self.what} {self.achieved} through the layer"
        if self.achieved.p50_us < self.floor.p50_us:
            out.append(f"{through} is faster than the layer's own floor {self.floor}")
        if self.achieved.p50_us < self.local.p50_us:
            out.append(
                f"{through} is faster than this disk's own {self.local}: the emulated "
                f"{self.disk_class} would beat the disk under it"
            )
        if self.target.disk_slower and self.local.p50_us < self.target.class_us:
            out.append(
                f"this disk ({self.local}) is called slower than {self.disk_class} "
                f"({self.target.class_us:,.0f} us), which it beats"
            )
        return out

    def describe(self) -> str:
        unit = "sync" if self.what == SYNC else "read"
        added = (
            f"each sync {self.factor:.1f}x the disk's own, less the layer's "
            f"{self.overhead_us:,.0f} us"
            if self.factor > 1.0
            else f"+{self.delay_us:,.0f} us per {unit}"
        )
        if self.local_after is not None:
            ratio = self.achieved.p50_us / self.local_after.p50_us
            added += f"; the disk right after: {self.local_after} ({ratio:.1f}x)"
        if self.achieved.p50_us > OVER * self.target.us:
            added += (
                f"; {self.achieved.p50_us / self.target.us:.1f}x over the target: a delayed "
                "I/O's wake-ups wait for a CPU on a busy machine, and the floor is the "
                "layer's cost without them"
            )
        how = (
            "fio 8 kB writes with fdatasync=1"
            if self.what == SYNC
            else "fio 8 kB random reads, O_DIRECT, queue depth 1"
        )
        return (
            f"{self.disk_class} {self.what}: {self.achieved} through the layer "
            f"(target {self.target.us:,.0f} us: {self.target.why}); this disk {self.local}; "
            f"the layer's own floor {self.floor}; {added} ({how}, {self.seconds} s each)"
        )


def check(calibration: Calibration) -> Calibration:
    """``calibration`` when its figures agree; else ``CalibrationRefused`` naming
    what was measured."""
    problems = calibration.contradictions()
    if problems:
        raise CalibrationRefused(
            f"the latency layer's calibration contradicts itself: {'; '.join(problems)} "
            f"(measured: {calibration.describe()})",
            hint="the machine was busy while it measured (other processes, another "
            "study): run again when it is quieter, or drop latency = ... from the target",
        )
    return calibration


@dataclass(frozen=True)
class Layer:
    """The layer's calibrations, for syncs and for reads."""

    syncs: Calibration
    reads: Calibration
    source: str = ""  # where the class's figures come from

    def describe(self) -> str:
        text = f"{self.syncs.describe()}. {self.reads.describe()}"
        return f"{text}. The class's figures: {self.source}" if self.source else text


def measure(directory: Path, seconds: int) -> Latency:
    """fdatasync after every 8 kB write, as a WAL flush does (fio, buffered, QD1)."""
    job = fio.FioJob(
        directory, "write", ioengine="sync", direct=False, iodepth=1, size="16M",
        runtime_s=seconds, fdatasync=1,
    )  # fmt: skip
    result, _raw = fio.run(job)
    if result.sync_p50_us is None or result.sync_p99_us is None:
        raise UsageError(f"fio in {directory} reported no fdatasync latency")
    return Latency(result.sync_p50_us, result.sync_p99_us)


def measure_reads(directory: Path, seconds: int) -> Latency:
    """One 8 kB read at a time from the disk, past the page cache (O_DIRECT): what
    a backend's miss waits (DataFileRead)."""
    job = fio.FioJob(
        directory, "randread", ioengine="psync", direct=True, iodepth=1, size="16M",
        runtime_s=seconds,
    )  # fmt: skip
    result, _raw = fio.run(job)
    return Latency(result.clat_p50_us, result.clat_p99_us)


def delay_for(target_us: float, through_us: float, delay_us: float = 0.0) -> float:
    """The delay that brings an I/O measured at ``through_us`` (with ``delay_us``
    added) to ``target_us``; never below 0 (the layer's floor is over the target:
    the description says so)."""
    return max(0.0, delay_us + target_us - through_us)


def _fixed(
    set_delay: Callable[[float], None], measure_: Callable[[], Latency], target: float, floor: float
) -> tuple[float, Latency]:
    """A fixed delay per I/O: set, measured, and corrected once by half the miss
    (on a shared machine one median is noisy)."""
    delay = delay_for(target, floor)
    set_delay(delay)
    achieved = measure_()
    if abs(achieved.p50_us - target) > 0.1 * target:
        delay = (delay + delay_for(target, achieved.p50_us, delay)) / 2
        set_delay(delay)
        achieved = measure_()
    return delay, achieved


def calibrate_syncs(
    mount: LossyMount, disk: Path, disk_class: DiskClass, seconds: int
) -> Calibration:
    mount.set_sync_delay(0.0)
    local = measure(disk, seconds)
    floor = measure(mount.mountpoint, seconds)
    target = disk_class.target(SYNC, local.p50_us)
    if target.ratio_kept:
        # A shared disk's latency jumps by 10x between minutes: a fixed delay
        # from one moment's median would set the ratio to chance. In
        # proportion, every sync keeps the ratio to the disk's own sync.
        factor, overhead = disk_class.ratio, max(0.0, floor.p50_us - local.p50_us)
        mount.set_sync_delay(0.0, factor=factor, overhead_us=overhead)
        achieved = measure(mount.mountpoint, seconds)
        local_after = measure(disk, seconds)  # the ratio is to the disk of that moment
        return Calibration(
            disk_class.name, local, floor, target, 0.0, achieved, seconds, SYNC,
            factor, overhead, local_after,
        )  # fmt: skip
    delay, achieved = _fixed(
        mount.set_sync_delay, lambda: measure(mount.mountpoint, seconds), target.us, floor.p50_us
    )
    return Calibration(disk_class.name, local, floor, target, delay, achieved, seconds)


def calibrate_reads(
    mount: LossyMount, disk: Path, disk_class: DiskClass, seconds: int
) -> Calibration:
    mount.set_read_delay(0.0)
    local = measure_reads(disk, seconds)
    floor = measure_reads(mount.mountpoint, seconds)
    target = disk_class.target(READ, local.p50_us)
    delay, achieved = _fixed(
        mount.set_read_delay,
        lambda: measure_reads(mount.mountpoint, seconds),
        target.us,
        floor.p50_us,
    )
    return Calibration(disk_class.name, local, floor, target, delay, achieved, seconds, READ)


def checked(calibrate: Callable[[], Calibration]) -> Calibration:
    """A calibration whose figures agree: measured again once if they do not (one
    noisy moment), refused if they still do not."""
    first = calibrate()
    if not first.contradictions():
        return first
    return check(calibrate())


@contextlib.contextmanager
def latency_layer(
    base: Path, disk_class: DiskClass, *, seconds: int = 2
) -> Iterator[tuple[Path, Layer]]:
    """Mount the calibrated layer in a marked holder under ``base``; yields the
    mounted directory (for the cluster and the probes) and the calibrations. The
    mount is recorded before it exists, so ``pgrig clean`` undoes it after a kill."""
    holder = base / f"{PREFIX}{secrets.token_hex(4)}"
    workdir.create(holder, study="storage-lab latency")
    mount: LossyMount | None = None
    try:
        backing = holder / "backing"
        backing.mkdir(mode=0o755)
        disk = holder / "disk"  # the disk itself, beside (never inside) the mount's backing
        disk.mkdir(mode=0o755)
        mount = LossyMount(backing, holder / "mnt", metadata="journal")
        with mount as live:
            syncs = checked(lambda: calibrate_syncs(live, disk, disk_class, seconds))
            reads = checked(lambda: calibrate_reads(live, disk, disk_class, seconds))
            yield live.mountpoint, Layer(syncs, reads, disk_class.source)
    finally:
        if mount is not None and mount.mounted:
            workdir.unregister(holder)  # never rmtree through a live mount
        else:
            with contextlib.suppress(OSError):
                workdir.remove(holder)
