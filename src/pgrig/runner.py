"""Runs a ``StudyPlan``: probes, then the server, then the workloads - recording
every step in the store the moment it ends.

Order of business, so that whatever cannot work fails before anything is
created: binaries, target directory, profile, disk space, existing-server
permission; then orphans of killed runs are cleaned up, the study is opened
in the store, and the steps run. A failing step is recorded as failed and the
study goes on; Ctrl-C stops the running tool, the cluster, and marks the study
interrupted - what finished stays recorded.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

from pgrig import __version__, environment, probe
from pgrig.cluster import binaries, profiles, workdir
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.errors import ClusterError, PgrigError, UsageError
from pgrig.plan import StudyPlan, check_space, parse_size
from pgrig.results import Environment, RunRecord, Study, to_dict
from pgrig.step import Context, Skip, Step
from pgrig.store import Store
from pgrig.ui import Ui
from pgrig.workloads import tpcb

DATABASE = "pgrig"
# Seeds 000 and 004 drop and reload pgbench_* tables; on a server pgrig did not
# create that destroys someone's tables, so it needs --yes.
DESTRUCTIVE_ON_EXISTING = "pgbench -i drops and recreates the pgbench_* tables"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def study_id(name: str) -> str:
    return f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


class StudyRunner:
    def __init__(self, plan: StudyPlan, ui: Ui) -> None:
        self.plan = plan
        self.ui = ui
        self._store: Store | None = None
        self.study: Study | None = None
        self.env: Environment | None = None
        self.cluster: Cluster | None = None
        self.failures = 0

    @property
    def store(self) -> Store:
        assert self._store is not None, "run() sets the store"
        return self._store

    # -- checks before anything is created -------------------------------

    def preflight(self) -> tuple[binaries.PgBinaries, Path, profiles.Profile | None]:
        plan = self.plan
        tools = binaries.CLIENT_TOOLS if plan.dsn is not None else binaries.SERVER_TOOLS
        bins = binaries.find(plan.pg_bin, tools=tools)
        target = workdir.check_target(plan.target)
        profile = None
        if plan.dsn is None:
            profile = profiles.load(plan.profile).with_overrides(plan.overrides)
            profiles.validate(profile, bins)
        elif plan.overrides or plan.profile not in ("oltp", "stock"):
            raise UsageError(
                "--profile and --set apply to a cluster pgrig creates, not to an existing server",
                hint="drop them, or drop --dsn to let pgrig create a throwaway cluster",
            )
        if plan.dsn is not None and plan.tpcb is not None and not plan.yes:
            raise UsageError(
                f"refusing to touch the existing server: {DESTRUCTIVE_ON_EXISTING}",
                hint="pass --yes if that is what you want, or let pgrig create a throwaway "
                "cluster (omit --dsn)",
            )
        tp = plan.tpcb
        for option, value in (
            ("--tablespace", tp and tp.tablespace),
            ("--index-tablespace", tp and tp.index_tablespace),
        ):
            if not value or not value.startswith("/"):
                continue  # a tablespace name: it must exist on the server
            if plan.dsn is not None:
                raise UsageError(
                    f"{option} {value}: on an existing server give the name of an existing "
                    "tablespace, not a directory",
                    hint="pgrig creates tablespaces in directories only in its own cluster",
                )
            check_space(workdir.check_target(Path(value)), plan.data_bytes(), option)
        need = 0
        if "fio" in plan.probes:
            need = parse_size(plan.fio.size) + 64 * 2**20
        if plan.dsn is None:
            need = max(need, plan.data_bytes())
        check_space(target, need, f"scale {plan.tpcb.scale}" if plan.tpcb else "the probes")
        return bins, target, profile

    # -- the study -------------------------------------------------------

    def run(self, store: Store) -> Study:
        """Run the study; call ``preflight`` first to fail before the store is created."""
        bins, target, profile = self.preflight()
        self._store = store
        for path in workdir.clean_orphans():
            self.ui.info(f"removed the orphan work directory {path} of a killed pgrig run")
        plan = self.plan
        sid = study_id(plan.name)
        self.study = Study(
            id=sid,
            name=plan.name,
            target=str(target),
            started_at=now(),
            status="running",
            params=_plan_params(plan, bins),
            pgrig_version=__version__,
        )
        self.store.begin_study(self.study)
        self.ui.info(
            f"study [bold]{sid}[/bold] on {target} - about "
            f"{plan.estimated_seconds() / 60:.0f} min; results go to {self.store.path}"
        )
        status = "failed"
        try:
            with self.ui.step("capturing the environment"):
                self.env = environment.capture([target], bin_dir=bins.bin_dir)
            self.store.set_environment(sid, self.env)
            ctx = Context(bins=bins, target=target, scratch=target)
            for step in probe.steps(plan):
                self._execute(step, ctx)
            if plan.tpcb is not None:
                with self._server(bins, target, profile, ctx):
                    for step in tpcb.load_steps(self.plan):
                        if not self._execute(step, ctx) and step.kind == "pgbench_init":
                            self.ui.fail("the load failed; skipping the TPC-B runs")
                            break
                    else:
                        for step in tpcb.bench_steps(self.plan):
                            self._execute(step, ctx)
            status = "finished"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            self.store.finish_study(sid, status, now())
            self.study = self.store.study(sid)
        return self.study

    @contextlib.contextmanager
    def _server(
        self,
        bins: binaries.PgBinaries,
        target: Path,
        profile: profiles.Profile | None,
        ctx: Context,
    ) -> Iterator[None]:
        plan = self.plan
        assert self.study is not None
        if plan.dsn is not None:
            conn = Conn.from_user(plan.dsn)
            ctx.conn = conn
            with conn.connect():
                pass
            self._capture_server(bins, conn)
            yield
            return
        assert profile is not None
        os_user = server_os_user(plan.os_user)
        cluster = Cluster.create(
            bins, target / f"pgrig-{self.study.id}", study=self.study.id, os_user=os_user
        )
        self.cluster = cluster
        try:
            with self.ui.step(f"initdb + start PostgreSQL {bins.version} ({profile.name})"):
                cluster.initdb(
                    InitdbOptions(
                        encoding=plan.encoding,
                        locale=plan.locale,
                        wal_segsize_mb=plan.wal_segsize_mb,
                    )
                )
                cluster.configure(profile)
                cluster.start()
                admin = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
                with admin.connect() as db:
                    db.execute(f'CREATE DATABASE "{DATABASE}"')
            ctx.conn = admin.with_dbname(DATABASE)
            ctx.scratch = cluster.workdir
            self._make_tablespaces(cluster)
            self.ui.ok(
                f"PostgreSQL {bins.version} running as {os_user.name if os_user else 'you'} "
                f"in {cluster.datadir} (socket {cluster.socket_dir}, profile {profile.name})"
            )
            self._capture_server(bins, ctx.conn)
            yield
        finally:
            if plan.keep:
                cluster.stop()
                workdir.unregister(cluster.workdir)
                self.ui.info(
                    f"kept the cluster in {cluster.datadir} (stopped; start it with pg_ctl -D)"
                )
            else:
                cluster.destroy()

    def _make_tablespaces(self, cluster: Cluster) -> None:
        """Directories given for --tablespace / --index-tablespace become tablespaces of
        the throwaway cluster; the TPC-B steps then use their names."""
        tp = self.plan.tpcb
        if tp is None:
            return
        names = {}
        for field, name in (("tablespace", "pgrig_tables"), ("index_tablespace", "pgrig_indexes")):
            value = getattr(tp, field)
            if value and value.startswith("/"):
                names[field] = cluster.create_tablespace(name, Path(value))
                self.ui.ok(f"tablespace {name} in {value}")
        if names:
            self.plan = replace(self.plan, tpcb=replace(tp, **names))

    def _capture_server(self, bins: binaries.PgBinaries, conn: Conn) -> None:
        assert self.study is not None
        self.env = environment.capture(
            [self.plan.target], pg_conninfo=conn.conninfo(), bin_dir=bins.bin_dir
        )
        if self.env.postgres is None:
            raise ClusterError(
                f"cannot read the server's version and settings from {conn.describe()}"
            )
        self.store.set_environment(self.study.id, self.env)

    def _execute(self, step: Step, ctx: Context) -> bool:
        """Run one step and record it, whatever happens. True if it succeeded."""
        assert self.study is not None
        if self.cluster is not None and ctx.conn is not None and not self.cluster.running():
            # The server died under an earlier step (crash, OOM, someone's kill):
            # bring it back so the study goes on, and say so.
            self.ui.warn(f"the server is down ({self.cluster.log_tail(2)}); restarting it")
            try:
                self.cluster.restart_after_crash()
            except PgrigError as exc:
                self.ui.fail(f"could not restart the server: {exc}")
        started = now()
        t0 = time.monotonic()
        status, reason, result, raw = "ok", None, None, ""
        try:
            with self.ui.step(step.label, total=step.total) as line:
                value, raw = step.action(ctx, line)
            result = to_dict(value)
        except Skip as exc:
            status, reason = "skipped", exc.reason
        except PgrigError as exc:
            status, reason = "failed", str(exc)
            raw = getattr(exc, "stderr", "") or ""
        except KeyboardInterrupt:
            self._record(step, started, "failed", "interrupted by the user (Ctrl-C)", None, raw)
            raise
        except Exception as exc:  # a bug or an unexpected server answer: keep going
            status, reason = "failed", f"{type(exc).__name__}: {exc}"
        self._record(step, started, status, reason, result, raw)
        elapsed = time.monotonic() - t0
        if status == "ok":
            self.ui.ok(f"{step.label} ({elapsed:.0f} s){_headline(step.kind, result)}")
        elif status == "skipped":
            self.ui.warn(f"{step.label} skipped: {reason}")
        else:
            self.failures += 1
            self.ui.fail(f"{step.label} failed: {reason}")
        return status == "ok"

    def _record(
        self,
        step: Step,
        started: str,
        status: str,
        reason: str | None,
        result: dict | None,
        raw: str,
    ) -> None:
        assert self.study is not None
        tools = self.env.tools if self.env else {}
        self.store.record(
            RunRecord(
                study=self.study.id,
                key=step.key,
                kind=step.kind,
                target=self.study.target,
                params=step.params,
                status=status,
                reason=reason,
                result=result,
                raw=raw,
                tool_versions={t: tools[t] for t in step.tools if t in tools},
                started_at=started,
                finished_at=now(),
            )
        )


def _headline(kind: str, result: dict | None) -> str:
    if not result:
        return ""
    if kind == "pgbench_run":
        return f": {result['tps']:,.0f} tps"
    if kind == "fio":
        return f": {result['iops']:,.0f} IOPS, {result['bandwidth_mib_s']:,.1f} MiB/s"
    if kind == "pgbench_init":
        return f": {result['elapsed_s']:.1f} s, {result['rows_per_s']:,.0f} rows/s"
    if kind == "count":
        return f": {result['execution_ms']:,.0f} ms"
    if kind == "pg_test_timing":
        return f": {result['per_loop_ns']:.2f} ns per loop"
    return ""


def _plan_params(plan: StudyPlan, bins: binaries.PgBinaries) -> dict:
    params = asdict(plan)
    params["target"] = str(plan.target)
    params["pg_bin"] = str(bins.bin_dir)
    params["pg_version"] = bins.version
    params["pid"] = os.getpid()
    if plan.dsn:
        params["dsn"] = Conn.from_user(plan.dsn).describe()
    return params
