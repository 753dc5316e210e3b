"""Who else used the machine: CPU and storage I/O of every process that is not
the server, the load generator or pgrig, during a run and before a study.

A benchmark on a shared machine measures the server *and* whatever else runs.
Each sample splits the machine's busy CPU into the server, the load
generator, pgrig itself, kernel threads, interrupts, steal and the rest -
other processes, including short-lived ones that no walk of /proc catches.
The walk of /proc names the others (summed by command name) and counts their
storage bytes from ``/proc/<pid>/io``. A run where others took more than
``Thresholds.cpu_pct`` of the machine, or most of the target device's traffic,
is *disturbed*: its numbers are not the server's alone.

    baseline = monitor.idle_baseline(3.0, target=ctx.target)   # before a study
    with monitor.Watch(ctx, baseline=baseline) as watch: ...
    mon = watch.result(run)
    monitor.is_disturbed(mon)                                   # skip it for until_ci
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgrig import environment
from pgrig.errors import UsageError
from pgrig.monitor import procfs
from pgrig.monitor.model import (
    Disturbance,
    IdleBaseline,
    MonitorResult,
    OtherLoad,
    OtherProcess,
    Sample,
)
from pgrig.monitor.spool import View
from pgrig.results import RunRecord

MIB = 1024 * 1024
TOP = 5  # other processes named


@dataclass(frozen=True)
class Thresholds:
    """When other load makes a run disturbed."""

    cpu_pct: float = 10.0  # other processes + steal, mean % of the machine over the run
    # Other processes' share of the target device's bytes, counted only when
    # the device was busy at least ``io_min_util_pct`` (a mostly idle device
    # is nobody's bottleneck, whoever uses the rest).
    io_share: float = 0.5
    io_min_util_pct: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.cpu_pct <= 100:
            raise UsageError(
                f"the disturbance threshold must be a CPU share in (0, 100] %, "
                f"not {self.cpu_pct:g}",
                hint="the default is 10 (% of the whole machine)",
            )
        if not 0 < self.io_share <= 1:
            raise UsageError(
                f"the I/O disturbance threshold must be a share in (0, 1], not {self.io_share:g}",
                hint="the default is 0.5: others sent half of the device's bytes",
            )


DEFAULT = Thresholds()

Key = tuple[int, int]  # (pid, starttime): a reused PID is a new process


@dataclass
class _Seen:
    comm: str
    ticks: int
    io: tuple[int, int] | None  # (read bytes, written bytes); None: not readable
    kernel: bool = False


@dataclass
class Walk:
    """One walk of /proc: every process, split by who it belongs to."""

    procs: dict[int, procfs.ProcStat]
    server: set[int]
    mine: set[int]  # pgrig and everything below it (the load generator too)
    kernel_ticks: int  # kernel threads' CPU since the previous walk


@dataclass(frozen=True, slots=True)
class _Use:
    """What processes of one name used while we watched: how many, their CPU
    ticks and their storage bytes."""

    processes: int
    ticks: int
    io_bytes: int

    def __add__(self, other: _Use) -> _Use:
        return _Use(
            self.processes + other.processes,
            self.ticks + other.ticks,
            self.io_bytes + other.io_bytes,
        )


_NONE = _Use(0, 0, 0)


@dataclass
class Ledger:
    """Every process's CPU ticks and storage bytes, first and last seen.

    A process alive at the first walk counts from then; one born later counts
    from zero; one that exits keeps what it had at its last walk. So the
    totals are what each process did while we watched, to within one interval
    for those that ended in between."""

    born_after_ticks: float  # starttime (ticks after boot) of the first walk
    first: dict[Key, _Seen] = field(default_factory=dict)
    last: dict[Key, _Seen] = field(default_factory=dict)
    walks: int = 0
    first_at: float = 0.0  # monotonic
    last_at: float = 0.0
    # Processes that have exited, folded into per-name totals: a busy machine
    # starts several processes a second, and keeping each one's entry made a
    # 30-minute run's memory grow by megabytes.
    gone: dict[str, _Use] = field(default_factory=dict)

    @classmethod
    def start(cls) -> Ledger:
        boot_ticks = time.clock_gettime(time.CLOCK_BOOTTIME) * procfs.CLK_TCK
        return cls(born_after_ticks=boot_ticks)

    def walk(self, server_pid: int | None, me: int | None = None) -> Walk:
        me = os.getpid() if me is None else me
        procs = procfs.all_processes()
        server = set()
        if server_pid is not None and server_pid in procs:
            server = {server_pid} | procfs.descendants(procs, [server_pid])
        mine = ({me} | procfs.descendants(procs, [me])) - server
        kernel = 0
        now = time.monotonic()
        present: set[Key] = set()
        for st in procs.values():
            if st.pid in server or st.pid in mine:
                continue
            key = (st.pid, st.starttime)
            present.add(key)
            kthread = st.kernel_thread
            prev = self.last.get(key)
            if kthread:
                io = None
            elif prev is not None and prev.ticks == st.ticks and prev.io is not None:
                # Idle since the last walk: its bytes, if any, are counted at
                # its next walk with CPU time (the counters only grow).
                io = prev.io
            else:
                io = procfs.read_pid_io(st.pid)
            seen = _Seen(st.comm, st.ticks, io, kthread)
            if key not in self.first:
                born_late = self.walks > 0 and st.starttime >= self.born_after_ticks
                self.first[key] = _Seen(st.comm, 0, (0, 0), kthread) if born_late else seen
            if st.kernel_thread:
                kernel += st.ticks - (prev.ticks if prev else self.first[key].ticks)
            self.last[key] = seen
        for key in [k for k in self.last if k not in present]:
            last, first = self.last.pop(key), self.first.pop(key)
            if not last.kernel:
                self.gone[last.comm] = self.gone.get(last.comm, _NONE) + _used(first, last)
        if self.walks == 0:
            self.first_at = now
        self.walks += 1
        self.last_at = now
        return Walk(procs, server, mine, max(0, kernel))

    def top(self, ncpu: int, n: int = TOP) -> tuple[OtherProcess, ...]:
        """User-space others by name, busiest first (CPU, then bytes)."""
        seconds = self.last_at - self.first_at
        if seconds <= 0:
            return ()
        by_name = dict(self.gone)
        for key, last in self.last.items():
            if not last.kernel:
                by_name[last.comm] = by_name.get(last.comm, _NONE) + _used(self.first[key], last)
        out = [
            OtherProcess(
                name=name,
                processes=use.processes,
                cpu_pct=100.0 * use.ticks / procfs.CLK_TCK / (seconds * ncpu),
                io_mib_s=use.io_bytes / MIB / seconds,
            )
            for name, use in by_name.items()
            if use.ticks or use.io_bytes
        ]
        out.sort(key=lambda p: (-p.cpu_pct, -p.io_mib_s))
        busiest_io = sorted((p for p in out if p.io_mib_s >= 0.1), key=lambda p: -p.io_mib_s)
        chosen = out[:n]
        # The biggest writer is named even when its CPU is small.
        for p in busiest_io[:3]:
            if p not in chosen:
                chosen.append(p)
        return tuple(chosen)


def _used(first: _Seen, last: _Seen) -> _Use:
    """What one process used between two walks."""
    io = 0
    if last.io is not None and first.io is not None:
        io = max(0, sum(last.io) - sum(first.io))
    return _Use(1, max(0, last.ticks - first.ticks), io)


def other_cpu(
    busy: float, steal: float, irq: float, kernel: float, ours: Iterable[float | None]
) -> float:
    """User-space CPU of everyone else, % of the machine: what is left of the
    busy time once steal, interrupts, kernel threads and our processes are taken out."""
    return max(0.0, busy - steal - irq - kernel - sum(v or 0.0 for v in ours))


# --------------------------------------------------------------------------
# The idle machine before a study


def target_device(target: Path | None) -> str | None:
    if target is None:
        return None
    fs = environment.describe_filesystem(target)
    if fs is None or fs.block_device is None:
        return None
    return fs.block_device


def idle_baseline(
    seconds: float = 3.0, *, target: Path | None = None, interval: float = 1.0
) -> IdleBaseline:
    """Sample the machine for ``seconds`` while pgrig does nothing: the CPU others
    use (steal included), who they are, and the target device's traffic.
    Call it before a study, with no server or load generator running."""
    if not 0.2 <= seconds <= 600:
        raise UsageError(
            f"the idle baseline must last 0.2 to 600 seconds, not {seconds:g}",
            hint="a few seconds (3) are enough to see a busy machine",
        )
    device = target_device(target)
    ledger = Ledger.start()
    ticks0 = _ticks_of(ledger.walk(None))
    stat0 = procfs.parse_stat(procfs.read_text("/proc/stat") or "")
    disk0 = procfs.parse_diskstats(procfs.read_text("/proc/diskstats") or "")
    t0 = start = time.monotonic()
    rows: list[tuple[float, float, float, float, float]] = []
    deadline = start + seconds
    while True:
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))
        walk = ledger.walk(None)
        stat = procfs.parse_stat(procfs.read_text("/proc/stat") or "")
        now = time.monotonic()
        span = max(now - t0, 1e-3)
        cpu = procfs.cpu_rates(stat0, stat, span)
        ticks = _ticks_of(walk)
        mine = sum(max(0, t - ticks0.get(k, t)) for k, t in ticks.items())
        machine = procfs.CLK_TCK * span * stat.ncpu / 100.0
        kernel = walk.kernel_ticks / machine
        other = other_cpu(cpu.busy, cpu.steal, cpu.irq, kernel, [mine / machine])
        rows.append((cpu.busy, other, cpu.steal, cpu.iowait, kernel))
        stat0, ticks0, t0 = stat, ticks, now
        if now >= deadline:
            break
    disk1 = procfs.parse_diskstats(procfs.read_text("/proc/diskstats") or "")
    elapsed = max(time.monotonic() - start, 1e-3)
    dev_mib = util = None
    if device is not None and device in disk0 and device in disk1:
        d = procfs.disk_rates(device, disk0[device], disk1[device], elapsed)
        dev_mib, util = d.read_mib_s + d.write_mib_s, d.util_pct

    def mean(i: int) -> float:
        return statistics.fmean(r[i] for r in rows)

    return IdleBaseline(
        seconds=round(elapsed, 3),
        ncpu=stat0.ncpu,
        busy_pct=mean(0),
        other_pct=mean(1),
        other_max_pct=max(r[1] for r in rows),
        steal_pct=mean(2),
        iowait_pct=mean(3),
        kernel_pct=mean(4),
        top=ledger.top(stat0.ncpu),
        device=device,
        device_mib_s=dev_mib,
        device_util_pct=util,
    )


def _ticks_of(walk: Walk) -> dict[Key, int]:
    """CPU ticks of our own processes (the ledger leaves them out)."""
    return {(pid, walk.procs[pid].starttime): walk.procs[pid].ticks for pid in walk.mine}


def baseline_busy(baseline: IdleBaseline, thresholds: Thresholds = DEFAULT) -> bool:
    return baseline.other_pct + baseline.steal_pct >= thresholds.cpu_pct


def wait_quiet(
    max_wait_s: float,
    *,
    thresholds: Thresholds = DEFAULT,
    target: Path | None = None,
    probe_s: float = 3.0,
) -> tuple[bool, IdleBaseline]:
    """Probe the machine every ``probe_s`` until other load falls under the
    threshold or ``max_wait_s`` passed: (quiet?, the last probe). For a runner
    that retries a disturbed run instead of keeping it."""
    deadline = time.monotonic() + max_wait_s
    while True:
        probe = idle_baseline(probe_s, target=target)
        if not baseline_busy(probe, thresholds):
            return True, probe
        if time.monotonic() + probe_s > deadline:
            return False, probe


# --------------------------------------------------------------------------
# A run's verdict on interference


def names(
    top: Sequence[OtherProcess], n: int = 3, io: bool = False, cap: float | None = None
) -> str:
    """'stress-ng 48% (2 processes), backup 3%' or by I/O: 'dd 120 MiB/s'.

    ``cap``: the device's MiB/s that others sent. A process's own counters cover
    every device and count pages when dirtied, so beside one device's bytes each
    is shown at most at ``cap`` - a share of a disk never above the disk's total -
    with its own figure in parentheses when that was larger."""
    parts = []
    for p in top[:n] if not io else sorted(top, key=lambda p: -p.io_mib_s)[:n]:
        count = f" ({p.processes} processes)" if p.processes > 1 else ""
        if not io:
            value = f"{p.cpu_pct:.0f}%"
        elif cap is not None and p.io_mib_s > cap:
            value = f"<= {cap:.1f} MiB/s ({p.io_mib_s:.1f} MiB/s on any device, when dirtied)"
        else:
            value = f"{p.io_mib_s:.1f} MiB/s"
        parts.append(f"{p.name} {value}{count}")
    return ", ".join(parts)


def assess(
    samples: Collection[Sample], top: tuple[OtherProcess, ...], thresholds: Thresholds = DEFAULT
) -> tuple[OtherLoad | None, Disturbance | None]:
    """Other load over the samples inside the run, and whether it disturbed it.
    ``samples`` may be a view of the spool: read in passes, never kept."""
    in_run = View(lambda: (s for s in samples if s.in_run))
    inside = in_run if in_run else samples
    cpu = [s.cpu.other for s in inside if s.cpu.other is not None]
    if not cpu:
        return None, None
    steal = statistics.fmean(s.cpu.steal for s in inside)
    cpu_pct = statistics.fmean(cpu)
    io = View(lambda: (s.io for s in inside if s.io is not None and s.io.device is not None))
    device = next(iter(io), None)
    io_share = device_mib = util = None
    named_io = sum(p.io_mib_s for p in top)
    if device is not None:
        device_mib = statistics.fmean(x.device_mib_s for x in io)
        ours = statistics.fmean(x.ours_mib_s for x in io)
        utils = [d.util_pct for s in inside for d in s.devices if d.name == device.device]
        util = statistics.fmean(utils) if utils else None
        if device_mib > 0:
            # Traffic ours does not explain, and only as much as named others
            # did: late writeback of our own dirty pages is nobody else's.
            io_share = min(max(0.0, device_mib - ours), named_io) / device_mib
    load = OtherLoad(
        cpu_pct=cpu_pct,
        cpu_max_pct=max(cpu),
        steal_pct=steal,
        top=top,
        io_share=io_share,
        io_mib_s=named_io,
        device_mib_s=device_mib,
        device_util_pct=util,
    )
    reasons = _reasons(
        load,
        device.device if device is not None else None,
        cpu=cpu_pct + steal >= thresholds.cpu_pct,
        io=io_share is not None
        and io_share >= thresholds.io_share
        and (util is None or util >= thresholds.io_min_util_pct),
        cpu_threshold_pct=thresholds.cpu_pct,
    )
    if not reasons:
        return load, None
    return load, Disturbance(
        reasons=reasons,
        cpu_pct=cpu_pct + steal,
        io_share=io_share,
        top=top,
        cpu_threshold_pct=thresholds.cpu_pct,
        io_threshold_share=thresholds.io_share,
    )


def _reasons(
    load: OtherLoad, device: str | None, *, cpu: bool, io: bool, cpu_threshold_pct: float
) -> tuple[str, ...]:
    """The sentences that say why a run was disturbed, from the numbers alone."""
    out = []
    if cpu:
        who = names(load.top) or "processes that ended before they could be named"
        text = (
            f"other processes took {load.cpu_pct:.0f}% of the machine's CPU on average "
            f"(up to {load.cpu_max_pct:.0f}% in one second; threshold {cpu_threshold_pct:g}%): "
            f"{who}"
        )
        if load.steal_pct >= 1:
            text += f"; the hypervisor gave {load.steal_pct:.0f}% to other guests (steal)"
        out.append(text)
    if io and load.io_share is not None:
        device_mib = load.device_mib_s or 0.0
        out.append(
            f"other processes sent {load.io_share:.0%} of the bytes on "
            f"{device or 'the target device'} ({device_mib:.1f} MiB/s in all, "
            f"{load.device_util_pct or 0:.0f}% busy): "
            + names(load.top, io=True, cap=load.io_share * device_mib)
        )
    return tuple(out)


def disturbance(mon: MonitorResult) -> str:
    """Why the run was disturbed, worded from its recorded numbers: a record an
    older pgrig wrote keeps its numbers, and is said as this one says them (a
    process's I/O beside a device never above the device's total). Its own
    sentences when its numbers do not tell them (no attribution recorded)."""
    d = mon.disturbed
    if d is None:
        return ""
    if mon.others is None:
        return d.summary
    again = _reasons(
        mon.others,
        mon.devices[0] if mon.devices else None,
        cpu=d.cpu_pct >= d.cpu_threshold_pct,
        io=d.io_share is not None and d.io_share >= d.io_threshold_share,
        cpu_threshold_pct=d.cpu_threshold_pct,
    )
    # the device's busy share, which also decided, is not in the record: the
    # recorded sentences say which reasons there were
    return "; ".join(again) if len(again) == len(d.reasons) else d.summary


def also(disturbed: Disturbance | None, reason: str, thresholds: Thresholds) -> Disturbance:
    """``disturbed`` with one more reason that is not another process's load (a
    load host held back: issue 40.11); a disturbance of its own when there was none."""
    if disturbed is not None:
        return replace(disturbed, reasons=(*disturbed.reasons, reason))
    return Disturbance(
        reasons=(reason,),
        cpu_pct=0.0,
        io_share=None,
        top=(),
        cpu_threshold_pct=thresholds.cpu_pct,
        io_threshold_share=thresholds.io_share,
    )


def is_disturbed(mon: MonitorResult | None) -> bool:
    """True when other load disturbed the run (see ``assess``): do not count it
    towards a confidence interval, or run it again."""
    return mon is not None and mon.disturbed is not None


def disturbed_run_keys(records: Iterable[RunRecord]) -> set[str]:
    """Keys of the runs whose monitor record (``<run key>/monitor``) says
    disturbed, from stored records (``RunRecord``) without rebuilding them."""
    out = set()
    for rec in records:
        if rec.kind != "monitor" or rec.status != "ok" or not rec.result:
            continue
        if rec.result.get("disturbed"):
            out.add(rec.key.removesuffix("/monitor"))
    return out
