"""Runs a campaign: probes, then one server per target, then the workloads with
targets interleaved - recording every step in the store the moment it ends.

Order of business, so that whatever cannot work fails before anything is
created: binaries, directories, profiles, disk space, permission to touch
existing servers; then orphans of killed runs are cleaned up, the study is
opened (or resumed: steps already recorded are not run again) and the steps
run. A failing step is recorded as failed and the campaign goes on; Ctrl-C
stops the running tool and every cluster and marks the study interrupted -
what finished stays recorded.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgrig import __version__, environment, probe, stats
from pgrig.campaign import (
    Campaign,
    CustomSpec,
    DurabilitySpec,
    TargetSpec,
    TpcbSpec,
    TpccSpec,
)
from pgrig.cluster import binaries, profiles, workdir
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.errors import ClusterError, PgrigError, UsageError
from pgrig.plan import check_space, expand
from pgrig.results import Environment, RunRecord, Study, to_dict
from pgrig.step import Context, Skip, Step
from pgrig.store import Store
from pgrig.ui import Ui
from pgrig.workloads import common, custom, tpcb

# Seeds 000 and 004 drop and reload pgbench_* tables; on a server pgrig did not
# create that destroys someone's tables, so it needs --yes.
DESTRUCTIVE_ON_EXISTING = "pgbench -i drops and recreates the pgbench_* tables"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_study_id(name: str) -> str:
    return f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


@dataclass
class TargetRun:
    """One target while the campaign runs."""

    spec: TargetSpec
    bins: binaries.PgBinaries
    directory: Path | None
    profile: profiles.Profile | None
    ctx: Context
    cluster: Cluster | None = None
    observed: dict[str, float] = field(default_factory=dict)  # mode -> best tps so far
    env: Environment | None = None
    # tablespace names for pgbench -i: given names, or those made from directories
    tablespaces: dict[str, str | None] = field(default_factory=dict)
    limits: Any = None  # monitor.Limits from this target's probes; False: none measured

    @property
    def name(self) -> str:
        return self.spec.name


class CampaignRunner:
    def __init__(
        self,
        campaign: Campaign,
        ui: Ui,
        *,
        yes: bool = False,
        keep: bool = False,
        study_id: str | None = None,
    ) -> None:
        self.campaign = campaign
        self.ui = ui
        self.yes = yes
        self.keep = keep
        self.study_id = study_id
        self.study: Study | None = None
        self.targets: list[TargetRun] = []
        self.failures = 0
        self.done: set[str] = set()
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        assert self._store is not None, "run() sets the store"
        return self._store

    # -- checks before anything is created -------------------------------

    def preflight(self) -> None:
        camp = self.campaign
        needs = expand(camp).disk
        has_tpcb = any(isinstance(w, TpcbSpec) for w in camp.workloads)
        runs: list[TargetRun] = []
        for spec in camp.targets:
            existing = spec.dsn is not None
            tools = binaries.CLIENT_TOOLS if existing else binaries.SERVER_TOOLS
            bins = binaries.find(spec.pg_bin, tools=tools)
            directory = workdir.check_target(spec.directory) if spec.directory else None
            profile = None
            if not existing:
                profile = profiles.load(spec.profile).with_overrides(spec.settings)
                profiles.validate(profile, bins)
            else:
                if camp.workloads and not self.yes:
                    raise UsageError(
                        f"target {spec.name}: refusing to touch the existing server: "
                        f"{DESTRUCTIVE_ON_EXISTING}",
                        hint="pass --yes if that is what you want, or let pgrig create a "
                        "throwaway cluster (give a directory instead of a dsn)",
                    )
                if camp.policy.reset == "restore" and camp.workloads:
                    raise UsageError(
                        f'target {spec.name}: reset = "restore" drops and recreates a '
                        "database, which pgrig only does in clusters it creates",
                        hint='use reset = "reuse" for existing servers',
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
                    if has_tpcb:
                        check_space(
                            workdir.check_target(Path(value)),
                            needs.get(spec.name, 0),
                            f"target {spec.name} ({option})",
                        )
            if directory is not None:
                need = needs.get(spec.name, 0) if not existing else 0
                check_space(directory, need, f"target {spec.name}")
            scratch = directory or Path.cwd()
            runs.append(
                TargetRun(
                    spec,
                    bins,
                    directory,
                    profile,
                    Context(bins=bins, target=scratch, scratch=scratch),
                    tablespaces={
                        "tablespace": spec.tablespace,
                        "index_tablespace": spec.index_tablespace,
                    },
                )
            )
        local = [t for t in runs if t.profile is not None]
        if len(local) > 1:
            self._check_memory(local)
        self.targets = runs

    def _check_memory(self, local: list[TargetRun]) -> None:
        """Interleaving keeps every target's cluster up at once: their shared
        buffers must fit together."""
        from pgrig.units import parse_size

        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        total = 0
        for t in local:
            assert t.profile is not None
            value = t.profile.settings.get("shared_buffers", "128MB")
            with contextlib.suppress(UsageError):
                total += parse_size(value)
        if total > 0.6 * ram:
            self.ui.warn(
                f"the {len(local)} clusters' shared_buffers add up to {total / 2**30:.1f} GiB of "
                f"{ram / 2**30:.1f} GiB RAM while they run side by side; "
                "lower it per target with set.shared_buffers"
            )

    # -- the campaign ----------------------------------------------------

    def run(self, store: Store) -> Study:
        """Run (or resume) the campaign; call ``preflight`` first to fail before
        the store is created."""
        if not self.targets:
            self.preflight()
        self._store = store
        for path in workdir.clean_orphans():
            self.ui.info(f"removed the orphan work directory {path} of a killed pgrig run")
        camp = self.campaign
        sid = self.study_id or new_study_id(camp.name)
        existing = {s.id: s for s in store.studies()}
        if sid in existing:
            self.done = {r.key for r in store.runs(sid)}
            store.set_status(sid, "running")
            self.ui.info(f"resuming [bold]{sid}[/bold]: {len(self.done)} steps already recorded")
        else:
            label = ", ".join(t.name for t in camp.targets)
            if len(self.targets) == 1:
                only = self.targets[0]
                where = only.spec.dsn is not None and only.ctx.conn is None
                label = (
                    Conn.from_user(only.spec.dsn).describe()
                    if where and only.spec.dsn
                    else str(only.directory)
                )
            store.begin_study(
                Study(
                    id=sid,
                    name=camp.name,
                    target=label,
                    started_at=now(),
                    status="running",
                    params=self._params(),
                    pgrig_version=__version__,
                )
            )
        self.study = store.study(sid)
        plan = expand(camp)
        self.ui.info(
            f"campaign [bold]{sid}[/bold]: {len(plan.runs)} steps on "
            f"{len(camp.targets)} target(s), about {plan.seconds / 60:.0f} min; "
            f"results go to {store.path}"
        )
        status = "failed"
        try:
            with self.ui.step("capturing the environment"):
                first = self.targets[0]
                env = environment.capture(
                    [t.directory for t in self.targets if t.directory] or [Path.cwd()],
                    bin_dir=first.bins.bin_dir,
                )
            store.set_environment(sid, env)
            self._probes()
            if camp.workloads:
                with self._servers():
                    for wl in camp.workloads:
                        if isinstance(wl, TpcbSpec):
                            for scale in wl.scales:
                                self._tpcb(wl, scale)
                        elif isinstance(wl, DurabilitySpec):
                            self._durability(wl)
                        elif isinstance(wl, TpccSpec):
                            self._tpcc(wl)
                        else:
                            self._custom(wl)
            status = "finished"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            store.finish_study(sid, status, now())
            self.study = store.study(sid)
        return self.study

    def _params(self) -> dict[str, Any]:
        camp = self.campaign
        params: dict[str, Any] = {
            "campaign": camp.name,
            "source": camp.source,
            "baseline": camp.baseline,
            "policy": asdict(camp.policy),
            "pid": os.getpid(),
        }
        targets = []
        for t in self.targets:
            info = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(t.spec).items()}
            if t.spec.dsn:
                info["dsn"] = Conn.from_user(t.spec.dsn).describe()
            info["pg_version"] = t.bins.version
            info["pg_bin"] = str(t.bins.bin_dir)
            targets.append(info)
        params["targets"] = targets
        if len(self.targets) == 1:  # the single-target summary the report shows first
            t = self.targets[0]
            params["profile"] = t.spec.profile
            params["pg_version"] = t.bins.version
        params["workloads"] = [
            {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(w).items()}
            | {"type": w.kind}
            for w in camp.workloads
        ]
        return params

    # -- probes ----------------------------------------------------------

    def _probes(self) -> None:
        if self.campaign.probes is None:
            return
        per_target = [
            (t, probe.steps(self.campaign.probes, t.name, t.directory))
            for t in self.targets
            if t.directory is not None
        ]
        if not per_target:
            return
        # Probe by probe, target after target: the same probe runs close in time.
        for i in range(max(len(steps) for _, steps in per_target)):
            for t, steps in per_target:
                if i < len(steps):
                    self._execute(steps[i], t)

    # -- servers ---------------------------------------------------------

    @contextlib.contextmanager
    def _servers(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for t in self.targets:
                stack.enter_context(self._server(t))
            yield

    @contextlib.contextmanager
    def _server(self, t: TargetRun) -> Iterator[None]:
        assert self.study is not None
        if t.spec.dsn is not None:
            conn = Conn.from_user(t.spec.dsn)
            with conn.connect():
                pass
            t.ctx.conn = conn
            self._capture_server(t)
            yield
            return
        assert t.profile is not None and t.directory is not None
        os_user = server_os_user(t.spec.os_user)
        name = f"pgrig-{self.study.id}" + (f"-{t.name}" if len(self.targets) > 1 else "")
        cluster = Cluster.create(t.bins, t.directory / name, study=self.study.id, os_user=os_user)
        t.cluster = cluster
        try:
            with self.ui.step(f"{t.name}: initdb + start PostgreSQL {t.bins.version}"):
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
                cluster.configure(t.profile)
                cluster.start()
                admin = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
                with admin.connect() as db:
                    db.execute(f'CREATE DATABASE "{common.DATABASE}"')
            t.ctx.conn = admin.with_dbname(common.DATABASE)
            t.ctx.scratch = cluster.workdir
            t.ctx.server_pid = cluster.postmaster_pid()
            self._make_tablespaces(t)
            self.ui.ok(
                f"{t.name}: PostgreSQL {t.bins.version} running as "
                f"{os_user.name if os_user else 'you'} in {cluster.datadir} "
                f"(profile {t.profile.name})"
            )
            self._capture_server(t)
            yield
        finally:
            if self.keep:
                cluster.stop()
                workdir.unregister(cluster.workdir)
                self.ui.info(f"{t.name}: kept the stopped cluster in {cluster.datadir}")
            else:
                cluster.destroy()

    def _make_tablespaces(self, t: TargetRun) -> None:
        """Directories given as tablespaces become tablespaces of the throwaway
        cluster; the TPC-B steps then use their names."""
        assert t.cluster is not None
        names: dict[str, str] = {}
        for option, name in (("tablespace", "pgrig_tables"), ("index_tablespace", "pgrig_indexes")):
            value = getattr(t.spec, option)
            if value and value.startswith("/"):
                names[option] = t.cluster.create_tablespace(name, Path(value))
                self.ui.ok(f"{t.name}: tablespace {name} in {value}")
        t.tablespaces = {
            "tablespace": names.get("tablespace", t.spec.tablespace),
            "index_tablespace": names.get("index_tablespace", t.spec.index_tablespace),
        }

    def _capture_server(self, t: TargetRun) -> None:
        assert t.ctx.conn is not None and self.study is not None
        t.env = environment.capture(
            [t.directory or Path.cwd()], pg_conninfo=t.ctx.conn.conninfo(), bin_dir=t.bins.bin_dir
        )
        if t.env.postgres is None:
            raise ClusterError(
                f"cannot read the server's version and settings from {t.ctx.conn.describe()}"
            )
        if len(self.targets) == 1:
            self.store.set_environment(self.study.id, t.env)
        else:
            self.store.set_target_environment(self.study.id, t.name, t.env)

    # -- workloads -------------------------------------------------------

    def _pending(self, keys: list[str]) -> bool:
        return any(k not in self.done for k in keys)

    def _prepare_data(self, t: TargetRun, steps: list[Step]) -> bool:
        """Create the dataset (load or setup, then counts); True if it is there.

        On a resumed campaign the data of a killed run is gone with its cluster,
        so the load runs again - but is recorded only once."""
        ok = True
        for step in steps:
            if step.kind in ("pgbench_init", "sql_setup", "tpcc_load"):
                ok = self._execute(step, t, record=step.key not in self.done)
                if not ok:
                    self.ui.fail(f"{t.name}: no data; skipping its runs of this workload")
                    return False
                if self.campaign.policy.reset == "restore":
                    with self.ui.step(f"{t.name}: saving a pristine copy for reset = restore"):
                        common.save_pristine(t.ctx)
            elif step.key not in self.done:
                self._execute(step, t)
        return ok

    def _tpcb(self, wl: TpcbSpec, scale: int) -> None:
        pol = self.campaign.policy
        live = []
        for t in self.targets:
            loads = tpcb.load_steps(t.name, wl, scale, t.tablespaces)
            runs_left = (
                any(
                    f"{tpcb.prefix(t.name, wl, scale)}/{m}/c{c}/d{d}/r{r}" not in self.done
                    for d, m, c in tpcb.points(wl)
                    for r in range(1, pol.repeat + 1)
                )
                or pol.until_ci_pct is not None
            )
            if not runs_left and not self._pending([s.key for s in loads]):
                continue
            if self._prepare_data(t, loads):
                live.append(t)
        for point in tpcb.points(wl):

            def make(t: TargetRun, rep: int, point: tuple[int, str, int] = point) -> Step:
                return tpcb.bench_step(t.name, wl, scale, point, rep, pol, t.observed)

            self._repeat(live, make)

    def _custom(self, wl: CustomSpec) -> None:
        pol = self.campaign.policy
        live = []
        for t in self.targets:
            if self._prepare_data(t, [custom.setup_step(t.name, wl)]):
                live.append(t)
        for cpoint in custom.points(wl):

            def make(t: TargetRun, rep: int, point: tuple[int, int] = cpoint) -> Step:
                return custom.bench_step(t.name, wl, point, rep, pol, t.observed)

            self._repeat(live, make)

    def _tpcc(self, wl: TpccSpec) -> None:
        """Load and check on every target, then each mode's runs interleaved across
        targets, each run followed by the consistency check."""
        from pgrig.workloads.tpcc import steps as tpcc

        pol = self.campaign.policy
        tp = tpcc.TpccPlan.of(wl, repeat=pol.repeat).validate()

        def scoped(t: TargetRun, step: Step) -> Step:
            return replace(
                step,
                key=f"{t.name}/{wl.name}/{step.key.removeprefix('tpcc/')}",
                label=f"{t.name}: {step.label}",
                params={**step.params, "workload": wl.name},
            )

        live = []
        for t in self.targets:
            load = scoped(t, tpcc.load_step(tp, t.spec.dsn is None or self.yes))
            after_load = scoped(
                t, tpcc.check_step("tpcc/check/load", "TPC-C consistency after load")
            )
            runs = [
                scoped(t, tpcc.run_step(tp, mode, rep)).key
                for mode in wl.modes
                for rep in range(1, pol.repeat + 1)
            ]
            if not self._pending([load.key, after_load.key, *runs]) and pol.until_ci_pct is None:
                continue  # a resumed campaign that already has all of it
            if self._prepare_data(t, [load, after_load]):
                live.append(t)
        for mode in wl.modes:

            def make(t: TargetRun, rep: int, mode: str = mode) -> Step:
                return scoped(t, tpcc.run_step(tp, mode, rep))

            def check_after(t: TargetRun, run: Step) -> None:
                check = tpcc.check_step(
                    f"tpcc/check/{run.key.split('/run/', 1)[1]}", "TPC-C consistency"
                )
                self._execute(scoped(t, check), t)

            self._repeat(live, make, after=check_after)

    def _durability(self, wl: DurabilitySpec) -> None:
        """Crash each target's own cluster under load (existing servers: skipped -
        pgrig only crashes servers it can restart)."""
        from pgrig.durability import crasher, driver

        plan = driver.DurabilityPlan(
            method=wl.method, crashes=wl.crashes, clients=wl.clients, interval_s=wl.interval_s
        )
        for t in self.targets:

            def action(ctx: Context, line: Any, t: TargetRun = t) -> tuple[Any, str]:
                if t.cluster is None or ctx.conn is None:
                    raise Skip("an existing server: run `pgrig durability --dsn ... --yes`")
                result = driver.run(
                    plan,
                    crasher.Server(conn=ctx.conn, cluster=t.cluster),
                    ctx.bins,
                    logfile=t.cluster.logfile,
                    progress=lambda text: line.update(detail=text),
                )
                t.ctx.server_pid = t.cluster.postmaster_pid()
                return result, ""

            self._execute(
                Step(
                    key=f"{t.name}/{wl.name}",
                    kind="durability",
                    label=f"{t.name}: durability, {wl.crashes} x {wl.method}",
                    params={
                        "workload": wl.name,
                        "method": wl.method,
                        "crashes": wl.crashes,
                        "clients": wl.clients,
                        "interval_s": wl.interval_s,
                    },
                    action=action,
                ),
                t,
            )

    def _repeat(
        self,
        live: list[TargetRun],
        make: Callable[[TargetRun, int], Step],
        after: Callable[[TargetRun, Step], None] | None = None,
    ) -> None:
        """Run one point on every target, ``repeat`` times or until the confidence
        interval is narrow enough; rotate the target order every repetition so
        that slow drift of the machine favours no target."""
        pol = self.campaign.policy
        rep = 1
        while live:
            order = live
            if pol.interleave and len(live) > 1:
                shift = (rep - 1) % len(live)
                order = live[shift:] + live[:shift]  # as plan._order shows it
            for t in order:
                step = make(t, rep)
                if step.key not in self.done:
                    self._execute(step, t)
                    if after is not None:
                        after(t, step)
            if rep >= pol.repeat:
                if pol.until_ci_pct is None or rep >= pol.max_repeat:
                    break
                if all(self._ci_ok(make(t, 1).key) for t in live):
                    break
            rep += 1

    def _ci_ok(self, first_key: str) -> bool:
        assert self.study is not None and self.campaign.policy.until_ci_pct is not None
        stem = first_key.rsplit("/r", 1)[0]
        tps = [
            r.result["tps"]
            for r in self.store.runs(self.study.id)
            if r.kind == "pgbench_run"
            and r.key.rsplit("/r", 1)[0] == stem
            and r.status == "ok"
            and r.result
        ]
        if len(tps) < 2:
            return False
        half = stats.ci95_half_width(tps)
        return half / statistics.fmean(tps) * 100 <= self.campaign.policy.until_ci_pct

    # -- one step --------------------------------------------------------

    def _execute(self, step: Step, t: TargetRun, *, record: bool = True) -> bool:
        """Run one step and record it, whatever happens. True if it succeeded.

        A step already recorded (a resumed campaign) is not run again: a run is
        never recorded twice."""
        assert self.study is not None
        if record and step.key in self.done:
            return True
        cluster = t.cluster
        if cluster is not None and t.ctx.conn is not None and not cluster.running():
            # The server died under an earlier step (crash, OOM, someone's kill):
            # bring it back so the campaign goes on, and say so.
            self.ui.warn(f"{t.name}: the server is down ({cluster.log_tail(2)}); restarting it")
            try:
                cluster.restart_after_crash()
                t.ctx.server_pid = cluster.postmaster_pid()
            except PgrigError as exc:
                self.ui.fail(f"{t.name}: could not restart the server: {exc}")
        started = now()
        t0 = time.monotonic()
        status, reason, result, raw = "ok", None, None, ""
        watched: Any = None
        try:
            with self.ui.step(step.label, total=step.total) as line:
                if step.prepare is not None:
                    step.prepare(t.ctx, line)
                started = now()
                if step.monitored and self.campaign.policy.monitor and t.ctx.conn is not None:
                    from pgrig import monitor

                    with monitor.Watch(t.ctx, limits=self._limits(t)) as watch:
                        try:
                            value, raw = step.action(t.ctx, line)
                        finally:
                            watched = watch
                else:
                    value, raw = step.action(t.ctx, line)
            result = to_dict(value)
        except Skip as exc:
            status, reason = "skipped", exc.reason
        except PgrigError as exc:
            status, reason = "failed", str(exc)
            raw = getattr(exc, "stderr", "") or ""
        except KeyboardInterrupt:
            if record:
                self._record(
                    step, t, started, "failed", "interrupted by the user (Ctrl-C)", None, raw
                )
            raise
        except Exception as exc:  # a bug or an unexpected server answer: keep going
            status, reason = "failed", f"{type(exc).__name__}: {exc}"
        if record:
            self._record(step, t, started, status, reason, result, raw)
        elapsed = time.monotonic() - t0
        if status == "ok":
            self.ui.ok(f"{step.label} ({elapsed:.0f} s){_headline(step.kind, result)}")
        elif status == "skipped":
            self.ui.warn(f"{step.label} skipped: {reason}")
        else:
            self.failures += 1
            self.ui.fail(f"{step.label} failed: {reason}")
        if record and watched is not None:
            self._record_monitor(step, t, started, watched, value if status == "ok" else None)
        return status == "ok"

    def _limits(self, t: TargetRun) -> Any:
        """The target's own probe results: what the run is compared with."""
        from pgrig import monitor
        from pgrig.results import typed_result

        if t.limits is None:
            assert self.study is not None
            probes = [
                typed_result(r)
                for r in self.store.runs(self.study.id)
                if r.target == t.name and r.kind in ("fio", "pg_test_fsync")
            ]
            t.limits = monitor.limits_from(p for p in probes if p is not None) or False
        return t.limits or None

    def _record_monitor(
        self, step: Step, t: TargetRun, started: str, watch: Any, value: Any
    ) -> None:
        """What the host and the server did during the run, and the verdict - a
        record of its own, so a failing sampler never costs the run itself."""
        mon = Step(
            key=f"{step.key}/monitor",
            kind="monitor",
            label=f"{step.label}: monitor",
            params={**step.params, "run": step.key},
            action=step.action,
        )
        try:
            observed = watch.result(value)
        except Exception as exc:  # the run is recorded; say why the evidence is missing
            self._record(mon, t, started, "failed", f"{type(exc).__name__}: {exc}", None, "")
            return
        self._record(mon, t, started, "ok", None, to_dict(observed), "")
        verdict = getattr(observed, "verdict", None)
        if verdict is not None:
            self.ui.info(f"  [dim]bottleneck: {getattr(verdict, 'summary', verdict)}[/dim]")

    def _record(
        self,
        step: Step,
        t: TargetRun,
        started: str,
        status: str,
        reason: str | None,
        result: dict[str, Any] | None,
        raw: str,
    ) -> None:
        assert self.study is not None
        tools = (t.env or self.study.environment or _NO_ENV).tools
        self.store.record(
            RunRecord(
                study=self.study.id,
                key=step.key,
                kind=step.kind,
                target=t.name,
                params=step.params,
                status=status,
                reason=reason,
                result=result,
                raw=raw,
                tool_versions={name: tools[name] for name in step.tools if name in tools},
                started_at=started,
                finished_at=now(),
            )
        )
        self.done.add(step.key)


class _NoEnv:
    tools: dict[str, str] = {}


_NO_ENV = _NoEnv()


def _headline(kind: str, result: dict[str, Any] | None) -> str:
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
