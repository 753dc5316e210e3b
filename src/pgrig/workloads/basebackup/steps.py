"""The base backup as steps: the TPC-B data it copies, then one timed
pg_basebackup per run into a directory pgrig creates, marks and removes.

The copy goes into ``pgrig-basebackup-TARGET-NAME-rN`` under the target's own
directory, under another target's directory (``to = "name"``, seed 002's
second disk) or under a directory the user gave. That directory is a marked
pgrig work directory: removed after the run whatever happened, and by the
next run or ``pgrig clean`` when pgrig was killed meanwhile. Nothing else is
written or deleted.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from pgrig import calibration, proc
from pgrig.cluster import workdir
from pgrig.environment.storage import describe_filesystem
from pgrig.errors import ClusterError, UsageError, WorkdirError
from pgrig.files import check_space
from pgrig.hosts.local import HERE
from pgrig.policy import RunPolicy
from pgrig.registry.workload import TargetView
from pgrig.results import Filesystem
from pgrig.step import Action, Call, Context, Prepare, Step, StepKey
from pgrig.tools import pgbench
from pgrig.ui import Step as ProgressLine
from pgrig.units import MB
from pgrig.workloads.basebackup import spec as bb_spec
from pgrig.workloads.basebackup import tool
from pgrig.workloads.basebackup.model import BasebackupData, BasebackupResult
from pgrig.workloads.basebackup.spec import BasebackupSpec
from pgrig.workloads.common import checkpoint, conn
from pgrig.workloads.tpcb import steps as tpcb_steps
from pgrig.workloads.tpcb.spec import TpcbSpec

CLUSTER_SQL = "SELECT sum(pg_database_size(oid))::bigint FROM pg_database"
TABLESPACES_SQL = (
    "SELECT oid, pg_tablespace_location(oid) FROM pg_tablespace "
    "WHERE spcname NOT IN ('pg_default', 'pg_global')"
)
REPLICATION_SQL = (
    "SELECT current_setting('wal_level'), current_setting('max_wal_senders')::int, "
    "(SELECT count(*) FROM pg_stat_replication)::int, "
    "(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)"
)


def _key(target: str, spec: BasebackupSpec, *parts: str) -> StepKey:
    return StepKey(target, spec.name, (f"s{spec.scale}", *parts))


def _scale_loaded(ctx: Context) -> int | None:
    """The scale of the pgbench tables in the database, None when there are none."""
    with conn(ctx).connect() as db:
        row = db.execute(
            "SELECT to_regclass('pgbench_branches') IS NOT NULL "
            "AND to_regclass('pgbench_accounts') IS NOT NULL"
        ).fetchone()
        if not row or not row[0]:
            return None
        count = db.execute("SELECT count(*) FROM pgbench_branches").fetchone()
    return int(count[0]) if count else None


def data_action(spec: BasebackupSpec, tablespaces: dict[str, str | None]) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[BasebackupData, str]:
        loaded, load_s, raw = False, None, ""
        found = _scale_loaded(ctx)
        if found == spec.scale:
            raw = f"pgbench tables of scale {found} are loaded already: copied as they are\n"
        else:
            opts = pgbench.InitOptions(
                scale=spec.scale,
                tablespace=tablespaces.get("tablespace"),
                index_tablespace=tablespaces.get("index_tablespace"),
            )

            def on_progress(done: int, total: int) -> None:
                line.update(completed=done, total=total, detail=f"{done:,} of {total:,} rows")

            init, raw = pgbench.run_init(ctx.bins.client_bin_dir, conn(ctx), opts, on_progress)
            loaded, load_s = True, init.elapsed_s
        checkpoint(ctx)
        with conn(ctx).connect() as db:
            database = db.execute("SELECT pg_database_size(current_database())").fetchone()
            cluster = db.execute(CLUSTER_SQL).fetchone()
        assert database is not None and cluster is not None
        data = BasebackupData(spec.scale, loaded, load_s, int(database[0]), int(cluster[0]))
        return data, raw

    return action


def data_steps(spec: BasebackupSpec, target: TargetView) -> list[Step]:
    return [
        Step(
            key=_key(target.name, spec, "data"),
            kind="basebackup_data",
            label=f"{target.name}: TPC-B data of scale {spec.scale} to copy",
            params={"workload": spec.name, "scale": spec.scale, **target.tablespaces},
            action=Call("basebackup.data", {"spec": spec, "tablespaces": target.tablespaces}),
            total=spec.scale * pgbench.ROWS_PER_SCALE,
            tools=("pgbench",),
            estimate_s=tpcb_steps.load_estimate(TpcbSpec(), spec.scale, target.storage),
            creates_data=True,
            leaves=tpcb_steps.pgbench_data(spec.scale),
            reused_s=1,  # a CHECKPOINT and two sizes: 0.9-1.0 s on seed002
        )
    ]


def destination(spec: BasebackupSpec, ctx: Context) -> tuple[Path, str]:
    """The directory the copy's work directory goes under, and how to name it."""
    if spec.to_directory is not None:
        return spec.to_directory, f"directory {spec.to_directory}"
    if spec.to_target is not None:
        where = ctx.peer(spec.to_target)
        if where is None:
            raise UsageError(
                f"workload {spec.name}: to = {spec.to_target!r}: that target has no directory "
                "on this machine to copy to",
                hint="name a target with a directory, or give a directory",
            )
        return where, f"target {spec.to_target}"
    if ctx.copy_here is not None:
        # A server on another host: pg_basebackup runs here over TCP, so its copy
        # lands here (issue 40.9: ``ctx.target``, the probes' directory there, is gone).
        return ctx.copy_here, f"this machine ({ctx.copy_here}; the server is on {ctx.host.name})"
    return ctx.target, "same target"


