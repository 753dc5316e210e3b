"""What a latency layer's process cost and did over one measured run (kind
"emulator"): its CPU time beside the machine's, and its I/O, so a report can
say "the emulator took N% of the CPU" beside the verdict it touches, and how
long the I/Os the layer delayed took inside it against the calibrated aim.
And at the end of a study (kind "emulator_end"), fio's view through each of a
target's layers again, as the build's calibration measured it: how close the
emulation still was once every run had gone through it."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from pgrig.monitor import procfs

# Over this share of the machine's CPU the emulator, not the disk, may be what
# the run measured: the record says so (``dominates``).
MAX_SHARE = 0.25


@dataclass(frozen=True)
class EmulatorReading:
    """One reading of the layer: its CPU seconds, the machine's busy CPU seconds,
    and its counters (the native layer's; empty for the Python one)."""

    layer: str  # "native" or "python"
    pid: int
    cpu_s: float
    machine_busy_s: float
    at: float  # time.monotonic()
    counters: tuple[tuple[str, int], ...] = ()
    read_aim_us: float = 0.0  # the calibrated per-read delay
    sync_aim_us: float = 0.0
    sync_mode: str = ""  # "deadline" or "proportion" (pgrig.storage.latency); "": not said


def machine_busy_s() -> float:
    """Every CPU's non-idle time since boot, seconds (/proc/stat)."""
    stat = procfs.parse_stat(procfs.read_text("/proc/stat") or "")
    return (stat.total - stat.idle - stat.iowait) / procfs.CLK_TCK


@dataclass(frozen=True)
class EmulatorUse:
    """The layer over one run."""

    layer: str
    seconds: float
    cpu_s: float
    share_of_machine: float  # its CPU over the run's wall time x the CPUs
    share_of_busy: float  # its CPU over everything the machine did meanwhile
    ios: int  # reads + writes + syncs through the layer (0: not counted)
    cpu_us_per_io: float | None
    read_in_layer_us: float | None  # mean, admission to reply, of delayed reads
    sync_in_layer_us: float | None  # mean of the syncs that were not bulk flushes
    throttled: int  # I/Os the caps held back
    read_aim_us: float = 0.0
    sync_aim_us: float = 0.0
    sync_mode: str = ""  # how the layer held its syncs to the aim; "": not recorded

    @property
    def dominates(self) -> bool:
        return self.share_of_machine > MAX_SHARE

    @classmethod
    def between(cls, a: EmulatorReading, b: EmulatorReading) -> EmulatorUse:
        seconds = max(b.at - a.at, 1e-9)
        cpu = max(0.0, b.cpu_s - a.cpu_s)
        busy = max(b.machine_busy_s - a.machine_busy_s, 1e-9)
        ncpu = os.cpu_count() or 1
        before, after = dict(a.counters), dict(b.counters)

        def d(name: str) -> int:
            return after.get(name, 0) - before.get(name, 0)

        ios = d("reads") + d("writes") + d("syncs")
        # a bulk flush (a checkpoint's fsync) is its data's time, not the
        # class's latency: the per-sync figure held to the aim leaves it out
        reads, syncs = d("reads"), d("syncs") - d("bulk_syncs")
        return cls(
            layer=b.layer,
            seconds=seconds,
            cpu_s=cpu,
            share_of_machine=cpu / (seconds * ncpu),
            share_of_busy=min(1.0, cpu / busy),
            ios=ios,
            cpu_us_per_io=cpu / ios * 1e6 if ios else None,
            read_in_layer_us=d("read_delay_ns") / reads / 1e3
            if reads and d("read_delay_ns")
            else None,
            sync_in_layer_us=(d("sync_delay_ns") - d("bulk_sync_ns")) / syncs / 1e3
            if syncs
            else None,
            throttled=d("throttled"),
            read_aim_us=b.read_aim_us,
            sync_aim_us=b.sync_aim_us,
            sync_mode=b.sync_mode,
        )

    def headline(self) -> str:
        text = (
            f": the {self.layer} layer took {self.share_of_machine:.1%} of the machine's CPU "
            f"({self.share_of_busy:.0%} of what was busy)"
        )
        if self.cpu_us_per_io is not None:
            text += f", {self.cpu_us_per_io:,.0f} us of CPU per I/O over {self.ios:,} I/Os"
        if self.read_in_layer_us is not None:
            text += f"; a delayed read {self.read_in_layer_us:,.0f} us in the layer"
            if self.read_aim_us:
                text += f" (aim {self.read_aim_us:,.0f})"
        if self.throttled:
            text += f"; {self.throttled:,} I/Os held by the caps"
        if self.dominates:
            text += (
                f" - over {MAX_SHARE:.0%}: this run's figures are the emulator's, not the disk's"
            )
        return text


def reading(
    layer: str,
    pid: int,
    cpu_s: float,
    counters: dict[str, int] | None = None,
    read_aim_us: float = 0.0,
    sync_aim_us: float = 0.0,
    sync_mode: str = "",
) -> EmulatorReading:
    return EmulatorReading(
        layer, pid, cpu_s, machine_busy_s(), time.monotonic(),
        tuple(sorted((counters or {}).items())), read_aim_us, sync_aim_us, sync_mode,
    )  # fmt: skip


@dataclass(frozen=True)
class Remeasured:
    """One kind of I/O of one emulated disk measured again through its layer at
    the end of a study: fio's median with the settings the build left (one
    measurement, nothing adjusted), against the aim the build held it to - in
    proportion, the class's ratio times the disk measured directly either side
    (``disk_us``, the mean of the two medians), as the calibration's step does."""

    disk: str  # "" for the data disk, else the tablespace option whose disk it is
    what: str  # "fdatasync" or "read" (pgrig.storage.latency.SYNC / READ)
    p50_us: float
    p99_us: float
    aimed_us: float
    built_miss: float  # the build's calibration: achieved / aimed - 1
    disk_us: float | None = None  # in proportion: the disk's own sync around it

    @property
    def miss(self) -> float:
        """fio's median / the aim - 1: +0.10 is 10% over."""
        return self.p50_us / self.aimed_us - 1.0

    def short(self) -> str:
        where = f"the {self.disk}'s " if self.disk else ""
        return (
            f"{where}{self.what} {self.p50_us:,.0f} us against the aim "
            f"{self.aimed_us:,.0f} ({self.miss:+.0%})"
        )

    def describe(self) -> str:
        where = f"the {self.disk}'s disk: " if self.disk else ""
        around = f" ({self.disk_us:,.0f} us the disk's own around it)" if self.disk_us else ""
        return (
            f"{where}{self.what} {self.p50_us:,.0f} us (p99 {self.p99_us:,.0f}) against the "
            f"aim {self.aimed_us:,.0f}{around} ({self.miss:+.0%}; built at {self.built_miss:+.0%})"
        )


@dataclass(frozen=True)
class EmulationAtEnd:
    """Every emulated disk of a target measured again at the end of its study,
    after its last run (kind "emulator_end"): what a report sets beside the
    build's calibration to say how close the emulation stayed."""

    each: tuple[Remeasured, ...]
    seconds: int  # each fio measurement's, as the calibration's
    tolerance: float  # what the calibration accepted (latency.TOLERANCE)

    @property
    def outside(self) -> tuple[Remeasured, ...]:
        """The measurements off their aim by more than the calibration accepts."""
        return tuple(x for x in self.each if abs(x.miss) > self.tolerance)

    def describe(self) -> str:
        text = "; ".join(x.describe() for x in self.each)
        if self.outside:
            text += f" - outside the calibration's ±{self.tolerance:.0%}"
        return f"{text} (fio {self.seconds} s each, after the last run)"

    def short(self) -> str:
        """'fdatasync 712 us against the aim 690 (+3%), read 205 us against the aim
        200 (+2%)': the first screen's words."""
        return ", ".join(x.short() for x in self.each)

    def headline(self) -> str:
        return f": at the end, {self.describe()}"
