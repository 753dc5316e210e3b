"""How the monitor reads the server's host, one strategy per kind of host
(``pgrig.monitor.watched.HostSampling``): ``ProcessesHere`` for this machine,
where the CPU and bytes are told apart by process (``ProcessMeter``), and
``WholeHost`` for a host read through its executor as a whole. The target kind
chooses one where it chooses the host's executor (``Context.sampling`` beside
``Context.host``); the sampler (``pgrig.monitor.watch.Watch``) never asks which.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pgrig import environment
from pgrig.errors import PgrigError
from pgrig.monitor import interference, procfs
from pgrig.monitor.meter import ProcCpu, ProcessMeter
from pgrig.monitor.model import CpuSample

if TYPE_CHECKING:
    from pgrig.monitor.watched import Watched


class ProcessesHere:
    """Sampling the server's host when it is this machine: /proc read here, and
    the CPU and bytes told apart by process (the server's, pgbench's, pgrig's,
    the kernel's, the others': the interference rules read them)."""

    def __init__(self, ctx: Watched, meter: ProcessMeter, notes: list[str]) -> None:
        self.ctx = ctx
        self.meter = meter

    def read(self, path: str) -> str:
        return procfs.read_text(path) or ""

    def prime(self, interval: float) -> None:
        self.meter.measure(interval)

    @property
    def sees_server(self) -> bool:
        return self.ctx.server_pid is not None  # the postmaster is here, by PID

    def attribute(
        self, base: CpuSample, stat: procfs.Stat, seconds: float
    ) -> tuple[CpuSample, ProcCpu]:
        pc = self.meter.measure(seconds)
        machine_ns = seconds * 1e9 * stat.ncpu
        machine_ticks = seconds * procfs.CLK_TCK * stat.ncpu
        server = None if pc.server_run is None else 100.0 * pc.server_run / machine_ns
        client = 100.0 * pc.client_run / machine_ns
        pgrig = 100.0 * pc.pgrig_ticks / machine_ticks
        kernel = 100.0 * pc.kernel_ticks / machine_ticks
        cpu = replace(
            base,
            server=server,
            client=client,
            pgrig=pgrig,
            kernel=kernel,
            other=interference.other_cpu(
                base.busy, base.steal, base.irq, kernel, [server, client, pgrig]
            ),
            server_runq_pct=_share(pc.server_wait, pc.server_run),
            client_thread_core_pct=pc.thread_core,
            client_thread_demand_pct=pc.thread_demand,
        )
        return cpu, pc

    def devices(self, notes: list[str]) -> tuple[str, ...]:
        fs = environment.describe_filesystem(self.ctx.target)
        if fs is None or fs.block_device is None:
            where = f"{fs.fstype} on {fs.device}" if fs else "unknown"
            notes.append(
                f"no block device behind {self.ctx.target} ({where}): device I/O not sampled"
            )
            return ()
        return tuple(procfs.slaves(fs.block_device))

    def unseen(self) -> str | None:
        if self.ctx.server_pid is None:
            return (
                "the server does not run on this machine (or its PID is unknown): "
                "its CPU share is not sampled"
            )
        return None


class WholeHost:
    """Sampling the server's host through its executor (``Context.host``): its
    CPUs, disks (``Context.host_devices``), memory and network as a whole; whose
    processes used them is not attributed (``CpuSample.other`` None: the
    interference rules do not apply)."""

    def __init__(self, ctx: Watched, meter: ProcessMeter, notes: list[str]) -> None:
        self.host = ctx.host
        self.notes = notes
        self._devices = ctx.host_devices

    def read(self, path: str) -> str:
        try:
            return self.host.read_text(path)
        except PgrigError as exc:
            self.notes.append(f"{path} on {self.host.name} not read: {exc}")
            return ""

    def prime(self, interval: float) -> None:
        return None

    sees_server = False

    def attribute(
        self, base: CpuSample, stat: procfs.Stat, seconds: float
    ) -> tuple[CpuSample, ProcCpu]:
        return base, ProcCpu(alive=0)

    def devices(self, notes: list[str]) -> tuple[str, ...]:
        notes.append(
            f"host figures (CPU, disks, memory, network) are the server's host "
            f"{self.host.name}'s, read over SSH; its processes are not told apart "
            "(server, pgbench and others share the busy CPU)"
        )
        return self._devices

    def unseen(self) -> str | None:
        return None


def _share(wait: float | None, run: float | None) -> float | None:
    if wait is None or run is None or wait + run <= 0:
        return None
    return 100.0 * wait / (wait + run)
