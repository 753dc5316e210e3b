"""The operating system and its knobs: os-release, kernel, memory, the sysctls and
limits seed 000 tunes, transparent hugepages and the clocksource."""

from __future__ import annotations

import re
import resource
from collections.abc import Sequence

from pgrig.environment.sources import Files, bracketed, normalize_space

# The kernel parameters seed 000 sets in /etc/sysctl.conf, in its order, plus the
# writeback and hugepage knobs it discusses. Ones this kernel lacks are skipped
# (tcp_tw_recycle went away in Linux 4.12, extra_free_kbytes is a vendor patch).
SYSCTLS: tuple[str, ...] = (
    "fs.aio-max-nr",
    "fs.file-max",
    "fs.nr_open",
    "kernel.sem",
    "kernel.shmall",
    "kernel.shmmax",
    "kernel.shmmni",
    "net.core.netdev_max_backlog",
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_synack_retries",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_tw_recycle",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_max_tw_buckets",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.ip_local_port_range",
    "net.nf_conntrack_max",
    "net.netfilter.nf_conntrack_max",
    "vm.dirty_background_bytes",
    "vm.dirty_background_ratio",
    "vm.dirty_bytes",
    "vm.dirty_ratio",
    "vm.dirty_expire_centisecs",
    "vm.dirty_writeback_centisecs",
    "vm.swappiness",
    "vm.mmap_min_addr",
    "vm.overcommit_memory",
    "vm.overcommit_ratio",
    "vm.zone_reclaim_mode",
    "vm.extra_free_kbytes",
    "vm.min_free_kbytes",
    "vm.nr_hugepages",
    "vm.lowmem_reserve_ratio",
)

# The limits seed 000 raises in /etc/security/limits.conf. Values are reported in
# getrlimit's units: core and memlock in bytes (limits.conf and `ulimit` use KiB).
LIMITS: dict[str, int] = {
    "nofile": resource.RLIMIT_NOFILE,
    "nproc": resource.RLIMIT_NPROC,
    "core": resource.RLIMIT_CORE,
    "memlock": resource.RLIMIT_MEMLOCK,
}

_CLOCKSOURCE = "/sys/devices/system/clocksource/clocksource0/"
_OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")
_THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def _sysctl_path(name: str) -> str:
    return "/proc/sys/" + name.replace(".", "/")


# What the parsers below read.
FILES: tuple[str, ...] = (
    "/proc/meminfo",
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/version",
    *_OS_RELEASE,
    _CLOCKSOURCE + "current_clocksource",
    _CLOCKSOURCE + "available_clocksource",
    _THP,
    *map(_sysctl_path, SYSCTLS),
)


def parse_os_release(files: Files) -> str | None:
    """PRETTY_NAME from os-release, e.g. ``"Debian GNU/Linux 12 (bookworm)"``."""
    for name in _OS_RELEASE:
        text = files.texts.get(name)
        if text is None:
            continue
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "PRETTY_NAME":
                return value.strip().strip("\"'") or None
    return None


def parse_kernel(files: Files) -> str | None:
    """Release and build, as ``uname -r`` and ``uname -v`` print them."""
    release = files.texts.get("/proc/sys/kernel/osrelease")
    version = files.texts.get("/proc/sys/kernel/version")
    if not release:
        return None
    return f"{release} {version}" if version else release


def parse_memory_bytes(files: Files) -> int | None:
    """MemTotal from /proc/meminfo, in bytes."""
    text = files.texts.get("/proc/meminfo")
    if text is None:
        return None
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def parse_sysctls(files: Files, names: Sequence[str] = SYSCTLS) -> dict[str, str]:
    """``{"kernel.sem": "32000 1024000000 500 32000", ...}``; missing knobs are skipped."""
    values = {}
    for name in names:
        text = files.texts.get(_sysctl_path(name))
        if text is not None:
            values[name] = normalize_space(text)
    return values


def _rlimit_text(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def read_limits() -> dict[str, str]:
    """This process's limits as ``"soft/hard"``, e.g. ``{"nofile": "1024/524288"}``."""
    limits = {}
    for name, which in LIMITS.items():
        try:
            soft, hard = resource.getrlimit(which)
        except (OSError, ValueError):
            continue
        limits[name] = f"{_rlimit_text(soft)}/{_rlimit_text(hard)}"
    return limits


def parse_transparent_hugepages(files: Files) -> str | None:
    text = files.texts.get(_THP)
    return bracketed(text) if text else None


def parse_clocksource(files: Files) -> tuple[str | None, str | None]:
    """(current, available), e.g. ``("tsc", "tsc kvm-clock")``: seed 000 compares the two."""
    current = files.texts.get(_CLOCKSOURCE + "current_clocksource") or None
    available = files.texts.get(_CLOCKSOURCE + "available_clocksource")
    return current, (normalize_space(available) or None) if available else None
