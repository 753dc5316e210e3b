"""One entry point for a campaign target built by the lab: filesystem, I/O cap,
memory limit, or any combination.

    spec = LabSpec.from_mapping({"fs": "xfs", "size": "8GiB", "mount": "noatime",
                                 "disk": "essd-pl1:100GiB", "memory": "2GiB"})
    with lab_target(Path("/var/tmp"), spec) as t:
        cluster = Cluster.create(bins, t.directory / "work", ...)
        cluster.start(cgroups=t.cgroups)
        fio.run(job_in(t.directory), preexec=t.preexec)
        t.describe(); t.memory_stats()

The keys are those of a campaign target (``pgrig.storage.keys``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from pgrig import environment
from pgrig.errors import UsageError
from pgrig.schema import Context, Locator, Table, TomlValue
from pgrig.storage import btrfs, cgroups, cpuset, keys, latency, memcg, throttle
from pgrig.storage.cgroups import Cgroup
from pgrig.storage.errors import CgroupError
from pgrig.storage.fsinfo import FilesystemInfo
from pgrig.storage.latency import Emulators, Layer
from pgrig.storage.loopfs import FsSpec, loop_filesystem
from pgrig.storage.memcg import MemoryStats
from pgrig.storage.model import IO_NOT_CAPTURED, LOOP_NOT_CAPTURED, V1_WRITEBACK, LabInfo
from pgrig.storage.nativefs import Caps, Instance
from pgrig.storage.throttle import IoLimits

FS_KEYS = ("size", "base", "mkfs", "mount", "log_size", "stripes")
CAP_KEYS = ("disk", "iops", "mbps")  # an I/O cap, of a target or of a tablespace's disk


@dataclass(frozen=True)
class LabSpec:
    fs: FsSpec | None = None
    io: IoLimits | None = None
    memory_bytes: int | None = None
    base: str | None = None  # where the backing file goes (with fs)
    disk: str | None = None  # the cloud-disk class asked for, e.g. "essd-pl1:100GiB"
    latency: str | None = None  # a disk class's per-I/O latency, e.g. "essd-pl3"
    # seed 004's tbs1/tbs2 on their own disks: (option, filesystem, base), option
    # "tablespace" or "index_tablespace"
    tablespaces: tuple[tuple[str, FsSpec, str], ...] = ()
    cpus: int | None = None  # the server and its clients on this many CPUs (a cpuset)
    # a tablespace filesystem's own I/O cap (seed 004's tbs1 and tbs2 on disks of
    # 20k IOPS each): option -> limits on its loop device, in the server's cgroup
    tablespace_io: tuple[tuple[str, IoLimits], ...] = ()
    # a tablespace on an emulated cloud disk of its own: option -> latency class
    # (over its filesystem, or over the target's directory without one)
    tablespace_latency: tuple[tuple[str, str], ...] = ()
    # the instance's own cap, which every emulated disk of the target draws from
    # (seed 000: 8 disks of 91.9k IOPS each reached 106k together)
    instance: Caps | None = None

    @property
    def emulated(self) -> int:
        """How many of the target's disks a latency layer emulates."""
        return (self.latency is not None) + len(self.tablespace_latency)

    @classmethod
    def from_table(cls, t: Table) -> LabSpec | None:
        """The lab keys of a campaign target; None when it has none."""
        tablespaces, tablespace_io, tablespace_latency = cls._tablespaces(t)
        v = keys.read(t)
        instance = _instance(t, v, tablespace_latency)
        if not keys.given(v):
            if not tablespaces and not tablespace_latency:
                return None
            return cls(tablespaces=tablespaces, tablespace_io=tablespace_io,
                       tablespace_latency=tablespace_latency)  # fmt: skip
        fs = None
        if v["fs"] is None:
            for key in FS_KEYS:
                if key in t.data:
                    # the quick study names its option (--fs), a file its key
                    option = t.ctx.options.get((*t.path, "fs"))
                    raise t.error(
                        key,
                        f"needs {option}"
                        if option
                        else 'a filesystem option without fs = "xfs", "ext4" or "btrfs"',
                    )
        else:
            if v["size_bytes"] is None:
                raise t.error("fs", f"fs = {v['fs']!r} needs size", hint='e.g. size = "8GiB"')
            _fs_combination(t, v)
            fs = FsSpec(
                fstype=v["fs"],
                size_bytes=v["size_bytes"],
                mkfs_options=v["mkfs"],
                mount_options=tuple(o.strip() for o in (v["mount"] or "").split(",") if o.strip()),
                external_log_bytes=v["log_bytes"],
                owner=None,  # the server's OS user, set when the target is checked
                stripes=v["stripes"] or 1,
            )
        io = None
        if v["disk"] is not None:
            if v["iops"] is not None or v["mbps"] is not None:
                raise t.error("disk", "give disk or iops/mbps, not both")
            pl, gib = keys.parse_disk(v["disk"])
            try:
                io = throttle.essd(pl, gib)
            except UsageError as exc:
                raise t.error("disk", exc.message, exc.hint) from exc
        elif v["iops"] is not None or v["mbps"] is not None:
            iops = None if v["iops"] is None else int(v["iops"])
            io = IoLimits.generic(iops=iops, mbps=v["mbps"])
        if v["latency"] is not None and io is not None:
            raise t.error(
                "latency",
                "cannot be combined with an I/O cap (disk, iops, mbps): the latency layer's "
                "process does the I/O, outside the cgroup that caps it",
                hint="give the latency and the cap to two targets",
            )
        base = str(keys.base_of(v)) if fs is not None else None
        return cls(fs, io, v["memory_bytes"], base, v["disk"], v["latency"], tablespaces,
                   v["cpus"], tablespace_io, tablespace_latency, instance)  # fmt: skip

    @classmethod
    def _tablespaces(
        cls, t: Table
    ) -> tuple[
        tuple[tuple[str, FsSpec, str], ...],
        tuple[tuple[str, IoLimits], ...],
        tuple[tuple[str, str], ...],
    ]:
        """``tablespace = { fs = "xfs", size = "2GiB", iops = 20000 }``: a
        filesystem the lab builds for that tablespace (the keys of a filesystem
        target), and the cap of its own device (``disk``, ``iops``, ``mbps``);
        or ``{ latency = "essd-pl3" }`` (with or without ``fs``): an emulated
        cloud disk of its own."""
        out, caps, emulated = [], [], []
        for option in ("tablespace", "index_tablespace"):
            raw = t.data.get(option)
            if not isinstance(raw, dict):
                continue
            sub = Table(raw, (*t.path, option), t.ctx)
            # unknown keys first: an instance key here is the target's, not misread
            sub.finish((*FS_KEYS, "fs", *CAP_KEYS, "latency"))
            spec = cls.from_table(sub)
            if spec is None or (spec.fs is None and spec.latency is None):
                raise t.error(option, 'a tablespace disk needs fs and size, or latency',
                              hint='e.g. { fs = "xfs", size = "2GiB" } or '
                                   '{ latency = "essd-pl3" }')  # fmt: skip
            if spec.fs is not None:
                out.append((option, spec.fs, str(keys.base_of({"base": spec.base}))))
            if spec.io is not None:
                caps.append((option, spec.io))
            if spec.latency is not None:
                emulated.append((option, spec.latency))
        return tuple(out), tuple(caps), tuple(emulated)

    @classmethod
    def from_mapping(cls, table: Mapping[str, TomlValue], *, where: str = "target") -> LabSpec:
        """From a plain mapping with the campaign's keys (the API and tests)."""
        t = Table(dict(table), (where,), Context(where, Path.cwd(), Locator("")))
        spec = cls.from_table(t)
        t.finish((*keys.LAB_SCHEMA.names, "tablespace", "index_tablespace"))
        return spec or cls()

    def describe(self) -> str:
        parts = []
        if self.fs:
            parts.append(self.fs.describe())
        if self.io:
            parts.append(self.io.describe() + _each(self.fs))
        if self.latency:
            parts.append(f"{latency.parse_class(self.latency).name} per-I/O latency")
        if self.instance:
            parts.append(f"an instance cap of {self.instance.describe()} shared by its "
                         f"{self.emulated} emulated disk(s)")  # fmt: skip
        if self.memory_bytes:
            parts.append(f"memory limit {self.memory_bytes / 2**20:,.0f} MiB")
        if self.cpus:
            parts.append(_cpus(self.cpus))
        caps = dict(self.tablespace_io)
        on_fs = {option: fs for option, fs, _ in self.tablespaces}
        for option, fs, _ in self.tablespaces:
            cap = caps.get(option)
            parts.append(f"{option} on {fs.describe()}"
                         + (f", {cap.describe()}{_each(fs)}" if cap else ""))  # fmt: skip
        for option, name in self.tablespace_latency:
            where = "its filesystem" if option in on_fs else "the target's directory"
            parts.append(f"{option} {latency.parse_class(name).name} per-I/O latency over {where}")
        return "; ".join(parts) or "plain directory"


