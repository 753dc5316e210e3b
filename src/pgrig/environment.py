"""What machine a study ran on: CPU, memory, disks, filesystems, kernel knobs, tools, server.

``capture`` records the environment once per study so that every result can be
read against it (seed 000 opens with ``lscpu``, ``lsblk``, the sysctls and
limits it tunes; we record the same facts). Nothing here needs root, and
nothing here fails a study: an item that cannot be read is left out (``None``
or absent from a dict), never raised.

Every reader takes a ``root`` directory (default ``/``) so that tests can point
it at copies of ``/proc`` and ``/sys`` captured from a real machine.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import resource
import shutil
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import psycopg

import pgrig
from pgrig import proc
from pgrig.errors import ToolError
from pgrig.results import Cpu, Disk, Environment, Filesystem, PostgresInfo

log = logging.getLogger(__name__)

ROOT = Path("/")

T = TypeVar("T")

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

# PostgreSQL programs whose version is recorded, looked up in bin_dir (or PATH).
PG_TOOLS: tuple[str, ...] = ("postgres", "pgbench", "psql", "pg_test_fsync", "pg_test_timing")

VERSION_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10

SERVER_VERSION_SQL = (
    "SELECT current_setting('server_version'), current_setting('server_version_num')::int"
)
DATA_DIRECTORY_SQL = "SELECT current_setting('data_directory')"
# Facts fixed at initdb or build time that a reader needs to compare results
# (checksums cost writes, segment and block sizes change I/O); pg_settings
# reports them as 'default' when they have their usual value, so they are
# asked for by name. Names a server does not know simply do not match.
PRESET_SETTINGS: tuple[str, ...] = (
    "block_size",
    "data_checksums",
    "lc_collate",
    "lc_ctype",
    "server_encoding",
    "shared_memory_size",
    "shared_memory_size_in_huge_pages",
    "wal_block_size",
    "wal_segment_size",
)
# 'client' and 'session' values, and the transaction_* 'override's, describe
# pgrig's own connection, not the server under test. current_setting() formats
# units as postgresql.conf does ("16MB").
SETTINGS_SQL = """
SELECT name, current_setting(name)
FROM pg_settings
WHERE (source NOT IN ('default', 'client', 'session')
       AND name NOT IN ('transaction_deferrable', 'transaction_isolation',
                        'transaction_read_only'))
   OR name = ANY(%s)
ORDER BY name
"""


# --------------------------------------------------------------------------
# Small helpers


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, one decimal: ``25769803776`` -> ``"24.0 GiB"``."""
    if abs(n) < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        # Promote when rounding would print "1024.0 KiB".
        if abs(round(value, 1)) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} EiB"


