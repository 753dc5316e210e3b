"""The native latency layer: ``pgrig-latencyfs`` (native/pgrig-latencyfs/, C on
libfuse3), mounted, set and read from here.

A passthrough FUSE filesystem that adds a cloud disk's read and sync latency
and caps total IOPS and MB/s (reads and writes together, as a cloud disk counts
them), with a burst rate while credits last, and an instance-wide cap shared by
every disk of a target: each mount maps its own control file, and the disks of
one instance also map one shared file (``Instance``), whose buckets every I/O
of every disk draws from. The settings are read by the layer on every request,
so a calibration changes them live.

The control file's layout is fixed; ``pgrig-latencyfs.c`` (``struct ctl``) is
the other half of it. Mounts are recorded in the lossy filesystem's registry
before they exist, so ``pgrig clean`` undoes them after a kill.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import re
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType

from pgrig import proc
from pgrig.cluster import workdir
from pgrig.errors import PgrigError
from pgrig.hosts.executor import Started
from pgrig.hosts.local import HERE
from pgrig.lossyfs.mount import (
    LossyFsError,
    LossyFsUnavailable,
    _check_paths,
    forget,
    new_record,
    wait_mounted,
)
from pgrig.lossyfs.registry import (
    RUN_MARKER,
    RUN_PREFIX,
    MountRecord,
    is_mounted,
    lazy_unmount,
    remove_run_dir,
    write_record,
)
from pgrig.monitor.procfs import CLK_TCK, parse_pid_stat

BINARY = "pgrig-latencyfs"
ENV = "PGRIG_LATENCYFS"  # a path to the binary, over the one built into the venv
BUILD_HINT = "build it with scripts/build-native.sh (run by `make venv`; needs libfuse3-dev, gcc)"

MAGIC = 0x70677269674C4154  # "pgrigLAT"
VERSION = 2
SIZE = 4096
# struct ctl: 9 int64 header fields (the last two: the disk's small sync and
# the time added to each backing sync, ns), 4 buckets of 4 int64, 16 uint64
# counters
_HEADER = struct.Struct("<QQqqqqqqq")
_BUCKET = struct.Struct("<qqqq")
BUCKETS_AT = _HEADER.size
COUNTERS_AT = BUCKETS_AT + 4 * _BUCKET.size
_COUNTERS = struct.Struct("<16Q")
COUNTERS = (
    "reads", "writes", "syncs", "read_bytes", "write_bytes", "throttled", "throttle_ns",
    "read_delay_ns", "sync_delay_ns", "backing_sync_ns", "bulk_syncs", "bulk_sync_ns",
)  # fmt: skip
IOPS, BPS, BURST_IOPS, BURST_BPS = range(4)
# How far a capped disk may run ahead of its rate without credits: a disk's
# limiter works over windows, not per I/O, and an I/O whose thread woke late
# (a shared CPU) may catch up within this. 5 ms lost 9% of a 2,000-IOPS cap at
# load 8 here (tests/test_storage_nativefs.py); 50 ms adds at most one burst
# of 50 ms at the rate.
SLACK_S = 0.05


def binary() -> Path | None:
    """The native layer's binary: $PGRIG_LATENCYFS, beside this Python (the venv's
    bin, where the install step builds it), or on PATH; None when not built."""
    given = os.environ.get(ENV)
    if given:
        return Path(given) if os.access(given, os.X_OK) else None
    beside = Path(sys.executable).parent / BINARY
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which(BINARY)
    return Path(found) if found else None


@functools.lru_cache(maxsize=4)
def _speaks(path: str, mtime_ns: int) -> int | None:
    """The control-file version a built binary speaks (its ``--version``); None
    when it does not say. Cached per file and modification time."""
    try:
        done = proc.run([path, "--version"], timeout=10, check=False)
    except (PgrigError, OSError):
        return None
    m = re.match(rf"{BINARY} (\d+)", done.stdout)
    return int(m.group(1)) if m else None


def unavailable() -> str | None:
    """None when a native mount can work here, else why not (naming the fix)."""
    found = binary()
    if found is None:
        return f"the native latency layer {BINARY} is not built: {BUILD_HINT}"
    speaks = _speaks(str(found), found.stat().st_mtime_ns)
    if speaks != VERSION:
        # an older build refuses the control file pgrig writes, after the mount began
        return (
            f"the native latency layer {found} is out of date (control file version "
            f"{speaks}, this pgrig writes {VERSION}): re{BUILD_HINT}"
        )
    try:
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return f"cannot open /dev/fuse: {exc.strerror} (no FUSE in this kernel or container)"
    os.close(fd)
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian package fuse3)"
    return None


def require(what: str) -> Path:
    reason = unavailable()
    if reason:
        raise LossyFsUnavailable(f"{what} needs the native latency layer: {reason}",
                                 hint=BUILD_HINT)  # fmt: skip
    found = binary()
    assert found is not None
    return found


@dataclass(frozen=True)
class Caps:
    """A disk's (or an instance's) total limits: reads and writes count together.
    ``burst_iops`` with ``credits``: the disk runs at up to ``burst_iops`` while
    it has credits (I/Os above the baseline), refilled at the baseline rate."""

    iops: int | None = None
    mbps: float | None = None  # MB = 10^6 bytes
    burst_iops: int | None = None
    credits: int = 0

    def describe(self) -> str:
        parts = []
        if self.iops:
            parts.append(f"{self.iops:,} IOPS")
        if self.mbps:
            parts.append(f"{self.mbps:,.0f} MB/s")
        text = " and ".join(parts) or "no cap"
        if self.burst_iops and self.credits:
            text += f", bursting to {self.burst_iops:,} IOPS on {self.credits:,} credits"
        return f"{text} (reads and writes together)" if parts else text


class Control:
    """One control file mapped here: the layer's settings and its counters."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        if create:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.ftruncate(fd, SIZE)
                self._map = mmap.mmap(fd, SIZE)
            finally:
                os.close(fd)
            _HEADER.pack_into(self._map, 0, MAGIC, VERSION, 0, 0, 1000, 0, 0, 0, 0)
        else:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            try:
                self._map = mmap.mmap(fd, SIZE)
            finally:
                os.close(fd)

    def _set(self, index: int, value: int) -> None:
        struct.pack_into("<q", self._map, 8 * index, int(value))

    def set_read_delay(self, us: float) -> None:
        self._set(2, round(us * 1000))

    def set_sync_delay(self, us: float, *, factor: float = 1.0, overhead_us: float = 0.0) -> None:
        self._set(2 + 1, round(us * 1000))
        self._set(4, round(factor * 1000))
        self._set(5, round(overhead_us * 1000))

    def set_spin(self, us: float) -> None:
        self._set(6, round(us * 1000))

    def set_small_sync(self, us: float) -> None:
        """The disk's own small sync as calibrated: a bulk flush (over 256 KiB to
        write) lasts its own time plus the class's extra latency over the disk's
        small sync ((factor - 1) x it in proportion, the delay less it on a
        deadline), this one until the layer has timed small syncs itself."""
        self._set(7, round(us * 1000))

    def set_backing_extra(self, us: float) -> None:
        """Every backing sync takes this much longer, counted as the disk's own: a
        disk slower than the one under the mount, without one (tests, benches)."""
        self._set(8, round(us * 1000))

    def _bucket(self, which: int, rate: float | None, tau_s: float) -> None:
        at = BUCKETS_AT + which * _BUCKET.size
        struct.pack_into("<qq", self._map, at, round(rate or 0), round(tau_s * 1e9))

    def set_caps(self, caps: Caps) -> None:
        """The token buckets: baseline IOPS and bytes/s with a depth of ``credits``
        I/Os above the baseline; the burst rate, where there are credits, with none."""
        iops, bps = caps.iops, caps.mbps * 1e6 if caps.mbps else None
        depth = SLACK_S + (caps.credits / iops if iops and caps.credits else 0.0)
        self._bucket(IOPS, iops, depth)
        self._bucket(BPS, bps, SLACK_S)
        self._bucket(BURST_IOPS, caps.burst_iops if caps.credits else None, SLACK_S)
        self._bucket(BURST_BPS, None, 0.0)

    def counters(self) -> dict[str, int]:
        values = _COUNTERS.unpack_from(self._map, COUNTERS_AT)
        return dict(zip(COUNTERS, values, strict=False))

    def close(self) -> None:
        with contextlib.suppress(ValueError, BufferError):
            self._map.close()


