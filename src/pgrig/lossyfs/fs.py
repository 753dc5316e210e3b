"""The FUSE adapter: pyfuse3's low-level operations mapped onto a ``Volume``.

Every handler changes the volume without awaiting, so the trio loop serialises
those changes: a power loss (handled on the same loop) never sees half an
operation. What a handler awaits comes after (a backing fdatasync, a cloud
disk's sync or read latency: storage/latency.py).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import stat
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

import pyfuse3
import trio

from pgrig.lossyfs.backing import STAGING
from pgrig.lossyfs.nodes import Dir, File, Node, Symlink
from pgrig.lossyfs.volume import FsError, Volume

log = logging.getLogger("pgrig.lossyfs")

P = ParamSpec("P")
R = TypeVar("R")
ATTR_TIMEOUT = 10.0  # nothing but this process changes the tree: the kernel may cache
SYNC_FLAGS = os.O_SYNC | os.O_DSYNC
INLINE_SYNC = 64 * 1024  # fdatasync on the loop when at most this much was written back


def handler(
    fn: Callable[P, Coroutine[object, None, R]],
) -> Callable[P, Coroutine[object, None, R]]:
    """Errors become errno replies; anything after a power loss is EIO (the disk is gone).
    An exception escaping a pyfuse3 handler would stop the whole filesystem."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        ops: LossyOperations = args[0]  # type: ignore[assignment]
        ops.calls[fn.__name__] = ops.calls.get(fn.__name__, 0) + 1
        if ops.dead:
            raise pyfuse3.FUSEError(errno.EIO)
        try:
            return await fn(*args, **kwargs)
        except pyfuse3.FUSEError:
            raise
        except FsError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        except OSError as exc:  # the backing store failed: say so, the caller sees it
            log.exception("backing store error in %s", fn.__name__)
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        except Exception:
            log.exception("internal error in %s", fn.__name__)
            raise pyfuse3.FUSEError(errno.EIO) from None

    return wrapper


@dataclass
class Handle:
    node: Node
    sync: bool = False  # opened O_SYNC/O_DSYNC: every write is durable at return
    listing: list[tuple[bytes, Node]] = field(default_factory=list)


async def pause(seconds: float) -> float:
    """Sleep without holding up other requests; returns the time slept. trio's own
    timer rounds up to whole milliseconds (epoll), too coarse for a 100 us disk:
    shorter delays sleep in a worker thread (the hand-off is part of the layer's
    measured floor)."""
    started = time.perf_counter()
    if seconds >= 0.002:
        await trio.sleep(seconds)
    else:
        await trio.to_thread.run_sync(time.sleep, seconds)
    return time.perf_counter() - started


