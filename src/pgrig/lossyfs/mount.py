"""Mounting, cutting the power of and unmounting a lossy filesystem, from pgrig.

The filesystem runs as its own process (``python -m pgrig.lossyfs serve``),
started and stopped by PID with timeouts, controlled through a unix socket in a
private run directory outside the mount. Every mount is recorded before it
exists (see registry.py), so ``clean_orphans`` can undo it after a crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import Any

from pgrig import ownership, proc
from pgrig.cluster import workdir
from pgrig.errors import PgrigError, ToolTimeout
from pgrig.hosts.executor import Started
from pgrig.hosts.local import HERE
from pgrig.lossyfs.powerloss import MODES, Mode, PowerLossReport
from pgrig.lossyfs.registry import (
    RUN_MARKER,
    RUN_PREFIX,
    MountRecord,
    drop_record,
    is_mounted,
    lazy_unmount,
    registry_dir,
    remove_run_dir,
    write_record,
)
from pgrig.lossyfs.volume import METADATA_MODELS, MetadataModel
from pgrig.results import JsonValue


class LossyFsError(PgrigError):
    """The lossy filesystem cannot be mounted, controlled or unmounted."""


class LossyFsUnavailable(LossyFsError):
    """FUSE or the binding is missing here (``available()`` says which): like a
    missing program, exit code 3."""

    exit_code = 3


def require(what: str) -> None:
    """Raise ``LossyFsUnavailable`` naming ``what`` needs the lossy filesystem."""
    reason = available()
    if reason:
        raise LossyFsUnavailable(
            f"{what} needs the lossy filesystem, which cannot run here: {reason}",
            hint="install fuse3 and pgrig[lossyfs] (scripts/install-deps.sh, or `make test`), "
            "or drop the power loss to crash processes only",
        )


def available(*, allow_other: bool = True) -> str | None:
    """None if a lossy mount can work here, else the reason it cannot."""
    if not sys.platform.startswith("linux"):
        return f"FUSE mounts need Linux, this is {sys.platform}"
    try:
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return f"cannot open /dev/fuse: {exc.strerror} (no FUSE in this kernel or container)"
    os.close(fd)
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian package fuse3)"
    try:
        import pyfuse3  # noqa: F401
        import trio  # noqa: F401
    except ImportError as exc:
        return f"the pyfuse3 binding is not installed: {exc} (pip install 'pgrig[lossyfs]')"
    if allow_other and os.geteuid() != 0:
        try:
            conf = Path("/etc/fuse.conf").read_text()
        except OSError:
            conf = ""
        if not any(line.strip() == "user_allow_other" for line in conf.splitlines()):
            return "allow_other needs root or 'user_allow_other' in /etc/fuse.conf"
    return None


def sync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (children before parents), as
    initdb's final sync does: what pgrig writes on the mount itself (its work
    directory marker, postgresql.conf edits after initdb) is volatile otherwise,
    and a power loss would take it back. Safe beside a running server: files it
    removes meanwhile are skipped."""
    for dirpath, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except FileNotFoundError:
                continue  # removed since the walk saw it (a running server's temp file)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(dirpath, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    parent = os.open(os.path.dirname(os.path.abspath(root)), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(parent)
    finally:
        os.close(parent)


