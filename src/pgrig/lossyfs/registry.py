"""The record of every lossy mount pgrig makes, and the cleanup of orphans.

Each mount is recorded in the state directory (``<state>/lossyfs/<fsname>.json``)
before it exists, so ``clean_orphans`` can undo it after pgrig itself was killed -
and only it: a mount is touched only if /proc/self/mountinfo shows that
mountpoint with the unique source name (fsname) pgrig gave it, and a process is
signalled only if its command line is the lossyfs server for that fsname.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pgrig import ownership, proc
from pgrig.cluster import workdir
from pgrig.environment import parse_mountinfo
from pgrig.hosts.local import HERE
from pgrig.ownership import state_dir

FSTYPE = "fuse.lossyfs"
# The native latency layer (pgrig.storage.nativefs) records its mounts here too,
# so one cleanup undoes both kinds.
NATIVE_FSTYPE = "fuse.pgrig-latencyfs"
NATIVE_BINARY = b"pgrig-latencyfs"
RUN_PREFIX = "pgrig-lossyfs-"
RECORDS = "lossyfs"  # the mount records' directory in the state directory
RUN_MARKER = ".pgrig-lossyfs"


@dataclass(frozen=True)
class MountRecord:
    """What pgrig mounted, written before the mount exists (the orphan marker)."""

    fsname: str
    mountpoint: str
    backing: str
    run_dir: str
    owner_pid: int
    host: str
    created_at: float
    fs_pid: int | None = None
    created_mountpoint: bool = False
    owner_start: int | None = None  # the owner PID's start time
    study: str = ""  # the study that mounted it (pgrig.ownership)

    def owner_alive(self) -> bool:
        return ownership.owner_alive(self.owner_pid, self.host, self.owner_start)


def registry_dir() -> Path:
    return state_dir() / RECORDS


def write_record(record: MountRecord) -> None:
    """Atomically: a crash must leave the old record or the new one."""
    directory = registry_dir()
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{record.fsname}.json"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(record), out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, final)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def drop_record(record: MountRecord) -> None:
    with contextlib.suppress(FileNotFoundError):
        (registry_dir() / f"{record.fsname}.json").unlink()


def _lossy_mounts() -> set[tuple[str, str]]:
    """(mountpoint, fsname) of every lossy filesystem mounted here."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return set()
    return {
        (m.mountpoint, m.source)
        for m in parse_mountinfo(text)
        if m.fstype in (FSTYPE, NATIVE_FSTYPE)
    }


def is_mounted(mountpoint: str, fsname: str) -> bool:
    """True if ``mountpoint`` carries our mount (matched by its unique source name)."""
    return (mountpoint, fsname) in _lossy_mounts()


def lazy_unmount(mountpoint: str, fsname: str) -> None:
    if not is_mounted(mountpoint, fsname):
        return
    fusermount = shutil.which("fusermount3") or "fusermount3"
    argv = [fusermount, "-u", "-z", mountpoint]
    HERE.run(argv, timeout=30, check=False, what="fusermount3")


