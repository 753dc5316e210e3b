"""What the monitor reads of a measured step's ``pgrig.step.Context``.

The monitor sits below the steps it watches: it names only these fields, which
``Context`` fills as it is (a Protocol, read-only), and never the step, its
cluster or its actions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: nothing here runs
    from pgrig.conninfo import Conn
    from pgrig.hosts.executor import Executor
    from pgrig.monitor import procfs
    from pgrig.monitor.meter import ProcCpu, ProcessMeter
    from pgrig.monitor.model import CpuSample
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


class HostSampling(Protocol):
    """How the one sampler (``Watch``) reads the server's host, one strategy per
    kind of host, chosen by the target kind where it chooses the host's executor
    (``Context.sampling`` beside ``Context.host``): the sampler never asks which."""

    def __init__(self, ctx: Watched, meter: ProcessMeter, notes: list[str]) -> None: ...

    def read(self, path: str) -> str:
        """A /proc file of the host; "" if it could not be read (said in a note)."""
        ...

    def prime(self, interval: float) -> None:
        """The processes' counters at the start: the first sample's deltas."""
        ...

    @property
    def sees_server(self) -> bool:
        """Whether the server's processes' bytes are known."""
        ...

    def attribute(
        self, base: CpuSample, stat: procfs.Stat, seconds: float
    ) -> tuple[CpuSample, ProcCpu]:
        """The host's CPU shares by process where they are known, and what the processes did."""
        ...

    def devices(self, notes: list[str]) -> tuple[str, ...]:
        """The block devices behind the target (their I/O is sampled)."""
        ...

    def unseen(self) -> str | None:
        """What cannot be sampled, said once."""
        ...
