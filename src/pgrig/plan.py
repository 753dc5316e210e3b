"""What a study will do, decided before anything runs.

A ``StudyPlan`` is built from the command line (or, later, a campaign file),
validated up front - bad values, not enough disk - and then handed to the
runner. The ``quick`` study is sized so that ``pgrig run`` with no arguments
finishes in well under ten minutes on a 2-core machine.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgrig.errors import DiskSpaceError, UsageError

MB = 2**20
GB = 2**30
# pgbench_accounts + indexes take about 15 MB per scale unit at fillfactor 100;
# 16 MB leaves room for the other tables and the free space map.
BYTES_PER_SCALE = 16 * MB
CLUSTER_BASE_BYTES = 64 * MB


@dataclass(frozen=True)
class FioPlan:
    patterns: tuple[str, ...] = ("randwrite", "randread", "write", "read")
    numjobs: int = 1
    iodepth: int = 8
    size: str = "256M"
    runtime_s: int = 10
    direct: bool = True
    ioengine: str = "libaio"


@dataclass(frozen=True)
class TpcbPlan:
    scale: int = 10
    clients: tuple[int, ...] = (1, 2, 4, 8)
    threads: int | None = None  # None: min(clients, CPUs), as the seeds match -j to -c
    duration_s: int = 30
    modes: tuple[str, ...] = ("select-only", "read-write")
    query_mode: str = "prepared"
    repeat: int = 1
    generate: str = "client"
    partitions: int = 0
    unlogged: bool = False
    tablespace: str | None = None
    index_tablespace: str | None = None
    count: bool = True  # time count(*) by index-only scan and by seq scan


@dataclass(frozen=True)
class StudyPlan:
    name: str = "quick"
    target: Path = field(default_factory=Path.cwd)
    profile: str = "oltp"
    overrides: dict[str, str] = field(default_factory=dict)
    pg_bin: str | None = None
    dsn: str | None = None  # an existing server: no initdb, no restart
    yes: bool = False  # allow destructive steps on an existing server
    keep: bool = False
    os_user: str | None = None
    encoding: str = "UTF8"
    locale: str = "C"
    wal_segsize_mb: int | None = None
    timing_s: int = 3
    fsync_s: int = 2
    probes: tuple[str, ...] = ("timing", "fsync", "fio")
    fio: FioPlan = field(default_factory=FioPlan)
    tpcb: TpcbPlan | None = field(default_factory=TpcbPlan)

    def threads_for(self, clients: int) -> int:
        assert self.tpcb is not None
        if self.tpcb.threads is not None:
            return min(self.tpcb.threads, clients)
        return max(1, min(clients, os.cpu_count() or 1))

    def estimated_seconds(self) -> float:
        """A rough wall-clock estimate, shown before the study starts."""
        total = 0.0
        if "timing" in self.probes:
            total += self.timing_s
        if "fsync" in self.probes:
            total += 16 * self.fsync_s  # pg_test_fsync runs 16 timed tests
        if "fio" in self.probes:
            total += len(self.fio.patterns) * (self.fio.runtime_s + 3)
        if self.tpcb:
            total += 10 + self.tpcb.scale * 1.5  # initdb/start + load
            runs = len(self.tpcb.modes) * len(self.tpcb.clients) * self.tpcb.repeat
            total += runs * (self.tpcb.duration_s + 2)
        return total

    def data_bytes(self) -> int:
        """Disk the cluster will need at its peak during the load."""
        if self.tpcb is None:
            return CLUSTER_BASE_BYTES
        data = self.tpcb.scale * BYTES_PER_SCALE
        wal = 0 if self.tpcb.unlogged else min(data, 4 * GB) + 64 * MB
        return CLUSTER_BASE_BYTES + data + wal


QUICK = StudyPlan()


def parse_size(text: str) -> int:
    units = {"": 1, "k": 2**10, "m": MB, "g": GB, "t": 2**40}
    value = text.strip().lower().removesuffix("b").removesuffix("i")
    unit = value[-1] if value and value[-1] in units else ""
    number = value[:-1] if unit else value
    try:
        return int(float(number) * units[unit])
    except ValueError as exc:
        raise UsageError(f"cannot read size {text!r}", hint="use e.g. 256M, 1G, 16G") from exc


def validate(plan: StudyPlan) -> StudyPlan:
    """Reject impossible values before anything is created."""
    tp = plan.tpcb
    if tp is not None:
        if tp.scale < 1:
            raise UsageError(f"--scale {tp.scale}: must be at least 1")
        if not tp.clients or any(c < 1 for c in tp.clients):
            raise UsageError(f"--clients {tp.clients}: every client count must be at least 1")
        if tp.duration_s < 1:
            raise UsageError(f"--duration {tp.duration_s}: must be at least 1 second")
        if tp.threads is not None and tp.threads < 1:
            raise UsageError(f"--threads {tp.threads}: must be at least 1")
        if tp.threads is not None and tp.threads > max(tp.clients):
            raise UsageError(
                f"--threads {tp.threads} is greater than the largest client count "
                f"{max(tp.clients)}",
                hint="pgbench needs at least one client per thread",
            )
        if tp.generate not in ("client", "server"):
            raise UsageError(f"--generate {tp.generate!r}: must be client or server")
        for mode in tp.modes:
            if mode not in ("select-only", "read-write"):
                raise UsageError(f"mode {mode!r}: must be select-only or read-write")
        if tp.repeat < 1:
            raise UsageError(f"--repeat {tp.repeat}: must be at least 1")
    for pattern in plan.fio.patterns:
        if pattern not in ("randwrite", "randread", "write", "read"):
            raise UsageError(f"fio pattern {pattern!r}: must be randwrite, randread, write or read")
    parse_size(plan.fio.size)
    if plan.wal_segsize_mb is not None and (
        plan.wal_segsize_mb < 1
        or plan.wal_segsize_mb > 1024
        or plan.wal_segsize_mb & (plan.wal_segsize_mb - 1)
    ):
        raise UsageError(
            f"--wal-segsize {plan.wal_segsize_mb}: must be a power of 2 between 1 and 1024 (MB)"
        )
    return plan


def check_space(directory: Path, need: int, what: str) -> None:
    """Refuse up front what cannot finish for lack of disk."""
    free = shutil.disk_usage(directory).free
    if free < need:
        raise DiskSpaceError(
            f"not enough free disk in {directory} for {what}: needs about "
            f"{need / GB:.1f} GiB, {free / GB:.1f} GiB free",
            hint="lower --scale (about 16 MB per scale unit plus WAL), or free some space, "
            "or pick another --target",
        )


def with_overrides(plan: StudyPlan, **changes: object) -> StudyPlan:
    return replace(plan, **changes)  # type: ignore[arg-type]
