"""What the monitor reads of a measured step's ``pgrig.step.Context``.

The monitor sits below the steps it watches: it names only these fields, which
``Context`` fills as it is (a Protocol, read-only), and never the step, its
cluster or its actions. Beside them, what the sampler asks of the server's host
(``HostSampling``, its strategies in ``pgrig.monitor.sampling``) and the records
it gets back (``Counters``, ``HostSample``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: nothing here runs
    from pgrig.conninfo import Conn
    from pgrig.hosts.executor import Executor
    from pgrig.monitor import procfs
    from pgrig.monitor.model import CpuSample, DeviceSample, IoSample, MemorySample, OtherProcess
    from pgrig.monitor.verdict import Finding


class Watched(Protocol):
    @property
    def target(self) -> Path:
        """The directory on the storage under test (its device is sampled)."""
        ...

    @property
    def conn(self) -> Conn | None:
        """The server, once it is up; None: no server statistics."""
        ...

    @property
    def server_pid(self) -> int | None:
        """The postmaster when it runs on this machine."""
        ...

    @property
    def host(self) -> Executor:
        """The server's host (this machine's executor, or another's)."""
        ...

    @property
    def sampling(self) -> type[HostSampling]:
        """How the monitor reads that host, chosen with its executor."""
        ...

    @property
    def host_devices(self) -> tuple[str, ...]:
        """The block devices under the data directory on that host."""
        ...

    @property
    def load_finding(self) -> Finding | None:
        """What the run's load hosts say for the verdict (client-bound)."""
        ...

    @property
    def load_imbalance(self) -> str | None:
        """A load host held back against the others, in a sentence; None: none."""
        ...

    @property
    def client_started(self) -> float | None:
        """When a pgbench running elsewhere started (epoch seconds); None: here."""
        ...


@dataclass(frozen=True)
class Counters:
    """The host's /proc counters read at one moment (``at``: monotonic seconds):
    a sample is the rates between two of them."""

    at: float
    stat: procfs.Stat
    disks: dict[str, procfs.DiskCounters]
    memory: dict[str, int]
    net: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class HostSample:
    """One interval of the server's host, as its strategy read it."""

    cpu: CpuSample
    devices: tuple[DeviceSample, ...]
    memory: MemorySample
    net: tuple[float, float]  # MiB/s received, sent
    io: IoSample
    clients_alive: int  # pgbench processes alive at its end (known on this machine only)


class HostSampling(Protocol):
    """How the one sampler (``Watch``) reads the server's host, one strategy per
    kind of host, chosen by the target kind where it chooses the host's executor
    (``Context.sampling`` beside ``Context.host``): the sampler never asks which,
    and what only one kind of host needs (this machine's process meter and
    interference ledger) is that strategy's own."""

    def __init__(self, ctx: Watched, notes: list[str]) -> None: ...

    def devices(self) -> tuple[str, ...]:
        """The block devices behind the target (their I/O is sampled)."""
        ...

    def first(self, started_at: float, interval: float) -> Counters:
        """The first look, at the watch's start (``started_at``, epoch seconds):
        the host's counters and, where they are told apart, its processes' (the
        first sample's deltas); what cannot be sampled said in a note."""
        ...

    def read(self) -> Counters:
        """The host's counters now; a file that could not be read counts as
        empty (said in a note)."""
        ...

    def sample(
        self, prev: Counters, cur: Counters, seconds: float, devices: tuple[str, ...]
    ) -> HostSample:
        """The interval between two looks: the host's rates, and its CPU and
        bytes by process where they are known."""
        ...

    def others(self, ncpu: int) -> tuple[OtherProcess, ...]:
        """The other processes that ran while it watched, busiest first (none
        where processes are not told apart)."""
        ...

    @property
    def client_start(self) -> float | None:
        """When the first pgbench it saw started (epoch seconds); None: none seen."""
        ...
