"""The in-memory inodes of the lossy filesystem and the page cache of a file.

A file's unsynced writes live in ``File.pages`` (page index -> bytearray), never
in the backing file; the backing file holds exactly what was last fsynced. Reads
combine the two: a cached page wins, else the backing file below ``floor`` (the
smallest size the file had since its last fsync: a truncate-then-extend must
read zeros, not the stale synced bytes), else zeros.
"""

from __future__ import annotations

import os
import stat
import time

Name = tuple["Dir", bytes]  # (parent directory, entry name)


class Node:
    """What every inode has. ``links`` are its live names (what the mount shows);
    ``durable_names`` are the names it has in the backing tree (what survives a
    power loss); ``staged`` means its backing copy sits nameless in the staging
    directory (fsynced data whose name is not durable yet: lost at power loss)."""

    def __init__(self, ino: int, mode: int, uid: int, gid: int) -> None:
        now = time.time_ns()
        self.ino = ino
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.atime_ns = self.mtime_ns = self.ctime_ns = now
        self.links: set[Name] = set()
        self.durable_names: set[Name] = set()
        self.staged = False
        self.lookups = 0
        self.opens = 0

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def alive(self) -> bool:
        """Reachable by a name or an open file: its data must be kept."""
        return bool(self.links) or self.opens > 0

    @property
    def nlink(self) -> int:
        return len(self.links)

    @property
    def size(self) -> int:
        return 0

    def touch(self, *, data: bool = False) -> None:
        now = time.time_ns()
        self.ctime_ns = now
        if data:
            self.mtime_ns = now


class Dir(Node):
    def __init__(self, ino: int, mode: int, uid: int, gid: int) -> None:
        super().__init__(ino, mode, uid, gid)
        self.live: dict[bytes, Node] = {}
        self.durable: dict[bytes, Node] = {}
        self.subdirs = 0

    @property
    def parent(self) -> Dir | None:
        for parent, _name in self.links:
            return parent
        return None

    @property
    def nlink(self) -> int:
        return (2 if self.links or self.ino == 1 else 0) + self.subdirs

    @property
    def dirty(self) -> bool:
        if len(self.live) != len(self.durable):
            return True
        return any(self.durable.get(name) is not node for name, node in self.live.items())

    def attach(self, name: bytes, node: Node) -> None:
        self.live[name] = node
        node.links.add((self, name))
        if node.is_dir:
            self.subdirs += 1
        self.touch(data=True)

    def detach(self, name: bytes) -> Node:
        node = self.live.pop(name)
        node.links.discard((self, name))
        if node.is_dir:
            self.subdirs -= 1
        self.touch(data=True)
        node.touch()
        return node


class Symlink(Node):
    def __init__(self, ino: int, mode: int, uid: int, gid: int, target: bytes) -> None:
        super().__init__(ino, mode, uid, gid)
        self.target = target

    @property
    def size(self) -> int:
        return len(self.target)


class File(Node):
    """A regular file: its synced bytes in the backing file, the rest in ``pages``."""

    def __init__(self, ino: int, mode: int, uid: int, gid: int, page_size: int) -> None:
        super().__init__(ino, mode, uid, gid)
        self.page_size = page_size
        self.pages: dict[int, bytearray] = {}
        self.live_size = 0
        self.durable_size = 0  # size of the backing file
        self.floor = 0  # backing bytes at or past this offset are stale: read zeros
        self.fd: int | None = None  # the backing file, opened when first needed

    @property
    def size(self) -> int:
        return self.live_size

    @property
    def dirty(self) -> bool:
        return (
            bool(self.pages) or self.floor != self.live_size or self.durable_size != self.live_size
        )

    def backed_bytes(self, off: int, length: int) -> bytes:
        """Synced content of [off, off+length): backing below the floor, zeros past it."""
        end = off + length
        out = b""
        if self.fd is not None and off < self.floor:
            out = os.pread(self.fd, min(end, self.floor) - off, off)
        return out + bytes(length - len(out))

    def _page(self, index: int) -> bytearray:
        page = self.pages.get(index)
        if page is None:
            page = bytearray(self.backed_bytes(index * self.page_size, self.page_size))
            self.pages[index] = page
        return page

    def write(self, off: int, data: bytes) -> None:
        psize = self.page_size
        view = memoryview(data)
        pos = 0
        while pos < len(data):
            index, start = divmod(off + pos, psize)
            take = min(psize - start, len(data) - pos)
            if start == 0 and take == psize:
                self.pages[index] = bytearray(view[pos : pos + take])
            else:
                self._page(index)[start : start + take] = view[pos : pos + take]
            pos += take
        self.live_size = max(self.live_size, off + len(data))
        self.touch(data=True)

    def read(self, off: int, length: int) -> bytes:
        end = min(off + length, self.live_size)
        if off >= end:
            return b""
        psize = self.page_size
        first, last = off // psize, (end - 1) // psize
        if not any(i in self.pages for i in range(first, last + 1)):
            return self.backed_bytes(off, end - off)
        parts = []
        pos = off
        while pos < end:
            index, start = divmod(pos, psize)
            take = min(psize - start, end - pos)
            page = self.pages.get(index)
            if page is None:
                parts.append(self.backed_bytes(pos, take))
            else:
                parts.append(bytes(page[start : start + take]))
            pos += take
        return b"".join(parts)

    def truncate(self, size: int) -> None:
        if size < self.live_size:
            psize = self.page_size
            keep = -(-size // psize)  # pages wholly past the end go
            for index in [i for i in self.pages if i >= keep]:
                del self.pages[index]
            index, start = divmod(size, psize)
            if start and index in self.pages:
                page = self.pages[index]
                page[start:] = bytes(psize - start)
            self.floor = min(self.floor, size)
        self.live_size = size
        self.touch(data=True)

    def page_extent(self, index: int) -> int:
        """How many bytes of cached page ``index`` lie inside the file."""
        return max(0, min(self.page_size, self.live_size - index * self.page_size))

    def close_backing(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def new_node(kind: int, ino: int, mode: int, uid: int, gid: int, page_size: int) -> Node:
    mode = kind | stat.S_IMODE(mode)
    if kind == stat.S_IFDIR:
        return Dir(ino, mode, uid, gid)
    if kind == stat.S_IFREG:
        return File(ino, mode, uid, gid, page_size)
    raise ValueError(f"unsupported file type {kind:o}")
