"""Compare this machine with the kernel settings seeds 000 and 002 tune for PostgreSQL.

One small class per kind of knob (``pgrig.environment.knob``: a sysctl, a sysfs
file, a resource limit, a block device queue setting, a mount option), each
knowing how to read itself, whether the current value is what the seeds
recommend, why that matters for PostgreSQL and how to make it permanent -
pyperf's ``system tune`` in spirit; this module lists the seeds' knobs.

``findings()`` only reads. ``apply()`` changes the knobs that can be changed at
run time (sysctls and sysfs files; never limits or mounts) after saving their
old values in a state file (atomically, the first saved value kept across
repeated applies); ``restore()`` puts those values back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pgrig.environment import storage, system
from pgrig.environment.knob import (
    Bracketed,
    Clocksource,
    DeviceKnob,
    Finding,
    Knob,
    Limit,
    MountNoatime,
    Sysctl,
    at_least,
    equals,
    limit_accept,
    one_of,
)
from pgrig.environment.sources import ROOT, read_files
from pgrig.errors import UsageError
from pgrig.files import write_atomically
from pgrig.ownership import state_dir

# --------------------------------------------------------------------------
# The knobs


def _sysctls() -> list[Knob]:
    # One list per family of knobs, in the order ``pgrig audit`` has always shown them.
    return [*_vm_sysctls(), *_kernel_sysctls(), *_file_and_net_sysctls()]


def _vm_sysctls() -> list[Knob]:
    """Writeback, swapping and memory overcommit."""
    dirty = (
        "the kernel starts writing dirty pages early, in the background, instead of "
        "stalling backends and the checkpointer when dirty memory reaches the hard limit"
    )
    return [
        Sysctl(
            "vm.dirty_background_bytes",
            "409600000",
            equals("409600000"),
            dirty + " (seed 002 uses 102400000; 0 means the ratio is used)",
        ),
        Sysctl(
            "vm.dirty_ratio",
            "95",
            at_least("80"),
            "processes (backends, fsync callers) write dirty pages themselves only past this "
            "share of memory; seed 002 saw tps=0 stalls on ext4 without it (80 there, 95 in 000)",
        ),
        Sysctl(
            "vm.dirty_expire_centisecs",
            "3000",
            equals("3000"),
            "dirty pages older than 30 s are written back; with the background threshold it "
            "keeps checkpoint fsyncs short",
        ),
        Sysctl(
            "vm.dirty_writeback_centisecs",
            "100",
            equals("100"),
            "the flusher wakes every second instead of every 5 s, so writeback is smoother",
        ),
        Sysctl(
            "vm.swappiness",
            "0",
            one_of("0", "1"),
            "keep shared_buffers and backends in RAM instead of swapping them for page cache",
        ),
        Sysctl(
            "vm.overcommit_memory",
            "0",
            one_of("0", "2"),
            "1 (always overcommit) lets the OOM killer take the postmaster; seed 000 keeps 0",
        ),
        Sysctl(
            "vm.zone_reclaim_mode",
            "0",
            equals("0"),
            "on NUMA machines 1 reclaims page cache on the local node instead of using remote "
            "memory: a cache that looks far smaller than RAM",
        ),
    ]


def _kernel_sysctls() -> list[Knob]:
    """Semaphores and System V shared memory, sized from this machine's RAM."""
    ram = system.parse_memory_bytes(read_files(ROOT, ("/proc/meminfo",))) or 0
    shmall = str(int(ram * 0.8) // os.sysconf("SC_PAGE_SIZE"))
    return [
        Sysctl(
            "kernel.sem",
            "4096 2147483647 2147483646 512000",
            at_least("4096 2147483647 2147483646 512000"),
            "PostgreSQL takes semaphores in sets of 17 per 16 connections; many connections "
            "or clusters need more than old defaults",
        ),
        Sysctl(
            "kernel.shmmax",
            str(ram // 2),
            at_least(str(ram // 2)),
            "largest System V shared memory segment (half of RAM in seed 000); PostgreSQL "
            ">= 9.3 needs little, but old servers and some extensions more",
        ),
        Sysctl(
            "kernel.shmall",
            shmall,
            at_least(shmall),
            "total System V shared memory in pages (80% of RAM in seed 000)",
        ),
        Sysctl(
            "kernel.shmmni",
            "819200",
            at_least("819200"),
            "shared memory segments: at least 2 per cluster",
        ),
    ]


def _file_and_net_sysctls() -> list[Knob]:
    """Open files, asynchronous I/O and connection backlogs."""
    return [
        Sysctl(
            "fs.aio-max-nr",
            "1048576",
            at_least("1048576"),
            "asynchronous I/O requests system-wide: fio with libaio and io_uring-era servers "
            "fail with EAGAIN past it",
        ),
        Sysctl(
            "fs.file-max",
            "76724600",
            at_least("76724600"),
            "open files system-wide: every backend opens many relation segments",
        ),
        Sysctl(
            "fs.nr_open",
            "20480000",
            at_least("20480000"),
            "per-process ceiling for the nofile limit; must be raised before nofile can be",
        ),
        Sysctl(
            "net.core.somaxconn",
            "4096",
            at_least("4096"),
            "listen backlog: bursts of new connections are refused past it",
        ),
        Sysctl(
            "net.ipv4.tcp_max_syn_backlog",
            "4096",
            at_least("4096"),
            "half-open connections queued during a connection storm",
        ),
        Sysctl(
            "net.core.netdev_max_backlog",
            "10000",
            at_least("10000"),
            "packets queued per CPU before the network stack drops them",
        ),
    ]


def _system_files() -> list[Knob]:
    thp = Path("/sys/kernel/mm/transparent_hugepage")
    clock = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    return [
        Bracketed(
            "transparent_hugepage/enabled",
            thp / "enabled",
            "never",
            one_of("never", "madvise"),
            "THP compaction stalls and khugepaged latency spikes; PostgreSQL uses explicit "
            "huge pages (huge_pages=try) instead",
        ),
        Bracketed(
            "transparent_hugepage/defrag",
            thp / "defrag",
            "never",
            one_of("never", "madvise", "defer", "defer+madvise"),
            "'always' makes page faults wait for compaction",
        ),
        Clocksource(
            "clocksource",
            clock,
            "tsc",
            equals("tsc"),
            "timing overhead (EXPLAIN ANALYZE, track_io_timing, pg_test_timing): seed 000 "
            "measured 31.9 ns per loop with tsc vs 38.1 ns with kvm-clock",
        ),
    ]


def _limits() -> list[Knob]:
    why = {
        "nofile": ("1024000", "backends open many files; a low limit means EMFILE or thrashing"),
        "nproc": ("unlimited", "each connection is a process"),
        "memlock": ("unlimited", "huge pages and locked shared memory"),
        "core": ("unlimited", "a core file when a backend crashes"),
    }
    knobs: list[Knob] = []
    for name, (value, reason) in why.items():
        which = system.LIMITS[name]
        knobs.append(Limit(f"limit.{name}", which, value, limit_accept(value), reason))
    return knobs


def _devices() -> list[Knob]:
    knobs: list[Knob] = []
    for disk in storage.parse_disks(read_files(ROOT, storage.FILES)):
        if disk.name.startswith(("loop", "ram", "zram", "nbd", "dm-", "md")):
            continue
        queue = Path("/sys/block") / disk.name / "queue"
        wanted = ("mq-deadline", "bfq") if disk.rotational else ("none", "mq-deadline")
        knobs += [
            DeviceKnob(
                f"{disk.name} scheduler",
                queue / "scheduler",
                wanted[0],
                one_of(*wanted),
                "SSDs and cloud disks have their own queues: 'none' or 'mq-deadline' adds no "
                "latency; 'bfq' costs CPU per I/O"
                if not disk.rotational
                else "the device says it rotates: a deadline scheduler bounds read latency",
            ),
            DeviceKnob(
                f"{disk.name} read_ahead_kb",
                queue / "read_ahead_kb",
                "128",
                at_least("128"),
                "sequential scans and pg_basebackup read ahead; seed 000 advises OS read-ahead "
                "to hide cloud-disk latency (4096 for analytics)",
            ),
            DeviceKnob(
                f"{disk.name} rq_affinity",
                queue / "rq_affinity",
                "2",
                equals("2"),
                "complete I/O on the CPU that issued it (seed 000 sets 2 for ESSDs)",
            ),
        ]
    return knobs


def knobs(targets: Sequence[Path] = ()) -> list[Knob]:
    return [
        *_sysctls(),
        *_system_files(),
        *_limits(),
        *_devices(),
        *(MountNoatime(t) for t in targets),
    ]


def findings(targets: Sequence[Path] = ()) -> list[Finding]:
    """Every knob as it is now; reads only."""
    return [k.finding() for k in knobs(targets)]


# --------------------------------------------------------------------------
# Apply and restore


def saved_path() -> Path:
    return state_dir() / "audit-saved.json"


def load_saved() -> dict[str, dict[str, str]]:
    try:
        data = json.loads(saved_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(saved: dict[str, dict[str, str]]) -> None:
    write_atomically(saved_path(), json.dumps(saved, indent=1, sort_keys=True), mode=0o600)


@dataclass(frozen=True)
class Change:
    name: str
    before: str | None
    after: str | None
    ok: bool
    error: str = ""


def _by_name(items: Iterable[Knob]) -> dict[str, Knob]:
    return {k.name: k for k in items}


def apply(only: Sequence[str] = (), targets: Sequence[Path] = ()) -> list[Change]:
    """Set every differing run-time knob (or only those named) to the recommendation.

    The old values are saved before anything is written; a knob already saved
    keeps its first saved value so that ``restore`` returns to the original.
    """
    all_knobs = _by_name(knobs(targets))
    unknown = [n for n in only if n not in all_knobs]
    if unknown:
        raise UsageError(
            f"unknown audit setting {', '.join(unknown)}",
            hint="`pgrig audit` lists the names",
        )
    todo = []
    for name, knob in all_knobs.items():
        if only and name not in only:
            continue
        finding = knob.finding()
        if finding.ok is False and knob.appliable and finding.current is not None:
            todo.append((knob, finding.current))
    saved = load_saved()
    for knob, current in todo:
        saved.setdefault(knob.name, {"value": current, "path": str(getattr(knob, "path", ""))})
    if todo:
        _save(saved)
    changes = []
    for knob, current in todo:
        value = knob.target_value(current)
        try:
            knob.write(value)
        except OSError as exc:
            changes.append(Change(knob.name, current, knob.read(), False, exc.strerror or str(exc)))
            continue
        after = knob.read()
        changes.append(Change(knob.name, current, after, after is not None and knob.accept(after)))
    return changes


def restore() -> list[Change]:
    """Write back every saved value; forget those restored, keep the rest for a retry."""
    saved = load_saved()
    known = _by_name(knobs())
    changes = []
    left = {}
    for name, entry in saved.items():
        knob = known.get(name)
        if knob is None or not knob.appliable:
            left[name] = entry
            changes.append(Change(name, None, None, False, "not a run-time setting here"))
            continue
        before = knob.read()
        try:
            knob.write(entry["value"])
        except OSError as exc:
            left[name] = entry
            changes.append(Change(name, before, before, False, exc.strerror or str(exc)))
            continue
        after = knob.read()
        ok = after is not None and after.split() == entry["value"].split()
        if not ok:
            left[name] = entry
        changes.append(Change(name, before, after, ok))
    if left:
        _save(left)
    else:
        saved_path().unlink(missing_ok=True)
    return changes


def to_dicts(items: Iterable[Finding]) -> list[dict[str, object]]:
    return [asdict(f) | {"status": f.status} for f in items]
