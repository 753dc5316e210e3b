"""What a host has: the facts ``pgrig hosts check`` reports, read through its executor."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgrig.errors import ToolError
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
    return cpus(ex), _memory(ex.read_text("/proc/meminfo"))


def cpus(ex: Executor) -> int:
    """The host's logical CPUs (``/proc/cpuinfo`` read there)."""
    return _cpus(ex.read_text("/proc/cpuinfo"))


def _cpus(cpuinfo: str) -> int:
    return len(re.findall(r"^processor\s*:", cpuinfo, re.M))


def _memory(meminfo: str) -> int:
    mem_kib = int(re.search(r"^MemTotal:\s+(\d+)", meminfo, re.M).group(1))  # type: ignore[union-attr]
    return mem_kib * 1024


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


# Run on the host: argv[1] is the JSON request. Reads only (the programs asked for
# their version change nothing); prints one JSON line.
_SURVEY = r"""
import json, os, subprocess, sys
req = json.loads(sys.argv[1])
def text(path):
    with open(path, errors="replace") as f:
        return f.read()
def version(path):
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=30, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
st = os.statvfs(req["directory"])
print(json.dumps({
    "present": [p for p in req["programs"] if os.path.exists(p)],
    "versions": {p: version(p) for p in req["versions"] if os.path.exists(p)},
    "cpuinfo": text("/proc/cpuinfo"), "meminfo": text("/proc/meminfo"),
    "free": st.f_bavail * st.f_frsize,
}))
"""


@dataclass(frozen=True)
class Survey:
    """What a target's check asks of one host, read there by one command (over
    SSH each command costs tens of milliseconds, a file read as much)."""

    host: str
    python: bool  # python3 runs there; False: only ``present`` was read (no python)
    present: frozenset[str]  # of the programs asked about, the paths that are there
    versions: Mapping[str, str]  # a program present -> what its ``--version`` printed
    cpus: int = 0
    memory: int = 0  # bytes
    free: int = 0  # bytes an unprivileged writer may still use in ``directory``

    def load_host(self, pgbench: str) -> LoadHostFacts:
        """The host as a load host: its CPUs and its pgbench (at ``pgbench``)."""
        return LoadHostFacts(self.host, self.cpus, self.versions[pgbench].strip())


def survey(
    ex: Executor, programs: Sequence[str], versions: Sequence[str], directory: str
) -> Survey:
    """Which of ``programs`` (paths) the host has, what those of ``versions``
    say of themselves, its CPUs and memory, and the free space in ``directory``:
    one command. A host without python3 is asked only which programs it has."""
    request = {"programs": list(programs), "versions": list(versions), "directory": directory}
    argv = ["python3", "-c", _SURVEY, json.dumps(request)]
    done = ex.run(argv, timeout=90, check=False, what="python3")
    if not done.ok:
        if ex.run(["python3", "-c", "pass"], timeout=60, check=False, what="python3").ok:
            raise ToolError(
                f"python3 failed on {ex.name}", argv=argv, returncode=done.returncode,
                stderr=done.stderr,
            )  # fmt: skip
        # no python3 (sudo says so with exit 1, a shell with 127): the check says
        # so, with whatever else the host lacks
        present = frozenset(p for p in programs if ex.exists(p))
        return Survey(ex.name, False, present, {})
    got = json.loads(done.stdout)
    said = {p: v for p, v in got["versions"].items() if v is not None}
    for path in set(got["versions"]) - set(said):  # present, but its --version failed
        said[path] = ex.run([path, "--version"], timeout=30).stdout  # raises what it said
    return Survey(
        ex.name, True, frozenset(got["present"]), said,
        _cpus(got["cpuinfo"]), _memory(got["meminfo"]), int(got["free"]),
    )  # fmt: skip


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
