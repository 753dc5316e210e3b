"""What a host has: the facts ``pgrig hosts check`` reports, read through its executor."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pgrig.hosts.executor import Executor
from pgrig.hosts.preflight import Access

PG_LIB = "/usr/lib/postgresql"  # Debian's and Ubuntu's layout, one directory per major
SCRATCH = "/var/tmp"


@dataclass(frozen=True)
class HostFacts:
    host: str
    user: str
    sudo: bool
    postgres_majors: tuple[str, ...]  # server binaries found, oldest first
    pgbench: str | None  # its --version, None: not found
    fio: str | None
    python: str | None
    cpus: int
    memory_gib: float
    scratch_free_gib: float  # free in /var/tmp, where pgrig works on a host

    def missing(self) -> list[str]:
        out = []
        if not self.postgres_majors:
            out.append("PostgreSQL")
        for tool in ("pgbench", "fio", "python"):
            if getattr(self, tool) is None:
                out.append(tool)
        return out


def _version(ex: Executor, argv: list[str]) -> str | None:
    done = ex.run(argv, timeout=30, check=False, what=argv[0])
    if done.returncode != 0:
        return None
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0] if text else ""


def _majors(ex: Executor) -> list[str]:
    if not ex.exists(PG_LIB):
        return []
    found = [m for m in ex.listdir(PG_LIB) if ex.exists(f"{PG_LIB}/{m}/bin/postgres")]
    return sorted(found, key=lambda m: [int(p) for p in re.findall(r"\d+", m)] or [0])


def size(ex: Executor) -> tuple[int, int]:
    """The host's logical CPUs and memory in bytes: what a profile is sized to."""
    meminfo = ex.read_text("/proc/meminfo")
    mem_kib = int(re.search(r"^MemTotal:\s+(\d+)", meminfo, re.M).group(1))  # type: ignore[union-attr]
    return cpus(ex), mem_kib * 1024


def cpus(ex: Executor) -> int:
    """The host's logical CPUs (``/proc/cpuinfo`` read there)."""
    return len(re.findall(r"^processor\s*:", ex.read_text("/proc/cpuinfo"), re.M))


def major(version: str) -> str | None:
    """``15`` of "pgbench (PostgreSQL) 15.18", ``9.6`` of "9.6.24": a major's name."""
    m = re.search(r"(\d+)\.(\d+)", version)
    if m is None:
        return None
    return m.group(1) if int(m.group(1)) >= 10 else f"{m.group(1)}.{m.group(2)}"


@dataclass(frozen=True)
class LoadHostFacts:
    """What a load host brings to a measured run, read on it once per study: its
    logical CPUs (its pgbench's ``-j``) and its pgbench."""

    host: str
    cpus: int
    pgbench: str  # its ``--version`` line

    @property
    def major(self) -> str | None:
        return major(self.pgbench)


def load_host(ex: Executor, bin_dir: str) -> LoadHostFacts:
    """A load host's CPUs and the version of the pgbench in ``bin_dir`` there."""
    line = ex.run([f"{bin_dir}/pgbench", "--version"], timeout=30, what="pgbench").stdout
    return LoadHostFacts(ex.name, cpus(ex), line.strip())


def gather(ex: Executor, access: Access) -> HostFacts:
    majors = _majors(ex)
    pgbench = None
    for major in reversed(majors):  # the newest major's pgbench, else one on PATH
        pgbench = _version(ex, [f"{PG_LIB}/{major}/bin/pgbench", "--version"])
        if pgbench:
            break
    pgbench = pgbench or _version(ex, ["pgbench", "--version"])
    cpus, memory = size(ex)
    return HostFacts(
        host=ex.name,
        user=access.user,
        sudo=access.sudo,
        postgres_majors=tuple(majors),
        pgbench=pgbench,
        fio=_version(ex, ["fio", "--version"]),
        python=_version(ex, ["python3", "--version"]),
        cpus=cpus,
        memory_gib=memory / 2**30,
        scratch_free_gib=ex.free_bytes(SCRATCH) / 2**30,
    )
