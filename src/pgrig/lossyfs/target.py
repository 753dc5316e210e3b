"""A target's throwaway cluster on the lossy filesystem (the power-loss crash model).

Layout, all of it made and marked by pgrig on the storage under test::

    DIRECTORY/NAME-lossy/     a marked work directory (``pgrig clean`` removes it)
        backing/              where the lossy filesystem writes what was synced
        mnt/                  the mount; the cluster's work directory goes inside

initdb writes into ``backing`` before the mount exists, at the disk's speed
(what the backing directory holds when the filesystem mounts counts as synced);
then the cluster runs under ``mnt``, data directory and WAL together. After the
run the mount is unmounted in order (its cache written back) and the holder
removed - or kept with the cluster, and then the kept paths are the ones under
``backing``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from pgrig.cluster import workdir
from pgrig.errors import WorkdirError
from pgrig.lossyfs.mount import LossyMount, require

SUFFIX = "-lossy"


@dataclass
class LossyTarget:
    holder: Path
    mount: LossyMount

    @property
    def backing(self) -> Path:
        """Where the cluster is made, before the mount."""
        return self.mount.backing

    @property
    def root(self) -> Path:
        """Where the cluster runs: the mount."""
        return self.mount.mountpoint

    def on_disk(self, path: Path) -> Path:
        """Where ``path`` on the mount is kept once the mount is gone."""
        try:
            return self.mount.backing / path.relative_to(self.mount.mountpoint)
        except ValueError:
            return path

    def close(self, *, keep: bool) -> None:
        """Unmount (the cache is written back) and remove the holder, unless kept."""
        try:
            self.mount.unmount()
        finally:
            if keep or self.mount.mounted:
                workdir.unregister(self.holder)  # never rmtree through a live mount
            else:
                workdir.remove(self.holder)


def open_lossy(directory: Path, name: str, *, study: str, seed: int) -> LossyTarget:
    """Make the holder for the cluster ``name`` in ``directory``; ``mount.start()``
    mounts the lossy filesystem once the cluster is made in ``backing``.

    ``metadata="journal"``: PostgreSQL relies on the filesystem making a new
    file's name durable with the file's fsync (ext4 and xfs do; docs/lossyfs.md).
    """
    require("a power-loss check")
    holder = directory / f"{name}{SUFFIX}"
    workdir.create(holder, study=study)
    try:
        backing = holder / "backing"
        backing.mkdir(mode=0o755)
        mount = LossyMount(backing, holder / "mnt", seed=seed, metadata="journal")
    except BaseException:
        with contextlib.suppress(OSError, WorkdirError):
            workdir.remove(holder)
        raise
    return LossyTarget(holder, mount)