def read_text(path: Path) -> str | None:
    """A file's text, or None when it is missing or unreadable."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _read_line(path: Path) -> str | None:
    text = read_text(path)
    if text is None:
        return None
    text = text.strip()
    return text or None


def _read_int(path: Path) -> int | None:
    text = _read_line(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def normalize_space(text: str) -> str:
    """``"32000\\t1024000000\\t500\\n"`` -> ``"32000 1024000000 500"``."""
    return " ".join(text.split())


def bracketed(text: str) -> str | None:
    """The active choice in a sysfs menu such as ``"always [madvise] never"``."""
    match = re.search(r"\[([^\]]+)\]", text)
    if match:
        return match.group(1)
    # Some devices offer only one choice and print it without brackets ("none").
    words = text.split()
    return words[0] if len(words) == 1 else None


def _sys(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


# --------------------------------------------------------------------------
# OS, kernel, memory


def read_os_release(root: Path = ROOT) -> str | None:
    """PRETTY_NAME from os-release, e.g. ``"Debian GNU/Linux 12 (bookworm)"``."""
    for name in ("etc/os-release", "usr/lib/os-release"):
        text = read_text(_sys(root, name))
        if text is None:
            continue
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "PRETTY_NAME":
                return value.strip().strip("\"'") or None
    return None


def read_kernel(root: Path = ROOT) -> str | None:
    """Release and build, as ``uname -r`` and ``uname -v`` print them."""
    release = _read_line(_sys(root, "proc/sys/kernel/osrelease"))
    version = _read_line(_sys(root, "proc/sys/kernel/version"))
    if release is None:
        return None
    return f"{release} {version}" if version else release


def read_memory_bytes(root: Path = ROOT) -> int | None:
    """MemTotal from /proc/meminfo, in bytes."""
    text = read_text(_sys(root, "proc/meminfo"))
    if text is None:
        return None
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


# --------------------------------------------------------------------------
# CPU


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


def read_topology(root: Path = ROOT) -> _Topology | None:
    """Sockets and cores from /sys/devices/system/cpu/cpuN/topology (online CPUs only).

    Cores are counted as distinct sets of thread siblings, as lscpu does, because
    core_id repeats across dies and clusters on some CPUs.
    """
    base = _sys(root, "sys/devices/system/cpu")
    try:
        cpus = [p for p in base.iterdir() if re.fullmatch(r"cpu\d+", p.name)]
    except OSError:
        return None
    packages: set[str] = set()
    cores: set[tuple[str, str]] = set()
    logical = 0
    for cpu in cpus:
        topo = cpu / "topology"
        package = _read_line(topo / "physical_package_id")
        siblings = _read_line(topo / "thread_siblings_list") or _read_line(topo / "core_cpus_list")
        if package is None or siblings is None:
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
    root: Path = ROOT, *, cpu_flags: Sequence[str] = (), lscpu: Mapping[str, str] | None = None
) -> str | None:
    """Who virtualises this machine, or None on bare metal.

    lscpu asks CPUID; without it the kernel's paravirtual clocksources name the
    hypervisor (kvm-clock, hyperv_clocksource_*, xen), which needs no root.
    """
    if lscpu and lscpu.get("Hypervisor vendor"):
        return lscpu["Hypervisor vendor"]
    if "hypervisor" not in cpu_flags:
        return None
    xen = _read_line(_sys(root, "sys/hypervisor/type"))
    if xen:
        return xen.capitalize() if xen == "xen" else xen
    clocks = read_text(
        _sys(root, "sys/devices/system/clocksource/clocksource0/available_clocksource")
    )
    for marker, vendor in (("kvm-clock", "KVM"), ("hyperv", "Microsoft"), ("xen", "Xen")):
        if clocks and marker in clocks:
            return vendor
    return _read_line(_sys(root, "sys/class/dmi/id/sys_vendor")) or "unknown"


def read_cpu(root: Path = ROOT, *, lscpu: Mapping[str, str] | None = None) -> Cpu:
    """The CPU as seed 000's lscpu excerpt shows it; unknown fields fall back to lscpu."""
    lscpu = lscpu or {}
    blocks = parse_cpuinfo(read_text(_sys(root, "proc/cpuinfo")) or "")
    first = blocks[0] if blocks else {}

    model = (
        first.get("model name")
        or first.get("Processor")
        or first.get("cpu model")
        or lscpu.get("Model name")
        or "unknown"
    )
    topo = read_topology(root) or _topology_from_cpuinfo(blocks)
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
        hypervisor=detect_hypervisor(root, cpu_flags=flags, lscpu=lscpu),
    )


# --------------------------------------------------------------------------
# Disks and filesystems


def read_disk(path: Path) -> Disk | None:
    """One /sys/block entry; None when it has no media (size 0), e.g. unused loop or zram."""
    sectors = _read_int(path / "size")
    if not sectors:
        return None
    scheduler_text = read_text(path / "queue" / "scheduler")
    return Disk(
        name=path.name,
        # /sys/block/*/size counts 512-byte sectors whatever the device's block size.
        size_bytes=sectors * 512,
        rotational=_read_line(path / "queue" / "rotational") == "1",
        scheduler=bracketed(scheduler_text) if scheduler_text else None,
        model=_read_line(path / "device" / "model"),
    )


def read_disks(root: Path = ROOT) -> tuple[Disk, ...]:
    """Every block device with media; loop devices with a backing file are kept."""
    try:
        entries = sorted(_sys(root, "sys/block").iterdir())
    except OSError:
        return ()
    return tuple(disk for entry in entries if (disk := read_disk(entry)) is not None)


