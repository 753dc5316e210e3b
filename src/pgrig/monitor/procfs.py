"""Host counters from /proc: pure parsers of the files' text, and rates between two reads.

Each ``parse_*`` takes the file's text (so tests run on captured real files);
each ``*_rates`` turns two parsed snapshots and the seconds between them into
what ``vmstat`` / ``iostat -x`` would print for that interval.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pgrig.monitor.model import CpuSample, DeviceSample, MemorySample

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size
MIB = 1024 * 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")
PF_KTHREAD = 0x00200000
KTHREADD = 2


# --------------------------------------------------------------------------
# /proc/stat


@dataclass(frozen=True)
class Stat:
    """The aggregate ``cpu`` line in clock ticks, and the system-wide counters."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int
    ctxt: int
    procs_running: int
    procs_blocked: int
    btime: int  # boot time, seconds since the epoch
    ncpu: int

    @property
    def total(self) -> int:
        # guest time is already inside user/nice, so it is not added again.
        return (
            self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
        )


def parse_stat(text: str) -> Stat:
    values: dict[str, list[int]] = {}
    ncpu = 0
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        key = parts[0]
        if key.startswith("cpu") and key != "cpu":
            ncpu += 1
            continue
        if key in ("cpu", "ctxt", "procs_running", "procs_blocked", "btime"):
            values[key] = [int(v) for v in parts[1:]]
    # old kernels have fewer columns; none: the file could not be read (a host's
    # SSH lost), said in the monitor's notes (it was KeyError: 'cpu', issue 40.10)
    cpu = values.get("cpu", []) + [0] * 10
    return Stat(
        user=cpu[0],
        nice=cpu[1],
        system=cpu[2],
        idle=cpu[3],
        iowait=cpu[4],
        irq=cpu[5],
        softirq=cpu[6],
        steal=cpu[7],
        ctxt=values.get("ctxt", [0])[0],
        procs_running=values.get("procs_running", [0])[0],
        procs_blocked=values.get("procs_blocked", [0])[0],
        btime=values.get("btime", [0])[0],
        ncpu=max(ncpu, 1),
    )


def cpu_rates(a: Stat, b: Stat, seconds: float) -> CpuSample:
    """Percent of the whole machine (all CPUs = 100) over the interval, as vmstat."""
    total = max(b.total - a.total, 1)

    def pct(name: str) -> float:
        return 100.0 * float(getattr(b, name) - getattr(a, name)) / total

    return CpuSample(
        user=pct("user") + pct("nice"),
        system=pct("system"),
        iowait=pct("iowait"),
        irq=pct("irq") + pct("softirq"),
        steal=pct("steal"),
        idle=pct("idle"),
        ctxt_s=(b.ctxt - a.ctxt) / seconds,
        runq=float(b.procs_running),
        blocked=float(b.procs_blocked),
    )


# --------------------------------------------------------------------------
# /proc/diskstats


@dataclass(frozen=True)
class DiskCounters:
    reads: int
    read_sectors: int
    read_ms: int
    writes: int
    write_sectors: int
    write_ms: int
    io_ms: int  # time the device had I/O in flight
    queue_ms: int  # weighted: in-flight I/Os x time
    flushes: int = 0  # kernel 5.5+


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        f = [int(v) for v in parts[3:]]
        out[parts[2]] = DiskCounters(
            reads=f[0],
            read_sectors=f[2],
            read_ms=f[3],
            writes=f[4],
            write_sectors=f[6],
            write_ms=f[7],
            io_ms=f[9],
            queue_ms=f[10],
            flushes=f[15] if len(f) > 15 else 0,
        )
    return out