def _fs_process(pid: int, fsname: str) -> bool:
    """Is ``pid`` really the lossyfs (or native latency layer's) process serving
    ``fsname``? (never signal a stranger)"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    ours = b"pgrig.lossyfs" in cmdline or os.path.basename(cmdline[0]) == NATIVE_BINARY
    return ours and f"--fsname={fsname}".encode() in cmdline


def _stop_pid(pid: int, fsname: str, timeout: float) -> None:
    """SIGTERM (clean shutdown), then SIGKILL, of a verified lossyfs process."""
    proc.escalate(
        pid, (signal.SIGTERM, signal.SIGKILL), grace=timeout, ours=lambda: _fs_process(pid, fsname)
    )


def clean_orphans(
    log: Callable[[str], None] | None = None,
    *,
    study: str | None = None,
    left: list[str] | None = None,
) -> list[str]:
    """Unmount lossy filesystems left by pgrig processes that are gone; returns
    their mountpoints. PostgreSQL servers running on such a mount are stopped first;
    then the filesystem process gets SIGTERM, which writes its cache to the backing
    directory (what an orderly umount would do). Call it before
    ``workdir.clean_orphans``, so that removes work directories no longer mounted.
    Only ``study``'s orphans (None: every study's); others are added to ``left``."""
    cleaned: list[str] = []
    registry = registry_dir()
    if not registry.is_dir():
        return cleaned
    for entry in sorted(registry.glob("*.json")):
        try:
            record = MountRecord(**json.loads(entry.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if record.owner_alive():
            continue
        if not ownership.removable(record.study, study):
            if left is not None:
                left.append(f"lossy mount {record.mountpoint} (study {record.study or 'unknown'})")
            continue
        if log:
            log(f"found lossy mount {record.mountpoint} of gone pgrig pid {record.owner_pid}")
        if is_mounted(record.mountpoint, record.fsname):
            for datadir in _server_dirs_inside(record.mountpoint):
                if workdir.stop_orphan_server(datadir) and log:
                    log(f"stopped the PostgreSQL server of {datadir} on it")
        if record.fs_pid is not None:
            _stop_pid(record.fs_pid, record.fsname, timeout=10)
        lazy_unmount(record.mountpoint, record.fsname)
        remove_run_dir(Path(record.run_dir))
        if record.created_mountpoint:
            with contextlib.suppress(OSError):
                os.rmdir(record.mountpoint)  # only if empty: never delete contents
        drop_record(record)
        cleaned.append(record.mountpoint)
    return cleaned


def _server_dirs_inside(mountpoint: str) -> set[Path]:
    """Working directories under ``mountpoint`` of running processes: a PostgreSQL
    server chdirs to its data directory (stop_orphan_server checks postmaster.pid
    before it signals anything). Stopped before the unmount, or the server would be
    left running on a dead filesystem."""
    found: set[Path] = set()
    prefix = mountpoint.rstrip("/") + "/"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd.startswith(prefix):
            found.add(Path(cwd))
    return found


def remove_run_dir(run_dir: Path) -> None:
    if (run_dir / RUN_MARKER).is_file():
        shutil.rmtree(run_dir, ignore_errors=True)


# A run directory of an older pgrig names no maker: one younger than this may be
# a live mount's between its mkdtemp and its record.
UNNAMED_GRACE_S = 300.0


def stale_run_dirs() -> list[Path]:
    """Run directories (``/tmp/pgrig-lossyfs-*``) left without their mount: they
    carry pgrig's marker, no mount record names them (a record's own cleanup
    removes its directory, for its study only), the pgrig that made them is gone,
    nothing is mounted on the mountpoint the marker names, and no process uses
    them (the filesystem process logs there and binds its control socket there)."""
    named: set[str] = set()
    for entry in registry_dir().glob("*.json") if registry_dir().is_dir() else ():
        with contextlib.suppress(OSError, ValueError, TypeError):
            named.add(MountRecord(**json.loads(entry.read_text())).run_dir)
    mounted = {mountpoint for mountpoint, _fsname in _lossy_mounts()}
    stale = []
    for path in Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}*"):
        try:
            if path.is_symlink() or not path.is_dir():
                continue
            mountpoint = (path / RUN_MARKER).read_text().strip()
            unnamed = not (path / workdir.SOCKET_OWNER).is_file()
            young = time.time() - path.stat().st_mtime < UNNAMED_GRACE_S
        except OSError:
            continue  # no marker: not provably ours
        if str(path) in named or mountpoint in mounted or workdir.maker_alive(path):
            continue
        if (unnamed and young) or proc.processes_in(path):
            continue
        stale.append(path)
    return stale


def clean_run_dirs() -> list[str]:
    """Remove ``stale_run_dirs``; returns their paths."""
    removed = []
    for path in stale_run_dirs():
        remove_run_dir(path)
        if not path.exists():
            removed.append(str(path))
    return removed
