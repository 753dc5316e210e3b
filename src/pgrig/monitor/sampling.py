"""How the monitor reads the server's host, one strategy per kind of host
(``pgrig.monitor.watched.HostSampling``): ``ProcessesHere`` for this machine,
where the CPU and bytes are told apart by process (its ``ProcessMeter`` and the
interference ledger in it, built by this strategy alone), and ``WholeHost`` for
a host read through its executor as a whole (nothing of this machine's built).
The target kind chooses one where it chooses the host's executor
(``Context.sampling`` beside ``Context.host``); the sampler
(``pgrig.monitor.watch.Watch``) never asks which. What both do - read /proc's
counters, turn two looks into rates - is ``ProcSampling``'s.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from pgrig import environment
from pgrig.errors import PgrigError
from pgrig.monitor import interference, procfs
from pgrig.monitor.meter import ProcCpu, ProcessMeter
from pgrig.monitor.model import CpuSample, DeviceSample, IoSample, OtherProcess
from pgrig.monitor.watched import Counters, HostSample

if TYPE_CHECKING:
    from pgrig.monitor.watched import Watched

MIB = 1024 * 1024
HOST_FILES = ("stat", "diskstats", "meminfo", "net/dev")


class ProcSampling:
    """What both strategies do: the host's /proc counters read (``_text``, the
    strategy's) and two looks turned into rates, the CPU told apart by process
    where the strategy can (``_attribute``)."""

    def __init__(self, ctx: Watched, notes: list[str]) -> None:
        self.notes = notes

    def read(self) -> Counters:
        stat, disks, memory, net = (self._text(f"/proc/{name}") for name in HOST_FILES)
        return Counters(
            at=time.monotonic(),
            stat=procfs.parse_stat(stat),
            disks=procfs.parse_diskstats(disks),
            memory=procfs.parse_meminfo(memory),
            net=procfs.parse_net_dev(net),
        )

    def sample(
        self, prev: Counters, cur: Counters, seconds: float, devices: tuple[str, ...]
    ) -> HostSample:
        base = procfs.cpu_rates(prev.stat, cur.stat, seconds)
        disks = tuple(
            procfs.disk_rates(name, prev.disks[name], cur.disks[name], seconds)
            for name in devices
            if name in cur.disks and name in prev.disks
        )
        memory = procfs.memory_sample(cur.memory)
        net = procfs.net_rates(prev.net, cur.net, seconds)
        cpu, pc = self._attribute(base, cur.stat, seconds)
        return HostSample(
            cpu=cpu,
            devices=disks,
            memory=memory,
            net=net,
            io=_io_sample(pc, disks, seconds, server=self.sees_server),
            clients_alive=pc.alive,
        )

    def others(self, ncpu: int) -> tuple[OtherProcess, ...]:
        return ()

    @property
    def client_start(self) -> float | None:
        return None

    @property
    def sees_server(self) -> bool:
        """Whether the server's processes' bytes are known."""
        return False

    def _text(self, path: str) -> str:
        raise NotImplementedError

    def _attribute(
        self, base: CpuSample, stat: procfs.Stat, seconds: float
    ) -> tuple[CpuSample, ProcCpu]:
        return base, ProcCpu(alive=0)


class ProcessesHere(ProcSampling):
    """Sampling the server's host when it is this machine: /proc read here, and
    the CPU and bytes told apart by process (the server's, pgbench's, pgrig's,
    the kernel's, the others': the interference rules read them)."""

    def __init__(self, ctx: Watched, notes: list[str]) -> None:
        super().__init__(ctx, notes)
        self.ctx = ctx
        self.meter = ProcessMeter(lambda: ctx.server_pid)

    def devices(self) -> tuple[str, ...]:
        fs = environment.describe_filesystem(self.ctx.target)
        if fs is None or fs.block_device is None:
            where = f"{fs.fstype} on {fs.device}" if fs else "unknown"
            self.notes.append(
                f"no block device behind {self.ctx.target} ({where}): device I/O not sampled"
            )
            return ()
        return tuple(procfs.slaves(fs.block_device))

    def first(self, started_at: float, interval: float) -> Counters:
        self.meter.started_at = started_at
        if self.ctx.conn is not None and self.ctx.server_pid is None:  # no server: said so
            self.notes.append(
                "the server does not run on this machine (or its PID is unknown): "
                "its CPU share is not sampled"
            )
        counters = self.read()
        self.meter.measure(interval)
        self.meter.primed = True  # threads seen from now on are new
        return counters

    @property
    def sees_server(self) -> bool:
        return self.ctx.server_pid is not None  # the postmaster is here, by PID

    def others(self, ncpu: int) -> tuple[OtherProcess, ...]:
        return self.meter.ledger.top(ncpu)

    @property
    def client_start(self) -> float | None:
        return self.meter.client_start

    def _text(self, path: str) -> str:
        return procfs.read_text(path) or ""

    def _attribute(
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


class WholeHost(ProcSampling):
    """Sampling the server's host through its executor (``Context.host``): its
    CPUs, disks (``Context.host_devices``), memory and network as a whole; whose
    processes used them is not attributed (``CpuSample.other`` None: the
    interference rules do not apply), so nothing of this machine's is built."""

    def __init__(self, ctx: Watched, notes: list[str]) -> None:
        super().__init__(ctx, notes)
        self.host = ctx.host
        self._devices = ctx.host_devices

    def devices(self) -> tuple[str, ...]:
        self.notes.append(
            f"host figures (CPU, disks, memory, network) are the server's host "
            f"{self.host.name}'s, read over SSH; its processes are not told apart "
            "(server, pgbench and others share the busy CPU)"
        )
        return self._devices

    def first(self, started_at: float, interval: float) -> Counters:
        return self.read()

    def _text(self, path: str) -> str:
        try:
            return self.host.read_text(path)
        except PgrigError as exc:
            self.notes.append(f"{path} on {self.host.name} not read: {exc}")
            return ""


def _io_sample(
    pc: ProcCpu, devices: tuple[DeviceSample, ...], seconds: float, *, server: bool
) -> IoSample:
    """One second's bytes: the device's, and the server's, pgbench's and pgrig's own."""

    def mib(group: str, i: int) -> float | None:
        value = pc.io.get(group)
        return None if value is None else value[i] / MIB / seconds

    device = devices[0] if devices else None
    return IoSample(
        device=device.name if device else None,
        device_read_mib_s=device.read_mib_s if device else 0.0,
        device_write_mib_s=device.write_mib_s if device else 0.0,
        server_read_mib_s=mib("server", 0) if server else None,
        server_write_mib_s=mib("server", 1) if server else None,
        client_read_mib_s=mib("client", 0) or 0.0,
        client_write_mib_s=mib("client", 1) or 0.0,
        pgrig_read_mib_s=mib("pgrig", 0) or 0.0,
        pgrig_write_mib_s=mib("pgrig", 1) or 0.0,
    ).capped()


def _share(wait: float | None, run: float | None) -> float | None:
    if wait is None or run is None or wait + run <= 0:
        return None
    return 100.0 * wait / (wait + run)
