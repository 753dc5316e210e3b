"""One validation pass, shared by ``pgrig plan`` and every command that runs a
campaign (``run``, ``tpcc study``, ``durability``): what cannot finish is
refused here, before a store, a study, a directory or a server is created.

It checks, in this order: what the campaign asks of itself (initdb's encoding
and locale: ``throwaway.initdb_encoding``); each target as its kind knows it
(``lifecycle.check_target`` with the study's ``Demands``: binaries,
directories, the profile and ``set`` values through the server's own parser and
what the server checks only at its start (``cluster.startable``: shared memory,
hba_file, preload libraries, log_directory, wal_level), disk, a memory limit,
the workload's connections against ``max_connections``, an existing server
connected to and refused without ``--yes`` where workloads drop data); the tools
of the workloads and what they refuse without a server (``Workload.check``:
pgbench scripts); how long it would take; and the results directory's free
space.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pgrig import files, lifecycle, ownership, plan, proc, registry
from pgrig.campaign import Campaign
from pgrig.cluster import workdir
from pgrig.cluster.server import DEFAULT_OS_USERS
from pgrig.conninfo import check_pg_environment
from pgrig.errors import (
    BinaryNotFound,
    DiskSpaceError,
    UsageError,
    WorkdirError,
)
from pgrig.pgsource import binaries
from pgrig.registry.target import (
    THIS_MACHINE,
    Demands,
    Target,
    TargetSpec,
    as_written,
    directory_option,
)
from pgrig.registry.workload import Workload
from pgrig.targets.throwaway import initdb_encoding
from pgrig.units import GB

# The results directory: the store and the report of one step (raw tool
# output, monitor samples, its share of the HTML) stay well under this; the
# base covers the report's stylesheet, figures and the SQLite journal.
RESULTS_BASE_BYTES = 32 * 2**20
RESULTS_PER_STEP_BYTES = 512 * 2**10
# Beyond this a campaign is almost surely a typo (--duration 999999999).
LONGEST_S = 30 * 86400

WARN_LONGER_S = 24 * 3600


@dataclass(frozen=True)
class Checked:
    """What the pass found: the targets, ready to run, and what to tell the user;
    the plan the runner runs, its steps and their seconds, as the pass measured
    them (``plan.Plan.size``)."""

    targets: list[Target]
    warnings: list[str]
    plan: plan.Plan
    steps: int = 0
    seconds: float = 0.0


def campaign(
    camp: Campaign,
    *,
    yes: bool = False,
    results: Path | None = None,
    store: Path | str | None = None,
    planning: bool = False,
) -> Checked:
    """Refuse what cannot finish. ``planning``: ``pgrig plan`` - a version not
    installed yet is not installed (the plan says what would be downloaded),
    and refusals that only a run's ``--yes`` lifts are left to the run."""
    warnings: list[str] = []
    ownership.state_dir()  # where what a run makes is recorded: refused now, not half way
    # The campaign's workloads and each target's kind, resolved once for the pass.
    workloads = [registry.of(w) for w in camp.workloads]
    lossy = power_loss_workload(camp, workloads)
    kinds = {spec.name: registry.target_kind(spec, lossy) for spec in camp.targets}
    for spec in camp.targets:
        if kinds[spec.name].creates_server:
            check_pg_environment("initdb and the server pgrig creates read it")
            initdb_encoding(spec, camp.source)
    phases = plan.phases(camp, workloads)
    needs = plan.disk_needs(camp, phases)
    destructive = next((w.needs.destructive for w in workloads if w.needs.destructive), None)
    runs: list[Target] = []
    peak, peak_of = _peak(camp, workloads)
    demands = Demands(
        yes=yes or planning,
        destructive=destructive,
        restore=camp.policy.reset == "restore" and bool(workloads),
        power_loss=lossy,
        source=camp.source,
        clients=peak,
        clients_of=peak_of,
        workloads=tuple(w.type for w in workloads),
    )
    for spec in camp.targets:
        if planning and not _installed(spec):
            # the plan lists the download; the run checks the rest once installed
            kind = kinds[spec.name]
            if spec.directory is not None and kind.directory_must_exist:
                workdir.check_target(spec.directory, option=directory_option(spec, camp.source))
            kind.check_uninstalled(spec, camp.source, warnings)
            continue
        need = replace(demands, need_bytes=needs.get(spec.name, 0))
        runs.append(
            lifecycle.check_target(spec, kinds[spec.name], need, notes=warnings, planning=planning)
        )
    tools = sorted({tool for w in workloads for tool in w.needs.tools})
    for run in runs:
        missing = [tool for tool in tools if not run.bins.has(tool)]
        if missing:
            raise BinaryNotFound(
                f"target {run.name}: {', '.join(missing)} not found in {run.bins.bin_dir}"
                " (a workload of the campaign runs it)",
                hint=binaries.INSTALL_HINT,
            )
        for spec_, workload in zip(camp.workloads, workloads, strict=True):
            workload.check(spec_, run.bins, camp.source)  # what its tools refuse without a server
    lifecycle.check_together(runs, warnings)
    shared_space(runs, needs, camp.source)
    if camp.policy.concurrent:
        lifecycle.check_concurrent(runs, camp.source)
    planned = plan.make(camp, runs, phases)
    seconds, steps = planned.size()
    warnings += _duration(camp, seconds)  # after the disk: a scale too large is first of all that
    if results is not None and store is not None:
        results_space(results, store, steps)
    warning = lifecycle.memory_check(runs, needs, camp.source)
    if warning:
        warnings.append(warning)
    for run in runs:
        reachable(run, camp.source)
    return Checked(runs, warnings, planned, steps, seconds)