class LossyMount:
    """A lossy FUSE filesystem over ``backing`` mounted on ``mountpoint``.

    ``start()`` mounts; ``power_loss()`` discards what was not fsynced and leaves
    the mount gone (clients get errors) until ``remount()``; ``unmount()`` is an
    orderly shutdown (the cache is written back). As a context manager it mounts
    on entry and unmounts on exit if still mounted.
    """

    def __init__(
        self,
        backing: Path,
        mountpoint: Path,
        *,
        seed: int = 0,
        page_size: int = 4096,
        metadata: MetadataModel = "strict",
        allow_other: bool = True,
        timeout: float = 30.0,
        sync_delay_us: float = 0.0,
    ) -> None:
        _check_options(metadata, page_size)
        self.backing = Path(os.path.realpath(backing))
        self.mountpoint = Path(os.path.realpath(mountpoint))
        self.seed = seed
        self.page_size = page_size
        self.metadata = metadata
        self.allow_other = allow_other
        self.timeout = timeout
        self.sync_delay_us = sync_delay_us  # added to every fsync (storage/latency.py)
        self.read_delay_us = 0.0  # added to every read the kernel asks (set_read_delay)
        self.power_losses = 0
        self._proc: Started | None = None
        self._record: MountRecord | None = None
        self._created_mountpoint = False

    # -- lifecycle ----------------------------------------------------------------

    @property
    def mounted(self) -> bool:
        return self._record is not None and is_mounted(str(self.mountpoint), self._record.fsname)

    @property
    def record(self) -> MountRecord | None:
        """What is registered for the current mount (fsname, PIDs, run directory)."""
        return self._record

    @property
    def log_file(self) -> Path | None:
        return Path(self._record.run_dir) / "fs.log" if self._record else None

    def start(self) -> None:
        """Mount; returns once the filesystem answers. Raises LossyFsError."""
        if self._proc is not None:
            raise LossyFsError(f"{self.mountpoint} is already mounted by this LossyMount")
        reason = available(allow_other=self.allow_other)
        if reason:
            raise LossyFsError(f"cannot mount a lossy filesystem: {reason}")
        if _check_paths(self.backing, self.mountpoint):
            self._created_mountpoint = True
        record = new_record("pgrig-lossyfs", self.mountpoint, self.backing,
                            self._created_mountpoint)  # fmt: skip
        self._record = record
        try:
            self._proc = HERE.start(self._argv(record), log=str(Path(record.run_dir) / "fs.log"))
            self._record = record = MountRecord(**{**asdict(record), "fs_pid": self._proc.pid})
            write_record(record)
            self._wait_ready()
        except BaseException as exc:
            # A signal is an exception here too: whenever it comes, the run
            # directory goes (nothing but pgrig's files is in it yet).
            if self._proc is not None:
                self._teardown(clean=False)
            else:
                self._forget()
            if isinstance(exc, OSError):
                raise LossyFsError(
                    f"cannot start the lossy filesystem on {self.mountpoint}: {exc}",
                    hint=f"check that the pgrig state directory {registry_dir()} is writable",
                ) from exc
            raise

    def _argv(self, record: MountRecord) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pgrig.lossyfs",
            "serve",
            f"--backing={self.backing}",
            f"--mountpoint={self.mountpoint}",
            f"--control={Path(record.run_dir) / 'control.sock'}",
            f"--fsname={record.fsname}",
            f"--page-size={self.page_size}",
            f"--metadata={self.metadata}",
            f"--sync-delay-us={self.sync_delay_us}",
        ] + (["--allow-other"] if self.allow_other else [])

    def _wait_ready(self) -> None:
        assert self._proc is not None and self._record is not None

        def answers() -> bool:
            with contextlib.suppress(LossyFsError):
                return bool(self._control({"cmd": "ping"}, timeout=2).get("ok"))
            return False

        wait_mounted(self._proc, self._record, self.timeout, "the lossy filesystem", answers)

    def remount(self) -> None:
        """Mount again over the same backing directory (after a power loss or unmount):
        what the filesystem shows is what survived."""
        if self._proc is not None:
            self._teardown(clean=True)
        self.start()

    def power_loss(
        self,
        mode: Mode = "drop",
        *,
        seed: int | None = None,
        keep_fraction: float = 0.5,
        torn_bytes: int | None = None,
        only: str | None = None,
        prefer: str | None = None,
    ) -> PowerLossReport:
        """Cut the power: unsynced data and directory entries are lost.

        ``drop`` keeps nothing unsynced; ``random-subset`` also persists each unsynced
        page with probability ``keep_fraction``; ``torn`` persists the first
        ``torn_bytes`` (default half a page) of one unsynced page. ``only`` restricts
        the pages that may be persisted to paths (relative to the mount root)
        matching this glob; ``prefer`` (a regular expression over the same paths)
        is where a torn page is drawn first. ``seed`` defaults to the mount's seed plus
        the number of earlier power losses, so a sequence of crashes is reproducible too.
        """
        if mode not in MODES:
            raise LossyFsError(f"power loss mode {mode!r} is unknown", hint=f"use one of {MODES}")
        if not 0.0 <= keep_fraction <= 1.0:
            raise LossyFsError(f"keep_fraction {keep_fraction} is not between 0 and 1")
        if torn_bytes is not None and not 0 < torn_bytes < self.page_size:
            raise LossyFsError(
                f"torn_bytes {torn_bytes} is not between 1 and {self.page_size - 1}",
                hint="a torn page keeps a prefix of one page (page_size of the mount)",
            )
        if self._proc is None:
            raise LossyFsError(f"{self.mountpoint} is not mounted", hint="call start() first")
        if seed is None:
            seed = self.seed + self.power_losses
        self.power_losses += 1
        request: dict[str, JsonValue] = {
            "cmd": "power_loss",
            "mode": mode,
            "seed": seed,
            "keep_fraction": keep_fraction,
            "torn_bytes": torn_bytes,
            "only": only,
            "prefer": prefer,
        }
        try:
            reply = self._control(request, timeout=self.timeout)
        except LossyFsError:
            self._teardown(clean=False)  # SIGKILL: as lossy as "drop"
            raise
        self._teardown(clean=False, exiting=bool(reply.get("ok")))
        if not reply.get("ok"):
            raise LossyFsError(f"power loss failed: {reply.get('error')}")
        return PowerLossReport.from_json(reply["report"])

    def unmount(self) -> None:
        """Orderly shutdown: the cache is written back, then the mount goes (lazily:
        stop processes using it first, or they get errors)."""
        if self._proc is None:
            return
        self._teardown(clean=True)

    def set_sync_delay(self, us: float, *, factor: float = 1.0, overhead_us: float = 0.0) -> None:
        """The delay of every sync, live: ``us``, plus - ``factor`` over 1 - what makes
        it last ``factor`` x the backing disk's sync, less ``overhead_us``."""
        self._order("setting the sync delay", cmd="sync_delay", us=us, factor=factor,
                    overhead_us=overhead_us)  # fmt: skip
        self.sync_delay_us = us

    def set_read_delay(self, us: float) -> None:
        """The delay of every read that reaches the process (a page cache miss)."""
        self._order("setting the read delay", cmd="read_delay", us=us)
        self.read_delay_us = us

    def fail_syncs(self, count: int = 1) -> None:
        """The next ``count`` fsyncs (fdatasyncs, O_DSYNC writes) of a file fail
        with EIO, as when the disk could not write the pages back (fsyncgate)."""
        self._order("arming the fsync failure", cmd="fail_syncs", count=count)

    def _order(self, what: str, **request: JsonValue) -> None:
        reply = self._control(request, timeout=self.timeout)
        if not reply.get("ok"):
            raise LossyFsError(f"{what} failed: {reply.get('error')}")

    def stats(self) -> dict[str, JsonValue]:
        """Cache and fsync counters of the running filesystem."""
        reply = self._control({"cmd": "stats"}, timeout=self.timeout)
        return dict(reply.get("stats", {}))

    def __enter__(self) -> LossyMount:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._proc is not None:
            self._teardown(clean=exc is None)

    # -- internals -------------------------------------------------------------------

    def _control(self, request: Mapping[str, JsonValue], *, timeout: float) -> dict[str, Any]:
        assert self._record is not None
        return _control(self._record, request, timeout=timeout, log=self.log_file)

    def _teardown(self, *, clean: bool, exiting: bool = False) -> None:
        """Stop the filesystem process (by PID, with timeouts) and make sure the mount
        is gone. ``clean``: ask for an orderly shutdown first; ``exiting``: it is
        leaving by itself (after a power loss); neither: SIGKILL it at once."""
        proc_ = self._proc
        record = self._record
        assert proc_ is not None and record is not None
        try:
            if proc_.poll() is None and clean:
                with contextlib.suppress(LossyFsError):
                    self._control({"cmd": "shutdown"}, timeout=self.timeout)
            elif proc_.poll() is None and not exiting:
                proc_.signal(signal.SIGKILL)  # nothing written back: a "drop" power loss
            # TERM, then KILL, if it does not go by itself in time.
            with contextlib.suppress(ToolTimeout):
                proc_.wait(self.timeout, check=False, what="the lossy filesystem")
        finally:
            # Held signals: one during the fusermount3 call skipped the rest, which
            # left the record and the run directory (its marker and fs.log) behind.
            with proc.signals_deferred():
                try:
                    lazy_unmount(record.mountpoint, record.fsname)
                finally:
                    self._proc = None
                    tail = _log_tail(self.log_file)
                    self._forget()
        if clean and (code := proc_.poll()) != 0:
            raise LossyFsError(
                f"the lossy filesystem on {self.mountpoint} exited with code {code}: {tail}"
            )

    def _forget(self) -> None:
        """Unregister and remove the run directory (errors carry the log's tail)."""
        forget(self._record, self._created_mountpoint)
        self._record = None


