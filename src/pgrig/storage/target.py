"""One entry point for a campaign target built by the lab: filesystem, I/O cap,
memory limit, or any combination.

    spec = LabSpec.from_mapping({"fs": "xfs", "size": "8G", "mount": "noatime",
                                 "essd": "PL1", "essd_gib": 100, "memory": "2G"})
    with lab_target(Path("/var/tmp"), spec) as t:
        cluster = Cluster.create(bins, t.directory / "work", ...)
        cluster.start(preexec=t.preexec)
        fio.run(job_in(t.directory), preexec=t.preexec)
        t.describe(); t.memory_stats()

Keys of the mapping (a campaign table): ``fs`` (xfs|ext4), ``size``, ``mkfs``,
``mount``, ``external_log``, ``direct_io``; ``essd`` (PL0..PL3) with
``essd_gib``, or ``iops``/``mbps`` and ``read_iops``/``write_iops``/
``read_mbps``/``write_mbps``; ``memory`` (e.g. "2G").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgrig.errors import UsageError
from pgrig.storage import cgroups, memcg, throttle
from pgrig.storage.cgroups import Cgroup
from pgrig.storage.errors import CgroupError
from pgrig.storage.fsinfo import FilesystemInfo
from pgrig.storage.loopfs import FsSpec, loop_filesystem
from pgrig.storage.memcg import MemoryStats
from pgrig.storage.throttle import IoLimits
from pgrig.units import parse_size

FS_KEYS = ("fs", "size", "mkfs", "mount", "external_log", "direct_io", "owner")
IO_KEYS = ("essd", "essd_gib", "iops", "mbps", "read_iops", "write_iops", "read_mbps", "write_mbps")
KEYS = (*FS_KEYS, *IO_KEYS, "memory")


@dataclass(frozen=True)
class LabSpec:
    fs: FsSpec | None = None
    io: IoLimits | None = None
    memory_bytes: int | None = None

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, where: str = "target") -> LabSpec:
        unknown = sorted(set(table) - set(KEYS))
        if unknown:
            raise UsageError(
                f"{where}: unknown storage-lab key(s) {', '.join(unknown)}",
                hint=f"known keys: {', '.join(KEYS)}",
            )
        fs = None
        if "fs" in table:
            if "size" not in table:
                raise UsageError(f'{where}: fs = {table["fs"]!r} needs size (e.g. size = "8G")')
            fs = FsSpec.parse(
                str(table["fs"]),
                table["size"],
                mkfs=str(table.get("mkfs", "")),
                mount=str(table.get("mount", "")),
                external_log=table.get("external_log"),
                direct_io=bool(table.get("direct_io", True)),
                owner=table.get("owner", "postgres"),
            )
        elif set(table) & set(FS_KEYS):
            raise UsageError(f'{where}: filesystem options without fs = "xfs" or "ext4"')
        io = None
        if "essd" in table:
            if "essd_gib" not in table:
                raise UsageError(f"{where}: essd = {table['essd']!r} needs essd_gib (disk size)")
            io = throttle.essd(str(table["essd"]), int(table["essd_gib"]))
        elif set(table) & set(IO_KEYS):
            io = IoLimits.generic(
                **{k: table[k] for k in IO_KEYS if k in table and k not in ("essd", "essd_gib")}
            )
        memory = table.get("memory")
        memory_bytes = None if memory is None else parse_size(str(memory))
        return cls(fs, io, memory_bytes)

    def describe(self) -> str:
        parts = []
        if self.fs:
            parts.append(self.fs.describe())
        if self.io:
            parts.append(self.io.describe())
        if self.memory_bytes:
            parts.append(f"memory limit {self.memory_bytes / 2**20:,.0f} MiB")
        return "; ".join(parts) or "plain directory"


@dataclass(frozen=True)
class LabTarget:
    """A built target: where to put the cluster and how to start processes in it."""

    directory: Path
    spec: LabSpec
    filesystem: FilesystemInfo | None
    device: str | None  # major:minor the I/O cap applies to
    cgroup: Cgroup | None

    @property
    def preexec(self) -> Callable[[], None] | None:
        """For ``Cluster.start``, ``tools.fio.run``, ``tools.pg_test_fsync.run``."""
        return self.cgroup.preexec() if self.cgroup is not None else None

    def memory_stats(self) -> MemoryStats | None:
        if self.cgroup is None or self.spec.memory_bytes is None:
            return None
        return memcg.stats(self.cgroup)

    def describe(self) -> str:
        text = self.filesystem.describe() if self.filesystem else str(self.directory)
        extra = [x.describe() for x in (self.spec.io,) if x]
        if self.spec.memory_bytes:
            extra.append(f"memory limit {self.spec.memory_bytes / 2**20:,.0f} MiB")
        return "; ".join([text, *extra])


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


@contextmanager
def lab_target(base: Path, spec: LabSpec) -> Iterator[LabTarget]:
    """Build what ``spec`` asks for under ``base`` (a directory on the disk to use);
    undo it all on the way out."""
    with contextlib.ExitStack() as stack:
        info = stack.enter_context(loop_filesystem(base, spec.fs)) if spec.fs else None
        directory = Path(info.data_dir) if info else base
        device = None
        if spec.io is not None:
            device = info.major_minor if info else throttle.device_of(base)
        cgroup = None
        if spec.io is not None or spec.memory_bytes is not None:
            cgroup = stack.enter_context(
                limited(io=spec.io, device=device, memory_bytes=spec.memory_bytes)
            )
        yield LabTarget(directory, spec, info, device, cgroup)
