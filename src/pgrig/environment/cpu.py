"""The CPU: model, topology, clock and hypervisor, from /proc/cpuinfo, sysfs and lscpu
(the files' texts: ``sources.Files``)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgrig.environment.sources import VERSION_TIMEOUT, Files
from pgrig.errors import ToolError
from pgrig.hosts.executor import C_LOCALE
from pgrig.hosts.local import HERE
from pgrig.results import Cpu

# What the parsers below read (available_clocksource is system's: FILES there).
FILES: tuple[str, ...] = (
    "/proc/cpuinfo",
    "/sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id",
    "/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list",
    "/sys/devices/system/cpu/cpu[0-9]*/topology/core_cpus_list",
    "/sys/hypervisor/type",
    "/sys/class/dmi/id/sys_vendor",
)
_TOPOLOGY = re.compile(r"/sys/devices/system/cpu/cpu(\d+)/topology/(\w+)")
_CLOCKSOURCES = "/sys/devices/system/clocksource/clocksource0/available_clocksource"


def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per logical CPU (blank-line separated blocks)."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    # Some architectures append a machine-wide block without "processor".
    return [b for b in blocks if "processor" in b] or blocks


def parse_lscpu(text: str) -> dict[str, str]:
    """``lscpu`` output (LC_ALL=C) as a dict: ``{"Hypervisor vendor": "KVM", ...}``."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields.setdefault(key.strip(), value.strip())
    return fields


@dataclass(frozen=True)
class _Topology:
    sockets: int
    cores: int  # physical cores over all sockets
    logical: int


def parse_topology(files: Files) -> _Topology | None:
    """Sockets and cores from /sys/devices/system/cpu/cpuN/topology (online CPUs only).

    Cores are counted as distinct sets of thread siblings, as lscpu does, because
    core_id repeats across dies and clusters on some CPUs.
    """
    by_cpu: dict[str, dict[str, str]] = {}
    for path, text in files.texts.items():
        if match := _TOPOLOGY.fullmatch(path):
            by_cpu.setdefault(match[1], {})[match[2]] = text
    packages: set[str] = set()
    cores: set[tuple[str, str]] = set()
    logical = 0
    for topo in by_cpu.values():
        package = topo.get("physical_package_id")
        siblings = topo.get("thread_siblings_list") or topo.get("core_cpus_list")
        if not package or not siblings:
            continue  # offline CPUs have no topology
        logical += 1
        packages.add(package)
        cores.add((package, siblings))
    if not logical:
        return None
    return _Topology(sockets=len(packages), cores=len(cores), logical=logical)


def _topology_from_cpuinfo(blocks: list[dict[str, str]]) -> _Topology | None:
    if not blocks or not all("physical id" in b and "core id" in b for b in blocks):
        return None
    packages = {b["physical id"] for b in blocks}
    cores = {(b["physical id"], b["core id"]) for b in blocks}
    return _Topology(sockets=len(packages), cores=len(cores), logical=len(blocks))


def detect_hypervisor(
    files: Files, *, cpu_flags: Sequence[str] = (), lscpu: Mapping[str, str] | None = None
) -> str | None:
    """Who virtualises this machine, or None on bare metal.

    lscpu asks CPUID; without it the kernel's paravirtual clocksources name the
    hypervisor (kvm-clock, hyperv_clocksource_*, xen), which needs no root.
    """
    if lscpu and lscpu.get("Hypervisor vendor"):
        return lscpu["Hypervisor vendor"]
    if "hypervisor" not in cpu_flags:
        return None
    xen = files.texts.get("/sys/hypervisor/type")
    if xen:
        return xen.capitalize() if xen == "xen" else xen
    clocks = files.texts.get(_CLOCKSOURCES)
    for marker, vendor in (("kvm-clock", "KVM"), ("hyperv", "Microsoft"), ("xen", "Xen")):
        if clocks and marker in clocks:
            return vendor
    return files.texts.get("/sys/class/dmi/id/sys_vendor") or "unknown"


def parse_cpu(files: Files, *, lscpu: Mapping[str, str] | None = None) -> Cpu:
    """The CPU as seed 000's lscpu excerpt shows it; unknown fields fall back to lscpu."""
    lscpu = lscpu or {}
    blocks = parse_cpuinfo(files.texts.get("/proc/cpuinfo", ""))
    first = blocks[0] if blocks else {}

    model = (
        first.get("model name")
        or first.get("Processor")
        or first.get("cpu model")
        or lscpu.get("Model name")
        or "unknown"
    )
    topo = parse_topology(files) or _topology_from_cpuinfo(blocks)
    logical = len(blocks) or (topo.logical if topo else 0) or (os.cpu_count() or 1)
    if topo is not None:
        sockets = max(1, topo.sockets)
        cores_per_socket = max(1, topo.cores // sockets)
        threads_per_core = max(1, topo.logical // max(1, topo.cores))
    else:
        sockets, cores_per_socket, threads_per_core = 1, logical, 1

    mhz_values = []
    for block in blocks:
        try:
            mhz_values.append(float(block["cpu MHz"]))
        except (KeyError, ValueError):
            continue
    mhz: float | None = round(sum(mhz_values) / len(mhz_values), 3) if mhz_values else None
    if mhz is None:
        try:
            mhz = float(lscpu.get("CPU max MHz") or lscpu.get("CPU MHz") or "")
        except ValueError:
            mhz = None

    flags = (first.get("flags") or first.get("Features") or "").split()
    return Cpu(
        model=model,
        sockets=sockets,
        cores_per_socket=cores_per_socket,
        threads_per_core=threads_per_core,
        logical_cpus=logical,
        mhz=mhz,
        hypervisor=detect_hypervisor(files, cpu_flags=flags, lscpu=lscpu),
    )


def run_lscpu() -> dict[str, str]:
    """``lscpu`` parsed, or an empty dict where it is not installed or cannot run."""
    program = shutil.which("lscpu")
    if program is None:
        return {}
    try:
        done = HERE.run([program], timeout=VERSION_TIMEOUT, env=C_LOCALE, check=False)
    except (ToolError, OSError):
        return {}
    return parse_lscpu(done.stdout) if done.ok else {}
