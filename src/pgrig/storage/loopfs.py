"""A filesystem target on a loop device: backing file -> losetup -> mkfs -> mount.

Seed 002 compares XFS and ext4 with stripe options, an external XFS log and
mount options such as noatime, nodiratime, logbufs, data=writeback. This module
builds such a filesystem on a file of a base directory, so a study can compare
filesystems and their options on one machine without a spare disk:

    spec = FsSpec.parse("xfs", "2G", mkfs="-d su=64k,sw=2", mount="noatime,logbufs=8",
                        external_log="128M")
    with loop_filesystem(Path("/var/tmp"), spec) as info:
        ... info.data_dir (owned by the server's OS user), info.major_minor ...

Everything is recorded (pgrig.storage.state) before it is created; the context
manager unmounts, detaches and deletes on the way out, and ``undo`` does the
same for a record left behind by a killed pgrig - touching only mounts, loop
devices and files that are provably ours (our marked directory, loop devices
whose backing file is in it).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from pgrig import environment, proc
from pgrig.errors import DiskSpaceError, ToolError, UsageError, WorkdirError
from pgrig.hosts.executor import C_LOCALE
from pgrig.hosts.local import HERE
from pgrig.storage import btrfs, fsinfo, state
from pgrig.storage.devices import (
    Leftovers,
    mount_at,
    mountinfo_line,
    tool,
    undo,
)
from pgrig.storage.errors import LeftoverError, OptionRefused, StorageError
from pgrig.storage.fsinfo import FilesystemInfo
from pgrig.storage.kmsg import KernelLog
from pgrig.units import parse_size

FSTYPES = ("xfs", "ext4", "btrfs")
TOOLS = {
    "xfs": ("losetup", "mount", "umount", "mkfs.xfs", "xfs_info"),
    "ext4": ("losetup", "mount", "umount", "mkfs.ext4", "mke2fs", "dumpe2fs"),
    "btrfs": ("losetup", "mount", "umount", "mkfs.btrfs", "btrfs"),
}
TIMEOUT = 300.0  # mkfs on a large file, or a mount replaying a log
DATA_SUBDIR = "pgrig-data"
DETAILS_TOOL = {"xfs": "xfs_info", "ext4": "dumpe2fs -h", "btrfs": "btrfs filesystem show, df"}


def check_prerequisites(fstype: str) -> None:
    if os.geteuid() != 0:
        raise StorageError(
            "filesystem targets need root (losetup, mkfs and mount)",
            hint="run pgrig as root, or test a directory on an existing filesystem",
        )
    for name in TOOLS[fstype]:
        tool(name)
    if not Path("/dev/loop-control").exists():
        raise StorageError(
            "this machine has no loop device support (/dev/loop-control is missing)",
            hint="modprobe loop; in a container, give it /dev/loop-control and /dev/loop*",
        )


@dataclass(frozen=True)
class FsSpec:
    """What to build: the filesystem, its size and the options the user chose."""

    fstype: str
    size_bytes: int
    mkfs_options: tuple[str, ...] = ()  # extra mkfs arguments, e.g. ("-d", "su=64k,sw=2")
    mount_options: tuple[str, ...] = ()  # e.g. ("noatime", "logbufs=8")
    external_log_bytes: int | None = None  # XFS log / ext4 journal on a second loop device
    direct_io: bool = True  # losetup --direct-io=on: no second page cache in the host
    preallocate: bool = True  # fallocate the backing file: no ENOSPC mid-benchmark
    owner: str | None = "postgres"  # OS user that gets <mountpoint>/pgrig-data
    stripes: int = 1  # loop devices the filesystem spans (btrfs raid0), size_bytes split

    def __post_init__(self) -> None:
        if self.fstype not in FSTYPES:
            raise UsageError(
                f"filesystem type {self.fstype!r} is not supported",
                hint=f"use one of: {', '.join(FSTYPES)}",
            )
        if self.size_bytes <= 0:
            raise UsageError(f"filesystem size {self.size_bytes} must be positive")
        if self.stripes < 1:
            raise UsageError(f"stripes = {self.stripes}: must be 1 or more")
        if self.stripes > 1 and self.fstype != "btrfs":
            raise UsageError(
                f"stripes = {self.stripes} with {self.fstype}: "
                + btrfs.why_not_striped(self.fstype),
                hint='use fs = "btrfs" for stripes, or one device with the mkfs stripe options '
                "(they shape the layout, not the devices)",
            )
        if self.external_log_bytes and self.fstype == "btrfs":
            raise UsageError(
                "btrfs has no external log or journal device",
                hint="drop the log size, or use xfs or ext4 for an external log",
            )

    @classmethod
    def parse(
        cls,
        fstype: str,
        size: str | int,
        *,
        mkfs: str = "",
        mount: str = "",
        external_log: str | int | None = None,
        direct_io: bool = True,
        owner: str | None = "postgres",
        stripes: int = 1,
    ) -> FsSpec:
        """From the strings a campaign file holds: mkfs options as a command line,
        mount options comma-separated (as ``mount -o`` takes them)."""
        try:
            mkfs_args = tuple(shlex.split(mkfs))
        except ValueError as exc:
            raise UsageError(f"mkfs options {mkfs!r}: {exc}") from exc
        return cls(
            fstype=fstype,
            size_bytes=size if isinstance(size, int) else parse_size(size),
            mkfs_options=mkfs_args,
            mount_options=tuple(o.strip() for o in mount.split(",") if o.strip()),
            external_log_bytes=(
                None
                if external_log is None
                else external_log
                if isinstance(external_log, int)
                else parse_size(external_log)
            ),
            direct_io=direct_io,
            owner=owner,
            stripes=stripes,
        )

    @property
    def total_bytes(self) -> int:
        return self.size_bytes + (self.external_log_bytes or 0)

    @property
    def stripe_bytes(self) -> int:
        """Each loop device's share of ``size_bytes``."""
        return self.size_bytes // self.stripes

    @property
    def backing_names(self) -> list[str]:
        """The data's backing files, one per stripe."""
        return [f"data{i}.img" for i in range(self.stripes)] if self.stripes > 1 else ["data.img"]

    def describe(self) -> str:
        parts = [f"{self.fstype} {self.size_bytes // 2**20} MiB"]
        if self.stripes > 1:
            parts[0] += f" raid0 over {self.stripes} loop devices"
        if self.mkfs_options:
            parts.append("mkfs " + " ".join(self.mkfs_options))
        if self.mount_options:
            parts.append("-o " + ",".join(self.mount_options))
        if self.external_log_bytes:
            parts.append(f"external log {self.external_log_bytes // 2**20} MiB")
        return ", ".join(parts)