def _instance(
    t: Table, v: Mapping[str, object], tablespace_latency: tuple[tuple[str, str], ...]
) -> Caps | None:
    """``instance_iops``/``instance_mbps``: the cap every emulated disk of the
    target shares - refused, by key, where no disk of the target is emulated."""
    iops, mbps = v["instance_iops"], v["instance_mbps"]
    if iops is None and mbps is None:
        return None
    if v["latency"] is None and not tablespace_latency:
        key = "instance_iops" if iops is not None else "instance_mbps"
        raise t.error(
            key,
            "an instance cap is shared by the target's emulated disks, and it has none: "
            "it needs latency on the target or on its tablespace",
            hint='e.g. latency = "essd-pl3" (the native latency layer applies the cap); '
            "for a plain cgroup cap of one disk use iops/mbps",
        )
    assert iops is None or isinstance(iops, float)
    assert mbps is None or isinstance(mbps, float)
    return instance_caps(iops, mbps)


def instance_caps(iops: float | None, mbps: float | None) -> Caps:
    """The keys' numbers (TOML floats) as the layer's caps: whole I/Os a second."""
    return Caps(iops=None if iops is None else max(1, round(iops)), mbps=mbps)


def _fs_combination(t: Table, v: Mapping[str, object]) -> None:
    """Keys of a filesystem target that do not go together, named by key."""
    stripes, fstype = v["stripes"], v["fs"]
    if isinstance(stripes, int) and stripes > 1 and fstype != "btrfs":
        raise t.error(
            "stripes",
            f"{stripes} with fs = {fstype!r}: {btrfs.why_not_striped(str(fstype))}",
            hint='use fs = "btrfs" with stripes (docs/storage-lab.md says what it leaves out), '
            "or one device with mkfs stripe options, which shape the layout only",
        )
    if fstype == "btrfs" and v["log_bytes"] is not None:
        raise t.error(
            "log_size", "btrfs has no external log or journal device",
            hint='drop log_size, or use fs = "xfs" (its log) or "ext4" (its journal)',
        )  # fmt: skip