class Instance:
    """The buckets every disk of one instance shares (its own IOPS and MB/s cap):
    a control file that each ``NativeMount`` of the instance maps too."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self.dir = Path(tempfile.mkdtemp(prefix=RUN_PREFIX))
        workdir.write_owner(self.dir)  # `pgrig clean` removes it once its maker is gone
        (self.dir / RUN_MARKER).write_text("instance")
        self.control = Control(self.dir / "instance.ctl", create=True)
        self.control.set_caps(caps)

    def pause(self, paused: bool) -> None:
        """Its caps off (a disk of it calibrating: fio's figures are the latency
        alone) or back on; live, as a disk's."""
        self.control.set_caps(Caps() if paused else self.caps)

    def close(self) -> None:
        self.control.close()
        remove_run_dir(self.dir)

    def __enter__(self) -> Instance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class CpuTime:
    """The layer's process's CPU time (user + system), seconds."""

    seconds: float
    at: float  # time.monotonic() of the reading


def cpu_of(pid: int) -> CpuTime | None:
    """A process's CPU time so far (user + system, all its threads; /proc, as the
    monitor reads it), or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return CpuTime(parse_pid_stat(text).ticks / CLK_TCK, time.monotonic())


class NativeMount:
    """``pgrig-latencyfs`` over ``backing`` on ``mountpoint``: the calls of
    ``LossyMount`` the latency layer uses (``set_sync_delay``, ``set_read_delay``,
    ``stats``), and the caps. Started at ``nice`` (a niceness added to pgrig's)."""

    def __init__(
        self,
        backing: Path,
        mountpoint: Path,
        *,
        caps: Caps | None = None,
        instance: Instance | None = None,
        allow_other: bool = True,
        timeout: float = 30.0,
        nice: int = 0,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.backing = Path(os.path.realpath(backing))
        self.mountpoint = Path(os.path.realpath(mountpoint))
        self.caps = caps
        self.instance = instance
        self.allow_other = allow_other
        self.timeout = timeout
        self.nice = nice
        self.preexec = preexec  # in the child before exec: its own cgroup
        self.control: Control | None = None
        self._proc: Started | None = None
        self._record: MountRecord | None = None
        self._created_mountpoint = False
        self.sync_delay_us = 0.0
        self.read_delay_us = 0.0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def mounted(self) -> bool:
        return self._record is not None and is_mounted(str(self.mountpoint), self._record.fsname)

    @property
    def log_file(self) -> Path | None:
        return Path(self._record.run_dir) / "fs.log" if self._record else None

    def start(self) -> None:
        exe = require(f"mounting {self.mountpoint}")
        if self._proc is not None:
            raise LossyFsError(f"{self.mountpoint} is already mounted by this NativeMount")
        if _check_paths(self.backing, self.mountpoint):
            self._created_mountpoint = True
        record = new_record("pgrig-latencyfs", self.mountpoint, self.backing,
                            self._created_mountpoint)  # fmt: skip
        self._record = record
        try:
            self.control = Control(Path(record.run_dir) / "disk.ctl", create=True)
            if self.caps is not None:
                self.control.set_caps(self.caps)
            argv = [str(exe), f"--backing={self.backing}", f"--control={self.control.path}"]
            if self.instance is not None:
                argv.append(f"--instance={self.instance.control.path}")
            if self.allow_other:
                argv.append("--allow-other")
            argv += [f"--fsname={record.fsname}", str(self.mountpoint)]
            nice, join = self.nice, self.preexec

            def before_exec() -> None:
                if join is not None:
                    join()
                if nice:
                    os.nice(nice)

            log = str(Path(record.run_dir) / "fs.log")
            self._proc = HERE.start(argv, log=log, preexec=before_exec)
            self._record = record = MountRecord(**{**asdict(record), "fs_pid": self._proc.pid})
            write_record(record)
            wait_mounted(self._proc, record, self.timeout, BINARY)
        except BaseException:
            if self._proc is not None:
                self._teardown()
            else:
                self._forget()
            raise

    def set_sync_delay(self, us: float, *, factor: float = 1.0, overhead_us: float = 0.0) -> None:
        assert self.control is not None
        self.control.set_sync_delay(us, factor=factor, overhead_us=overhead_us)
        self.sync_delay_us = us

    def set_read_delay(self, us: float) -> None:
        assert self.control is not None
        self.control.set_read_delay(us)
        self.read_delay_us = us

    def set_small_sync(self, us: float) -> None:
        assert self.control is not None
        self.control.set_small_sync(us)

    def set_backing_extra(self, us: float) -> None:
        assert self.control is not None
        self.control.set_backing_extra(us)

    def set_caps(self, caps: Caps) -> None:
        assert self.control is not None
        self.control.set_caps(caps)
        self.caps = caps

    def stats(self) -> dict[str, int]:
        assert self.control is not None
        return self.control.counters()

    def cpu(self) -> CpuTime | None:
        """The layer's CPU time so far (all its threads), or None when it is gone."""
        return cpu_of(self.pid) if self.pid is not None else None

    def unmount(self) -> None:
        if self._proc is not None:
            self._teardown()

    def _teardown(self) -> None:
        """SIGTERM (libfuse unmounts and exits), SIGKILL after the timeout; the
        mount is then lazily unmounted if it is still there. Nothing is cached
        in the layer: the backing files hold every write already."""
        proc_, record = self._proc, self._record
        assert proc_ is not None and record is not None
        try:
            proc_.stop(grace=self.timeout)
        finally:
            with proc.signals_deferred():
                try:
                    lazy_unmount(record.mountpoint, record.fsname)
                finally:
                    self._proc = None
                    self._forget()

    def _forget(self) -> None:
        if self.control is not None:
            self.control.close()
        forget(self._record, self._created_mountpoint)
        self._record = None

    def __enter__(self) -> NativeMount:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unmount()
