"""What a campaign will do and what it needs, decided before anything runs.

``expand`` lists every run a campaign expands to with a time estimate;
``disk_needs`` says how much disk each target needs; ``check_space``
refuses what cannot fit. ``quick`` is the campaign ``pgrig run`` runs with no
file: sized to finish in well under ten minutes on a 2-core machine.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pgrig.campaign import (
    Campaign,
    CustomSpec,
    DurabilitySpec,
    InitdbSpec,
    ProbeSpec,
    RunPolicy,
    TargetSpec,
    TpcbSpec,
    TpccSpec,
)
from pgrig.errors import DiskSpaceError
from pgrig.units import GB, MB, parse_size
from pgrig.workloads import custom, tpcb

# pgbench_accounts + indexes take about 15 MB per scale unit at fillfactor 100;
# 16 MB leaves room for the other tables and the free space map.
BYTES_PER_SCALE = 16 * MB
CLUSTER_BASE_BYTES = 64 * MB
# TPC-C tables and indexes take about 110 MB per warehouse; the load writes as much WAL.
TPCC_BYTES_PER_WAREHOUSE = 250 * MB
FSYNC_TESTS = 16  # timed tests pg_test_fsync runs


def data_bytes(scale: int, *, unlogged: bool = False, copies: int = 1) -> int:
    """Disk a TPC-B cluster needs at its peak during the load (``copies`` > 1
    when a pristine copy is kept for reset = "restore")."""
    data = scale * BYTES_PER_SCALE
    wal = 0 if unlogged else min(data, 4 * GB) + 64 * MB
    return CLUSTER_BASE_BYTES + data * copies + wal


def check_space(directory: Path, need: int, what: str) -> None:
    """Refuse up front what cannot finish for lack of disk."""
    free = shutil.disk_usage(directory).free
    if free < need:
        raise DiskSpaceError(
            f"not enough free disk in {directory} for {what}: needs about "
            f"{need / GB:.1f} GiB, {free / GB:.1f} GiB free",
            hint="lower the scale (about 16 MB per scale unit plus WAL), free some space, "
            "or pick another directory",
        )


@dataclass(frozen=True)
class PlannedRun:
    target: str
    key: str
    label: str
    seconds: float


@dataclass(frozen=True)
class Expansion:
    runs: list[PlannedRun] = field(default_factory=list)
    disk: dict[str, int] = field(default_factory=dict)  # target -> bytes needed
    repeats: str = ""  # "3" or "3 to 10 (until the 95% CI is within 5%)"

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs)


def _order(names: list[str], rep: int, interleave: bool) -> list[str]:
    """The runner rotates the target order every repetition (see runner._repeat)."""
    if not interleave or len(names) < 2:
        return names
    shift = (rep - 1) % len(names)
    return names[shift:] + names[:shift]


def expand(campaign: Campaign) -> Expansion:
    """Every run the campaign expands to, in the order the runner executes them
    (targets interleaved), with estimated seconds; repeats counted at their minimum."""
    pol = campaign.policy
    runs: list[PlannedRun] = []
    disk: dict[str, int] = {}
    names = [t.name for t in campaign.targets]
    warm = 15.0 if pol.warmup == "auto" else float(pol.warmup or 0)
    probes = campaign.probes
    if probes is not None:
        for t in names:
            if probes.timing_s:
                runs.append(
                    PlannedRun(
                        t, f"{t}/probe/pg_test_timing", "pg_test_timing", probes.timing_s + 1
                    )
                )
            if probes.fsync_s:
                runs.append(
                    PlannedRun(
                        t,
                        f"{t}/probe/pg_test_fsync",
                        "pg_test_fsync",
                        FSYNC_TESTS * probes.fsync_s + 1,
                    )
                )
            if probes.fio:
                for p in probes.fio.patterns:
                    runs.append(
                        PlannedRun(t, f"{t}/probe/fio/{p}", f"fio 8k {p}", probes.fio.runtime_s + 3)
                    )
                disk[t] = max(disk.get(t, 0), parse_size(probes.fio.size) + 64 * MB)
    copies = 2 if pol.reset == "restore" else 1
    for wl in campaign.workloads:
        if isinstance(wl, TpcbSpec):
            for scale in wl.scales:
                for t in names:
                    base = tpcb.prefix(t, wl, scale)
                    runs.append(
                        PlannedRun(t, f"{base}/init", f"pgbench -i -s {scale}", 5 + 1.5 * scale)
                    )
                    if wl.count:
                        runs.append(
                            PlannedRun(t, f"{base}/count/*", "count(*) x 2", 2 + 0.1 * scale)
                        )
                    disk[t] = max(
                        disk.get(t, 0), data_bytes(scale, unlogged=wl.unlogged, copies=copies)
                    )
                for point in tpcb.points(wl):
                    duration, mode, clients = point
                    for rep in range(1, pol.repeat + 1):
                        for t in _order(names, rep, pol.interleave):
                            runs.append(
                                PlannedRun(
                                    t,
                                    tpcb.run_key(t, wl, scale, point, rep),
                                    f"{mode} -s {scale} -c {clients} -T {duration}",
                                    duration + warm + 2 + (0.2 * scale if copies > 1 else 0),
                                )
                            )
        elif isinstance(wl, TpccSpec):
            for t in names:
                runs.append(
                    PlannedRun(
                        t,
                        f"{t}/{wl.name}/load/w{wl.warehouses}",
                        f"TPC-C load, {wl.warehouses} warehouses",
                        5 + 3 * wl.warehouses,
                    )
                )
                disk[t] = max(
                    disk.get(t, 0), CLUSTER_BASE_BYTES + wl.warehouses * TPCC_BYTES_PER_WAREHOUSE
                )
            for mode in wl.modes:
                for rep in range(1, pol.repeat + 1):
                    for t in _order(names, rep, pol.interleave):
                        suffix = f"/r{rep}" if pol.repeat > 1 else ""
                        runs.append(
                            PlannedRun(
                                t,
                                f"{t}/{wl.name}/run/{mode}/c{wl.connections}{suffix}",
                                f"TPC-C {mode}-side -c {wl.connections} -T {wl.duration_s}",
                                wl.duration_s + 5 + 2 * wl.warehouses,
                            )
                        )
        elif isinstance(wl, DurabilitySpec):
            for t in names:
                runs.append(
                    PlannedRun(
                        t,
                        f"{t}/{wl.name}",
                        f"durability, {wl.crashes} crashes",
                        wl.crashes * (wl.interval_s + 5) + 10,
                    )
                )
        elif isinstance(wl, CustomSpec):
            for t in names:
                runs.append(PlannedRun(t, f"{custom.prefix(t, wl)}/setup", f"{wl.name} setup", 10))
            for cpoint in custom.points(wl):
                duration, clients = cpoint
                for rep in range(1, pol.repeat + 1):
                    for t in _order(names, rep, pol.interleave):
                        runs.append(
                            PlannedRun(
                                t,
                                custom.run_key(t, wl, cpoint, rep),
                                f"{wl.name} -c {clients} -T {duration}",
                                duration + warm + 2,
                            )
                        )
    repeats = str(pol.repeat)
    if pol.until_ci_pct is not None:
        repeats = (
            f"{pol.repeat} to {pol.max_repeat} (until the 95% confidence interval "
            f"is within {pol.until_ci_pct:g}%)"
        )
    return Expansion(runs=runs, disk=disk, repeats=repeats)


def quick(
    target: Path,
    *,
    name: str = "quick",
    dsn: str | None = None,
    profile: str = "oltp",
    settings: dict[str, str] | None = None,
    pg_bin: str | None = None,
    os_user: str | None = None,
    initdb: InitdbSpec | None = None,
    tablespace: str | None = None,
    index_tablespace: str | None = None,
    probes: ProbeSpec | None = None,
    workload: TpcbSpec | None = None,
    policy: RunPolicy | None = None,
) -> Campaign:
    """The one-target campaign behind ``pgrig run`` without a file."""
    spec = TargetSpec(
        name="local",
        directory=target,
        dsn=dsn,
        tablespace=tablespace,
        index_tablespace=index_tablespace,
        pg_bin=pg_bin,
        profile=profile,
        settings=settings or {},
        initdb=initdb or InitdbSpec(),
        os_user=os_user,
    )
    return Campaign(
        name=name,
        source="command line",
        targets=(spec,),
        probes=probes,
        workloads=(workload,) if workload is not None else (),  # None: no workload
        policy=policy or RunPolicy(),
        baseline="local",
    )
