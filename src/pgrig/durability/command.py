"""``pgrig durability``: the check on a throwaway cluster (or, with ``--yes``, an
existing server), recorded in the results store as a study with one
"durability" record, and written as a report.

Order of business, as for ``pgrig run``: everything that can be refused is
refused before anything is created (binaries, options, target, profile,
permission to crash an existing server); then the study is opened, the
cluster made (initdb with data checksums), the check run, the record written,
the cluster removed - unless the server did not come back, in which case its
data directory and log are kept and their paths given.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from pgrig import __version__, environment
from pgrig.cluster import binaries, profiles, workdir
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.durability import crasher, driver
from pgrig.durability.model import KILL_BACKEND, DurabilityResult
from pgrig.errors import PgrigError, UsageError
from pgrig.plan import check_space
from pgrig.results import RunRecord, Study, to_dict
from pgrig.store import Store
from pgrig.ui import Ui

DATABASE = "pgrig"
KIND = "durability"
NEEDED_BYTES = 256 * 2**20  # cluster, WAL of a few minutes of small transactions


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def study_id() -> str:
    return f"durability-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


class DurabilityFailed(PgrigError):
    """The check ran and found lost commits, a broken invariant or corruption."""


@dataclass(frozen=True)
class Options:
    plan: driver.DurabilityPlan
    target: Path = field(default_factory=Path.cwd)
    profile: str = "oltp"
    overrides: dict[str, str] = field(default_factory=dict)
    pg_bin: str | None = None
    dsn: str | None = None
    yes: bool = False
    keep: bool = False
    os_user: str | None = None


@dataclass(frozen=True)
class Outcome:
    study: Study
    result: DurabilityResult | None
    reports: tuple[Path, Path] | None


def preflight(opts: Options) -> tuple[binaries.PgBinaries, Path, profiles.Profile | None]:
    opts.plan.validate()
    if opts.dsn is not None:
        if not opts.yes:
            raise UsageError(
                "refusing to crash an existing server: the durability check kills its "
                "processes several times under load",
                hint="pass --yes if that is what you want, or omit --dsn to let pgrig "
                "create a throwaway cluster",
            )
        if opts.plan.method != KILL_BACKEND:
            raise UsageError(
                f"--crash {opts.plan.method} stops the postmaster, and pgrig can only start "
                "again a server it created",
                hint=f"use --crash {KILL_BACKEND} on an existing server (its postmaster "
                "restarts by itself), or drop --dsn to let pgrig create a throwaway cluster",
            )
        if opts.overrides or opts.profile not in ("oltp", "stock"):
            raise UsageError(
                "--profile and --set apply to a cluster pgrig creates, not to an existing server",
                hint="drop them, or drop --dsn to let pgrig create a throwaway cluster",
            )
    tools = binaries.CLIENT_TOOLS if opts.dsn is not None else binaries.SERVER_TOOLS
    bins = binaries.find(opts.pg_bin, tools=tools)
    target = workdir.check_target(opts.target)
    profile = None
    if opts.dsn is None:
        profile = profiles.load(opts.profile).with_overrides(opts.overrides)
        profiles.validate(profile, bins)
        check_space(target, NEEDED_BYTES, "the durability check")
    return bins, target, profile


def execute(
    opts: Options,
    ui: Ui,
    store: Store,
    results_dir: Path,
    *,
    on_event: driver.EventHook = lambda _e, _n: None,
) -> Outcome:
    """Run the check, record it and write the report, whatever happens.

    Raises ``DurabilityFailed`` (after recording and reporting) when the check
    failed, ``crasher.ServerLost`` when the server did not come back.
    """
    bins, target, profile = preflight(opts)
    for path in workdir.clean_orphans():
        ui.info(f"removed the orphan work directory {path} of a killed pgrig run")
    sid = study_id()
    conn = Conn.from_user(opts.dsn) if opts.dsn is not None else None
    label = str(target) if conn is None else conn.describe()
    store.begin_study(
        Study(
            id=sid,
            name="durability",
            target=label,
            started_at=now(),
            status="running",
            params=_params(opts, bins),
            pgrig_version=__version__,
        )
    )
    ui.info(f"study [bold]{sid}[/bold]: durability check; results go to {store.path}")
    status, started = "failed", now()
    result: DurabilityResult | None = None
    error: BaseException | None = None
    cluster: Cluster | None = None
    tools: dict[str, str] = {}
    try:
        if conn is None:
            assert profile is not None
            cluster = _make_cluster(bins, target, sid, profile, opts, ui)
            conn = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, DATABASE)
        env = environment.capture([target], pg_conninfo=conn.conninfo(), bin_dir=bins.bin_dir)
        store.set_environment(sid, env)
        tools = env.tools
        plan = opts.plan
        ui.info(
            f"{plan.clients} clients; {plan.crashes} crash(es) by {plan.method}, about "
            f"{plan.interval_s:g} s of load apart"
        )
        result = driver.run(
            plan,
            crasher.Server(conn, cluster),
            bins,
            logfile=cluster.logfile if cluster else None,
            progress=ui.info,
            on_event=on_event,
        )
        status = "finished"
    except KeyboardInterrupt as exc:
        status, error = "interrupted", exc
        raise
    except BaseException as exc:
        error = exc
        raise
    finally:
        kept = _dispose(cluster, opts.keep, error, ui) if cluster is not None else None
        if result is not None and kept is not None:
            result = replace(result, kept_datadir=str(kept[0]), kept_log=str(kept[1]))
        store.record(_record(sid, label, opts, started, result, error, tools))
        store.finish_study(sid, status, now())
        study = store.study(sid)
        reports = _report(store, study, results_dir, ui)
    assert result is not None
    if not result.ok:
        raise DurabilityFailed(
            "the durability check failed: " + " | ".join(result.failures),
            hint=f"details in {reports[0]}",
        )
    return Outcome(study, result, reports)


def _make_cluster(
    bins: binaries.PgBinaries,
    target: Path,
    sid: str,
    profile: profiles.Profile,
    opts: Options,
    ui: Ui,
) -> Cluster:
    os_user = server_os_user(opts.os_user)
    cluster = Cluster.create(bins, target / f"pgrig-{sid}", study=sid, os_user=os_user)
    try:
        with ui.step(f"initdb (data checksums) + start PostgreSQL {bins.version}"):
            cluster.initdb(InitdbOptions(data_checksums=True))
            cluster.configure(profile)
            cluster.start()
            admin = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
            with admin.connect() as db:
                db.execute(f'CREATE DATABASE "{DATABASE}"')
    except BaseException:
        cluster.destroy()
        raise
    ui.ok(
        f"PostgreSQL {bins.version} in {cluster.datadir} (profile {profile.name}"
        + (
            f", {', '.join(f'{k}={v}' for k, v in opts.overrides.items())}"
            if opts.overrides
            else ""
        )
        + ")"
    )
    return cluster


def _dispose(
    cluster: Cluster, keep: bool, error: BaseException | None, ui: Ui
) -> tuple[Path, Path] | None:
    """Remove the cluster - or keep it, stopped, when asked or when the server did
    not come back (the evidence). Returns (datadir, log) when kept."""
    lost = isinstance(error, crasher.ServerLost)
    if not keep and not lost:
        cluster.destroy()
        return None
    try:
        cluster.stop()
    finally:
        workdir.unregister(cluster.workdir)
    why = "the server did not come back" if lost else "--keep"
    ui.info(f"kept ({why}): data directory {cluster.datadir}, server log {cluster.logfile}")
    return cluster.datadir, cluster.logfile


def _record(
    sid: str,
    label: str,
    opts: Options,
    started: str,
    result: DurabilityResult | None,
    error: BaseException | None,
    tools: dict[str, str],
) -> RunRecord:
    reason = None
    if result is None:
        reason = str(error) if isinstance(error, PgrigError) else repr(error)
        if isinstance(error, KeyboardInterrupt):
            reason = "interrupted by the user (Ctrl-C)"
    return RunRecord(
        study=sid,
        key=KIND,
        kind=KIND,
        target=label,
        params=asdict(opts.plan),
        status="ok" if result is not None else "failed",
        reason=reason,
        result=to_dict(result) if result is not None else None,
        started_at=started,
        finished_at=now(),
        tool_versions={t: v for t, v in tools.items() if t in ("pg_amcheck", "postgres", "pg_ctl")},
    )


def _report(store: Store, study: Study, results_dir: Path, ui: Ui) -> tuple[Path, Path]:
    from pgrig import report

    md, html = report.write(study, store.runs(study.id), results_dir)
    click.echo(f"report: {md}")
    click.echo(f"report: {html}")
    return md, html


def _params(opts: Options, bins: binaries.PgBinaries) -> dict[str, Any]:
    params: dict[str, Any] = asdict(opts.plan)
    params.update(
        target=str(opts.target),
        pg_bin=str(bins.bin_dir),
        pg_version=bins.version,
        pid=os.getpid(),
    )
    if opts.dsn is not None:
        params["dsn"] = Conn.from_user(opts.dsn).describe()
    else:
        params.update(profile=opts.profile, overrides=opts.overrides, initdb="--data-checksums")
    return params
