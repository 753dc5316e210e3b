"""The storage lab (``fs``, ``size``, ``disk``, ``iops``, ``mbps``, ``memory``;
docs/storage-lab.md): a filesystem built on a loop device, an I/O cap and a
memory limit - they compose - with the throwaway cluster and the probes inside.
Building it is a recorded step (kind ``storage_lab``); a target whose tools or
loop devices are missing here is skipped with the reason, the rest of the
study runs."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgrig import calibration, files, storage
from pgrig.clients import OneHost
from pgrig.cluster import profiles, workdir
from pgrig.cluster.server import server_os_user
from pgrig.errors import BinaryNotFound, DiskSpaceError, UsageError
from pgrig.lossyfs.mount import LossyFsUnavailable
from pgrig.ownership import Found, Leaves
from pgrig.registry.target import Checked, Demands, Target, as_written, build_action
from pgrig.step import Action, Call, Context, Skip, Step, StepKey
from pgrig.storage import LabSpec, cgroups, cpuset, kernel, latency, loopfs, nativefs, state
from pgrig.storage.emulator import EmulationAtEnd
from pgrig.storage.errors import CgroupError, StorageError
from pgrig.storage.model import LabInfo
from pgrig.targets.throwaway import Throwaway
from pgrig.ui import Step as ProgressLine
from pgrig.ui import Ui
from pgrig.units import GB, size_text

if TYPE_CHECKING:
    from pgrig.registry.target import TargetSpec


def remeasure_action(calibrate: str) -> Action:
    """The end of the study's step: the target's latency layers measured again
    (``Context.remeasure``); its seconds kept under ``calibrate`` for the next plan."""

    def action(ctx: Context, line: ProgressLine) -> tuple[EmulationAtEnd, str]:
        if ctx.remeasure is None:
            raise Skip("no latency layer is mounted under this target")
        started, machine = time.monotonic(), calibration.busy()
        out = ctx.remeasure()
        calibration.record(calibrate, 1, max(0.01, time.monotonic() - started), machine)
        return out, ""

    return action


class LabKind(Throwaway[LabSpec | None]):
    name = "lab"
    order = 40
    summary = (
        "a throwaway cluster on storage the lab builds: a loop-device filesystem, "
        "an I/O cap, a memory limit (they compose)"
    )
    actions = {"target.build": build_action, "lab.remeasure": remeasure_action}
    clean_rank = 30  # after the work directories: their servers kept the mounts busy
    leaves = Leaves(records=(state.RECORDS, kernel.RECORDS))

    def claims(self, spec: TargetSpec, power_loss: str | None) -> bool:
        return spec.lab is not None

    def memory_limit(self, spec: TargetSpec) -> int | None:
        return spec.lab.memory_bytes if spec.lab is not None else None

    def machine(self, spec: TargetSpec) -> profiles.Machine | None:
        # {ram * 0.25} of a profile means a quarter of what the server may use
        if spec.lab is None:
            return profiles.Machine.this()
        return profiles.Machine.within(spec.lab.memory_bytes, spec.lab.cpus)

    def check(self, spec: TargetSpec, demands: Demands, notes: list[str]) -> Checked:
        _check_memory(spec, demands.source)  # first: the profile is sized to it
        checked = super().check(spec, demands, notes)
        if spec.lab is None:
            return checked
        lab, unavailable = _check_lab(spec, demands.need_bytes)
        return replace(checked, unavailable=unavailable, state=lab)

    def check_together(self, targets: Sequence[Target], notes: list[str]) -> None:
        """The lab's backing files of all targets on one host filesystem must fit it
        together (they exist at once); refused before anything is created."""
        by_base: dict[int, tuple[Path, int, list[str]]] = {}
        for t in targets:
            lab = self.state(t)
            if lab is None or lab.fs is None or lab.base is None:
                continue
            if t.checked.unavailable:
                continue
            base = workdir.check_target(Path(lab.base), what="storage-lab base", option="base")
            dev = base.stat().st_dev
            _, total, names = by_base.get(dev, (base, 0, []))
            by_base[dev] = (base, total + lab.fs.total_bytes, [*names, t.name])
        for base, total, names in by_base.values():
            files.check_space(
                base,
                total,
                f"the filesystem target(s) {', '.join(names)}",
                # the quick study's options too: it named only the campaign's keys
                hint="lower the size (--fs-size; in a campaign: size = ...), or put the"
                " backing files elsewhere (--target; in a campaign: base = ...)",
            )

    def build_step(self, spec: TargetSpec) -> Step | None:
        """Building a target's storage lab (filesystem, I/O cap, memory limit): the
        step records what was built, as the system reports it."""
        if spec.lab is None:
            return None
        # Timed per lab as described (seed002's 4 GiB XFS: 13 s planned, 1 s built;
        # seed000's latency layer: 16 s, its fio calibration included).
        kind = f"lab-build@{self.where(spec)[0]}"
        default = 5 + (spec.lab.fs.total_bytes / GB * 2 if spec.lab.fs else 0)
        return Step(
            key=StepKey(spec.name, "lab"),
            kind="storage_lab",
            label=f"{spec.name}: storage lab",
            params={"spec": spec.lab.describe(), "base": spec.lab.base, "disk": spec.lab.disk},
            action=Call("target.build", {"calibrate": kind}),
            estimate_s=calibration.estimate(kind, 1, lambda _n: default),
        )

    def end_step(self, spec: TargetSpec) -> Step | None:
        """A target with emulated disks measures each again after its last run, as
        its build calibrated it (fio through the layer once; in proportion the
        disk either side): the report says how close each stayed to its aim."""
        if spec.lab is None or not spec.lab.emulated:
            return None
        n = spec.lab.emulated
        kind = f"lab-end@{self.where(spec)[0]}"
        # per disk: syncs (in proportion, the disk either side) and reads, fio each
        default = n * (4 * latency.CALIBRATION_S + 2)
        return Step(
            key=StepKey(spec.name, "lab", ("end",)),
            kind="emulator_end",
            label=f"{spec.name}: the emulated disk{'s' if n > 1 else ''} measured again",
            params={"spec": spec.lab.describe(), "disks": n},
            action=Call("lab.remeasure", {"calibrate": kind}),
            estimate_s=calibration.estimate(kind, 1, lambda _n: default),
        )

    @contextlib.contextmanager
    def storage(self, t: Target, ui: Ui, *, keep: Callable[[], bool]) -> Iterator[LabInfo | None]:
        """Build the target's lab (filesystem, cgroups) for the ``with`` block: the
        probes and the cluster then run in it. Removed after - kept with the
        cluster under --keep or when a crashed server is kept as evidence."""
        lab = self.state(t)
        if lab is None:
            yield None
            return
        if t.checked.unavailable is not None:
            raise Skip(t.checked.unavailable)
        base = Path(lab.base) if lab.base else (t.directory or Path.cwd())
        with storage.lab_target(base, lab, keep=keep) as built:
            t.moved_to(built.directory)
            t.live.cgroups = built.cgroups
            memory = built.memory_stats if lab.memory_bytes is not None else None
            emulator = built.emulator.reading if built.emulator is not None else None
            for option, path in built.tablespaces:  # tablespaces on lab filesystems
                if option == "tablespace":
                    t.spec = replace(t.spec, tablespace=str(path))
                else:
                    t.spec = replace(t.spec, index_tablespace=str(path))
            with t.scoped(
                preexec=built.preexec,
                clients=OneHost(t.bins.client_bin_dir, preexec=built.clients_preexec),
                memory=memory, emulator=emulator,
                remeasure=built.emulator.remeasure if built.emulator is not None else None,
            ):  # fmt: skip
                yield built.info()
        if built.filesystem is not None and keep():
            ui.info(f"{t.name}: {loopfs.kept_message(built.filesystem)}")

    def clean(self, study: str | None, others: list[str], found: Found) -> list[str]:
        lines = storage.clean(study, others)
        return [f"storage lab, left by a killed pgrig run: {line}" for line in lines]

    def where(self, spec: TargetSpec) -> tuple[str, Path | None]:
        if spec.lab is None:
            return super().where(spec)
        where = f"{spec.directory if spec.directory else 'storage lab'}: {spec.lab.describe()}"
        return where, Path(spec.lab.base) if spec.lab.base else spec.directory

    def describe(self, t: Target) -> dict[str, Any]:
        out = super().describe(t)
        if t.spec.lab is not None:
            out["storage"] = t.spec.lab.describe()
        return out


def _check_lab(spec: TargetSpec, need: int) -> tuple[LabSpec, str | None]:
    """What can be refused about a lab target before anything is created. Missing
    tools or loop devices only make the target unavailable (the rest of the
    study runs); a missing cgroup controller or a filesystem too small for the
    data is an error."""
    lab = spec.lab
    assert lab is not None
    if os.geteuid() != 0 and (lab.io or lab.memory_bytes or lab.cpus or lab.tablespace_io):
        raise StorageError(
            f"target {spec.name}: I/O caps, memory limits and cpus need root (cgroups)",
            hint="run pgrig as root, or drop disk, iops, mbps, memory and cpus from the target",
        )
    if lab.instance is not None and (reason := nativefs.unavailable()) is not None:
        raise LossyFsUnavailable(  # the Python layer has no caps to share
            f"target {spec.name}: an instance cap (instance_iops, instance_mbps) needs the "
            f"native latency layer: {reason}",
            hint=nativefs.BUILD_HINT,
        )
    if lab.cpus is not None:
        try:
            cpuset.cpu_list(lab.cpus)
        except UsageError as exc:
            raise UsageError(f"target {spec.name}: {exc.message}", hint=exc.hint) from exc
    wanted_controllers = (
        ("io", lab.io or lab.tablespace_io),
        ("memory", lab.memory_bytes),
        ("cpuset", lab.cpus),
    )
    for controller, wanted in wanted_controllers:
        if wanted is not None:
            try:
                cgroups.hierarchy_for(controller)
            except CgroupError as exc:
                raise CgroupError(f"target {spec.name}: {exc.message}", hint=exc.hint) from exc
    if lab.tablespaces:  # tablespaces on lab filesystems, owned by the server
        os_user = server_os_user(spec.os_user)
        owner = os_user.name if os_user else None
        lab = replace(
            lab, tablespaces=tuple((o, replace(f, owner=owner), b) for o, f, b in lab.tablespaces)
        )
        for option, fs_spec, ts_base in lab.tablespaces:
            try:
                loopfs.check_prerequisites(fs_spec.fstype)
            except (StorageError, BinaryNotFound) as exc:
                return lab, f"{exc.message}" + (f" ({exc.hint})" if exc.hint else "")
            loopfs.check_options(fs_spec, Path(ts_base), what=f"target {spec.name}: {option}")
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
    base = Path(lab.base) if lab.base else None
    loopfs.check_options(fs, base, what=f"target {spec.name}")
    return lab, None


KIND = LabKind()


# Beside shared_buffers, the postmaster and a backend need tens of MB of their
# own before the first query; a limit below this cannot even start the server.
SERVER_OVERHEAD_BYTES = 64 * 2**20


def _check_memory(spec: TargetSpec, source: str) -> None:
    """A memory limit the server cannot start in, or one above the machine's RAM
    (which limits nothing), refused by name rather than by its consequences."""
    if spec.lab is None or spec.lab.memory_bytes is None:
        return
    memory = spec.lab.memory_bytes
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if memory > ram:
        raise UsageError(
            f"{as_written(spec, source, 'memory')} {memory / 2**30:,.1f} GiB is more than this "
            f"machine's {ram / 2**30:.1f} GiB of RAM: it would limit nothing",
            hint="give a limit below the RAM, e.g. a quarter of it",
        )
    if memory < SERVER_OVERHEAD_BYTES:
        raise UsageError(
            f"{as_written(spec, source, 'memory')} {memory / 2**20:,.3f} MiB: PostgreSQL cannot "
            f"start in less than about {SERVER_OVERHEAD_BYTES / 2**20:.0f} MiB",
            hint="e.g. 512MiB; the profile's {ram * 0.25} then means a quarter of it",
        )