@dataclass(frozen=True)
class LabTarget:
    """A built target: where to put the cluster and how to start processes in it."""

    directory: Path
    spec: LabSpec
    filesystem: FilesystemInfo | None
    devices: tuple[str, ...]  # major:minor of each device the I/O cap applies to
    cgroup: Cgroup | None
    latency: latency.Layer | None = None
    tablespaces: tuple[tuple[str, Path], ...] = ()  # option -> the mounted directory
    clients: Cgroup | None = None  # the clients' cpuset (``cpus``)
    emulator: Emulators | None = None  # the latency layers' processes, for per-run records
    # the layers of tablespaces on emulated disks of their own: option -> calibrations
    tablespace_layers: tuple[tuple[str, Layer], ...] = ()

    @property
    def preexec(self) -> Callable[[], None] | None:
        """For ``Cluster.start``, ``tools.fio.run``, ``tools.pg_test_fsync.run``."""
        return self.cgroup.preexec() if self.cgroup is not None else None

    @property
    def clients_preexec(self) -> Callable[[], None] | None:
        """For pgbench (``pgrig.clients.OneHost.preexec``): the clients' cpuset."""
        return self.clients.preexec() if self.clients is not None else None

    @property
    def cgroups(self) -> tuple[str, ...]:
        """For ``Cluster.start`` (through ``Launch``): the cgroup.procs files to join."""
        return tuple(str(path) for path in self.cgroup.procs_files) if self.cgroup else ()

    def memory_stats(self) -> MemoryStats | None:
        if self.cgroup is None or self.spec.memory_bytes is None:
            return None
        return memcg.stats(self.cgroup)

    def info(self) -> LabInfo:
        """What the store records about this target (kind "storage_lab")."""
        cgroup = None
        not_captured: list[str] = []
        if self.filesystem is not None:
            not_captured += LOOP_NOT_CAPTURED
            if self.filesystem.stripes:
                not_captured += btrfs.NOT_CAPTURED
        if self.cgroup is not None:
            cgroup = "cgroup " + ", ".join(
                f"{c} v{self.cgroup.version(c)}" for c in sorted(self.cgroup.dirs)
            )
        if self.spec.io is not None:
            not_captured += IO_NOT_CAPTURED
            if self.cgroup is not None and self.cgroup.version("io") == 1:
                not_captured.append(V1_WRITEBACK)
        if self.latency is not None or self.tablespace_layers:
            not_captured += latency.NOT_CAPTURED
        host: str | None = None
        if self.filesystem is not None:
            host = self.filesystem.host_filesystem
        else:
            fs = environment.describe_filesystem(self.directory)
            host = f"{fs.fstype} on {fs.device} (mounted at {fs.mountpoint})" if fs else None
        return LabInfo(
            description=self.describe(),
            directory=str(self.directory),
            filesystem=self.filesystem,
            io=self.spec.io,
            io_device=", ".join(self.devices) or None,
            io_devices=self.devices,
            disk=self.spec.disk,
            memory_limit_bytes=self.spec.memory_bytes,
            cgroup=cgroup,
            host=host,
            not_captured=tuple(not_captured),
            latency=self.layers() or None,
        )

    def layers(self) -> str:
        """Every layer's calibrations: the data disk's, then each tablespace's."""
        parts = [self.latency.describe()] if self.latency else []
        parts += [f"The {option}'s disk: {layer.describe()}"
                  for option, layer in self.tablespace_layers]  # fmt: skip
        return " ".join(parts)

    def describe(self) -> str:
        text = self.filesystem.describe() if self.filesystem else str(self.directory)
        extra = [x.describe() for x in (self.spec.io, self.latency) if x]
        extra += [f"the {option}'s disk: {layer.describe()}"
                  for option, layer in self.tablespace_layers]  # fmt: skip
        if self.spec.io is not None:
            extra[0] += _each(self.spec.fs)
        if self.spec.memory_bytes:
            extra.append(f"memory limit {self.spec.memory_bytes / 2**20:,.0f} MiB")
        if self.spec.cpus:
            extra.append(_cpus(self.spec.cpus))
        return "; ".join([text, *extra])


