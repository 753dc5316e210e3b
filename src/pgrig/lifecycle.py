"""A target's server from start to end, for every command: checked before
anything is created, then made (initdb, profile, start, database,
tablespaces) or connected to, described, and finally removed - or kept,
stopped, when asked or when the server did not come back after a crash (the
evidence).
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgrig import environment, lossyfs, proc, storage
from pgrig.campaign import TargetSpec
from pgrig.cluster import aio, binaries, profiles, workdir
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, ServerLost, server_os_user
from pgrig.conninfo import Conn
from pgrig.errors import BinaryNotFound, ClusterError, DiskSpaceError, UsageError
from pgrig.lossyfs.target import open_lossy
from pgrig.pgsource import catalog
from pgrig.plan import check_space
from pgrig.results import Environment
from pgrig.step import Context, Skip
from pgrig.storage import LabSpec, cgroups, loopfs
from pgrig.storage.errors import CgroupError, StorageError
from pgrig.storage.model import LabInfo
from pgrig.ui import Ui
from pgrig.units import parse_size, size_text
from pgrig.workloads.common import DATABASE


@dataclass
class TargetRun:
    """One target while a campaign runs (a ``TargetView`` for workloads)."""

    spec: TargetSpec
    bins: binaries.PgBinaries
    directory: Path | None
    profile: profiles.Profile | None  # None: an existing server
    ctx: Context
    yes: bool = False  # the user allowed destructive steps on an existing server
    cluster: Cluster | None = None
    observed: dict[str, float] = field(default_factory=dict)  # mode -> best tps so far
    env: Environment | None = None
    # tablespace names for pgbench -i: given names, or those made from directories
    tablespaces: dict[str, str | None] = field(default_factory=dict)
    lost: ServerLost | None = None  # the server did not come back after a crash
    kept: tuple[Path, Path] | None = None  # (data directory, log) when kept
    # The cluster goes on the lossy filesystem (a power-loss workload asked for it).
    lossy: bool = False
    lab: LabSpec | None = None  # what the storage lab builds for this target
    # why the lab cannot build it here (tools, loop devices): the target is
    # skipped with this reason, the rest of the study runs
    unavailable: str | None = None
    adapted: tuple[str, ...] = ()  # what the profile became on this major (for the report)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def existing(self) -> bool:
        return self.spec.dsn is not None

    @property
    def owned(self) -> bool:
        return not self.existing or self.yes


def check_target(
    spec: TargetSpec,
    need: int,
    *,
    yes: bool,
    destructive: str | None,
    ui_notes: list[str] | None = None,
    lossy: str | None = None,
) -> TargetRun:
    """Everything about one target that can be refused, refused before anything
    is created: binaries, directories, profile, disk, permission. What the
    profile had to change for this major is added to ``ui_notes``."""
    ui_notes = ui_notes if ui_notes is not None else []
    existing = spec.dsn is not None
    tools = binaries.CLIENT_TOOLS if existing else binaries.SERVER_TOOLS
    bins = _binaries(spec, tools)
    directory = workdir.check_target(spec.directory) if spec.directory else None
    lab, unavailable = (None, None) if spec.lab is None else _check_lab(spec, need)
    profile = None
    adapted_notes: list[str] = []
    if not existing:
        machine = None
        if spec.lab is not None and spec.lab.memory_bytes is not None:
            # {ram * 0.25} of a profile means a quarter of what the server may use
            machine = profiles.Machine(spec.lab.memory_bytes, os.cpu_count() or 1)
        profile = profiles.load(spec.profile, machine=machine).with_overrides(spec.settings)
        os_user = server_os_user(spec.os_user)
        aio.check_io_method(spec.name, profile.settings, bins, os_user)
        adapted = profiles.validate(profile, bins, os_user)
        for dropped in adapted.dropped:
            if dropped.name in dict(spec.axes):  # the variants would all be the same server
                raise UsageError(
                    f"target {spec.name}: the axis {dropped.name} cannot vary on PostgreSQL "
                    f"{bins.version}: {dropped.reason}",
                    hint=f"compare {dropped.name} on the versions that have it only",
                )
        adapted_notes = adapted.notes()
        for note in adapted_notes:  # a setting this major renamed or lacks: never silent
            ui_notes.append(f"target {spec.name} (PostgreSQL {bins.version}): {note}")
    else:
        if destructive and not yes:
            raise UsageError(
                f"target {spec.name}: refusing to touch the existing server: {destructive}",
                hint="pass --yes if that is what you want, or let pgrig create a "
                "throwaway cluster (give a directory instead of a dsn)",
            )
        Conn.from_user(spec.dsn)
    for option in ("tablespace", "index_tablespace"):
        value = getattr(spec, option)
        if value and value.startswith("/"):
            if existing:
                raise UsageError(
                    f"target {spec.name}: {option} {value}: on an existing server give "
                    "the name of an existing tablespace, not a directory",
                    hint="pgrig creates tablespaces in directories only in its own cluster",
                )
            flag = "--" + option.replace("_", "-")
            where = workdir.check_target(Path(value), what=f"{option} directory", option=flag)
            check_space(where, need, f"target {spec.name} ({option})")
    if directory is not None and not existing:
        check_space(directory, need, f"target {spec.name}")
    if lossy is not None:
        _check_lossy(spec, lossy)
    scratch = directory or Path.cwd()
    return TargetRun(
        spec,
        bins,
        directory,
        profile,
        Context(bins=bins, target=scratch, scratch=scratch),
        yes=yes,
        tablespaces={"tablespace": spec.tablespace, "index_tablespace": spec.index_tablespace},
        lossy=lossy is not None,
        lab=lab,
        unavailable=unavailable,
        adapted=tuple(adapted_notes),
    )


def _check_lossy(spec: TargetSpec, workload: str) -> None:
    """A power-loss workload needs the whole cluster on the lossy filesystem."""
    outside = [
        option
        for option, value in (
            ("dsn", spec.dsn),
            ("wal_directory", spec.wal_directory),
            ("tablespace", spec.tablespace),
            ("index_tablespace", spec.index_tablespace),
        )
        if value is not None
    ]
    if spec.lab is not None and (spec.lab.io is not None or spec.lab.memory_bytes is not None):
        # The FUSE daemon does the real I/O to the backing directory, outside the
        # target's cgroup: the caps would silently not apply.
        outside += [
            key
            for key, value in (("disk/iops/mbps", spec.lab.io), ("memory", spec.lab.memory_bytes))
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


def _check_lab(spec: TargetSpec, need: int) -> tuple[LabSpec, str | None]:
    """What can be refused about a lab target before anything is created. Missing
    tools or loop devices only make the target unavailable (the rest of the
    study runs); a missing cgroup controller or a filesystem too small for the
    data is an error."""
    lab = spec.lab
    assert lab is not None
    if os.geteuid() != 0 and (lab.io is not None or lab.memory_bytes is not None):
        raise StorageError(
            f"target {spec.name}: I/O caps and memory limits need root (cgroups)",
            hint="run pgrig as root, or drop disk, iops, mbps and memory from the target",
        )
    for controller, wanted in (("io", lab.io), ("memory", lab.memory_bytes)):
        if wanted is not None:
            try:
                cgroups.hierarchy_for(controller)
            except CgroupError as exc:
                raise CgroupError(f"target {spec.name}: {exc.message}", hint=exc.hint) from exc
    if lab.fs is None:
        return lab, None
    if need > lab.fs.size_bytes:
        raise DiskSpaceError(
            f"target {spec.name}: the {size_text(lab.fs.size_bytes)} {lab.fs.fstype} "
            f"filesystem is too small for the campaign's data (about {size_text(need)})",
            hint="raise size, or lower the scale",
        )
    os_user = server_os_user(spec.os_user)
    fs = replace(lab.fs, owner=os_user.name if os_user else None)
    lab = replace(lab, fs=fs)
    try:
        loopfs.check_prerequisites(fs.fstype)
    except (StorageError, BinaryNotFound) as exc:
        return lab, f"{exc.message}" + (f" ({exc.hint})" if exc.hint else "")
    return lab, None


def check_lab_space(targets: Sequence[TargetRun]) -> None:
    """The lab's backing files of all targets on one host filesystem must fit it
    together (they exist at once); refused before anything is created."""
    by_base: dict[int, tuple[Path, int, list[str]]] = {}
    for t in targets:
        if t.lab is None or t.lab.fs is None or t.lab.base is None or t.unavailable:
            continue
        base = workdir.check_target(Path(t.lab.base), what="storage-lab base", option="base")
        dev = base.stat().st_dev
        _, total, names = by_base.get(dev, (base, 0, []))
        by_base[dev] = (base, total + t.lab.fs.total_bytes, [*names, t.name])
    for base, total, names in by_base.values():
        check_space(
            base,
            total,
            f"the filesystem target(s) {', '.join(names)}",
            hint="lower size, or put the backing files elsewhere (base = ...)",
        )


@contextlib.contextmanager
def lab(t: TargetRun, ui: Ui, *, keep: bool) -> Iterator[LabInfo]:
    """Build the target's lab (filesystem, cgroups) for the ``with`` block: the
    probes and the cluster then run in it. Removed after - kept with the
    cluster under --keep or when a crashed server is kept as evidence."""
    assert t.lab is not None
    if t.unavailable is not None:
        raise Skip(t.unavailable)
    base = Path(t.lab.base) if t.lab.base else (t.directory or Path.cwd())

    def kept() -> bool:
        return keep or t.lost is not None

    with storage.lab_target(base, t.lab, keep=kept) as built:
        t.directory = built.directory
        t.ctx.target = t.ctx.scratch = built.directory
        t.ctx.preexec = built.preexec
        yield built.info()
    if built.filesystem is not None and kept():
        ui.info(f"{t.name}: {loopfs.kept_message(built.filesystem)}")


def _binaries(spec: TargetSpec, tools: tuple[str, ...]) -> binaries.PgBinaries:
    """The target's binaries; a version (``pg_bin = "9.6"``, the versions axis) not
    in the cache yet is installed now, before anything else is created."""
    try:
        return binaries.find(spec.pg_bin, tools=tools)
    except BinaryNotFound:
        if spec.pg_bin is None or not binaries.looks_like_version(spec.pg_bin):
            raise
    catalog.install(str(spec.pg_bin))
    return binaries.find(spec.pg_bin, tools=tools)


def memory_warning(targets: Sequence[TargetRun]) -> str | None:
    """Interleaving keeps every target's cluster up at once: their shared
    buffers must fit together."""
    local = [t for t in targets if t.profile is not None]
    if len(local) < 2:
        return None
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    total = 0
    for t in local:
        assert t.profile is not None
        with contextlib.suppress(UsageError):
            total += parse_size(t.profile.settings.get("shared_buffers", "128MB"))
    if total <= 0.6 * ram:
        return None
    return (
        f"the {len(local)} clusters' shared_buffers add up to {total / 2**30:.1f} GiB of "
        f"{ram / 2**30:.1f} GiB RAM while they run side by side; "
        "lower it per target with set.shared_buffers"
    )


@contextlib.contextmanager
def server(t: TargetRun, name: str, study: str, ui: Ui, *, keep: bool) -> Iterator[None]:
    """The target's server, up for the ``with`` block: an existing one connected
    to, or a throwaway cluster named ``name`` made in the target directory."""
    if t.spec.dsn is not None:
        conn = Conn.from_user(t.spec.dsn)
        with conn.connect():
            pass
        t.ctx.conn = conn
        capture(t)
        yield
        return
    assert t.profile is not None and t.directory is not None
    os_user = server_os_user(t.spec.os_user)
    root = t.directory
    if t.lossy:
        t.ctx.lossy = open_lossy(t.directory, name, study=study, seed=_seed(name))
        root = t.ctx.lossy.backing
        ui.info(f"{t.name}: the cluster runs on a lossy filesystem in {t.ctx.lossy.holder}")
    try:
        cluster = Cluster.create(t.bins, root / name, study=study, os_user=os_user)
    except BaseException:
        _close_lossy(t, keep=False)
        raise
    t.cluster = t.ctx.cluster = cluster
    try:
        with ui.step(f"{t.name}: initdb + start PostgreSQL {t.bins.version}"):
            waldir = None
            if t.spec.wal_directory is not None:
                holder = workdir.make_extra_dir(
                    cluster.workdir, t.spec.wal_directory.resolve() / f"{name}-wal", os_user
                )
                waldir = holder / "pg_wal"
            init = t.spec.initdb
            cluster.initdb(
                InitdbOptions(
                    encoding=init.encoding,
                    locale=init.locale,
                    wal_segsize_mb=init.wal_segsize_mb,
                    data_checksums=init.data_checksums,
                    waldir=waldir,
                )
            )
            cluster.configure(_lossy_profile(t) if t.ctx.lossy is not None else t.profile)
            cluster.preexec = t.ctx.preexec
            if t.ctx.lossy is not None:
                cluster = _onto_lossy(t, cluster)
            cluster.start()
            admin = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
            with admin.connect() as db:
                db.execute(f'CREATE DATABASE "{DATABASE}"')
        t.ctx.conn = admin.with_dbname(DATABASE)
        t.ctx.scratch = cluster.workdir
        t.ctx.server_pid = cluster.postmaster_pid()
        _make_tablespaces(t, ui)
        overrides = ", ".join(f"{k}={v}" for k, v in t.spec.settings.items())
        ui.ok(
            f"{t.name}: PostgreSQL {t.bins.version} running as "
            f"{os_user.name if os_user else 'you'} in {cluster.datadir} "
            f"(profile {t.profile.name}{', ' + overrides if overrides else ''})"
        )
        capture(t)
        yield
    finally:
        try:
            dispose(t, cluster, keep, ui)
        finally:
            _close_lossy(t, keep=keep or t.lost is not None)


def _onto_lossy(t: TargetRun, cluster: Cluster) -> Cluster:
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
    t.cluster = t.ctx.cluster = moved
    return moved


def _lossy_profile(t: TargetRun) -> profiles.Profile:
    """After a power loss the remounted filesystem holds nothing unsynced, so the
    fsync of every file that crash recovery starts with checks nothing - and costs
    seconds of FUSE round trips per cycle; syncfs (14+) does the same job at once.
    A value the user set is kept."""
    assert t.profile is not None
    if t.bins.major < 14 or "recovery_init_sync_method" in t.profile.settings:
        return t.profile
    return t.profile.with_overrides({"recovery_init_sync_method": "syncfs"})


def _seed(name: str) -> int:
    """The lossy filesystem's seed (which unsynced pages a partial power loss keeps)."""
    return zlib.crc32(name.encode())


