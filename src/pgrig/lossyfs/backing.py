"""The backing directory: what survived the last fsync, and nothing else.

Invariant: the backing tree is the durable state. Every backing directory lists
exactly the ``durable`` entries of its in-memory directory, every backing file
holds exactly the last fsynced content of its inode (hard links mirror inode
identity). An inode whose data was fsynced but whose name is not durable yet
lives nameless in the staging directory; the staging directory is emptied at
mount, because after a power loss such an inode is unreachable (fsck would put
it in lost+found).

So a power loss needs no undo: the filesystem process stops serving, optionally
writes a chosen subset of cached pages into the backing files, and exits; the
next mount reads the backing tree.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from pgrig.lossyfs.nodes import Dir, File, Node, Symlink

log = logging.getLogger("pgrig.lossyfs")

STAGING = ".lossyfs-staging"
MAX_IOV = 256  # buffers per pwritev (the kernel's limit is IOV_MAX, 1024)


class Backing:
    """Applies fsyncs to the backing tree; ``root`` is the mount's root directory."""

    def __init__(self, path: Path, root: Dir, *, chown: bool) -> None:
        self.path = path
        self.root = root
        self.staging = path / STAGING
        self.chown = chown
        self.dirty_files: set[File] = set()
        self.dirty_dirs: set[Dir] = set()  # live entries may differ from durable ones

    # -- where an inode's backing copy is -------------------------------------

    def relpath(self, node: Node) -> str | None:
        """Path of ``node``'s backing copy relative to the backing root, or None."""
        if node is self.root:
            return ""
        if node.durable_names:
            parent, name = min(node.durable_names, key=lambda n: (n[0].ino, n[1]))
            base = self.relpath(parent)
            if base is None:  # pragma: no cover - invariant: durable parents are backed
                raise RuntimeError(f"inode {node.ino} has a durable name in an unbacked dir")
            return os.path.join(base, os.fsdecode(name)) if base else os.fsdecode(name)
        if node.staged:
            return os.path.join(STAGING, str(node.ino))
        return None

    def abspath(self, node: Node) -> Path | None:
        rel = self.relpath(node)
        return None if rel is None else self.path / rel if rel else self.path

    def _name_path(self, parent: Dir, name: bytes) -> Path:
        base = self.abspath(parent)
        assert base is not None
        return base / os.fsdecode(name)

    def _staged_path(self, node: Node) -> Path:
        return self.staging / str(node.ino)

    def open_file(self, node: File) -> int | None:
        """The backing file's descriptor, opened once; None while it has no backing copy."""
        if node.fd is None:
            path = self.abspath(node)
            if path is None:
                return None
            node.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        return node.fd

    # -- creating backing copies ----------------------------------------------

    def _create(self, node: Node, path: Path) -> None:
        if isinstance(node, File):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            os.fchmod(fd, stat.S_IMODE(node.mode))
            if self.chown:
                os.fchown(fd, node.uid, node.gid)
            node.fd = fd
            node.durable_size = node.floor = 0
        elif isinstance(node, Dir):
            os.mkdir(path, 0o700)
            os.chmod(path, stat.S_IMODE(node.mode))
            if self.chown:
                os.chown(path, node.uid, node.gid)
        elif isinstance(node, Symlink):
            os.symlink(node.target, path)
            if self.chown:
                os.lchown(path, node.uid, node.gid)

    def _stage(self, node: Node) -> None:
        """Give a nameless inode a backing copy in the staging directory."""
        self._create(node, self._staged_path(node))
        node.staged = True

    def apply_attrs(self, node: Node) -> None:
        """Mode and owner are written through (see docs/lossyfs.md: not modelled)."""
        path = self.abspath(node)
        if path is None:
            return
        if not isinstance(node, Symlink):
            os.chmod(path, stat.S_IMODE(node.mode))
        if self.chown:
            os.lchown(path, node.uid, node.gid)

    # -- fsync of a file --------------------------------------------------------

    def persist_file(self, node: File, *, datasync: bool) -> None:
        fd = self.write_back(node)
        if fd is not None:
            (os.fdatasync if datasync else os.fsync)(fd)

    def write_back(self, node: File) -> int | None:
        """Move a file's cache into its backing file; returns the descriptor the caller
        must still (f)datasync, or None if nothing changed since the last fsync. The
        model counts the data durable from here on: a power loss that comes before the
        caller's fdatasync returns keeps it (the disk may well have written it)."""
        if not node.dirty and node.fd is not None:
            return None
        if self.abspath(node) is None:
            self._stage(node)
            self._fsync_dir(self.staging)
        fd = self.open_file(node)
        assert fd is not None
        backing_size = node.durable_size
        if node.floor < node.durable_size:
            os.ftruncate(fd, node.floor)
            backing_size = node.floor
        backing_size = max(backing_size, self._write_pages(node, fd, sorted(node.pages)))
        if backing_size != node.live_size:
            os.ftruncate(fd, node.live_size)
        node.pages.clear()
        self.dirty_files.discard(node)
        node.floor = node.durable_size = node.live_size
        return fd

    def _write_pages(self, node: File, fd: int, indexes: list[int], limit: int = 0) -> int:
        """Write cached pages, consecutive ones in one pwritev; ``limit`` cuts each.
        Returns the end offset of the last byte written (0 if none)."""
        psize = node.page_size
        end = 0
        run: list[memoryview] = []
        run_start = -1
        expected = -1
        for index in indexes:
            extent = node.page_extent(index)
            if limit:
                extent = min(extent, limit)
            if extent <= 0:
                continue
            if index != expected or run_start < 0 or len(run) >= MAX_IOV:
                if run:
                    os.pwritev(fd, run, run_start * psize)
                run, run_start = [], index
            run.append(memoryview(node.pages[index])[:extent])
            expected = index + 1 if extent == psize else -1
            end = max(end, index * psize + extent)
        if run:
            os.pwritev(fd, run, run_start * psize)
        return end

    # -- fsync of a directory -----------------------------------------------------

    def persist_dir(self, d: Dir) -> None:
        """Make the backing directory of ``d`` list exactly its live entries."""
        touched: set[Path] = set()
        if self.abspath(d) is None:
            self._stage(d)
            touched.add(self.staging)
        for name, node in list(d.live.items()):
            if d.durable.get(name) is not node:
                self._place(d, name, node, touched)
        for name, node in list(d.durable.items()):
            if d.live.get(name) is not node:
                self._release(d, name, node, touched)
        self.dirty_dirs.discard(d)
        base = self.abspath(d)
        assert base is not None
        touched.add(base)
        for path in sorted(touched):
            self._fsync_dir(path)

    def _place(self, d: Dir, name: bytes, node: Node, touched: set[Path]) -> None:
        occupant = d.durable.get(name)
        if occupant is not None:
            self._release(d, name, occupant, touched)
        target = self._name_path(d, name)
        stale = [n for n in node.durable_names if n[0].live.get(n[1]) is not node]
        if stale:
            # A rename: persist it as one step, so the old name goes when the new one
            # comes (journalling filesystems commit a rename atomically).
            old_dir, old_name = min(stale, key=lambda n: (n[0].ino, n[1]))
            source = self._name_path(old_dir, old_name)
            os.rename(source, target)
            del old_dir.durable[old_name]
            node.durable_names.discard((old_dir, old_name))
            touched.add(source.parent)
        elif node.durable_names:
            existing = self.abspath(node)
            assert existing is not None
            os.link(existing, target, follow_symlinks=False)
        elif node.staged:
            os.rename(self._staged_path(node), target)
            node.staged = False
            touched.add(self.staging)
        else:
            self._create(node, target)
        d.durable[name] = node
        node.durable_names.add((d, name))

    def _release(self, d: Dir, name: bytes, node: Node, touched: set[Path]) -> None:
        """Drop the durable name ``d/name`` of ``node``, keeping its backing copy
        while the inode is alive and has no other one."""
        path = self._name_path(d, name)
        touched.add(path.parent)
        last = node.durable_names == {(d, name)} and not node.staged
        if last and not node.alive and isinstance(node, Dir):
            # A removed tree: empty it while its own path still resolves (its live
            # descendants are rescued, the rest goes with it).
            for child_name, child in list(node.durable.items()):
                self._release(node, child_name, child, touched)
        del d.durable[name]
        node.durable_names.discard((d, name))
        if not last:
            os.unlink(path)
        elif node.alive:
            self._rescue(node, path, touched)
        else:
            (os.rmdir if isinstance(node, Dir) else os.unlink)(path)
            self.forget_backing(node)

    def _rescue(self, node: Node, path: Path, touched: set[Path]) -> None:
        """An alive inode loses its only durable name: if it was renamed to a name
        whose slot is free and backed, persist that rename; else stage it."""
        for parent, live_name in sorted(node.links, key=lambda n: (n[0].ino, n[1])):
            base = self.abspath(parent)
            if base is None or live_name in parent.durable:
                continue
            target = base / os.fsdecode(live_name)
            try:
                os.rename(path, target)
            except OSError as exc:  # e.g. a directory moved under its own old path
                log.debug("cannot persist rename of %s to %s: %s", path, target, exc)
                continue
            parent.durable[live_name] = node
            node.durable_names.add((parent, live_name))
            touched.add(base)
            return
        os.rename(path, self._staged_path(node))
        node.staged = True
        touched.add(self.staging)

    def forget_backing(self, node: Node) -> None:
        """``node`` has no backing copy any more: drop its cache and descriptor."""
        if isinstance(node, File):
            node.close_backing()
            node.pages.clear()
            node.durable_size = node.floor = 0
            self.dirty_files.discard(node)
            if node.alive:  # pragma: no cover - callers only forget dead inodes
                raise RuntimeError(f"inode {node.ino} lost its backing copy while alive")

    def drop_dead(self, node: Node) -> None:
        """A dead inode (no name, not open, forgotten by the kernel): remove what only
        it used. Its durable names stay until their directory is fsynced."""
        if node.durable_names:
            return
        if node.staged:
            path = self._staged_path(node)
            if isinstance(node, Dir):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            node.staged = False
        self.forget_backing(node)

    def _fsync_dir(self, path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return  # removed by the same fsync (a dead directory's contents)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def dirs(self) -> Iterator[Dir]:
        """Every directory reachable live or durably from the root, parents first."""
        seen: set[int] = set()
        todo: list[Dir] = [self.root]
        while todo:
            d = todo.pop(0)
            if d.ino in seen:
                continue
            seen.add(d.ino)
            yield d
            for child in (*d.live.values(), *d.durable.values()):
                if isinstance(child, Dir):
                    todo.append(child)