# --------------------------------------------------------------------------
# Building


def _merge_option(args: tuple[str, ...], flag: str, value: str) -> list[str]:
    """Add ``flag value`` to mkfs arguments, joining an existing ``flag`` group:
    ``-l size=128m`` + ``logdev=X`` -> ``-l logdev=X,size=128m``."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == flag:
            out[i + 1] = f"{value},{out[i + 1]}"
            return out
    return [*out, flag, value]


def _option_value(args: tuple[str, ...], flag: str) -> str | None:
    for i, arg in enumerate(args[:-1]):
        if arg == flag:
            return args[i + 1]
    return None


def _kernel_lines(log: KernelLog, device: str, fstype: str) -> list[str]:
    """Lines about our device, or about the filesystem type without naming any device
    ("xfs: Unknown parameter 'nobarrier'"); not other engineers' "(loop5)" lines."""
    name = Path(device).name
    kept = []
    for line in log.new_lines([name, fstype]):
        if f"({name})" in line or "(" not in line.split(":", 1)[0]:
            kept.append(line)
    return kept


class LoopFilesystem:
    """One filesystem target; ``create()`` then ``destroy()``, or use ``loop_filesystem``."""

    def __init__(self, base: Path, spec: FsSpec, *, umount_attempts: int = 6) -> None:
        self.base = base
        self.spec = spec
        self.umount_attempts = umount_attempts
        self.record: state.Record | None = None
        self.info: FilesystemInfo | None = None

    def _add(self, name: str, item: str) -> None:
        assert self.record is not None
        self.record = state.add(self.record, name, item)

    def _check_base(self) -> Path:
        base = self.base
        if not base.is_dir():
            raise WorkdirError(
                f"base directory {base} for the filesystem target does not exist",
                hint="create it on the disk that should hold the backing file",
            )
        base = base.resolve()
        vfs = os.statvfs(base)
        free = vfs.f_bavail * vfs.f_frsize
        if self.spec.total_bytes > free:
            raise DiskSpaceError(
                f"a {self.spec.total_bytes / 2**30:.2f} GiB filesystem target does not fit in "
                f"{base}: {free / 2**30:.2f} GiB free",
                hint="choose a smaller size or another base directory",
            )
        return base

    def create(self) -> FilesystemInfo:
        spec = self.spec
        check_prerequisites(spec.fstype)
        base = self._check_base()
        owner = self._owner()
        self.record = state.save(state.new_record("fs", note=spec.describe()))
        directory = base / f"pgrig-{self.record.id}"
        self.record = state.update(self.record, directory=str(directory))
        try:
            directory.mkdir(mode=0o755)
            state.write_marker(directory, self.record)
            stripes = [self._attach(directory / n, spec.stripe_bytes) for n in spec.backing_names]
            data_dev = stripes[0]
            log_dev = None
            if spec.external_log_bytes:
                log_dev = self._attach(directory / "log.img", spec.external_log_bytes)
            mkfs_argv = self._mkfs(stripes, log_dev)
            mnt = directory / "mnt"
            mnt.mkdir(mode=0o755)
            self._add("mountpoints", str(mnt))
            asked = list(spec.mount_options)
            if spec.fstype == "xfs" and log_dev and not any(o.startswith("logdev=") for o in asked):
                asked.append(f"logdev={log_dev}")
            if spec.fstype == "btrfs":
                asked += btrfs.mount_options(stripes)
            kernel = self._mount(data_dev, mnt, asked)
            data_dir = self._data_dir(mnt, owner)
            self.info = self._describe(stripes, log_dev, mnt, data_dir, mkfs_argv, asked, kernel)
            return self.info
        except BaseException as exc:
            left = undo(self.record, attempts=self.umount_attempts)
            if left:
                exc.add_note(left.describe())
            raise

    def _owner(self) -> proc.OsUser | None:
        if self.spec.owner is None:
            return None
        try:
            return proc.OsUser.lookup(self.spec.owner)
        except KeyError:
            raise UsageError(
                f"OS user {self.spec.owner!r} (owner of the target's data directory) does not "
                "exist",
                hint="create it (Debian's postgresql package makes 'postgres') or set owner",
            ) from None

    def _attach(self, path: Path, size: int) -> str:
        self._add("backing_files", str(path))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if self.spec.preallocate:
                try:
                    os.posix_fallocate(fd, 0, size)
                except OSError:
                    os.ftruncate(fd, size)  # the host filesystem cannot preallocate
            else:
                os.ftruncate(fd, size)
        finally:
            os.close(fd)
        argv = [tool("losetup"), "--find", "--show"]
        if self.spec.direct_io:
            argv.append("--direct-io=on")
        done = HERE.run([*argv, str(path)], timeout=60, env=C_LOCALE, what="losetup")
        device = done.stdout.strip().splitlines()[-1]
        self._add("loop_devices", device)
        return device

    def _mkfs(self, stripes: list[str], log_device: str | None) -> list[str]:
        spec = self.spec
        opts = spec.mkfs_options
        device = stripes[0]
        if spec.fstype == "btrfs":
            argv = btrfs.mkfs_argv(stripes, opts)
        elif spec.fstype == "xfs":
            args = _merge_option(opts, "-l", f"logdev={log_device}") if log_device else list(opts)
            argv = [tool("mkfs.xfs"), *args, device]
        else:
            args = list(opts)
            if log_device:
                # The journal device's block size must equal the filesystem's; small
                # filesystems would otherwise get 1 KiB blocks.
                block = _option_value(opts, "-b") or "4096"
                if _option_value(opts, "-b") is None:
                    args = ["-b", block, *args]
                self._run_mkfs(
                    [tool("mke2fs"), "-q", "-F", "-O", "journal_dev", "-b", block, log_device],
                    "mke2fs -O journal_dev",
                )
                args += ["-J", f"device={log_device}"]
            argv = [tool("mkfs.ext4"), "-F", *args, device]
        self._run_mkfs(argv, Path(argv[0]).name)
        return argv

    def _run_mkfs(self, argv: list[str], what: str) -> None:
        done = HERE.run(argv, timeout=TIMEOUT, env=C_LOCALE, check=False, what=what)
        if done.ok:
            return
        names = fsinfo.refused_options(done.stderr, done.stdout)
        first = next((ln for ln in done.stderr.splitlines() if ln.strip()), "").strip()
        if names:
            raise OptionRefused(
                f"{what} refused option {', '.join(names)}: {first}",
                options=names,
                argv=argv,
                returncode=done.returncode,
                stderr=done.stderr,
                hint=f"check the option against `man {Path(argv[0]).name}` "
                f"(asked: {' '.join(self.spec.mkfs_options) or 'none'})",
            )
        # mkfs.xfs says why on its first line, then prints its whole usage: keep the why
        said = (done.stderr or done.stdout).split("Usage:", 1)[0].strip()
        raise ToolError(
            f"{what} failed",
            argv=argv,
            returncode=done.returncode,
            stderr=said or done.stderr or done.stdout,
            hint=f"asked mkfs options: {' '.join(self.spec.mkfs_options) or 'none'}",
        )

    def _mount(self, device: str, mnt: Path, options: list[str]) -> tuple[str, ...]:
        fstype = self.spec.fstype
        argv = [tool("mount"), "-t", fstype]
        if options:
            argv += ["-o", ",".join(options)]
        argv += [device, str(mnt)]
        with KernelLog() as klog:
            done = HERE.run(argv, timeout=TIMEOUT, env=C_LOCALE, check=False, what="mount")
            kernel = tuple(_kernel_lines(klog, device, fstype))
        if done.ok:
            return kernel
        names = fsinfo.refused_options(*kernel, done.stderr)
        said = "; ".join(kernel) or (done.stderr.strip().splitlines() or [""])[0]
        release = os.uname().release
        raise OptionRefused(
            f"the kernel ({release}) refused to mount {fstype} -o {','.join(options)}: {said}",
            options=names,
            kernel_messages=kernel,
            argv=[str(a) for a in argv],
            returncode=done.returncode,
            stderr=done.stderr,
            hint=(
                f"remove {', '.join(names)} from the mount options: this kernel does not accept "
                f"{'it' if len(names) == 1 else 'them'} for {fstype}"
                if names
                else "see the kernel log (dmesg) for the reason"
            ),
        )

    def _data_dir(self, mnt: Path, owner: proc.OsUser | None) -> Path:
        data = mnt / DATA_SUBDIR
        data.mkdir(mode=0o755)
        if owner is None:
            return data
        os.chown(data, owner.uid, owner.gid)
        if not HERE.writable_by(data, owner.name):
            raise WorkdirError(
                f"OS user {owner.name} cannot reach {data} (a parent of {self.base} is not "
                "searchable for it)",
                hint="choose a base directory that user can reach, e.g. under /var/tmp",
            )
        return data

    def _describe(
        self,
        stripes: list[str],
        log_device: str | None,
        mnt: Path,
        data_dir: Path,
        mkfs_argv: list[str],
        asked: list[str],
        kernel: tuple[str, ...],
    ) -> FilesystemInfo:
        spec = self.spec
        device = stripes[0]
        mount = mount_at(str(mnt))
        assert mount is not None, f"{mnt} is not mounted right after mount succeeded"
        effective = fsinfo.effective_options(mount.mount_options, mount.super_options)
        if spec.fstype == "btrfs":
            details = btrfs.details(mnt)
            facts = btrfs.facts(details)
        elif spec.fstype == "xfs":
            argv = [tool("xfs_info"), str(mnt)]
            details = HERE.run(argv, timeout=60, env=C_LOCALE, what="xfs_info").stdout
            facts = fsinfo.xfs_facts(details)
        else:
            argv = [tool("dumpe2fs"), "-h", device]
            details = HERE.run(argv, timeout=60, env=C_LOCALE, what="dumpe2fs").stdout
            facts = fsinfo.ext4_facts(details)
        host = environment.describe_filesystem(self.base)
        host_text = (
            f"{host.fstype} on {host.device} (mounted at {host.mountpoint})" if host else "unknown"
        )
        dio = environment.read_text(Path(f"/sys/block/{Path(device).name}/loop/dio"))
        # what an I/O cap is keyed by: each loop device the data is on (a btrfs
        # mount reports an anonymous 0:N, no block device)
        numbers = [environment.read_text(Path(f"/sys/block/{Path(d).name}/dev")) for d in stripes]
        return FilesystemInfo(
            fstype=spec.fstype,
            device=device,
            major_minor=mount.major_minor,
            size_bytes=spec.size_bytes,
            mountpoint=str(mnt),
            data_dir=str(data_dir),
            mkfs_options=spec.mkfs_options,
            mkfs_argv=tuple(str(a) for a in mkfs_argv),
            mount_options_asked=tuple(asked),
            mount_options=",".join(effective),
            options_not_shown=fsinfo.not_shown(tuple(asked), effective),
            log_device=log_device,
            backing_file=str(mnt.parent / spec.backing_names[0]),
            direct_io=(dio or "").strip() == "1",
            host_filesystem=host_text,
            mountinfo_line=mountinfo_line(str(mnt)),
            details=details,
            facts=facts,
            kernel_messages=kernel,
            stripes=tuple(stripes) if len(stripes) > 1 else (),
            io_devices=tuple((n or "").strip() for n in numbers),
            details_tool=DETAILS_TOOL[spec.fstype],
        )

    def release(self) -> str:
        """Keep the target as it is, out of the registry; say how to remove it."""
        if self.record is None or self.info is None:
            return "nothing kept"
        state.forget(self.record)
        self.record = None
        return kept_message(self.info)

    def destroy(self) -> Leftovers:
        if self.record is None:
            return Leftovers()
        left = undo(self.record, attempts=self.umount_attempts)
        if not left:
            self.record = None
        return left


