"""Run the server and its page cache inside a memory cgroup: a larger-than-RAM study
on a machine with plenty of RAM.

The page cache a process reads into is charged to its memory cgroup; when the
cgroup reaches its limit the kernel reclaims that cgroup's own pages first. So a
server started inside a 1 GiB cgroup sees about 1 GiB of cache (shared_buffers
included: PostgreSQL's shared memory is charged too) whatever the machine has.

cgroup v2: ``memory.max``, ``memory.stat`` (anon, file, shmem), ``memory.events``;
cgroup v1: ``memory.limit_in_bytes``, ``memory.stat`` (rss, cache, shmem),
``memory.failcnt``. ``MemoryStats`` reports both the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from pgrig.errors import UsageError
from pgrig.storage import cgroups
from pgrig.storage.cgroups import Cgroup
from pgrig.storage.errors import CgroupError

MIN_BYTES = 32 * 2**20  # below this a PostgreSQL server cannot even start


@dataclass(frozen=True)
class MemoryStats:
    """One reading of a memory cgroup, v1 and v2 alike (bytes)."""

    limit_bytes: int
    usage_bytes: int
    peak_bytes: int | None  # v1 max_usage_in_bytes, v2 memory.peak (5.19+)
    cache_bytes: int  # page cache (v1 "cache", v2 "file"), shared memory included
    rss_bytes: int  # anonymous memory (v1 "rss", v2 "anon")
    shmem_bytes: int
    failcnt: int  # v1: times the limit was hit; v2: memory.events "max"
    oom_kills: int

    def describe(self) -> str:
        mib = 2**20
        return (
            f"limit {self.limit_bytes / mib:,.0f} MiB, used {self.usage_bytes / mib:,.0f} MiB "
            f"(cache {self.cache_bytes / mib:,.0f}, rss {self.rss_bytes / mib:,.0f}, shmem "
            f"{self.shmem_bytes / mib:,.0f}); limit hit {self.failcnt:,} times, "
            f"{self.oom_kills} OOM kills"
        )


@dataclass(frozen=True)
class MemoryUse:
    """A memory-limited target's cgroup over one measured run (kind "memory_cgroup"):
    how often the run pushed against the limit, and whether the kernel killed for it."""

    after: MemoryStats  # the reading at the run's end; its counters since the lab was built
    limit_hits: int  # failcnt (v1) / memory.events "max" (v2) during the run
    oom_kills: int  # during the run

    @classmethod
    def between(cls, before: MemoryStats, after: MemoryStats) -> MemoryUse:
        return cls(after, after.failcnt - before.failcnt, after.oom_kills - before.oom_kills)

    def headline(self) -> str:
        peak = f", peak {self.after.peak_bytes / 2**20:,.0f} MiB" if self.after.peak_bytes else ""
        return (
            f": limit hit {self.limit_hits:,} times, {self.oom_kills} OOM kills{peak} "
            f"of {self.after.limit_bytes / 2**20:,.0f} MiB"
        )


def parse_stat(text: str) -> dict[str, int]:
    """memory.stat / memory.events: ``key value`` lines."""
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            values[key] = int(value)
    return values


def apply(cgroup: Cgroup, limit_bytes: int) -> int:
    """Set the limit; return what the kernel holds (rounded down to whole pages)."""
    if limit_bytes < MIN_BYTES:
        raise UsageError(
            f"memory limit {limit_bytes} bytes is too small to run PostgreSQL",
            hint=f"use at least {MIN_BYTES // 2**20} MiB",
        )
    if cgroup.version("memory") == 2:
        cgroup.write("memory", "memory.max", str(limit_bytes))
        # Without swap limits a v2 group would swap instead of dropping page cache.
        if cgroup.path("memory", "memory.swap.max").exists():
            cgroup.write("memory", "memory.swap.max", "0")
        return int(cgroup.read("memory", "memory.max").strip())
    cgroup.write("memory", "memory.limit_in_bytes", str(limit_bytes))
    return int(cgroup.read("memory", "memory.limit_in_bytes").strip())


def stats(cgroup: Cgroup) -> MemoryStats:
    stat = parse_stat(cgroup.read("memory", "memory.stat"))
    if cgroup.version("memory") == 2:
        events = parse_stat(cgroup.read("memory", "memory.events"))
        peak_file = cgroup.path("memory", "memory.peak")
        limit_text = cgroup.read("memory", "memory.max").strip()
        return MemoryStats(
            limit_bytes=-1 if limit_text == "max" else int(limit_text),
            usage_bytes=int(cgroup.read("memory", "memory.current")),
            peak_bytes=int(peak_file.read_text()) if peak_file.exists() else None,
            cache_bytes=stat.get("file", 0),
            rss_bytes=stat.get("anon", 0),
            shmem_bytes=stat.get("shmem", 0),
            failcnt=events.get("max", 0),
            oom_kills=events.get("oom_kill", 0),
        )
    oom = parse_stat(cgroup.read("memory", "memory.oom_control"))
    return MemoryStats(
        limit_bytes=int(cgroup.read("memory", "memory.limit_in_bytes")),
        usage_bytes=int(cgroup.read("memory", "memory.usage_in_bytes")),
        peak_bytes=int(cgroup.read("memory", "memory.max_usage_in_bytes")),
        cache_bytes=stat.get("cache", 0),
        rss_bytes=stat.get("rss", 0),
        shmem_bytes=stat.get("shmem", 0),
        failcnt=int(cgroup.read("memory", "memory.failcnt")),
        oom_kills=oom.get("oom_kill", 0),
    )


@contextmanager
def memory_limited(limit_bytes: int, *, extra_controllers: Sequence[str] = ()) -> Iterator[Cgroup]:
    """A pgrig cgroup whose processes share ``limit_bytes`` of memory, page cache included."""
    controllers = ("memory", *extra_controllers)
    with cgroups.owned(controllers, purpose=f"memory limit {limit_bytes // 2**20} MiB") as cg:
        held = apply(cg, limit_bytes)
        page = 4096
        if not limit_bytes - page < held <= limit_bytes:
            raise CgroupError(f"the kernel holds a memory limit of {held}, not {limit_bytes}")
        yield cg
