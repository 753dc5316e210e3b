"""What machine a study ran on: CPU, memory, disks, filesystems, kernel knobs, tools, server.

``capture`` records the environment once per study so that every result can be
read against it (seed 000 opens with ``lscpu``, ``lsblk``, the sysctls and
limits it tunes; we record the same facts). Nothing here needs root, and
nothing here fails a study: an item that cannot be read is left out (``None``
or absent from a dict), never raised.

A capture reads the files it needs in one pass (``sources.read_files``: on
another host ``remote.snapshot``), then the parsers of each concern (``cpu``,
``storage``, ``system``: ``from_files``, the same on both) read those texts;
``software`` asks the programs and the server. Every reader runs in one loop
(``read_each``), which logs a reader's failure and keeps its stand-in.
``read_files`` takes a ``root`` directory (default ``/``) so that tests can
point it at copies of ``/proc`` and ``/sys`` captured from a real machine.
This package re-exports the parsers.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pgrig.environment import audit, cpu, storage, system
from pgrig.environment.cpu import (
    detect_hypervisor,
    parse_cpu,
    parse_cpuinfo,
    parse_lscpu,
    parse_topology,
    run_lscpu,
)
from pgrig.environment.software import (
    CONNECT_TIMEOUT,
    DATA_DIRECTORY_SQL,
    PG_TOOLS,
    PRESET_SETTINGS,
    SERVER_VERSION_SQL,
    SETTINGS_SQL,
    first_line,
    read_postgres,
    tool_version,
    tool_versions,
)
from pgrig.environment.sources import (
    ROOT,
    VERSION_TIMEOUT,
    Files,
    bracketed,
    normalize_space,
    read_files,
    read_text,
)
from pgrig.environment.storage import (
    Mount,
    block_device_for,
    describe_filesystem,
    find_mount,
    parse_disks,
    parse_filesystem,
    parse_mountinfo,
)
from pgrig.environment.system import (
    LIMITS,
    SYSCTLS,
    parse_clocksource,
    parse_kernel,
    parse_memory_bytes,
    parse_os_release,
    parse_sysctls,
    parse_transparent_hugepages,
    read_limits,
)
from pgrig.results import AuditFinding, Cpu, Environment

__all__ = [
    "CONNECT_TIMEOUT",
    "DATA_DIRECTORY_SQL",
    "FILES",
    "LIMITS",
    "PG_TOOLS",
    "PRESET_SETTINGS",
    "ROOT",
    "SERVER_VERSION_SQL",
    "SETTINGS_SQL",
    "SYSCTLS",
    "VERSION_TIMEOUT",
    "Files",
    "Mount",
    "block_device_for",
    "bracketed",
    "capture",
    "describe_filesystem",
    "detect_hypervisor",
    "find_mount",
    "from_files",
    "first_line",
    "normalize_space",
    "parse_clocksource",
    "parse_cpu",
    "parse_cpuinfo",
    "parse_disks",
    "parse_filesystem",
    "parse_kernel",
    "parse_lscpu",
    "parse_memory_bytes",
    "parse_mountinfo",
    "parse_os_release",
    "parse_sysctls",
    "parse_topology",
    "parse_transparent_hugepages",
    "read_files",
    "Reader",
    "read_each",
    "read_limits",
    "read_postgres",
    "read_text",
    "run_lscpu",
    "tool_version",
    "tool_versions",
]

# What the parsers read, for one pass over a host's files (duplicates once).
FILES: tuple[str, ...] = tuple(dict.fromkeys((*cpu.FILES, *storage.FILES, *system.FILES)))

log = logging.getLogger(__name__)

# One reader of the environment: what it is called in a warning, the read, and
# what stands in for it when the read fails.
Reader = tuple[str, Callable[[], Any], Any]


def read_each(readers: Sequence[Reader]) -> dict[str, Any]:
    """Each reader's value by its name, in order; its stand-in where it fails."""
    found: dict[str, Any] = {}
    for what, read, default in readers:
        # The environment is context for results, not a result: a surprise in one
        # reader (an odd kernel, a sandbox) must not cost the study.
        try:
            found[what] = read()
        except Exception as exc:
            log.warning("environment: cannot read %s: %s", what, exc)
            found[what] = default
    return found


def from_files(
    files: Files, lscpu: Mapping[str, str], logical: int, filesystems: Sequence[Reader]
) -> list[Reader]:
    """The readers of one host's machine, the same here and on another host:
    what its files say (``logical``: the CPUs counted where they say nothing)
    and ``filesystems``, the readers of the paths under test."""
    unknown: tuple[str | None, str | None] = (None, None)
    return [
        ("cpu", partial(parse_cpu, files, lscpu=lscpu), Cpu("unknown", 1, logical, 1, logical)),
        *filesystems,
        ("disks", partial(parse_disks, files), ()),
        ("os-release", partial(parse_os_release, files), None),
        ("kernel", partial(parse_kernel, files), None),
        ("memory", partial(parse_memory_bytes, files), None),
        ("clocksource", partial(parse_clocksource, files), unknown),
        ("sysctls", partial(parse_sysctls, files), {}),
        ("transparent hugepages", partial(parse_transparent_hugepages, files), None),
    ]


def capture(
    paths: Sequence[Path],
    *,
    pg_conninfo: Mapping[str, object] | str | None = None,
    bin_dir: Path | None = None,
    locate: Callable[[str], Path] | None = None,
) -> Environment:
    """Record this machine, the filesystems of ``paths`` and, if given, the server."""
    files = read_files(ROOT, FILES)
    logical = os.cpu_count() or 1
    filesystems: list[Reader] = [
        (f"filesystem of {path}", partial(describe_filesystem, Path(path)), None) for path in paths
    ]
    readers: list[Reader] = [
        *from_files(files, run_lscpu(), logical, filesystems),
        ("limits", read_limits, {}),
        ("tool versions", partial(tool_versions, bin_dir, locate), {}),
        ("audit", partial(_audit, paths), ()),
    ]
    if pg_conninfo is not None:
        readers.append(("PostgreSQL", partial(read_postgres, pg_conninfo, bin_dir=bin_dir), None))
    found = read_each(readers)
    uname = os.uname()
    return Environment(
        captured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        hostname=socket.gethostname(),
        os_release=found["os-release"] or "unknown",
        kernel=found["kernel"] or f"{uname.release} {uname.version}",
        cpu=found["cpu"],
        memory_bytes=found["memory"] or _sysconf_memory(),
        disks=found["disks"],
        filesystems=tuple(fs for what, _, _ in filesystems if (fs := found[what]) is not None),
        sysctls=found["sysctls"],
        limits=found["limits"],
        transparent_hugepages=found["transparent hugepages"],
        clocksource=found["clocksource"][0],
        available_clocksources=found["clocksource"][1],
        postgres=found.get("PostgreSQL"),
        tools=found["tool versions"],
        audit=found["audit"],
    )


def _audit(paths: Sequence[Path]) -> tuple[AuditFinding, ...]:
    """What ``pgrig audit`` says about this machine (reads only)."""
    return tuple(
        AuditFinding(f.name, f.current, f.recommended, f.status, f.why, f.how)
        for f in audit.findings([Path(p) for p in paths])
    )


def _sysconf_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0