# What the option check found accepted in this process: checked once.
_probed: set[tuple[str, int, tuple[str, ...], tuple[str, ...], int]] = set()


def check_options(spec: FsSpec, base: Path | None, *, what: str) -> None:
    """Refuse mkfs or mount options this machine rejects, before the study exists:
    the same mkfs and mount as the real target, on a sparse file of its size
    (removed again). Only the tools know their options, and the kernel its mount
    options, so asking them is the one check that cannot drift.
    ``what`` names the target in the error."""
    if not spec.mkfs_options and not spec.mount_options and spec.stripes == 1:
        return  # stripes: mkfs.btrfs knows each device's minimum size, not pgrig
    key = (spec.fstype, spec.size_bytes, spec.mkfs_options, spec.mount_options, spec.stripes)
    if key in _probed:
        return
    # At the target's own size (a sparse file: mkfs writes only its metadata):
    # options relative to it (agcount, a log size) hold there and may not on a
    # smaller filesystem (seed 002's agcount=32 needs 512 MiB, the minimum AG
    # being 16 MiB; a 300 MiB scratch filesystem refused what its 4 GiB takes).
    # With its external log too: `-l size=32m` sizes that device, and without it
    # mkfs.xfs read it as an internal log larger than a 32 MiB AG and refused.
    probe = replace(
        spec,
        direct_io=False,
        preallocate=False,
        owner=None,
    )
    where = base if base is not None and base.is_dir() else Path(tempfile.gettempdir())
    registry = state.registry_dir()
    fresh = not registry.exists()  # a refusal leaves no trace, not even the registry
    target = LoopFilesystem(where, probe)
    try:
        target.create()
    except OptionRefused as exc:
        # the message holds the tool's own line; its usage text would bury it
        raise OptionRefused(f"{what}: {exc.message}", options=exc.options, hint=exc.hint) from None
    except ToolError as exc:  # mkfs said no without naming the option (its usage text)
        if not exc.argv or "mk" not in Path(exc.argv[0]).name:
            raise  # losetup, mount...: not the options' fault
        asked = " ".join(spec.mkfs_options) or "none"
        # mkfs.btrfs says why on two lines ("too small", then the minimum): keep both
        said = [ln.strip() for ln in (exc.stderr or "").strip().splitlines() if ln.strip()][:2]
        hint = f"check the options against `man mkfs.{spec.fstype}`"
        if spec.stripes > 1:
            each = spec.stripe_bytes / 2**20
            hint = (f"each of the {spec.stripes} stripes gets size / stripes ({each:,.0f} MiB): "
                    f"raise size or lower stripes; or {hint}")  # fmt: skip
        raise OptionRefused(
            f"{what}: {exc.message} with mkfs options {asked}"
            + (f": {'; '.join(said)}" if said else ""),
            hint=hint,
        ) from None
    finally:
        left = target.destroy()
        if fresh:
            with contextlib.suppress(OSError):  # not empty: someone else's record
                registry.rmdir()
        if left:
            raise LeftoverError(left.describe())
    _probed.add(key)


