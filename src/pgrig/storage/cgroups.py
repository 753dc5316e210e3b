"""Cgroups pgrig creates and owns, on cgroup v2 or v1 - shared by throttle and memcg.

A ``Cgroup`` is one named group (``pgrig-<id>``) in every hierarchy that holds
a controller it needs: on cgroup v2 one directory; on v1 one directory per
controller hierarchy (this machine mounts blkio and memory separately). It is
recorded in the storage registry before it is made, so ``clean_orphans`` can
remove it after a crash; pgrig never removes a cgroup it has no record of.

Processes join it by PID (``add``) or - so that everything they fork is in it
from the start - from inside the child before ``exec`` (``preexec``, given to
this machine's executor (``HERE.stream(preexec=...)``), which calls it while
still root).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pgrig import environment, proc
from pgrig.storage import state
from pgrig.storage.errors import CgroupError

log = logging.getLogger(__name__)

# pgrig's controller names -> cgroup v1 subsystem names.
V1_NAMES = {"io": "blkio", "memory": "memory", "cpuset": "cpuset", "cpu": "cpu"}
PREFIX = "pgrig-"


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1 or 2
    root: Path  # where it is mounted


def _mounts() -> list[environment.Mount]:
    text = environment.read_text(Path("/proc/self/mountinfo")) or ""
    return environment.parse_mountinfo(text)


def hierarchy_for(controller: str) -> Hierarchy:
    """Where ``controller`` ("io" or "memory") can be used: v2 if the unified hierarchy
    offers it, else the v1 hierarchy of that subsystem. CgroupError says which is missing."""
    mounts = _mounts()
    v2_seen = []
    for mount in mounts:
        if mount.fstype == "cgroup2":
            root = Path(mount.mountpoint)
            offered = (environment.read_text(root / "cgroup.controllers") or "").split()
            v2_seen.append(f"{root} offers {' '.join(offered) or 'none'}")
            if controller in offered:
                enabled = (environment.read_text(root / "cgroup.subtree_control") or "").split()
                if controller not in enabled:
                    raise CgroupError(
                        f"cgroup v2 at {root} has the {controller} controller but does not "
                        "enable it for child groups",
                        hint=f"echo +{controller} > {root}/cgroup.subtree_control",
                    )
                return Hierarchy(2, root)
    v1_name = V1_NAMES[controller]
    for mount in mounts:
        if mount.fstype == "cgroup" and v1_name in mount.super_options.split(","):
            return Hierarchy(1, Path(mount.mountpoint))
    raise CgroupError(
        f"the {controller} cgroup controller is not available: no cgroup v1 hierarchy with "
        f"{v1_name}, and cgroup v2 " + ("; ".join(v2_seen) if v2_seen else "is not mounted"),
        hint=(
            f"enable it (kernel CONFIG_BLK_DEV_THROTTLING / CONFIG_MEMCG), mount it "
            f"(mount -t cgroup -o {v1_name} none /sys/fs/cgroup/{v1_name}) or on v2 "
            f"echo +{controller} > /sys/fs/cgroup/cgroup.subtree_control"
        ),
    )


class Cgroup:
    """One pgrig-owned cgroup across the hierarchies of its controllers."""

    def __init__(
        self, name: str, dirs: dict[str, Path], versions: dict[str, int], record_id: str = ""
    ) -> None:
        self.name = name
        self.record_id = record_id
        self.dirs = dirs  # controller -> directory
        self.versions = versions  # controller -> 1 or 2

    def __repr__(self) -> str:
        return f"Cgroup({self.name!r}, {sorted(self.dirs)})"

    def version(self, controller: str) -> int:
        return self.versions[controller]

    @property
    def procs_files(self) -> list[Path]:
        return sorted({d / "cgroup.procs" for d in self.dirs.values()})

    def path(self, controller: str, filename: str) -> Path:
        if controller not in self.dirs:
            raise CgroupError(
                f"cgroup {self.name} was not created with the {controller} controller"
            )
        return self.dirs[controller] / filename

    def write(self, controller: str, filename: str, value: str) -> None:
        """Write a control file; the kernel's refusal becomes a CgroupError naming both."""
        target = self.path(controller, filename)
        try:
            with open(target, "w") as fh:
                fh.write(value)
        except OSError as exc:
            raise CgroupError(
                f"the kernel refused {value!r} in {target}: {exc.strerror}",
                hint="check the device number (major:minor of a whole disk, not a partition) "
                "and the value",
            ) from exc

    def read(self, controller: str, filename: str) -> str:
        try:
            return self.path(controller, filename).read_text()
        except OSError as exc:
            raise CgroupError(f"cannot read {self.path(controller, filename)}: {exc}") from exc

    def add(self, pid: int) -> None:
        """Move a running process (all its threads) in; its later children follow it."""
        for procs in self.procs_files:
            try:
                procs.write_text(str(pid))
            except OSError as exc:
                raise CgroupError(f"cannot move pid {pid} into {procs}: {exc.strerror}") from exc

    def pids(self) -> list[int]:
        found: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in procs.read_text().split())
        return sorted(found)

    def preexec(self) -> Callable[[], None]:
        """A function for a child process between fork and exec: it moves itself in.

        It only makes system calls on precomputed bytes - no imports, no locks -
        because it runs in a forked copy of a possibly multithreaded pgrig.
        """
        files = [os.fsencode(p) for p in self.procs_files]

        def enter() -> None:
            me = str(os.getpid()).encode()
            for path in files:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, me)
                finally:
                    os.close(fd)

        return enter


