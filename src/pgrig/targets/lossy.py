"""The lossy filesystem (docs/lossyfs.md): when a workload cuts the power
(``pgrig durability --power-loss``), every target's throwaway cluster runs on a
FUSE filesystem that forgets what was not synced. initdb writes into its
backing directory at the disk's speed; the cluster then runs on the mount, data
directory and WAL together. On a lab filesystem it goes inside that; an I/O cap
or memory limit cannot cover the FUSE daemon's own I/O and is refused."""

from __future__ import annotations

import contextlib
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from pgrig import lossyfs
from pgrig.cluster import profiles, workdir
from pgrig.cluster.server import Cluster
from pgrig.errors import UsageError
from pgrig.lossyfs.target import open_lossy
from pgrig.ownership import Found, Leaves
from pgrig.registry.target import Checked, Demands, Target
from pgrig.targets.lab import LabKind
from pgrig.ui import Ui

if TYPE_CHECKING:
    from pgrig.registry.target import TargetSpec


class LossyKind(LabKind):
    name = "lossy"
    order = 20
    summary = "a throwaway cluster on the lossy FUSE filesystem (power-loss durability checks)"
    clean_rank = 10  # first: removing a work directory must never reach through a live mount
    leaves = Leaves(records=(lossyfs.RECORDS,), scratch=(lossyfs.RUN_PREFIX,))

    def claims(self, spec: TargetSpec, power_loss: str | None) -> bool:
        return power_loss is not None and spec.dsn is None

    def check(self, spec: TargetSpec, demands: Demands, notes: list[str]) -> Checked:
        checked = super().check(spec, demands, notes)
        workload = demands.power_loss or "(power loss)"
        outside = [
            option
            for option, value in (
                ("wal_directory", spec.wal_directory),
                ("tablespace", spec.tablespace),
                ("index_tablespace", spec.index_tablespace),
            )
            if value is not None
        ]
        if spec.lab is not None:
            # The FUSE daemon does the real I/O to the backing directory, outside the
            # target's cgroup: the caps would silently not apply.
            outside += [
                key
                for key, value in (
                    ("disk/iops/mbps", spec.lab.io),
                    ("memory", spec.lab.memory_bytes),
                )
                if value is not None
            ]
        if outside:
            raise UsageError(
                f"target {spec.name}: workload {workload} cuts the power of the cluster's "
                f"filesystem, which cannot cover {', '.join(outside)}",
                hint="give that target a directory only (data directory and WAL go on the "
                "lossy filesystem together)",
            )
        lossyfs.require(f"workload {workload}")
        return checked

    def clean(self, study: str | None, others: list[str], found: Found) -> list[str]:
        # a run directory without a record is what the second looks for: either
        # alone finds nothing without what it looks at
        mounts = lossyfs.clean_orphans(study=study, left=others) if found.records else []
        return [
            f"unmounted the lossy filesystem on {mount} (left by a killed pgrig run)"
            for mount in mounts
        ] + [
            f"removed the lossy filesystem's run directory {path} (its pgrig gone, "
            "nothing mounted, no process using it)"
            for path in (lossyfs.clean_run_dirs() if found.scratch else ())
        ]

    def _root(self, t: Target, name: str, study: str, ui: Ui, scope: contextlib.ExitStack) -> Path:
        assert t.directory is not None
        lossy = open_lossy(t.directory, name, study=study, seed=zlib.crc32(name.encode()))
        scope.enter_context(t.scoped(lossy=lossy))
        ui.info(f"{t.name}: the cluster runs on a lossy filesystem in {lossy.holder}")
        return lossy.backing

    def _profile(self, t: Target) -> profiles.Profile:
        """After a power loss the remounted filesystem holds nothing unsynced, so the
        fsync of every file that crash recovery starts with checks nothing - and costs
        seconds of FUSE round trips per cycle; syncfs (14+) does the same job at once.
        A value the user set is kept."""
        profile = super()._profile(t)
        if t.bins.major < 14 or "recovery_init_sync_method" in profile.settings:
            return profile
        return profile.with_overrides({"recovery_init_sync_method": "syncfs"})

    def _before_start(self, t: Target, cluster: Cluster) -> Cluster:
        """initdb wrote into the backing directory at the disk's speed (what it holds
        when the filesystem mounts counts as synced); from now on the cluster runs on
        the mount, and the holder's marker stands for its work directory."""
        lossy = t.ctx.lossy
        assert lossy is not None
        lossy.mount.start()
        moved = cluster.moved(lossy.root / cluster.workdir.name)
        workdir.unregister(cluster.workdir)
        # Its work directory vanishes between a power loss and the remount.
        workdir.anchor_socket_dir(cluster.socket_dir, lossy.holder)
        return moved

    def _close(self, t: Target, *, keep: bool) -> None:
        if t.ctx.lossy is not None:
            t.ctx.lossy.close(keep=keep)

    def _on_disk(self, t: Target, path: Path) -> Path:
        # On the lossy filesystem the files stay in its backing directory after the unmount.
        return t.ctx.lossy.on_disk(path) if t.ctx.lossy is not None else path


KIND = LossyKind()