def _close_lossy(t: TargetRun, *, keep: bool) -> None:
    if t.ctx.lossy is not None:
        lossy, t.ctx.lossy = t.ctx.lossy, None
        lossy.close(keep=keep)


def dispose(t: TargetRun, cluster: Cluster, keep: bool, ui: Ui) -> None:
    """Remove the cluster - or keep it, stopped, when asked or when a crash left
    it down for good (the evidence)."""
    if not keep and t.lost is None:
        with proc.signals_deferred():
            cluster.destroy()
        return
    try:
        cluster.stop()
    finally:
        workdir.unregister(cluster.workdir)
    why = "--keep" if t.lost is None else "the server did not come back"
    # On the lossy filesystem the files stay in its backing directory after the unmount.
    on_disk = t.ctx.lossy.on_disk if t.ctx.lossy is not None else (lambda p: p)
    t.kept = (on_disk(cluster.datadir), on_disk(cluster.logfile))
    ui.info(f"{t.name}: kept ({why}): data directory {t.kept[0]}, log {t.kept[1]}")


def _make_tablespaces(t: TargetRun, ui: Ui) -> None:
    """Directories given as tablespaces become tablespaces of the throwaway
    cluster; the TPC-B steps then use their names."""
    assert t.cluster is not None
    names: dict[str, str] = {}
    for option, name in (("tablespace", "pgrig_tables"), ("index_tablespace", "pgrig_indexes")):
        value = getattr(t.spec, option)
        if value and value.startswith("/"):
            names[option] = t.cluster.create_tablespace(name, Path(value))
            ui.ok(f"{t.name}: tablespace {name} in {value}")
    t.tablespaces = {
        "tablespace": names.get("tablespace", t.spec.tablespace),
        "index_tablespace": names.get("index_tablespace", t.spec.index_tablespace),
    }


def capture(t: TargetRun) -> None:
    """The machine as this target's server sees it: version and settings."""
    assert t.ctx.conn is not None
    t.env = environment.capture(
        [t.directory or Path.cwd()], pg_conninfo=t.ctx.conn.conninfo(), bin_dir=t.bins.bin_dir
    )
    if t.env.postgres is None:
        raise ClusterError(
            f"cannot read the server's version and settings from {t.ctx.conn.describe()}"
        )
