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
    MemoryShortfall,
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
from pgrig.units import GB, parse_size

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
    demands = _demands(camp, workloads, yes=yes or planning)
    kinds = {spec.name: registry.target_kind(spec, demands.power_loss) for spec in camp.targets}
    for spec in camp.targets:
        if kinds[spec.name].creates_server:
            check_pg_environment("initdb and the server pgrig creates read it")
            initdb_encoding(spec, camp.source)
    phases = plan.phases(camp, workloads)
    needs = plan.disk_needs(camp, phases)
    runs: list[Target] = []
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
    warning = memory_check(runs, needs, camp.source)
    if warning:
        warnings.append(warning)
    for run in runs:
        reachable(run, camp.source)
    return Checked(runs, warnings, planned, steps, seconds)


def _demands(camp: Campaign, workloads: Sequence[Workload], *, yes: bool) -> Demands:
    """What the campaign's workloads (``workloads``: resolved) ask of every target,
    each asked once: whether one cuts the power (refused beside a workload that
    would be measured on the slower lossy filesystem), the most connections one
    run opens, and why they may not run on a server pgrig did not create."""
    asks = [
        (w.name, of.loses_power(w), of.connections(w))
        for w, of in zip(camp.workloads, workloads, strict=True)
    ]
    cutting = [name for name, cuts, _ in asks if cuts]
    others = [name for name, cuts, _ in asks if not cuts]
    if cutting and others:
        raise UsageError(
            f"campaign {camp.name}: workload {cutting[0]} runs the clusters on the lossy "
            f"filesystem (several times slower), where {', '.join(others)} would be measured",
            hint="put the power-loss durability check in a campaign of its own",
        )
    clients, clients_of = max(((n, name) for name, _, n in asks), default=(0, ""))
    return Demands(
        yes=yes,
        destructive=next((w.needs.destructive for w in workloads if w.needs.destructive), None),
        restore=camp.policy.reset == "restore" and bool(workloads),
        power_loss=cutting[0] if cutting else None,
        source=camp.source,
        clients=clients,
        clients_of=clients_of,
        workloads=tuple(w.type for w in workloads),
    )


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


# -- targets side by side (interleaved: every target's cluster lives until the end) --


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
        if THIS_MACHINE not in run.machines or not needs.get(run.name):
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


def memory_use(t: Target, need_bytes: int) -> tuple[int, int]:
    """What a target's server may hold in memory while the study runs: its shared
    buffers (the memory cgroup's limit for a memory-limited lab target, which caps
    the page cache too), and of that what its data can fill (data smaller than the
    buffers leaves the rest untouched: shared memory is committed when touched).
    ``need_bytes`` is the plan's disk estimate: WAL included, an upper bound."""
    assert t.profile is not None
    shared = 128 * 2**20
    with contextlib.suppress(UsageError):
        shared = parse_size(t.profile.settings.get("shared_buffers", "128MB"))
    limit = t.kind.memory_limit(t.spec)
    held = limit if limit is not None else shared
    return held, min(held, need_bytes) if need_bytes > 0 else held


def memory_check(
    targets: Sequence[Target], needs: dict[str, int], source: str, ram: int | None = None
) -> str | None:
    """Interleaving keeps every target's cluster up at once: what their data fills
    of their buffers must fit this machine's memory together (refused, exit 5),
    and buffers that could not be filled together are warned about. A server
    elsewhere has its host's memory."""
    if len(targets) < 2:
        return None  # nothing beside it
    local = [t for t in targets if t.profile is not None and THIS_MACHINE in t.machines]
    if len(local) < 2:
        return None
    ram = ram or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    uses = {t.name: memory_use(t, needs.get(t.name, 0)) for t in local}
    filled = sum(used for _, used in uses.values())
    if filled > 0.9 * ram:
        each = ", ".join(f"{name} {used / 2**30:.1f} GiB" for name, (_, used) in uses.items())
        raise MemoryShortfall(
            f"{source}: targets {' and '.join(uses)} run side by side (interleaved) and their "
            f"data fills {filled / 2**30:.1f} GiB of shared buffers together ({each}), more "
            f"than 90% of this machine's {ram / 2**30:.1f} GiB RAM",
            hint="lower shared_buffers per target ([target.set] shared_buffers), the scale, "
            "or give each target a memory limit (memory = ...) that fits together",
        )
    total = sum(held for held, _ in uses.values())
    if total <= 0.6 * ram:
        return None
    return (
        f"the {len(local)} clusters' shared_buffers add up to {total / 2**30:.1f} GiB of "
        f"{ram / 2**30:.1f} GiB RAM while they run side by side; "
        "lower it per target with set.shared_buffers"
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
    if THIS_MACHINE not in run.machines:
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