def disk_rates(name: str, a: DiskCounters, b: DiskCounters, seconds: float) -> DeviceSample:
    """``iostat -x`` for one device: r/s, w/s, MiB/s, average wait per I/O, %util, aqu-sz."""
    reads = b.reads - a.reads
    writes = b.writes - a.writes
    read_ms = b.read_ms - a.read_ms
    write_ms = b.write_ms - a.write_ms
    return DeviceSample(
        name=name,
        reads_s=reads / seconds,
        writes_s=writes / seconds,
        read_mib_s=(b.read_sectors - a.read_sectors) * SECTOR_BYTES / MIB / seconds,
        write_mib_s=(b.write_sectors - a.write_sectors) * SECTOR_BYTES / MIB / seconds,
        read_await_ms=read_ms / reads if reads else 0.0,
        write_await_ms=write_ms / writes if writes else 0.0,
        util_pct=min(100.0, 100.0 * (b.io_ms - a.io_ms) / (seconds * 1000)),
        queue=(b.queue_ms - a.queue_ms) / (seconds * 1000),
        flushes_s=(b.flushes - a.flushes) / seconds,
    )


def slaves(device: str, sys_block: Path = Path("/sys/block")) -> list[str]:
    """``device`` and what it is built on (LVM, md, dm-crypt), recursively."""
    out = [device]
    try:
        below = sorted(p.name for p in (sys_block / device / "slaves").iterdir())
    except OSError:
        return out
    for name in below:
        # slaves may be partitions (vda1): iostat shows their disk's numbers too
        disk = name if (sys_block / name).exists() else _disk_of(name, sys_block)
        for dev in slaves(disk, sys_block):
            if dev not in out:
                out.append(dev)
    return out


def _disk_of(partition: str, sys_block: Path) -> str:
    for disk in sys_block.iterdir():
        if (disk / partition).exists():
            return disk.name
    return partition


# --------------------------------------------------------------------------
# /proc/meminfo