class Syncs:
    """The filesystem's durability points (fsync, fdatasync, O_DSYNC writes): the
    cache written back and the backing file synced, a cloud disk's latency added,
    an injected EIO (fsyncgate), and what they cost."""

    def __init__(self, volume: Volume, sync_delay_s: float = 0.0) -> None:
        self.volume = volume
        # A cloud disk's per-I/O latency (storage/latency.py calibrates it): every
        # fsync, fdatasync and O_DSYNC write returns this much later.
        self.sync_delay_s = sync_delay_s
        # ... or in proportion: a sync takes sync_factor x what the backing disk's own
        # fdatasync took just now (its noise included), less the layer's own cost
        self.sync_factor = 1.0
        self.sync_overhead_s = 0.0
        self.delays = 0
        self.delay_seconds = 0.0
        # fsyncgate: the next N fsyncs of a file fail with EIO, as a disk's write
        # error reaches fsync (docs/durability.md); the data stays cached
        self.fail_syncs = 0
        self.failed_syncs = 0
        self.inflight: dict[int, trio.Event] = {}
        self.datasyncs = 0  # fsync requests that asked for fdatasync only
        self.fsync_seconds = 0.0  # in fsync handlers, backing fdatasync included
        self.backing_sync_seconds = 0.0  # in fdatasync/fsync of backing files

    async def durable(self, node: Node, *, datasync: bool, reason: str) -> None:
        """fsync: the cache goes to the backing file on the loop, then the backing file
        is (f)datasynced - on the loop when little was written (a WAL commit: a
        thread hand-off costs more than it saves on a busy machine), in a thread
        when much was (a checkpoint's fsync of a data file must not stall the WAL
        commits meanwhile). An fsync that finds nothing new still waits for the one
        in flight for the same file."""
        started = time.perf_counter()
        self.datasyncs += datasync
        if self.fail_syncs > 0 and isinstance(node, File):
            self.fail_syncs -= 1
            self.failed_syncs += 1
            log.warning("injected EIO on the %s of inode %d", reason, node.ino)
            raise pyfuse3.FUSEError(errno.EIO)
        took = 0.0
        try:
            took = await self._sync(node, datasync=datasync, reason=reason, started=started)
        finally:
            delay = self.sync_delay_s
            if self.sync_factor > 1.0:
                delay += max(0.0, (self.sync_factor - 1.0) * took - self.sync_overhead_s)
            if delay > 0:
                await self.delay(delay)

    async def delay(self, seconds: float) -> None:
        self.delays += 1
        self.delay_seconds += await pause(seconds)

    async def _sync(self, node: Node, *, datasync: bool, reason: str, started: float) -> float:
        """Returns how long the backing file's own sync took (0: nothing to sync)."""
        small = not isinstance(node, File) or len(node.pages) * node.page_size <= INLINE_SYNC
        fd = self.volume.fsync_file(node, reason=reason)
        if fd is None:
            pending = self.inflight.get(node.ino)
            if pending is not None:
                await pending.wait()
            self.fsync_seconds += time.perf_counter() - started
            return 0.0
        done = trio.Event()
        self.inflight[node.ino] = done
        try:
            synced = time.perf_counter()
            sync = os.fdatasync if datasync else os.fsync
            if small:
                sync(fd)
            else:
                await trio.to_thread.run_sync(sync, fd)
            took = time.perf_counter() - synced
            self.backing_sync_seconds += took
        finally:
            done.set()
            if self.inflight.get(node.ino) is done:
                del self.inflight[node.ino]
            self.fsync_seconds += time.perf_counter() - started
        return took


