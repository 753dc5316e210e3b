"""The report's environment section: the machine (or each target's machine),
its kernel settings and storage."""

from __future__ import annotations

from collections.abc import Sequence

from pgrig.document import fmt
from pgrig.document.model import (
    Row,
    Section,
    Table,
)
from pgrig.report import storage as storage_report
from pgrig.report.header import plural
from pgrig.results import (
    Environment,
    RunRecord,
    Study,
)


def environment_section(study: Study, records: Sequence[RunRecord] = ()) -> Section:
    env = study.environment
    if env is None:
        return Section("Environment", "environment", ("The environment was not captured.",))
    blocks: list[Table] = [
        Table(("Item", "Value"), tuple(Row(r) for r in environment_rows(env))),
        *storage_report.environment_blocks(records),
    ]
    audit = storage_report.audit_table(env)
    if audit is not None:
        blocks.append(audit)
    if env.sysctls or env.limits:
        rows = [Row((k, v)) for k, v in env.sysctls.items()]
        rows += [Row((f"limit {k} (soft/hard)", v)) for k, v in env.limits.items()]
        blocks.append(
            Table(
                ("Setting", "Value"),
                tuple(rows),
                caption=f"Kernel settings and limits ({len(rows)})",
                collapsed=True,
            )
        )
    if env.postgres is not None and env.postgres.settings:
        settings = env.postgres.settings
        blocks.append(
            Table(
                ("Setting", "Value"),
                tuple(Row((k, v)) for k, v in sorted(settings.items())),
                caption=f"Non-default PostgreSQL settings ({len(settings)})",
                collapsed=True,
            )
        )
    return Section("Environment", "environment", blocks=tuple(blocks))


def environment_rows(env: Environment) -> list[tuple[str, str]]:
    cpu = env.cpu
    layout = (
        f"{plural(cpu.sockets, 'socket')} x {plural(cpu.cores_per_socket, 'core')} x "
        f"{plural(cpu.threads_per_core, 'thread')} = {plural(cpu.logical_cpus, 'logical CPU')}"
    )
    cpu_extra = [f"{cpu.mhz:.0f} MHz" if cpu.mhz else "", cpu.hypervisor or ""]
    cpu_extra = [x for x in cpu_extra if x]
    host = env.hostname
    if env.host:  # read on another host through its executor
        host = f"{env.host} ({env.address}), hostname {env.hostname}"
    rows = [
        ("Host", host),
        ("CPU", cpu.model + (f" ({', '.join(cpu_extra)})" if cpu_extra else "")),
        ("CPU layout", layout),
        ("Memory", fmt.size(env.memory_bytes)),
        ("Kernel", env.kernel),
        ("OS", env.os_release),
    ]
    for disk in env.disks:
        # What the kernel reports: virtual disks often claim to be rotational.
        kind = "rotational" if disk.rotational else "non-rotational"
        extra = ", ".join(x for x in (kind, disk.model, f"scheduler {disk.scheduler}") if x)
        if disk.scheduler is None:
            extra = ", ".join(x for x in (kind, disk.model) if x)
        rows.append((f"Disk {disk.name}", f"{fmt.size(disk.size_bytes)} ({extra})"))
    for fs in env.filesystems:
        device = fs.device + (f" ({fs.block_device})" if fs.block_device else "")
        rows.append(
            (
                f"Filesystem of {fs.path}",
                f"{fs.fstype} on {device}, mounted at {fs.mountpoint} ({fs.options}); "
                f"{fmt.size(fs.size_bytes)}, {fmt.size(fs.free_bytes)} free",
            )
        )
    rows.append(("Transparent huge pages", env.transparent_hugepages or "unknown"))
    clock = env.clocksource or "unknown"
    if env.available_clocksources:
        clock += f" (available: {env.available_clocksources})"
    rows.append(("Clocksource", clock))
    if env.postgres is not None:
        pg = env.postgres
        rows.append(("PostgreSQL", f"{pg.version} (server_version_num {pg.version_num})"))
        if pg.build:
            rows.append(("PostgreSQL build", pg.build))
        if pg.source:
            rows.append(("PostgreSQL source", pg.source))
        if pg.bin_dir:
            rows.append(("PostgreSQL binaries", pg.bin_dir))
        if pg.data_directory:
            rows.append(("Data directory", pg.data_directory))
    for tool, version in sorted(env.tools.items()):
        rows.append((f"Tool {tool}", version))
    rows.append(("Captured at", env.captured_at))
    return rows


# What tells two machines apart, for seed 000's side-by-side table.
MACHINE_ITEMS = ("CPU", "CPU layout", "Memory", "Kernel", "OS")


def machines_of(study: Study, targets: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """Each target's machine as (item, value) rows, when the targets ran on more
    than one machine (another host's environment is read there: pgrig.environment.remote);
    empty when they all ran on one."""
    envs = {t: e for t in targets if (e := study.target_environments.get(t)) is not None}
    if len(envs) < 2 or len({(e.host, e.address, e.hostname) for e in envs.values()}) < 2:
        return {}
    return {t: machine_items(env) for t, env in envs.items()}


def machine_section(env: Environment) -> Section:
    """Another host's environment in full, as read there (the comparison table
    holds what tells machines apart)."""
    rows = [Row(r) for r in environment_rows(env)]
    rows += [Row((k, v)) for k, v in env.sysctls.items()]
    return Section(
        "Machine",
        "machine",
        blocks=(
            Table(
                ("Item", "Value"),
                tuple(rows),
                caption=f"{env.host} ({env.address}) as read there: {len(rows)} items",
                collapsed=True,
            ),
        ),
    )


def machine_items(env: Environment) -> list[tuple[str, str]]:
    where = f"{env.host} ({env.address})" if env.host else "this machine"
    rows = [("Machine", f"{where}, hostname {env.hostname}")]
    rows += [(k, v) for k, v in environment_rows(env) if k in MACHINE_ITEMS]
    disks = [d for d in env.disks if not d.name.startswith(("loop", "ram", "zram"))]
    if disks:
        rows.append(("Disks", ", ".join(f"{d.name} {fmt.size(d.size_bytes)}" for d in disks)))
    for fs in env.filesystems[:1]:
        device = fs.device + (f" ({fs.block_device})" if fs.block_device else "")
        rows.append((
            "Data directory's filesystem",
            f"{fs.fstype} on {device} at {fs.mountpoint}, {fmt.size(fs.size_bytes)}",
        ))  # fmt: skip
    if env.postgres is not None:
        rows.append(("PostgreSQL", env.postgres.version))
    return rows
