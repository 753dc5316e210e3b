"""Loop devices and mounts, identified by what they point at - and undoing them.

A loop device is ours only if its backing file is one pgrig created (in a
directory carrying our marker); a mount is ours only if it is at our mount point
and its source is such a loop device. ``undo`` removes exactly those, so it is
safe after a crash, with other engineers' loop devices and mounts around.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pgrig import environment, proc
from pgrig.errors import BinaryNotFound
from pgrig.hosts.executor import C_LOCALE
from pgrig.hosts.local import HERE
from pgrig.storage import state

# Tool -> Debian package that ships it.
PACKAGES = {
    "losetup": "util-linux",
    "mount": "mount",
    "umount": "mount",
    "mkfs.xfs": "xfsprogs",
    "xfs_info": "xfsprogs",
    "mkfs.ext4": "e2fsprogs",
    "mke2fs": "e2fsprogs",
    "dumpe2fs": "e2fsprogs",
    "mkfs.btrfs": "btrfs-progs",
    "btrfs": "btrfs-progs",
}
SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


def tool(name: str) -> str:
    """Absolute path of a system tool, or BinaryNotFound naming the Debian package."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))
    if found is None:
        package = PACKAGES.get(name, name)
        raise BinaryNotFound(
            f"{name} is not installed (needed for loop-device filesystem targets)",
            hint=f"apt-get install {package}  (or run scripts/install-deps.sh)",
        )
    return found


def loop_backing_files() -> dict[str, str]:
    """``{"/dev/loop3": "/var/tmp/x/data.img", ...}`` for every attached loop device."""
    found = {}
    for entry in Path("/sys/block").glob("loop*"):
        try:
            backing = (entry / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        found[f"/dev/{entry.name}"] = backing.removesuffix(" (deleted)")
    return found


def loops_of(files: tuple[str, ...]) -> list[str]:
    """Loop devices backed by one of ``files``: the only loop devices we may detach."""
    wanted = {os.path.realpath(f) for f in files}
    return sorted(dev for dev, backing in loop_backing_files().items() if backing in wanted)


def _detached(device: str, files: tuple[str, ...], within_s: float = 5.0) -> bool:
    """Whether ``device`` is off ``files`` now or within ``within_s``: while another
    opener holds it (udev probing a device just made), ``losetup -d`` succeeds and
    the kernel detaches it when that one closes (seen listed right after a refused
    mount, then gone)."""
    deadline = time.monotonic() + within_s
    while device in loops_of(files):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def mount_at(mountpoint: str) -> environment.Mount | None:
    """The topmost mount at exactly ``mountpoint``, or None."""
    text = environment.read_text(Path("/proc/self/mountinfo")) or ""
    found = None
    for mount in environment.parse_mountinfo(text):
        if mount.mountpoint == mountpoint:
            found = mount
    return found


def mounts_under(path: str) -> list[str]:
    text = environment.read_text(Path("/proc/self/mountinfo")) or ""
    prefix = path.rstrip("/") + "/"
    mounts = environment.parse_mountinfo(text)
    return [m.mountpoint for m in mounts if m.mountpoint.startswith(prefix)]


def mountinfo_line(mountpoint: str) -> str:
    text = environment.read_text(Path("/proc/self/mountinfo")) or ""
    lines = [ln for ln in text.splitlines() if f" {mountpoint} " in ln]
    return lines[-1] if lines else ""


def holders(path: str) -> list[str]:
    """Processes with a cwd, root, open file or mapping under ``path``: why umount is busy."""
    prefix = path.rstrip("/") + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        uses = False
        try:
            links = [entry / "cwd", entry / "root", *(entry / "fd").iterdir()]
            for link in links:
                target = os.readlink(link)
                if target == path or target.startswith(prefix):
                    uses = True
                    break
            if not uses:
                uses = any(
                    prefix in line or line.endswith(" " + path)
                    for line in (entry / "maps").read_text().splitlines()
                )
        except OSError:
            continue
        if uses:
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                cmd = "?"
            found.append(f"pid {entry.name} ({cmd[:80]})")
    return found


# --------------------------------------------------------------------------
# Undo: shared by the context manager and clean() after a crash


def mounted_elsewhere(device: str, limit: int = 3) -> list[str]:
    """Processes of other mount namespaces in which ``device``'s filesystem is
    still mounted: a namespace copies the mounts of its moment (``ip netns exec``,
    systemd's PrivateTmp, a container), and where / is private the unmount here
    never reaches the copy, so ``losetup -d`` only marks the device to go when
    the last of those processes ends. One line per namespace, its first process."""
    try:
        rdev = os.stat(device).st_rdev
    except OSError:
        return []
    numbers = f"{os.major(rdev)}:{os.minor(rdev)}"
    seen = {os.readlink("/proc/self/ns/mnt")}
    found = []
    for pid in sorted(int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()):
        proc_dir = Path(f"/proc/{pid}")
        try:
            ns = os.readlink(proc_dir / "ns" / "mnt")
            if ns in seen:
                continue
            seen.add(ns)
            mounts = environment.parse_mountinfo((proc_dir / "mountinfo").read_text())
            comm = (proc_dir / "comm").read_text().strip()
        except OSError:
            continue
        for m in mounts:
            # the filesystem on it, or an xfs whose external log it is
            if m.major_minor == numbers or device in (m.source, *_logdevs(m.super_options)):
                found.append(
                    f"pid {pid} ({comm}): mounted at {m.mountpoint} in its own mount "
                    "namespace, made while the filesystem was mounted here"
                )
                break
        if len(found) >= limit:
            break
    return found


def _logdevs(options: str) -> list[str]:
    return [o.removeprefix("logdev=") for o in options.split(",") if o.startswith("logdev=")]


@dataclass(frozen=True)
class Leftovers:
    """What cleanup could not remove, and the commands that would."""

    mounts: tuple[str, ...] = ()
    loop_devices: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    holders: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.mounts or self.loop_devices or self.paths)

    def commands(self) -> list[str]:
        cmds = [f"# busy: {h}; stop it first" for h in self.holders]
        cmds += [f"umount {shlex.quote(m)}" for m in self.mounts]
        cmds += [f"losetup -d {d}" for d in self.loop_devices]
        cmds += [f"rm -r {shlex.quote(p)}" for p in self.paths]
        return cmds

    def describe(self) -> str:
        what = [*self.mounts, *self.loop_devices, *self.paths]
        return "left behind: " + ", ".join(what) + "; remove with: " + "; ".join(self.commands())