def descendants(pid: int) -> list[int]:
    """All descendants of ``pid`` (from /proc/*/stat parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[-1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def create(controllers: tuple[str, ...], *, purpose: str) -> Cgroup:
    """Make ``pgrig-<id>`` in the hierarchy of each controller, recorded first."""
    if os.geteuid() != 0:
        raise CgroupError("creating cgroups needs root", hint="run pgrig as root")
    where = {c: hierarchy_for(c) for c in controllers}
    record = state.save(state.new_record("cgroup", note=purpose))
    name = PREFIX + record.id
    dirs = {c: h.root / name for c, h in where.items()}
    record = state.update(record, cgroups=tuple(sorted({str(d) for d in dirs.values()})))
    made = []
    try:
        for directory in sorted(set(dirs.values())):
            directory.mkdir()
            made.append(directory)
    except OSError as exc:
        for directory in reversed(made):
            with contextlib.suppress(OSError):
                directory.rmdir()
        state.forget(record)
        raise CgroupError(f"cannot create cgroup {directory}: {exc.strerror}") from exc
    return Cgroup(name, dirs, {c: h.version for c, h in where.items()}, record.id)


def _evacuate(directory: Path) -> list[int]:
    """Move processes still in ``directory`` to its parent so it can be removed."""
    procs = directory / "cgroup.procs"
    parent = directory.parent / "cgroup.procs"
    moved = []
    with contextlib.suppress(OSError):
        for pid in procs.read_text().split():
            with contextlib.suppress(OSError):
                parent.write_text(pid)
                moved.append(int(pid))
    return moved


def remove_dir(directory: Path, attempts: int = 20) -> list[int]:
    """rmdir one pgrig cgroup directory; returns the PIDs that had to be moved out.

    Raises CgroupError if it cannot be removed (e.g. a process keeps coming back).
    """
    if not directory.name.startswith(PREFIX):
        raise CgroupError(f"refusing to remove {directory}: not a pgrig cgroup")
    moved: list[int] = []
    for _ in range(attempts):
        if not directory.exists():
            return moved
        moved += _evacuate(directory)
        try:
            directory.rmdir()
            return moved
        except OSError as exc:
            if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                raise CgroupError(f"cannot remove cgroup {directory}: {exc.strerror}") from exc
        time.sleep(0.1)
    raise CgroupError(
        f"cgroup {directory} is still busy",
        hint=f"see {directory}/cgroup.procs; stop those processes, then `rmdir {directory}`",
    )


def remove(cgroup: Cgroup) -> list[int]:
    moved = []
    # A signal now would leave the cgroup (and its record) until `pgrig clean`:
    # it waits for the removal (issue 19's memory-cgroup teardown under SIGHUP).
    with proc.signals_deferred():
        for directory in sorted(set(cgroup.dirs.values())):
            moved += remove_dir(directory)
        if cgroup.record_id:
            state.forget(cgroup.record_id)
    if moved:
        log.warning("processes %s were still in cgroup %s; moved to its parent", moved, cgroup.name)
    return moved


@contextmanager
def owned(controllers: tuple[str, ...], *, purpose: str) -> Iterator[Cgroup]:
    """A cgroup for the duration of the block; processes left in it are moved out."""
    cgroup = create(controllers, purpose=purpose)
    try:
        yield cgroup
    finally:
        remove(cgroup)


def clean_orphans(study: str | None = None, left: list[str] | None = None) -> list[str]:
    """Remove the cgroups of ``study``'s (None: any) pgrig runs that are gone; never
    raises, reports instead. Other studies' are added to ``left``."""
    lines = []
    for record in state.orphans("cgroup", study=study, left=left):
        problems = []
        for text in record.cgroups:
            directory = Path(text)
            try:
                moved = remove_dir(directory)
            except CgroupError as exc:
                problems.append(f"{exc} ({exc.hint})")
                continue
            extra = f" (moved pids {moved} to its parent)" if moved else ""
            lines.append(f"removed cgroup {directory}{extra}")
        if problems:
            lines += problems
        else:
            state.forget(record)
    return lines
