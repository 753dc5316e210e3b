"""``pgrig durability``: a one-target campaign of the durability workload on a
throwaway cluster (initdb with data checksums) or, with ``--yes``, an existing
server - recorded, reported and disposed of by the same runner as every study.

Everything that can be refused is refused before anything is created; the
result is recorded before the cluster is removed, and the cluster is kept with
its log when the server did not come back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path

from pgrig import lossyfs
from pgrig.campaign import Campaign, InitdbSpec, TargetSpec
from pgrig.cluster import profiles, workdir
from pgrig.cluster.server import server_os_user
from pgrig.conninfo import Conn
from pgrig.durability import driver
from pgrig.durability.model import KILL_BACKEND, METHOD_TEXT, POWER_LOSS, DurabilityResult
from pgrig.durability.workload import NEEDED_BYTES, DurabilitySpec
from pgrig.errors import PgrigError, UsageError
from pgrig.pgsource import binaries
from pgrig.plan import check_space
from pgrig.policy import RunPolicy
from pgrig.report import samples as report_samples
from pgrig.report.writer import write as write_report
from pgrig.results import Study, typed
from pgrig.runner import CampaignRunner
from pgrig.store import Store, location
from pgrig.ui import Ui

# A torn run's shared_buffers unless --set gives one: the least PostgreSQL takes
# (16 pages), so backends evict dirty data pages - written, not fsynced until the
# next checkpoint - and the power loss has data pages to tear. With the profile's
# buffers every dirty page stayed in memory and only WAL could tear (issue 19.17).
TORN_SHARED_BUFFERS = "128kB"


def study_id() -> str:
    return f"durability-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


class DurabilityFailed(PgrigError):
    """The check ran and found lost commits, a broken invariant or corruption."""


class DurabilityUntested(PgrigError):
    """The check passed, but its crash model cannot test some settings of the run."""


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
    allow_untested: bool = False  # a PASS that cannot speak for some settings still exits 0


@dataclass(frozen=True)
class Outcome:
    study: Study
    result: DurabilityResult | None
    reports: tuple[Path, Path] | None


def preflight(opts: Options) -> None:
    """What the campaign checks cannot know: the crash method against the server."""
    opts.plan.validate()
    if opts.plan.power_loss is not None:
        if opts.dsn is not None:
            raise UsageError(
                "--power-loss with --dsn: pgrig can only cut the power of a cluster it "
                "created on its lossy filesystem",
                hint="drop --dsn to let pgrig create a throwaway cluster on the lossy filesystem",
            )
        lossyfs.require("--power-loss")
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
        binaries.find(opts.pg_bin, tools=binaries.CLIENT_TOOLS)
        return
    bins = binaries.find(opts.pg_bin, tools=binaries.SERVER_TOOLS)
    target = workdir.check_target(opts.target)
    profile = profiles.load(opts.profile).with_overrides(opts.overrides)
    profiles.validate(profile, bins, server_os_user(opts.os_user))
    check_space(target, NEEDED_BYTES, "the durability check", hint="free some space")


def summary(res: DurabilityResult) -> str:
    """Commits, crash model, mode and cycles, for the console."""
    n = len(res.crashes)
    how = METHOD_TEXT.get(res.method, res.method)
    if res.crash_model == POWER_LOSS:
        what = f"{n} power-loss cycle{'s' if n != 1 else ''} ({res.power_loss_mode}, after {how})"
    else:
        what = f"{n} process crash{'es' if n != 1 else ''} ({how})"
    return f"{res.acknowledged:,} acknowledged commits, {what}"


def losses(res: DurabilityResult) -> str:
    """Lost acknowledged commits per crash, and the longest window they covered."""
    counts = [str(c.loss.count if c.loss else 0) for c in res.crashes]
    if res.final_loss is not None:
        counts.append(f"end {res.final_loss.count}")
    text = f"lost per crash: {', '.join(counts) or 'none'}"
    if res.lost:
        text += f"; {res.lost:,} lost in all, within {res.lost_window_ms:,.0f} ms before a crash"
    return text


def campaign(opts: Options) -> Campaign:
    plan = opts.plan
    spec = DurabilitySpec(**asdict(plan))  # the plan's keys are the spec's (``spec.plan``)
    settings = dict(opts.overrides)
    if plan.power_loss == "torn" and opts.dsn is None:
        settings.setdefault("shared_buffers", TORN_SHARED_BUFFERS)
    target = TargetSpec(
        name="local",
        directory=None if opts.dsn is not None else opts.target,
        dsn=opts.dsn,
        pg_bin=opts.pg_bin,
        profile=opts.profile,
        settings=settings,
        initdb=InitdbSpec(data_checksums=True),
        os_user=opts.os_user,
    )
    return Campaign(
        name="durability",
        source="command line",  # its errors name its options (--set, --clients), not a file
        targets=(target,),
        probes=None,
        workloads=(spec,),
        policy=RunPolicy(monitor=False),
        baseline="local",
    )


def open_store(results: Path, where: str | None) -> Store:
    """The results store the check records into (--results, --store)."""
    return Store.open(location(results, where))


def prepare(opts: Options, ui: Ui) -> CampaignRunner:
    """The check's runner, its input validated: before the results store exists
    (`--clients 100000` was refused after pgrig-results was made)."""
    preflight(opts)
    runner = CampaignRunner(
        campaign(opts),
        ui,
        yes=opts.yes,
        keep=opts.keep,
        study_id=study_id(),
        label=str(opts.target) if opts.dsn is None else Conn.from_user(opts.dsn).describe(),
    )
    runner.preflight()
    return runner


def execute(
    opts: Options,
    ui: Ui,
    store: Store,
    results_dir: Path,
    *,
    on_event: driver.EventHook | None = None,
    runner: CampaignRunner | None = None,
) -> Outcome:
    """Run the check, record it and write the report, whatever happens.

    Raises ``DurabilityFailed`` (after recording and reporting) when the check
    failed, ``crasher.ServerLost`` when the server did not come back.
    """
    runner = runner or prepare(opts, ui)
    if opts.plan.power_loss == "torn" and "shared_buffers" not in opts.overrides:
        ui.info(
            f"torn power losses: shared_buffers = {TORN_SHARED_BUFFERS} so that data pages "
            "are written between checkpoints and can tear (--set shared_buffers=... to change)"
        )
    for t in runner.targets:  # a hook, not a parameter: it stays out of the steps
        t.ctx = replace(t.ctx, on_event=on_event)
    try:
        runner.run(store)
    finally:
        reports = None
        if runner.study is not None:
            records, samples, progress = report_samples.read(store, runner.study.id)
            reports = write_report(
                runner.study, records, results_dir, samples=samples, progress=progress
            )
            ui.data(f"report: {reports[0]}")
            ui.data(f"report: {reports[1]}")
    assert runner.study is not None
    (record,) = [r for r in store.runs(runner.study.id) if r.kind == "durability"]
    result = typed(record, DurabilityResult)
    target = runner.targets[0]
    if result is None:
        if target.lost is not None:
            raise target.lost
        raise PgrigError(f"the durability check did not run: {record.reason}")
    if not result.ok:
        # A failure does not make the settings the crash model cannot test any
        # more tested: the console says so, as the report does.
        for setting in result.untested:
            ui.warn(f"NOT TESTED by a {result.crash_model} crash: {setting}")
        raise DurabilityFailed(
            f"the durability check failed ({summary(result)}; {losses(result)}): "
            + " | ".join(result.failures),
            hint=f"details in {reports[0] if reports else 'the report'}",
        )
    if result.untested and not opts.allow_untested:
        raise DurabilityUntested(
            f"no acknowledged commit was lost, but a {result.crash_model} crash cannot test: "
            + " | ".join(result.untested),
            hint=(
                "only a power loss tests these (--power-loss); pass --allow-untested to "
                "accept a process-crash PASS that says nothing about them"
                if result.crash_model != POWER_LOSS
                else "only torn pages test it (--power-loss-mode torn or random-subset); pass "
                "--allow-untested to accept a PASS that says nothing about it"
            ),
        )
    return Outcome(runner.study, result, reports)