def parse_meminfo(text: str) -> dict[str, int]:
    """Field -> bytes (the file says kB, meaning KiB)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        value = int(parts[0])
        out[key.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def memory_sample(info: Mapping[str, int]) -> MemorySample:
    def mib(key: str) -> float:
        return info.get(key, 0) / MIB

    return MemorySample(
        cached_mib=mib("Cached"),
        dirty_mib=mib("Dirty"),
        writeback_mib=mib("Writeback"),
        available_mib=mib("MemAvailable"),
    )


# --------------------------------------------------------------------------
# /proc/net/dev


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """Interface -> (received bytes, transmitted bytes)."""
    out = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep or "|" in line:
            continue
        f = rest.split()
        if len(f) >= 9:
            out[name.strip()] = (int(f[0]), int(f[8]))
    return out


def net_rates(
    a: Mapping[str, tuple[int, int]], b: Mapping[str, tuple[int, int]], seconds: float
) -> tuple[float, float]:
    """(rx MiB/s, tx MiB/s) over every interface but loopback: what crosses a wire."""
    rx = tx = 0
    for name, (brx, btx) in b.items():
        if name == "lo" or name not in a:
            continue
        rx += brx - a[name][0]
        tx += btx - a[name][1]
    return rx / MIB / seconds, tx / MIB / seconds


# --------------------------------------------------------------------------
# /proc/<pid>/stat


@dataclass(frozen=True)
class ProcStat:
    pid: int
    comm: str
    state: str
    ppid: int
    utime: int  # clock ticks
    stime: int
    cutime: int  # of reaped children
    cstime: int
    num_threads: int
    starttime: int  # clock ticks after boot
    flags: int = 0  # PF_* flags of the kernel's task

    @property
    def ticks(self) -> int:
        return self.utime + self.stime

    @property
    def kernel_thread(self) -> bool:
        # Kernel threads (kworkers, loop, jbd2) mostly work for whoever caused
        # the I/O or the interrupt: not "other processes" in their own right.
        return bool(self.flags & PF_KTHREAD) or self.pid == KTHREADD or self.ppid == KTHREADD


def parse_pid_stat(text: str) -> ProcStat:
    """``comm`` may hold spaces and parentheses: it ends at the *last* ')'."""
    head, _, tail = text.rpartition(")")
    pid_text, _, comm = head.partition(" (")
    f = tail.split()
    return ProcStat(
        pid=int(pid_text),
        comm=comm,
        state=f[0],
        ppid=int(f[1]),
        utime=int(f[11]),
        stime=int(f[12]),
        cutime=int(f[13]),
        cstime=int(f[14]),
        num_threads=int(f[17]),
        starttime=int(f[19]),
        flags=int(f[6]),
    )


def read_text(path: str) -> str | None:
    """The file's text, or None if it cannot be read (gone, not ours).

    Raw reads, not ``open()``: a sample reads every process's files, and the
    text-file layers cost half of that."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def all_processes() -> dict[int, ProcStat]:
    """Every process's stat; processes that vanish while reading are skipped."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        text = read_text(f"/proc/{name}/stat")
        if text:
            try:
                st = parse_pid_stat(text)
            except (ValueError, IndexError):
                continue
            out[st.pid] = st
    return out


def process_tree(root: int) -> dict[int, ProcStat]:
    """``root`` and every process below it, following /proc/<pid>/task/*/children:
    a handful of reads instead of a walk over every process on the machine.
    Falls back to the full walk where the kernel has no children files."""
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        procs = all_processes()
        pids = descendants(procs, [root]) | ({root} if root in procs else set())
        return {pid: procs[pid] for pid in pids}
    out: dict[int, ProcStat] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        text = read_text(f"/proc/{pid}/stat")
        if not text or pid in out:
            continue  # gone in the meantime
        try:
            out[pid] = parse_pid_stat(text)
        except (ValueError, IndexError):
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            children = read_text(f"/proc/{pid}/task/{tid}/children") or ""
            todo.extend(int(c) for c in children.split())
    return out


def descendants(procs: Mapping[int, ProcStat], roots: Iterable[int]) -> set[int]:
    """PIDs below any of ``roots`` (the roots themselves excluded)."""
    children: dict[int, list[int]] = {}
    for st in procs.values():
        children.setdefault(st.ppid, []).append(st.pid)
    out: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def parse_pid_io(text: str) -> tuple[int, int]:
    """``/proc/<pid>/io``: (bytes read from storage, bytes sent to storage).

    ``read_bytes`` / ``write_bytes`` count what reached the block layer (a
    write when its page was dirtied), not ``rchar``/``wchar`` (page-cache hits
    too). ``cancelled_write_bytes`` - dirty pages truncated before writeback -
    never reached the device."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip():
            fields[key.strip()] = int(value)
    written = fields.get("write_bytes", 0) - fields.get("cancelled_write_bytes", 0)
    return fields.get("read_bytes", 0), max(0, written)


def read_pid_io(pid: int) -> tuple[int, int] | None:
    """None when the process is gone or not ours to read (ptrace rules: another
    user's process needs CAP_SYS_PTRACE; some are never readable)."""
    text = read_text(f"/proc/{pid}/io")
    if not text:
        return None
    try:
        return parse_pid_io(text)
    except ValueError:
        return None


def parse_schedstat(text: str) -> tuple[int, int]:
    """``/proc/<pid>/schedstat``: (ns on a CPU, ns waiting in a run queue)."""
    f = text.split()
    return int(f[0]), int(f[1])


def read_schedstat(path: str) -> tuple[int, int] | None:
    text = read_text(path)
    if not text:
        return None
    try:
        return parse_schedstat(text)
    except (ValueError, IndexError):
        return None


def thread_schedstats(pid: int) -> dict[int, tuple[int, int]]:
    """Thread id -> (ns running, ns runnable but waiting), for one process's threads
    (pgbench -j runs one thread per -j)."""
    out: dict[int, tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        st = read_schedstat(f"/proc/{pid}/task/{tid}/schedstat")
        if st is not None:
            out[int(tid)] = st
    return out