class LossyOperations(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False  # every write reaches this process at write(2) time
    enable_acl = False

    def __init__(self, volume: Volume, sync_delay_s: float = 0.0) -> None:
        super().__init__()
        self.volume = volume
        self.syncs = Syncs(volume, sync_delay_s)
        self.dead = False
        self.handles: dict[int, Handle] = {}
        self.next_fh = 1
        self.calls: dict[str, int] = {}  # requests served, by operation
        self.max_write = 0
        self.max_read = 0
        # A cloud disk's per-I/O read latency (storage/latency.py): every read that
        # reaches this process missed the kernel's page cache (or was O_DIRECT),
        # as a read that goes to the disk does, and returns this much later.
        self.read_delay_s = 0.0
        self.read_delays = 0
        self.read_delay_seconds = 0.0

    # -- helpers -----------------------------------------------------------

    def entry(self, node: Node) -> pyfuse3.EntryAttributes:
        e = pyfuse3.EntryAttributes()
        e.st_ino = node.ino
        e.generation = 0
        e.entry_timeout = e.attr_timeout = ATTR_TIMEOUT
        e.st_mode = node.mode
        e.st_nlink = node.nlink
        e.st_uid, e.st_gid = node.uid, node.gid
        e.st_rdev = 0
        e.st_size = node.size
        e.st_blksize = 4096
        e.st_blocks = -(-node.size // 512)
        e.st_atime_ns, e.st_mtime_ns, e.st_ctime_ns = node.atime_ns, node.mtime_ns, node.ctime_ns
        return e

    def looked_up(self, node: Node) -> pyfuse3.EntryAttributes:
        node.lookups += 1  # the kernel now holds a reference until it forgets
        return self.entry(node)

    def _handle(self, fh: int) -> Handle:
        try:
            return self.handles[fh]
        except KeyError:
            raise pyfuse3.FUSEError(errno.EBADF) from None

    def _file(self, fh: int) -> File:
        node = self._handle(fh).node
        if not isinstance(node, File):
            raise pyfuse3.FUSEError(errno.EISDIR)
        return node

    def _new_handle(self, handle: Handle) -> int:
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = handle
        handle.node.opens += 1
        return fh

    def _owner(self, parent: Dir, ctx: pyfuse3.RequestContext, mode: int) -> tuple[int, int, int]:
        """BSD group semantics under a setgid directory, as Linux filesystems do."""
        if parent.mode & stat.S_ISGID:
            return mode | (stat.S_ISGID if stat.S_ISDIR(mode) else 0), ctx.uid, parent.gid
        return mode, ctx.uid, ctx.gid

    # -- namespace -------------------------------------------------------------

    @handler
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self.volume.dir(parent_inode)
        return self.looked_up(self.volume.child(parent, name))

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for ino, count in inode_list:
            self.volume.forget(ino, count)

    @handler
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self.entry(self.volume.get(inode))

    @handler
    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        node = self.volume.get(inode)
        if fields.update_size:
            if not isinstance(node, File):
                raise pyfuse3.FUSEError(errno.EINVAL)
            self.volume.truncate(node, attr.st_size)
        owner_changed = False
        if fields.update_mode:
            node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(attr.st_mode)
            owner_changed = True
        if fields.update_uid:
            node.uid = attr.st_uid
            owner_changed = True
        if fields.update_gid:
            node.gid = attr.st_gid
            owner_changed = True
        if fields.update_atime:
            node.atime_ns = attr.st_atime_ns
        if fields.update_mtime:
            node.mtime_ns = attr.st_mtime_ns
        node.touch()
        if owner_changed:
            self.volume.backing.apply_attrs(node)
        return self.entry(node)

    @handler
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        node = self.volume.get(inode)
        if not isinstance(node, Symlink):
            raise pyfuse3.FUSEError(errno.EINVAL)
        return node.target

    @handler
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        if not stat.S_ISREG(mode):
            raise pyfuse3.FUSEError(errno.EPERM)  # no devices, fifos or sockets
        parent = self.volume.dir(parent_inode)
        mode, uid, gid = self._owner(parent, ctx, mode)
        node = self.volume.make(parent_inode, name, stat.S_IFREG, mode, uid, gid)
        return self.looked_up(node)

    @handler
    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self.volume.dir(parent_inode)
        mode, uid, gid = self._owner(parent, ctx, mode | stat.S_IFDIR)
        node = self.volume.make(parent_inode, name, stat.S_IFDIR, mode, uid, gid)
        return self.looked_up(node)

    @handler
    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self.volume.dir(parent_inode)
        _mode, uid, gid = self._owner(parent, ctx, stat.S_IFLNK)
        return self.looked_up(self.volume.symlink(parent_inode, name, target, uid, gid))

    @handler
    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        return self.looked_up(self.volume.link(inode, new_parent_inode, new_name))

    @handler
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self.volume.unlink(parent_inode, name)

    @handler
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self.volume.rmdir(parent_inode, name)

    @handler
    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        self.volume.rename(parent_inode_old, name_old, parent_inode_new, name_new, flags)

    # -- files --------------------------------------------------------------------

    @handler
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        node = self.volume.get(inode)
        if not isinstance(node, File):
            raise pyfuse3.FUSEError(errno.EISDIR if isinstance(node, Dir) else errno.EINVAL)
        if flags & os.O_TRUNC and (flags & os.O_ACCMODE) != os.O_RDONLY:
            self.volume.truncate(node, 0)
        fh = self._new_handle(Handle(node, sync=bool(flags & SYNC_FLAGS)))
        # O_DIRECT is left to the kernel (it bypasses its own page cache and keeps it
        # coherent); the writes still land in this process's volatile cache.
        return pyfuse3.FileInfo(fh=fh, keep_cache=True)

    @handler
    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: pyfuse3.RequestContext
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent = self.volume.dir(parent_inode)
        mode, uid, gid = self._owner(parent, ctx, mode)
        node = self.volume.make(parent_inode, name, stat.S_IFREG, mode, uid, gid)
        fh = self._new_handle(Handle(node, sync=bool(flags & SYNC_FLAGS)))
        return pyfuse3.FileInfo(fh=fh, keep_cache=True), self.looked_up(node)

    @handler
    async def read(self, fh: int, off: int, size: int) -> bytes:
        self.max_read = max(self.max_read, size)
        data = self.volume.read(self._file(fh), off, size)  # before the wait: one state
        if self.read_delay_s:
            self.read_delays += 1
            self.read_delay_seconds += await pause(self.read_delay_s)
        return data

    @handler
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self._handle(fh)
        node = self._file(fh)
        self.max_write = max(self.max_write, len(buf))
        self.volume.write(node, off, buf)
        if handle.sync:
            await self.syncs.durable(node, datasync=True, reason="sync_write")
        return len(buf)

    @handler
    async def flush(self, fh: int) -> None:
        """close(2) is not a durability point."""

    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh, None)
        if handle is not None:
            handle.node.opens -= 1
            self.volume.maybe_drop(handle.node)

    @handler
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self.syncs.durable(self._handle(fh).node, datasync=datasync, reason="file")

    # -- directories ------------------------------------------------------------------

    @handler
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        node = self.volume.dir(inode)
        return self._new_handle(Handle(node))

    @handler
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        handle = self._handle(fh)
        d = handle.node
        assert isinstance(d, Dir)
        if start_id == 0:  # a new listing (or rewinddir): take a stable snapshot
            hide = STAGING.encode() if d is self.volume.root else None
            handle.listing = [(n, c) for n, c in d.live.items() if n != hide]
        for index in range(start_id, len(handle.listing)):
            name, node = handle.listing[index]
            if not pyfuse3.readdir_reply(token, name, self.entry(node), index + 1):
                break
            node.lookups += 1

    async def releasedir(self, fh: int) -> None:
        await self.release(fh)

    @handler
    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        d = self._handle(fh).node
        assert isinstance(d, Dir)
        self.volume.fsync_dir(d)
        if self.syncs.sync_delay_s > 0:  # a journal commit on the disk, as for a file
            await self.syncs.delay(self.syncs.sync_delay_s)

    @handler
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        st = os.statvfs(self.volume.backing.path)
        data = pyfuse3.StatvfsData()
        for name in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail"):
            setattr(data, name, getattr(st, name))
        for name in ("f_files", "f_ffree", "f_favail", "f_namemax"):
            setattr(data, name, getattr(st, name))
        return data

    def stats(self) -> dict[str, object]:
        backing = self.volume.backing
        pages = sum(len(n.pages) for n in backing.dirty_files)
        return {
            "inodes": len(self.volume.inodes),
            "open_handles": len(self.handles),
            "dirty_files": len(backing.dirty_files),
            "dirty_pages": pages,
            "dirty_bytes": pages * self.volume.page_size,
            "dirty_dirs": sum(1 for d in backing.dirs() if d.dirty),
            "fsyncs": dict(self.volume.fsyncs),
            "calls": dict(self.calls),
            "datasyncs": self.syncs.datasyncs,
            "fsync_seconds": round(self.syncs.fsync_seconds, 6),
            "backing_sync_seconds": round(self.syncs.backing_sync_seconds, 6),
            "max_write": self.max_write,
            "max_read": self.max_read,
            "failed_syncs": self.syncs.failed_syncs,
            "delays": self.syncs.delays,
            "delay_seconds": round(self.syncs.delay_seconds, 6),
            "read_delays": self.read_delays,
            "read_delay_seconds": round(self.read_delay_seconds, 6),
            "dead": self.dead,
        }
