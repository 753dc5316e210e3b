"""Fewer CPUs for a target: the server and its clients pinned to the first N CPUs
with a cpuset cgroup (seed 000 compared 26 and 52 cores; here 1 against 2).

A cpuset, not a CPU quota: a quota of one CPU lets the server's processes run on
both cores in turn, each for part of a period, which keeps two cores' caches and
parallel wake-ups; a machine with one core has neither. The clients (pgbench)
get a cgroup of their own on the same CPUs, since on the seed's machine they ran
on the same cores, and must not share the server's memory limit or I/O cap.

cgroup v2: ``cpuset.cpus`` (``cpuset.mems`` inherited); v1: both must be set
before a process may join.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from pgrig.errors import UsageError
from pgrig.storage import cgroups
from pgrig.storage.cgroups import Cgroup


def available() -> list[int]:
    """The CPUs pgrig itself may run on (what a cpuset can be carved from)."""
    return sorted(os.sched_getaffinity(0))


def cpu_list(cpus: int) -> str:
    """The first ``cpus`` CPUs pgrig may use, as the kernel writes a list ("0-1", "0")."""
    have = available()
    if not 0 < cpus <= len(have):
        raise UsageError(
            f"cpus = {cpus}: this machine gives pgrig {len(have)} CPU(s)",
            hint=f"cpus = 1 to {len(have)}",
        )
    chosen = have[:cpus]
    return ",".join(str(c) for c in chosen)


def apply(cgroup: Cgroup, cpus: int) -> str:
    """Pin the group to the first ``cpus`` CPUs; return the list the kernel holds."""
    wanted = cpu_list(cpus)
    if cgroup.version("cpuset") == 1:
        # v1 refuses a task in a cpuset without memory nodes: the parent's.
        parent = cgroup.path("cpuset", "cpuset.mems").parent.parent / "cpuset.mems"
        cgroup.write("cpuset", "cpuset.mems", parent.read_text().strip())
    cgroup.write("cpuset", "cpuset.cpus", wanted)
    return cgroup.read("cpuset", "cpuset.cpus").strip()


@contextmanager
def pinned(cpus: int, *, purpose: str) -> Iterator[Cgroup]:
    """A pgrig cgroup with only a cpuset: the clients' (see the module's docstring)."""
    with cgroups.owned(("cpuset",), purpose=f"{purpose}: {cpus} CPU(s)") as cg:
        apply(cg, cpus)
        yield cg