def _check_replication(ctx: Context, wal_method: str) -> None:
    """Refuse with the setting to change, before pg_basebackup says it less clearly."""
    with conn(ctx).connect() as db:
        row = db.execute(REPLICATION_SQL).fetchone()
    assert row is not None
    wal_level, senders, used, allowed = row
    if wal_level == "minimal" or senders < 1:
        fix = "set wal_level = replica and max_wal_senders = 10 in [target.set] or the profile"
        raise ClusterError(
            f"pg_basebackup cannot copy this server: it takes no replication connections "
            f"(wal_level = {wal_level}, max_wal_senders = {senders}); {fix}",
            hint=fix,
        )
    needed = 2 if wal_method == "stream" else 1  # -X stream: a second connection for WAL
    if used + needed > senders:
        raise ClusterError(
            f"max_wal_senders = {senders} and {used} are in use: no room for pg_basebackup; "
            "raise max_wal_senders in [target.set]",
            hint="raise max_wal_senders in [target.set]",
        )
    if not allowed:
        raise ClusterError(
            f"{conn(ctx).describe()}: the role has neither REPLICATION nor superuser, "
            "which pg_basebackup needs",
            hint="ALTER ROLE ... REPLICATION, or connect as a role that has it",
        )


RESTARTS_S = 2.5  # `set`: two restarts around a copy, 0.3-1.2 s each here (docs/tpcc.md)


@contextlib.contextmanager
def _restarted(ctx: Context, settings: Mapping[str, str]) -> Iterator[None]:
    """The body on pgrig's server restarted at ``settings`` (the workload's
    ``set``), then restarted at the profile's again - also when the body fails.
    The monitor is told the server's new PID each time."""
    if not settings:
        yield
        return
    server = ctx.restartable
    if server is None:
        raise ClusterError(
            f"{conn(ctx).describe()}: the basebackup workload's set "
            f"({', '.join(settings)}) needs a server pgrig created: it restarts it",
            hint="remove [workload.set], or set those in the server's configuration",
        )
    try:  # a server that refuses the settings starts again at the profile's
        server.restart(settings)
        _moved(ctx)
        yield
    finally:
        server.restart()
        _moved(ctx)


def _moved(ctx: Context) -> None:
    if ctx.cluster is not None:
        ctx.running.server_pid = ctx.cluster.postmaster_pid()


def _timeout(spec: BasebackupSpec, cluster_bytes: int) -> float:
    if spec.timeout_s is not None:
        return spec.timeout_s
    return 600.0 + cluster_bytes / MB


def _reachable(holder: Path, owner: proc.OsUser | None) -> None:
    if owner is None or os.geteuid() != 0:
        return
    os.chown(holder, owner.uid, owner.gid)
    if not HERE.writable_by(holder, owner.name):
        raise WorkdirError(
            f"pg_basebackup runs as OS user {owner.name}, which cannot write to {holder} "
            "(a parent directory is not searchable for it)",
            hint="send the copies to a directory that user can reach, e.g. under /var/tmp",
        )


def calibration_kind(spec: BasebackupSpec) -> str:
    """What a copy's time is calibrated under: its format and compression."""
    return f"basebackup:{spec.format}:{spec.compress}"


def backup_estimate(spec: BasebackupSpec, storage: str = "") -> float:
    """Seconds a copy of ``spec.scale`` takes here, from the copies this storage
    or machine made (per planned size, MB), else at 50 MB/s (a slow disk's pace)."""
    mb = bb_spec.copy_bytes(spec.scale) / MB
    return calibration.estimate_on(
        calibration_kind(spec), storage, mb, lambda _mb: 10 + spec.scale * 16 / 50
    )