def power_loss_workload(camp: Campaign, workloads: Sequence[Workload]) -> str | None:
    """The name of the workload that cuts the power, if any (``workloads``: the
    campaign's, resolved); refused beside a workload that would be measured on
    the (slower) lossy filesystem."""
    loses = {w.name: of.loses_power(w) for w, of in zip(camp.workloads, workloads, strict=True)}
    cutting = [name for name, cuts in loses.items() if cuts]
    if not cutting:
        return None
    others = [name for name, cuts in loses.items() if not cuts]
    if others:
        raise UsageError(
            f"campaign {camp.name}: workload {cutting[0]} runs the clusters on the lossy "
            f"filesystem (several times slower), where {', '.join(others)} would be measured",
            hint="put the power-loss durability check in a campaign of its own",
        )
    return cutting[0]


def _installed(spec: TargetSpec) -> bool:
    if spec.pg_bin is None or not binaries.looks_like_version(spec.pg_bin):
        return True
    try:
        binaries.find(spec.pg_bin, tools=binaries.CLIENT_TOOLS)
    except BinaryNotFound:
        return False
    return True


def _duration(camp: Campaign, seconds: float) -> list[str]:
    what = (
        "--duration, --repeat or --scale"
        if camp.source == "command line"
        else f"the durations, repeat and scales in {camp.source}"
    )
    if seconds > LONGEST_S:
        raise UsageError(
            f"the campaign would take about {seconds / 86400:.0f} days: refused as a likely typo",
            hint=f"check {what}",
        )
    if seconds > WARN_LONGER_S:
        return [f"the campaign will take about {seconds / 3600:.0f} h (check {what})"]
    return []


# -- connections -----------------------------------------------------------------


def _peak(camp: Campaign, workloads: Sequence[Workload]) -> tuple[int, str]:
    """The most connections one run opens, and the workload that opens them."""
    peaks = [(of.connections(w), w.name) for w, of in zip(camp.workloads, workloads, strict=True)]
    return max(peaks, default=(0, ""))


# -- the results directory ---------------------------------------------------------


def results_space(results: Path, store: Path | str, steps: int) -> None:
    """The store and the report must fit where they go: a full disk found when
    the report is written loses nothing, but wastes the whole study's time."""
    need = RESULTS_BASE_BYTES + steps * RESULTS_PER_STEP_BYTES
    for path, option in ((results, "--results"), (store, "--store")):
        if not isinstance(path, Path) or (option == "--store" and path.parent == results):
            continue  # a PostgreSQL store is its server's business
        existing = _nearest_existing(path)
        if existing is None:
            continue
        if not _writable(existing):
            raise WorkdirError(
                f"{option} {path}: cannot write in {existing}",
                hint=f"pass a {option} you can write to",
            )
        usage = shutil.disk_usage(existing)
        if usage.total > 0 and usage.free < need:
            raise DiskSpaceError(
                f"{option} {path}: {usage.free / 2**20:.0f} MiB free in {existing}, the "
                f"results of {steps} steps need about {need / 2**20:.0f} MiB",
                hint=f"free some space there or pass another {option}",
            )