def _unescape_mount(text: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    major_minor: str
    root: str
    mountpoint: str
    mount_options: str
    fstype: str
    source: str
    super_options: str

    @property
    def options(self) -> str:
        """Per-mount then superblock options, duplicates (``rw``) once."""
        seen: dict[str, None] = {}
        for opt in f"{self.mount_options},{self.super_options}".split(","):
            if opt:
                seen.setdefault(opt, None)
        return ",".join(seen)


def parse_mountinfo(text: str) -> list[Mount]:
    """/proc/self/mountinfo (see proc(5)); malformed lines are skipped."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        try:
            sep = fields.index("-", 6)
            mounts.append(
                Mount(
                    major_minor=fields[2],
                    root=_unescape_mount(fields[3]),
                    mountpoint=_unescape_mount(fields[4]),
                    mount_options=fields[5],
                    fstype=fields[sep + 1],
                    source=_unescape_mount(fields[sep + 2]),
                    super_options=fields[sep + 3] if len(fields) > sep + 3 else "",
                )
            )
        except (ValueError, IndexError):
            continue
    return mounts


def _under(path: str, mountpoint: str) -> bool:
    return mountpoint == "/" or path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


def find_mount(mounts: Sequence[Mount], path: str, *, dev: str | None = None) -> Mount | None:
    """The mount holding ``path`` (absolute, symlinks resolved): the longest mount point.

    When two mounts share a mount point the later one is on top. ``dev`` (the
    path's ``major:minor`` from stat) breaks ties the mount table alone cannot,
    such as a parent mounted over after a child.
    """
    candidates = [m for m in mounts if _under(path, m.mountpoint)]
    if dev is not None:
        same_dev = [m for m in candidates if m.major_minor == dev]
        candidates = same_dev or candidates
    best: Mount | None = None
    for mount in candidates:
        if best is None or len(mount.mountpoint) >= len(best.mountpoint):
            best = mount
    return best


def block_device_for(root: Path, major_minor: str, source: str | None = None) -> str | None:
    """The /sys/block name behind a device number: ``"259:0"`` (loop0p1) -> ``"loop0"``.

    Partitions resolve to their disk. Filesystems on anonymous device numbers
    (btrfs, overlay) fall back to the mount source when it is a /dev node.
    """
    candidates = [_sys(root, f"sys/dev/block/{major_minor}")]
    if source and source.startswith("/dev/"):
        name = Path(os.path.realpath(source)).name if root == ROOT else Path(source).name
        candidates.append(_sys(root, f"sys/class/block/{name}"))
    for link in candidates:
        try:
            device = link.resolve(strict=True)
        except OSError:
            continue
        if (device / "partition").exists():
            return device.parent.name
        return device.name
    return None


def _existing_ancestor(path: Path) -> Path:
    # A study directory may not exist yet; its filesystem is its nearest parent's.
    path = Path(os.path.abspath(path)).resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def describe_filesystem(path: Path, *, root: Path = ROOT) -> Filesystem | None:
    """The filesystem holding ``path``; None when the mount table cannot be read."""
    target = _existing_ancestor(path)
    text = read_text(_sys(root, "proc/self/mountinfo"))
    if text is None:
        return None
    try:
        st = os.stat(target)
        dev: str | None = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        vfs: os.statvfs_result | None = os.statvfs(target)
    except OSError:
        dev, vfs = None, None
    mount = find_mount(parse_mountinfo(text), str(target), dev=dev)
    if mount is None:
        return None
    return Filesystem(
        path=str(path),
        device=mount.source,
        mountpoint=mount.mountpoint,
        fstype=mount.fstype,
        options=mount.options,
        size_bytes=vfs.f_blocks * vfs.f_frsize if vfs else 0,
        free_bytes=vfs.f_bavail * vfs.f_frsize if vfs else 0,
        block_device=block_device_for(root, mount.major_minor, mount.source),
    )


# --------------------------------------------------------------------------
# Kernel knobs and limits


def read_sysctls(root: Path = ROOT, names: Sequence[str] = SYSCTLS) -> dict[str, str]:
    """``{"kernel.sem": "32000 1024000000 500 32000", ...}``; missing knobs are skipped."""
    values = {}
    for name in names:
        text = read_text(_sys(root, "proc/sys/" + name.replace(".", "/")))
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


def read_transparent_hugepages(root: Path = ROOT) -> str | None:
    text = read_text(_sys(root, "sys/kernel/mm/transparent_hugepage/enabled"))
    return bracketed(text) if text else None


def read_clocksource(root: Path = ROOT) -> tuple[str | None, str | None]:
    """(current, available), e.g. ``("tsc", "tsc kvm-clock")``: seed 000 compares the two."""
    base = _sys(root, "sys/devices/system/clocksource/clocksource0")
    current = _read_line(base / "current_clocksource")
    available = read_text(base / "available_clocksource")
    return current, (normalize_space(available) or None) if available else None


# --------------------------------------------------------------------------
# Tools and the server


def first_line(text: str) -> str | None:
    """The first non-empty line: what ``--version`` prints, e.g. ``"fio-3.33"``."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None


def tool_version(program: str | Path) -> str | None:
    """``program --version``'s first line, or None when it is missing or fails."""
    try:
        done = proc.run([program, "--version"], timeout=VERSION_TIMEOUT, check=False)
    except ToolError:
        return None
    if not done.ok:
        return None
    return first_line(done.stdout) or first_line(done.stderr)


def tool_versions(bin_dir: Path | None = None) -> dict[str, str]:
    """Versions of the programs a study runs; programs not found are absent."""
    versions = {"python": platform.python_version(), "pgrig": pgrig.__version__}
    programs: dict[str, str | Path | None] = {
        name: (bin_dir / name if bin_dir is not None else shutil.which(name)) for name in PG_TOOLS
    }
    programs["fio"] = shutil.which("fio")
    for name, program in programs.items():
        if program is None or not os.access(program, os.X_OK):
            continue
        version = tool_version(program)
        if version:
            versions[name] = version
    return versions


def read_postgres(
    conninfo: Mapping[str, Any] | str, *, bin_dir: Path | None = None
) -> PostgresInfo | None:
    """Version and non-default settings of a running server; None when it cannot be reached."""
    # A cluster initialised in the C locale is SQL_ASCII, and psycopg then returns
    # bytes instead of str; asking for UTF8 gets text back (settings are ASCII).
    params: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT, "client_encoding": "UTF8"}
    dsn = ""
    if isinstance(conninfo, str):
        dsn = conninfo
    else:
        params.update(conninfo)
    try:
        with psycopg.connect(dsn, autocommit=True, **params) as conn:
            row = conn.execute(SERVER_VERSION_SQL).fetchone()
            assert row is not None
            version, version_num = str(row[0]), int(row[1])
            try:
                dd = conn.execute(DATA_DIRECTORY_SQL).fetchone()
                data_directory = str(dd[0]) if dd else None
            except psycopg.Error:
                # Needs superuser or pg_read_all_settings.
                data_directory = None
            settings = {
                str(name): str(value)
                for name, value in conn.execute(SETTINGS_SQL, [list(PRESET_SETTINGS)])
            }
    except psycopg.Error as exc:
        log.warning("environment: cannot read PostgreSQL settings: %s", exc)
        return None
    return PostgresInfo(
        version=version,
        version_num=version_num,
        bin_dir=str(bin_dir) if bin_dir is not None else None,
        data_directory=data_directory,
        settings=settings,
    )


def run_lscpu() -> dict[str, str]:
    """``lscpu`` parsed, or an empty dict where it is not installed."""
    program = shutil.which("lscpu")
    if program is None:
        return {}
    try:
        done = proc.run([program], timeout=VERSION_TIMEOUT, check=False)
    except ToolError:
        return {}
    return parse_lscpu(done.stdout) if done.ok else {}


# --------------------------------------------------------------------------
# Everything at once


def _attempt(what: str, fn: Callable[[], T], default: T) -> T:
    # The environment is context for results, not a result: a surprise in one
    # reader (an odd kernel, a sandbox) must not cost the study.
    try:
        return fn()
    except Exception as exc:
        log.warning("environment: cannot read %s: %s", what, exc)
        return default


def capture(
    paths: Sequence[Path],
    *,
    pg_conninfo: Mapping[str, Any] | str | None = None,
    bin_dir: Path | None = None,
) -> Environment:
    """Record this machine, the filesystems of ``paths`` and, if given, the server."""
    lscpu: dict[str, str] = _attempt("lscpu", run_lscpu, {})
    logical = os.cpu_count() or 1
    cpu = _attempt("cpu", lambda: read_cpu(lscpu=lscpu), Cpu("unknown", 1, logical, 1, logical))
    filesystems: list[Filesystem] = []
    for path in paths:
        fs = _attempt(f"filesystem of {path}", partial(describe_filesystem, Path(path)), None)
        if fs is not None:
            filesystems.append(fs)
    unknown: tuple[str | None, str | None] = (None, None)
    clocksource, available = _attempt("clocksource", read_clocksource, unknown)
    postgres: PostgresInfo | None = None
    if pg_conninfo is not None:
        postgres = _attempt(
            "PostgreSQL", partial(read_postgres, pg_conninfo, bin_dir=bin_dir), None
        )
    uname = os.uname()
    return Environment(
        captured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        hostname=socket.gethostname(),
        os_release=_attempt("os-release", read_os_release, None) or "unknown",
        kernel=_attempt("kernel", read_kernel, None) or f"{uname.release} {uname.version}",
        cpu=cpu,
        memory_bytes=_attempt("memory", read_memory_bytes, None) or _sysconf_memory(),
        disks=_attempt("disks", read_disks, ()),
        filesystems=tuple(filesystems),
        sysctls=_attempt("sysctls", read_sysctls, {}),
        limits=_attempt("limits", read_limits, {}),
        transparent_hugepages=_attempt("transparent hugepages", read_transparent_hugepages, None),
        clocksource=clocksource,
        available_clocksources=available,
        postgres=postgres,
        tools=_attempt("tool versions", partial(tool_versions, bin_dir), {}),
    )


def _sysconf_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0