def backup_action(
    spec: BasebackupSpec, opts: tool.Options, target: str, rep: int, storage: str
) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[BasebackupResult, str]:
        with _restarted(ctx, spec.settings):
            return backup(ctx, line)

    def backup(ctx: Context, line: ProgressLine) -> tuple[BasebackupResult, str]:
        started, machine = time.monotonic(), calibration.busy()
        _check_replication(ctx, spec.wal_method)
        with conn(ctx).connect() as db:
            row = db.execute(CLUSTER_SQL).fetchone()
            spaces = db.execute(TABLESPACES_SQL).fetchall()
        cluster_bytes = int(row[0]) if row else 0
        parent, described = destination(spec, ctx)
        # What a copy can need at most: the cluster as it is now, and the WAL of the copy.
        check_space(
            parent,
            int(cluster_bytes * 1.05) + 64 * MB,
            f"the base backup of {target}",
            hint="lower scale, free some space, or send the copies elsewhere (to)",
        )
        binary = ctx.bins.path(tool.TOOL)
        version = tool.version(binary)
        owner = ctx.cluster.os_user if ctx.cluster is not None else None
        made = workdir.record(ctx.cluster.workdir) if ctx.cluster is not None else None
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", spec.name)
        holder = parent / f"pgrig-basebackup-{target}-{name}-r{rep}"
        workdir.create(holder, study=made.study if made else spec.name, kind="holder")
        try:
            _reachable(holder, owner)
            copy = holder / "copy"
            mapping = (
                [(str(location), holder / "tablespaces" / str(oid)) for oid, location in spaces]
                if spec.format == "plain"
                else []
            )
            args = tool.argv(
                binary,
                conn(ctx).args(),
                copy,
                opts,
                version_num=tool.version_num(version),  # the client's: it may be newer
                tablespace_map=mapping,
            )

            def on_progress(done_kb: int, total_kb: int) -> None:
                line.update(
                    completed=done_kb,
                    total=total_kb,
                    detail=f"{done_kb / 1024:,.0f} of {total_kb / 1024:,.0f} MiB",
                )

            ran = tool.run(
                args,
                timeout=_timeout(spec, cluster_bytes),
                env=conn(ctx).env(),
                user=owner,
                on_progress=on_progress,
                # the source target's cgroup: its caps (to another target: only the
                # source's device is capped, the destination's writes are not)
                preexec=ctx.preexec,
            )
            copied = tool.measure(copy)
            if mapping:
                copied += tool.measure(holder / "tablespaces")
            fs = describe_filesystem(holder)
        finally:
            workdir.remove(holder)
        result = _result(spec, ran, copied, described, fs, version, args)
        # the whole step (the copy measured and removed too), as the plan counts it
        elapsed = time.monotonic() - started
        mb = bb_spec.copy_bytes(spec.scale) / MB
        calibration.record_on(calibration_kind(spec), storage, mb, elapsed, machine)
        return result, ran.raw

    return action


def _result(
    spec: BasebackupSpec,
    ran: tool.Ran,
    copied: tool.Copied,
    described: str,
    fs: Filesystem | None,
    version: str,
    args: list[str],
) -> BasebackupResult:
    """One copy's result: what pg_basebackup said, and what was ``copied`` as
    measured on the destination's filesystem ``fs``."""
    return BasebackupResult(
        data_bytes=ran.output.total_kb * 1024,
        copy_bytes=copied.bytes,
        files=copied.files,
        wall_s=round(ran.wall_s, 3),
        format=spec.format,
        checkpoint=spec.checkpoint,
        wal_method=spec.wal_method,
        compress=spec.compress,
        max_rate=spec.max_rate,
        destination=described,
        filesystem=f"{fs.fstype} {fs.device} at {fs.mountpoint}" if fs else "unknown",
        tool_version=version,
        start_lsn=ran.output.start_lsn,
        end_lsn=ran.output.end_lsn,
        timeline=ran.output.timeline,
        tablespaces=ran.output.tablespaces,
        phases=ran.phases,
        argv=tuple(args),
    )


def backup_step(spec: BasebackupSpec, policy: RunPolicy, target: TargetView, rep: int) -> Step:
    opts = tool.Options(spec.format, spec.checkpoint, spec.wal_method, spec.compress, spec.max_rate)
    return Step(
        key=_key(target.name, spec, "backup").with_repeat(rep),
        kind="basebackup",
        label=f"{target.name}: pg_basebackup -F {spec.format[0]} -X {spec.wal_method} "
        f"-c {spec.checkpoint}" + (f" to {spec.to}" if spec.to else ""),
        params={
            "workload": spec.name,
            "scale": spec.scale,
            "format": spec.format,
            "checkpoint": spec.checkpoint,
            "wal_method": spec.wal_method,
            "compress": spec.compress,
            "max_rate": spec.max_rate,
            "to": spec.to or None,
            "repeat": rep,
            **({"set": dict(spec.settings)} if spec.settings else {}),
        },
        action=Call(
            "basebackup.backup",
            {
                "spec": spec,
                "opts": opts,
                "target": target.name,
                "rep": rep,
                "storage": target.storage,
            },
        ),  # fmt: skip
        prepare=Call("basebackup.prepare", {"policy": policy}),
        tools=(tool.TOOL,),
        monitored=True,
        estimate_s=backup_estimate(spec, target.storage) + (RESTARTS_S if spec.settings else 0.0),
    )


def prepare_action(policy: RunPolicy) -> Prepare:
    """A CHECKPOINT first, as before every measured run: the backup's own
    checkpoint then does not flush what the load or an earlier run left dirty."""

    def prepare(ctx: Context, line: ProgressLine) -> None:
        if policy.checkpoint:
            checkpoint(ctx)

    return prepare