def _each(fs: FsSpec | None) -> str:
    return f" on each of the {fs.stripes} stripes" if fs is not None and fs.stripes > 1 else ""


def _cpus(n: int) -> str:
    return f"{n} CPU{'s' if n != 1 else ''} (cpuset: the server and its clients)"


@contextmanager
def limited(
    *,
    io: IoLimits | None = None,
    device: str | None = None,
    devices: tuple[str, ...] = (),
    memory_bytes: int | None = None,
    cpus: int | None = None,
    io_later: bool = False,
) -> Iterator[Cgroup]:
    """One pgrig cgroup with an I/O cap on ``device`` (or on each of ``devices``: the
    stripes, each its own disk), a memory limit and/or a cpuset;
    ``io_later``: with the io controller for caps written after (a tablespace's
    device, once it exists)."""
    controllers: list[str] = ["io"] if io_later and io is None else []
    capped = devices or ((device,) if device is not None else ())
    if io is not None:
        if not capped:
            raise CgroupError("an I/O limit needs the device (major:minor) it applies to")
        controllers.append("io")
    if memory_bytes is not None:
        controllers.append("memory")
    if cpus is not None:
        controllers.append("cpuset")
    if not controllers:
        raise CgroupError("limited() needs io= and device=, memory_bytes=, cpus= or io_later=")
    what = ["tablespace caps"] if io_later else []
    if io is not None:
        what.append(f"throttle {', '.join(capped)}: {io.describe()}")
    if memory_bytes is not None:
        what.append(f"memory {memory_bytes // 2**20} MiB")
    if cpus is not None:
        what.append(f"{cpus} CPU(s)")
    with cgroups.owned(tuple(controllers), purpose="; ".join(what)) as cg:
        if io is not None:
            for each in capped:
                throttle.apply(cg, io, each)
        if memory_bytes is not None:
            memcg.apply(cg, memory_bytes)
        if cpus is not None:
            cpuset.apply(cg, cpus)
        yield cg