def shared_space(runs: Sequence[Target], needs: dict[str, int], source: str) -> None:
    """Targets in directories of this machine that share a filesystem need their
    space at once: the runner interleaves targets, so every target's cluster
    lives until the study ends. Each target alone was checked by its kind."""
    if len(runs) < 2:
        return
    by_device: dict[int, list[tuple[Target, Path]]] = {}
    for run in runs:
        if run.directory is None or not run.kind.directory_must_exist:
            continue  # a lab builds its own filesystem; a server's host checks its own
        if THIS_MACHINE not in run.kind.machines(run) or not needs.get(run.name):
            continue
        existing = _nearest_existing(run.directory)
        if existing is not None:
            by_device.setdefault(existing.stat().st_dev, []).append((run, existing))
    for group in by_device.values():
        if len(group) < 2:
            continue
        need = sum(needs[run.name] for run, _ in group)
        usage = shutil.disk_usage(group[0][1])
        if usage.total > 0 and usage.free < need:
            each = ", ".join(f"{run.name} {needs[run.name] / GB:.1f} GiB" for run, _ in group)
            raise DiskSpaceError(
                f"{source}: targets {' and '.join(run.name for run, _ in group)} share the "
                f"filesystem of {group[0][1]} and need {need / GB:.1f} GiB together ({each}), "
                f"{usage.free / GB:.1f} GiB free: targets are interleaved, so all their "
                "clusters live until the study ends",
                hint="give the targets directories on different filesystems, lower the "
                "scale, or free some space",
            )


def server_account(name: str | None) -> proc.OsUser | None:
    """The account a cluster's server will run as, without creating it (that
    waits for a run): None where it does not exist yet."""
    for candidate in [name] if name else list(DEFAULT_OS_USERS):
        with contextlib.suppress(KeyError):
            return proc.OsUser.lookup(candidate)
    return None


def reachable(run: Target, source: str) -> None:
    """A cluster pgrig creates as root runs as an unprivileged account, which must
    reach its directories through every parent: a checkout under a mode-700 home
    failed only after the probes had run (issue 33). Refused here, before anything."""
    spec = run.spec
    if os.geteuid() != 0 or not run.kind.creates_server or not run.kind.directory_must_exist:
        return
    if THIS_MACHINE not in run.kind.machines(run):
        return
    user = server_account(spec.os_user)
    places = [(run.directory, directory_option(spec, source))]
    places += [(spec.wal_directory, as_written(spec, source, "wal_directory"))]
    places += [
        (Path(value), as_written(spec, source, key))
        for key, value in (
            ("tablespace", spec.tablespace),
            ("index_tablespace", spec.index_tablespace),
        )
        if value is not None and "/" in value
    ]
    for path, option in places:
        blocked = None if path is None else files.blocked_for(path, user)
        if path is not None and blocked is not None:
            who = (
                user.name
                if user is not None
                else f"{spec.os_user or DEFAULT_OS_USERS[-1]} (made at the run)"
            )
            raise WorkdirError(
                f"{option} {path}: the server runs as OS user {who}, which cannot pass "
                f"{blocked} (mode {blocked.stat().st_mode & 0o777:o}, owner "
                f"{_owner_name(blocked)})",
                hint=f"choose a directory that user can reach, e.g. under /var/tmp, or "
                f"chmod o+x {blocked}",
            )


def _owner_name(path: Path) -> str:
    try:
        return pwd.getpwuid(path.stat().st_uid).pw_name
    except KeyError:
        return str(path.stat().st_uid)


def _nearest_existing(path: Path) -> Path | None:
    for candidate in (path, *path.absolute().parents):
        if candidate.exists():
            return candidate if candidate.is_dir() else candidate.parent
    return None


def _writable(directory: Path) -> bool:
    # A real write, not os.access: root passes access checks on a read-only mount.
    try:
        fd, probe = tempfile.mkstemp(prefix=".pgrig-write-test-", dir=directory)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True