def _umount(mountpoint: str, attempts: int) -> tuple[bool, list[str]]:
    """umount with retries (a process may be closing its files); never lazy, never forced."""
    umount = tool("umount")
    delay = 0.2
    for attempt in range(attempts):
        if mount_at(mountpoint) is None:
            return True, []
        done = HERE.run([umount, mountpoint], timeout=120, env=C_LOCALE, check=False, what="umount")
        if done.ok:
            return True, []
        if attempt < attempts - 1:
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    return mount_at(mountpoint) is None, holders(mountpoint)


def undo(record: state.Record, *, attempts: int = 6) -> Leftovers:
    """Unmount, detach and delete what ``record`` lists - only what is provably ours.
    A signal meanwhile waits for the end: it stopped the umount and left the
    mount and its loop device until `pgrig clean` (issue 19's lab teardown)."""
    with proc.signals_deferred():
        return _undo(record, attempts)


def _forget_btrfs(device: str) -> None:
    """Drop an unmounted device from the kernel's btrfs device list before its loop
    device goes: the entry would outlive it, naming a loop number someone else
    attaches next. A device btrfs does not know is no error; no btrfs-progs, no
    btrfs target was ever built."""
    btrfs = shutil.which("btrfs") or shutil.which("btrfs", path=os.pathsep.join(SBIN))
    if btrfs is not None:
        argv = [btrfs, "device", "scan", "--forget", device]
        HERE.run(argv, timeout=30, env=C_LOCALE, check=False, what="btrfs device scan --forget")


def _undo(record: state.Record, attempts: int) -> Leftovers:
    directory = Path(record.directory) if record.directory else None
    ours = directory is not None and state.marker_id(directory) == record.id
    left_mounts: list[str] = []
    busy: list[str] = []
    for mountpoint in record.mountpoints:
        mount = mount_at(mountpoint)
        if mount is None:
            continue
        backing = loop_backing_files().get(mount.source)
        if backing is None or backing not in {os.path.realpath(f) for f in record.backing_files}:
            continue  # something else is mounted there now: not ours to unmount
        unmounted, who = _umount(mountpoint, attempts)
        if not unmounted:
            left_mounts.append(mountpoint)
            busy += who
    left_loops = []
    for device in loops_of(record.backing_files):
        if left_mounts:
            left_loops.append(device)  # still mounted: detaching would fail anyway
            continue
        _forget_btrfs(device)
        argv = [tool("losetup"), "-d", device]
        done = HERE.run(argv, timeout=60, env=C_LOCALE, check=False, what="losetup")
        files = record.backing_files
        gone = _detached(device, files) if done.ok else device not in loops_of(files)
        if not gone:
            left_loops.append(device)
            busy += mounted_elsewhere(device)
    left_paths = []
    if directory is not None and directory.exists():
        if not ours:
            pass  # no marker, or another record's: never delete
        elif left_mounts or left_loops or mounts_under(str(directory)):
            left_paths.append(str(directory))
        else:
            # The mount point is empty once unmounted; the data is in the image files.
            shutil.rmtree(directory)
    leftovers = Leftovers(tuple(left_mounts), tuple(left_loops), tuple(left_paths), tuple(busy))
    if not leftovers:
        state.forget(record)
    return leftovers


def clean_orphans(study: str | None = None, others: list[str] | None = None) -> list[str]:
    """Undo every filesystem target of ``study`` (None: of any) whose pgrig process
    is gone; returns what was removed and raises nothing: what cannot be removed is
    reported in the returned lines. Other studies' are added to ``others``."""
    lines = []
    for record in state.orphans("fs", study=study, left=others):
        left = undo(record)
        if left:
            lines.append(f"filesystem target {record.directory}: {left.describe()}")
        else:
            lines.append(f"removed filesystem target {record.directory} ({record.note})")
    return lines