@contextmanager
def lab_target(
    base: Path,
    spec: LabSpec,
    *,
    keep: Callable[[], bool] = lambda: False,
) -> Iterator[LabTarget]:
    """Build what ``spec`` asks for under ``base`` (a directory on the disk to use);
    undo it all on the way out - but a filesystem stays when ``keep()`` says so
    then (the cgroups go: nothing runs in them any more)."""
    with contextlib.ExitStack() as stack:
        info = stack.enter_context(loop_filesystem(base, spec.fs, keep=keep)) if spec.fs else None
        directory = Path(info.data_dir) if info else base
        calibration = None
        emulators: list[latency.Emulator] = []
        instance = stack.enter_context(Instance(spec.instance)) if spec.instance else None
        if spec.latency is not None:
            directory, calibration, emulator = stack.enter_context(
                latency.latency_layer(
                    directory, latency.parse_class(spec.latency), instance=instance
                )
            )
            emulators.append(emulator)
        devices: tuple[str, ...] = ()
        if spec.io is not None:
            devices = info.cap_devices if info else (throttle.device_of(base),)
        cgroup = clients = None
        caps = dict(spec.tablespace_io)
        if spec.io or spec.memory_bytes or spec.cpus or caps:
            cgroup = stack.enter_context(
                limited(
                    io=spec.io,
                    devices=devices,
                    memory_bytes=spec.memory_bytes,
                    cpus=spec.cpus,
                    io_later=bool(caps),
                )  # fmt: skip
            )
        if spec.cpus is not None:
            clients = stack.enter_context(cpuset.pinned(spec.cpus, purpose="pgbench"))
        tablespaces: dict[str, Path] = {}
        for option, fs, where in spec.tablespaces:
            mounted = stack.enter_context(loop_filesystem(Path(where), fs, keep=keep))
            if option in caps and cgroup is not None:
                for each in mounted.cap_devices:
                    throttle.apply(cgroup, caps[option], each)
            tablespaces[option] = Path(mounted.data_dir)
        layers = []
        for option, name in spec.tablespace_latency:  # over its filesystem, or beside the data
            over = tablespaces.get(option, base)
            tablespaces[option], layer, emulator = stack.enter_context(
                latency.latency_layer(over, latency.parse_class(name), instance=instance)
            )
            layers.append((option, layer))
            emulators.append(replace(emulator, label=option))
        yield LabTarget(
            directory, spec, info, devices, cgroup, calibration, tuple(tablespaces.items()),
            clients, Emulators(tuple(emulators)) if emulators else None, tuple(layers),
        )  # fmt: skip