def new_record(
    prefix: str, mountpoint: Path, backing: Path, created_mountpoint: bool
) -> MountRecord:
    """A private run directory (pgrig's owner file and marker) and the mount's
    record, written before the mount exists: a crash from here is cleanable."""
    run_dir = Path(tempfile.mkdtemp(prefix=RUN_PREFIX))
    try:
        workdir.write_owner(run_dir)  # before the marker: a marked directory names its maker
        (run_dir / RUN_MARKER).write_text(str(mountpoint))
        record = MountRecord(
            fsname=f"{prefix}-{secrets.token_hex(6)}",
            mountpoint=str(mountpoint),
            backing=str(backing),
            run_dir=str(run_dir),
            owner_pid=os.getpid(),
            host=socket.gethostname(),
            created_at=time.time(),
            created_mountpoint=created_mountpoint,
            owner_start=ownership.process_start_time(os.getpid()),
            study=ownership.current_study(),
        )
        write_record(record)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return record


def wait_mounted(
    process: Started,
    record: MountRecord,
    timeout: float,
    what: str,
    answers: Callable[[], bool] = lambda: True,
) -> None:
    """Until ``record``'s mount is in mountinfo and ``answers()``; LossyFsError with
    the log's tail when the process exits first or ``timeout`` passes."""
    log = Path(record.run_dir) / "fs.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (code := process.poll()) is not None:
            raise LossyFsError(
                f"{what} exited with code {code} before mounting "
                f"{record.mountpoint}: {_log_tail(log)}",
                hint=f"see {log}",
            )
        if is_mounted(record.mountpoint, record.fsname) and answers():
            return
        time.sleep(0.02)
    raise LossyFsError(
        f"{what} did not come up on {record.mountpoint} in {timeout:.0f} s: {_log_tail(log)}",
        hint=f"see {log}",
    )