def kept_message(info: FilesystemInfo) -> str:
    loops = [d for d in (*(info.stripes or (info.device,)), info.log_device) if d]
    how = "; ".join(
        [f"umount {info.mountpoint}", *(f"losetup -d {d}" for d in loops),
         f"rm -r {Path(info.mountpoint).parent}"]
    )  # fmt: skip
    return f"kept the filesystem target {info.mountpoint}; remove it with: {how}"


@contextmanager
def loop_filesystem(
    base: Path,
    spec: FsSpec,
    *,
    umount_attempts: int = 6,
    keep: Callable[[], bool] = lambda: False,
) -> Iterator[FilesystemInfo]:
    """Create the target, yield its description, then unmount, detach and delete -
    unless ``keep()`` says so on the way out (--keep, or a crashed server's
    evidence): then it stays mounted and leaves the registry, so no later
    ``pgrig clean`` removes it.

    A mount still busy after the retries raises ``LeftoverError`` naming what is
    left and how to remove it (or, when the body already raised, is added to
    that exception as a note).
    """
    target = LoopFilesystem(base, spec, umount_attempts=umount_attempts)
    info = target.create()
    failed = False
    try:
        yield info
    except BaseException as exc:
        failed = True
        if keep():
            exc.add_note(target.release())
            raise
        left = target.destroy()
        if left:
            exc.add_note(left.describe())
        raise
    finally:
        if not failed:
            if keep():
                target.release()
            else:
                left = target.destroy()
                if left:
                    raise LeftoverError(
                        f"filesystem target {info.mountpoint} could not be removed completely: "
                        + left.describe(),
                        hint="stop the processes using it, then run `pgrig clean`",
                    )
