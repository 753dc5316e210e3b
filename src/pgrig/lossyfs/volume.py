"""The live namespace: an inode table and the POSIX operations on it.

Nothing here touches the backing tree except an fsync (``fsync_file``,
``fsync_dir``, ``sync_all``). Errors are ``OSError(errno)``; the FUSE adapter
turns them into replies.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
from pathlib import Path
from typing import Literal

from pgrig.lossyfs.backing import STAGING, Backing
from pgrig.lossyfs.nodes import Dir, File, Node, Symlink, new_node

log = logging.getLogger("pgrig.lossyfs")

ROOT_INO = 1
NAME_MAX = 255
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
MetadataModel = Literal["strict", "journal"]
METADATA_MODELS: tuple[MetadataModel, ...] = ("strict", "journal")


class FsError(OSError):
    """An expected error of a filesystem call (ENOENT, EEXIST...), not an I/O failure."""


def _err(code: int, what: str = "") -> FsError:
    return FsError(code, os.strerror(code) + (f": {what}" if what else ""))


class Volume:
    """The filesystem state of one mount.

    ``metadata`` chooses when directory entries become durable: ``strict`` (POSIX:
    only an fsync of the directory itself) or ``journal`` (ext4/xfs-like: any
    fsync commits every earlier namespace change).
    """

    def __init__(
        self,
        backing: Path,
        *,
        page_size: int = 4096,
        metadata: MetadataModel = "strict",
    ) -> None:
        if page_size < 512 or page_size & (page_size - 1):
            raise ValueError(f"page size {page_size} is not a power of two >= 512")
        if metadata not in METADATA_MODELS:
            raise ValueError(f"metadata model {metadata!r} is not one of {METADATA_MODELS}")
        self.page_size = page_size
        self.metadata = metadata
        st = os.lstat(backing)
        self.root = Dir(ROOT_INO, st.st_mode, st.st_uid, st.st_gid)
        self.backing = Backing(backing, self.root, chown=os.geteuid() == 0)
        self.inodes: dict[int, Node] = {ROOT_INO: self.root}
        self.next_ino = ROOT_INO + 1
        self.fsyncs = {"file": 0, "dir": 0, "sync_write": 0}

    # -- mount ---------------------------------------------------------------

    def load(self) -> None:
        """Read the backing tree (the durable state) and empty the staging area."""
        staging = self.backing.staging
        if staging.is_dir() and not staging.is_symlink():
            shutil.rmtree(staging)  # inodes whose names never became durable: lost
        staging.mkdir(mode=0o700)
        fd = os.open(self.backing.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._scan(self.root, self.backing.path, {})

    def _scan(self, d: Dir, path: Path, seen: dict[tuple[int, int], Node]) -> None:
        with os.scandir(path) as entries:
            for entry in entries:
                if d is self.root and entry.name == STAGING:
                    continue
                st = entry.stat(follow_symlinks=False)
                key = (st.st_dev, st.st_ino)
                node = seen.get(key)
                if node is None:
                    node = _node_from_stat(self._new_ino(), st, Path(entry.path), self.page_size)
                    if node is None:
                        log.warning("ignoring %s: unsupported file type", entry.path)
                        continue
                    self.inodes[node.ino] = node
                    seen[key] = node
                name = os.fsencode(entry.name)
                d.live[name] = d.durable[name] = node
                node.links.add((d, name))
                node.durable_names.add((d, name))
                if isinstance(node, Dir):
                    d.subdirs += 1
                    self._scan(node, Path(entry.path), seen)

    def _new_ino(self) -> int:
        ino = self.next_ino
        self.next_ino += 1
        return ino

    # -- lookups ----------------------------------------------------------------

    def get(self, ino: int) -> Node:
        node = self.inodes.get(ino)
        if node is None:
            raise _err(errno.ENOENT, f"inode {ino}")
        return node

    def dir(self, ino: int) -> Dir:
        node = self.get(ino)
        if not isinstance(node, Dir):
            raise _err(errno.ENOTDIR)
        return node

    def child(self, parent: Dir, name: bytes) -> Node:
        if name == b".":
            return parent
        if name == b"..":
            return parent.parent or self.root
        node = parent.live.get(name)
        if node is None or (parent is self.root and name == STAGING.encode()):
            raise _err(errno.ENOENT)
        return node

    def forget(self, ino: int, count: int) -> None:
        node = self.inodes.get(ino)
        if node is None or ino == ROOT_INO:
            return
        node.lookups = max(0, node.lookups - count)
        self.maybe_drop(node)

    def maybe_drop(self, node: Node) -> None:
        if node.alive or node.lookups > 0 or node.ino == ROOT_INO:
            return
        self.inodes.pop(node.ino, None)
        self.backing.drop_dead(node)

    # -- namespace changes (volatile until fsync) ---------------------------------

    def _check_new_name(self, parent: Dir, name: bytes) -> None:
        if len(name) > NAME_MAX:
            raise _err(errno.ENAMETOOLONG)
        if parent is self.root and name == STAGING.encode():
            raise _err(errno.EPERM, f"{STAGING} is reserved by lossyfs")
        if name in parent.live:
            raise _err(errno.EEXIST)
        if not parent.links and parent is not self.root:
            raise _err(errno.ENOENT, "directory was removed")

    def make(self, parent_ino: int, name: bytes, kind: int, mode: int, uid: int, gid: int) -> Node:
        parent = self.dir(parent_ino)
        self._check_new_name(parent, name)
        node = new_node(kind, self._new_ino(), mode, uid, gid, self.page_size)
        self.inodes[node.ino] = node
        self._attach(parent, name, node)
        return node

    def _attach(self, parent: Dir, name: bytes, node: Node) -> None:
        parent.attach(name, node)
        self.backing.dirty_dirs.add(parent)

    def _detach(self, parent: Dir, name: bytes) -> Node:
        self.backing.dirty_dirs.add(parent)
        return parent.detach(name)

    def symlink(self, parent_ino: int, name: bytes, target: bytes, uid: int, gid: int) -> Node:
        parent = self.dir(parent_ino)
        self._check_new_name(parent, name)
        node = Symlink(self._new_ino(), stat.S_IFLNK | 0o777, uid, gid, target)
        self.inodes[node.ino] = node
        self._attach(parent, name, node)
        return node

    def link(self, ino: int, parent_ino: int, name: bytes) -> Node:
        node = self.get(ino)
        if isinstance(node, Dir):
            raise _err(errno.EPERM)
        parent = self.dir(parent_ino)
        self._check_new_name(parent, name)
        self._attach(parent, name, node)
        return node

    def unlink(self, parent_ino: int, name: bytes) -> None:
        parent = self.dir(parent_ino)
        node = self.child(parent, name)
        if isinstance(node, Dir):
            raise _err(errno.EISDIR)
        self._detach(parent, name)
        self.maybe_drop(node)

    def rmdir(self, parent_ino: int, name: bytes) -> None:
        parent = self.dir(parent_ino)
        node = self.child(parent, name)
        if not isinstance(node, Dir):
            raise _err(errno.ENOTDIR)
        if node.live:
            raise _err(errno.ENOTEMPTY)
        self._detach(parent, name)
        self.maybe_drop(node)

    def rename(self, old_ino: int, old: bytes, new_ino: int, new: bytes, flags: int) -> None:
        src_dir, dst_dir = self.dir(old_ino), self.dir(new_ino)
        node = self.child(src_dir, old)
        if len(new) > NAME_MAX:
            raise _err(errno.ENAMETOOLONG)
        if dst_dir is self.root and new == STAGING.encode():
            raise _err(errno.EPERM, f"{STAGING} is reserved by lossyfs")
        target = dst_dir.live.get(new)
        if flags & RENAME_EXCHANGE:
            if target is None:
                raise _err(errno.ENOENT)
            self._check_no_loop(node, dst_dir)
            self._check_no_loop(target, src_dir)
            self._detach(src_dir, old)
            self._detach(dst_dir, new)
            self._attach(src_dir, old, target)
            self._attach(dst_dir, new, node)
            return
        if target is not None:
            if flags & RENAME_NOREPLACE:
                raise _err(errno.EEXIST)
            if target is node:
                return
            if isinstance(node, Dir):
                if not isinstance(target, Dir):
                    raise _err(errno.ENOTDIR)
                if target.live:
                    raise _err(errno.ENOTEMPTY)
            elif isinstance(target, Dir):
                raise _err(errno.EISDIR)
        self._check_no_loop(node, dst_dir)
        if target is not None:
            self._detach(dst_dir, new)
        self._detach(src_dir, old)
        self._attach(dst_dir, new, node)
        if target is not None:
            self.maybe_drop(target)

    def _check_no_loop(self, node: Node, dst: Dir) -> None:
        """A directory cannot move under itself."""
        if not isinstance(node, Dir):
            return
        walk: Dir | None = dst
        while walk is not None:
            if walk is node:
                raise _err(errno.EINVAL)
            walk = walk.parent

    # -- data -----------------------------------------------------------------------

    def write(self, node: File, off: int, data: bytes) -> None:
        self.backing.open_file(node)  # a partial page is completed from the backing file
        node.write(off, data)
        self.backing.dirty_files.add(node)

    def truncate(self, node: File, size: int) -> None:
        self.backing.open_file(node)
        node.truncate(size)
        self.backing.dirty_files.add(node)

    def read(self, node: File, off: int, size: int) -> bytes:
        self.backing.open_file(node)
        return node.read(off, size)

    # -- durability -------------------------------------------------------------------

    def fsync_file(self, node: Node, *, reason: str = "file") -> int | None:
        """The in-memory part of an fsync of a file: returns the backing descriptor the
        caller must still fdatasync (outside the event loop), or None."""
        self.fsyncs[reason] += 1
        fd = self.backing.write_back(node) if isinstance(node, File) else None
        if self.metadata == "journal":
            self._persist_dirs()
        return fd

    def fsync_dir(self, node: Dir) -> None:
        self.fsyncs["dir"] += 1
        if self.metadata == "journal":
            self._persist_dirs()
        else:
            self.backing.persist_dir(node)

    def _persist_dirs(self) -> None:
        """Every changed directory, parents first (a new directory gets its name before
        its entries); releasing a removed tree may settle others on the way."""
        pending = self.backing.dirty_dirs
        while pending:
            d = min(pending, key=self._depth)
            if d.dirty and (d.links or d is self.root):  # a removed one goes with its parent
                self.backing.persist_dir(d)
            pending.discard(d)

    def _depth(self, d: Dir) -> tuple[int, int]:
        depth = 0
        walk = d.parent
        while walk is not None:
            depth += 1
            walk = walk.parent
        return depth, d.ino

    def sync_all(self) -> None:
        """A clean shutdown: everything cached becomes durable (as umount does)."""
        for node in sorted(self.backing.dirty_files, key=lambda n: n.ino):
            if node.links:  # nameless ones are lost at unmount anyway
                self.backing.persist_file(node, datasync=False)
        self._persist_dirs()

    def path_of(self, node: Node) -> str:
        """A live path for messages and reports ('?' parts for removed ones)."""
        parts: list[str] = []
        walk: Node = node
        while walk is not self.root:
            if not walk.links:
                parts.append(f"<removed inode {walk.ino}>")
                break
            parent, name = min(walk.links, key=lambda n: (n[0].ino, n[1]))
            parts.append(os.fsdecode(name))
            walk = parent
        return "/".join(reversed(parts))


def _node_from_stat(ino: int, st: os.stat_result, path: Path, page_size: int) -> Node | None:
    """The node of a file found in the backing tree; None: a type it does not hold."""
    node: Node
    if stat.S_ISREG(st.st_mode):
        node = File(ino, st.st_mode, st.st_uid, st.st_gid, page_size)
        node.live_size = node.durable_size = node.floor = st.st_size
    elif stat.S_ISDIR(st.st_mode):
        node = Dir(ino, st.st_mode, st.st_uid, st.st_gid)
    elif stat.S_ISLNK(st.st_mode):
        node = Symlink(ino, st.st_mode, st.st_uid, st.st_gid, os.readlink(os.fsencode(path)))
    else:
        return None
    node.atime_ns, node.mtime_ns, node.ctime_ns = st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns
    return node