def forget(record: MountRecord | None, created_mountpoint: bool) -> None:
    """Unregister a mount that is gone and remove its run directory (and the
    mountpoint pgrig created, if empty)."""
    if record is None:
        return
    if created_mountpoint:
        with contextlib.suppress(OSError):
            os.rmdir(record.mountpoint)
    remove_run_dir(Path(record.run_dir))
    drop_record(record)


def _check_options(metadata: str, page_size: int) -> None:
    if metadata not in METADATA_MODELS:
        raise LossyFsError(
            f"metadata model {metadata!r} is unknown",
            hint=f"use one of {', '.join(METADATA_MODELS)}",
        )
    if page_size < 512 or page_size > 1 << 20 or page_size & (page_size - 1):
        raise LossyFsError(
            f"page size {page_size} is not a power of two between 512 and 1 MiB",
            hint="use 4096 (the kernel's page) or 8192 (PostgreSQL's block)",
        )


def _check_paths(backing: Path, mountpoint: Path) -> bool:
    """Refuse overlapping or non-empty directories; True: the mountpoint was created."""
    if not backing.is_dir():
        raise LossyFsError(
            f"backing directory {backing} does not exist",
            hint="create it on the storage under test",
        )
    inside = backing.is_relative_to(mountpoint)
    if inside or mountpoint.is_relative_to(backing):
        raise LossyFsError(
            f"mountpoint {mountpoint} and backing {backing} overlap",
            hint="use two separate directories",
        )
    if not mountpoint.exists():
        mountpoint.mkdir(mode=0o755)
        return True
    if not mountpoint.is_dir() or any(mountpoint.iterdir()):
        raise LossyFsError(
            f"mountpoint {mountpoint} is not an empty directory",
            hint="pgrig mounts only over an empty directory (or one it creates)",
        )
    return False


def _control(
    record: MountRecord, request: Mapping[str, JsonValue], *, timeout: float, log: Path | None
) -> dict[str, Any]:
    """One request to the filesystem process over its control socket, and its reply."""
    path = str(Path(record.run_dir) / "control.sock")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        reply = json.loads(data)
    except (OSError, ValueError) as exc:
        raise LossyFsError(
            f"the lossy filesystem on {record.mountpoint} did not answer {request['cmd']!r}: {exc}",
            hint=f"see {log}",
        ) from exc
    if not isinstance(reply, dict):
        raise LossyFsError(f"bad reply from the lossy filesystem: {reply!r}")
    return reply


def _log_tail(log: Path | None, lines: int = 8) -> str:
    try:
        text = (log or Path("/nonexistent")).read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(empty log)"
