"""Runs a campaign: probes, then one server per target, then each workload's
phases with targets interleaved - every step recorded the moment it ends.

Order of business, so that whatever cannot work fails before anything is
created: binaries, directories, profiles, disk space, permission to touch
existing servers (``preflight``); then orphans of killed runs are cleaned up,
the study is opened (or resumed: steps already recorded are not run again)
and the steps run. ``pgrig run``, ``pgrig tpcc study`` and ``pgrig durability``
all come through here; the cluster lifecycle is ``pgrig.lifecycle``, the
recording ``pgrig.recorder``, the repeat policy ``pgrig.policy``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from pgrig import (
    __version__,
    calibration,
    campaign,
    environment,
    lifecycle,
    monitor,
    ownership,
    plan,
    probe,
    registry,
    validate,
    workdb,
)
from pgrig.campaign import Campaign
from pgrig.errors import (
    Interrupted,
    PartialFailure,
    PgrigError,
    StudyExists,
    UsageError,
    WorkdirError,
    signal_number,
)
from pgrig.meaning import Meaning
from pgrig.proc import pid_alive, threads_cancelled
from pgrig.recorder import Recorder, StartTogether, now
from pgrig.registry.target import Target
from pgrig.registry.workload import Phase, Series
from pgrig.report import samples as report_samples
from pgrig.report.monitor import closing_warning
from pgrig.report.writer import write as write_report
from pgrig.results import Study
from pgrig.step import Step
from pgrig.storage.errors import OptionRefused, StorageError
from pgrig.store import Store
from pgrig.ui import Ui, count, estimate


def new_study_id(name: str) -> str:
    return f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def study_live(study: Study) -> bool:
    """True while the pgrig that runs the study lives (on this host; a study of
    another host in a shared store is taken at its word)."""
    pid, env = study.params.get("pid"), study.environment
    if study.status != "running":
        return False
    if not isinstance(pid, int):  # recorded by an older pgrig: take it at its word
        return True
    if env is not None and env.hostname != socket.gethostname():
        return True
    return pid != os.getpid() and pid_alive(pid)


def planned_steps(study: Study) -> set[str] | None:
    """The step keys of the study's plan, read from its campaign file if that
    still holds the campaign of this name; None where it is unknown (a quick
    study, a file moved, renamed or no longer valid)."""
    path = study.params.get("campaign_file")
    if not isinstance(path, str) or not Path(path).is_file():
        return None
    try:
        camp = campaign.load(Path(path))
    except PgrigError:
        return None
    return plan.step_ids(camp) if camp.name == study.params.get("campaign") else None


def _comparable(value: Any) -> Any:
    """A params value as the store gives it back (JSON), minus what changes
    between two runs of the same campaign on the same machine."""
    value = json.loads(json.dumps(value, sort_keys=True, default=str))
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                item.pop("adapted", None)
    return value


def _first_difference(before: Any, after: Any, path: str = "") -> str | None:
    """Where two params first differ, for the message (``targets[0].directory:
    '/a' then, '/b' now``); None when they agree. A key only one side has is no
    difference: a newer pgrig records more than the one that began the study."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) & set(after)):
            found = _first_difference(before[key], after[key], f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            found = _first_difference(b, a, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if before == after or before is None:
        return None  # None: a study begun before pgrig recorded this at all
    return f"{path.lstrip('.') or 'value'}: {before!r} then, {after!r} now"


class CampaignRunner:
    def __init__(
        self,
        campaign: Campaign,
        ui: Ui,
        *,
        yes: bool = False,
        keep: bool = False,
        study_id: str | None = None,
        label: str | None = None,
    ) -> None:
        self.campaign = campaign
        self.ui = ui
        self.yes = yes
        self.keep = keep
        self.study_id = study_id
        self.label = label  # what the study is "on" (default: the targets)
        self.study: Study | None = None
        self.targets: list[Target] = []
        self.recorder: Recorder | None = None
        self._refused: list[OptionRefused] = []  # lab options mkfs or the kernel refused
        # A finished campaign run again: every step it expands to, found recorded
        # before anything was started (``_all_recorded``).
        self.recorded_before: list[Step] = []

    @property
    def failures(self) -> int:
        return self.recorder.failures if self.recorder is not None else 0

    # -- checks before anything is created -------------------------------

    def preflight(self, results: Path | None = None, store: Path | str | None = None) -> None:
        """The validation pass ``pgrig plan`` shares (``pgrig.validate``)."""
        checked = validate.campaign(self.campaign, yes=self.yes, results=results, store=store)
        for note in checked.warnings:
            self.ui.warn(note)
        self.targets = checked.targets
        for t in self.targets:  # looked up when used: a target's directory may appear late
            t.ctx.peer = self._peer_directory

    def _peer_directory(self, name: str) -> Path | None:
        return next((t.directory for t in self.targets if t.name == name), None)

    # -- the campaign ----------------------------------------------------

    def run(self, store: Store) -> Study:
        """Run (or resume) the campaign; call ``preflight`` first to fail before
        the store is created."""
        if not self.targets:
            self.preflight()
        self.study_id = self.study_id or new_study_id(self.campaign.name)
        with ownership.studying(self.study_id):
            self._clean_orphans(self.campaign.name)
            return self._all_recorded(store) or self._run(store)

    def _all_recorded(self, store: Store) -> Study | None:
        """The study, when every step the campaign expands to (builds, probes,
        loads, measured runs and what follows them: ``plan.steps``, the runner's
        own order) is recorded in it already - as a resume would find, any status
        counting as done. Then nothing is built, sampled or started for it. None
        when a step is missing, or when repeats go on until a confidence interval
        is met (how many, only the recorded runs' figures can say: the resume decides)."""
        sid = self.study_id
        if self.campaign.policy.until_ci_pct is not None or sid is None:
            return None
        if not any(s.id == sid for s in store.studies()):
            return None
        self._check_resume(store.study(sid), self._params(), store)  # the resume's refusals
        planned = [step for _view, step in plan.steps(self.campaign)]
        recorded = store.keys(sid)
        if not planned or any(step.id not in recorded for step in planned):
            return None
        if store.study(sid).status != "finished":  # killed after its last step: now it is
            store.finish_study(sid, "finished", now())
        self.recorded_before = planned
        self.study = store.study(sid)
        return self.study

    def _clean_orphans(self, campaign: str) -> None:
        """What a killed run of this study left; other studies' orphans are only
        reported (pgrig.ownership): their owner or ``pgrig clean`` removes them."""
        others: list[str] = []
        for line in lifecycle.clean_orphans(campaign, others):
            self.ui.info(line)
        for what in others:
            self.ui.warn(
                f"{what} is left by a killed pgrig run of another study; `pgrig clean` removes it"
            )

    def _run(self, store: Store) -> Study:
        study = self._open(store)
        pol = self.campaign.policy
        rec = self.recorder = Recorder(
            store, study, self.ui, monitor_runs=pol.monitor, wait_quiet_s=pol.wait_quiet_s
        )
        with calibration.watching() as seen:
            expansion = plan.expand(self.campaign)
        self.ui.info(
            f"campaign [bold]{study.id}[/bold]: {count(len(expansion.runs), 'step')} on "
            f"{len(self.targets)} target(s), about {estimate(expansion.total_s)}; "
            f"results go to {store.path}"
        )
        # The same caution as `pgrig plan`'s: whoever only runs should hear it too.
        if busier := calibration.load_note(seen, calibration.busy()):
            self.ui.warn(busier)
        if self.campaign.workloads:
            for t in self.targets:
                if t.profile is not None:  # an existing server's are known once connected
                    self._say_settings(t, t.profile.settings, t.profile.name)
        status = "failed"
        try:
            with contextlib.ExitStack() as built:
                self._storage(built, rec)
                if not self.targets and self._refused:
                    refused = self._refused[0]
                    raise OptionRefused(
                        f"no target is left to study: {refused.message}",
                        options=refused.options,
                        kernel_messages=refused.kernel_messages,
                        hint=refused.hint or "drop or change the refused option (above)",
                    )
                if not self.targets:
                    raise StorageError(
                        "no target is left to study: the storage of every target could not "
                        "be built here (the reasons are above and recorded in the study)",
                        hint="see docs/storage-lab.md for what the lab needs (root, loop "
                        "devices, mkfs.xfs/mkfs.ext4, cgroup controllers)",
                    )
                with self.ui.step("capturing the environment"):
                    dirs = list(dict.fromkeys(t.directory for t in self.targets if t.directory))
                    env = environment.capture(
                        dirs or [Path.cwd()],
                        bin_dir=self.targets[0].bins.bin_dir,
                        locate=self.targets[0].bins.path,
                    )
                store.set_environment(study.id, env)
                rec.study = store.study(study.id)
                if pol.monitor and self.campaign.workloads and self.targets:
                    rec.baseline = self._idle_baseline()
                self._probes(rec)
                if self.campaign.workloads and self.targets:
                    with self._servers(store, study):
                        for phase in plan.phases(self.campaign):
                            self._phase(phase, rec)
            status = "finished"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            store.finish_study(study.id, status, now())
            self.study = store.study(study.id)
        return self.study

    def _idle_baseline(self) -> monitor.IdleBaseline:
        """A few seconds of the machine before anything of ours runs: what the
        measured runs' interference is judged against."""
        with self.ui.step("sampling the idle machine (3 s)"):
            baseline = monitor.idle_baseline(3.0, target=self.targets[0].directory)
        if monitor.baseline_busy(baseline):
            who = ", ".join(p.name for p in baseline.top[:3])
            self.ui.warn(
                f"the machine is busy before the study: other processes take "
                f"{baseline.other_pct:.0f}% of the CPUs ({who}); runs they disturb are marked, "
                "and numbers from a shared machine vary - see wait_quiet in docs/campaigns.md"
            )
        return baseline

    def _open(self, store: Store) -> Study:
        camp = self.campaign
        sid = self.study_id or new_study_id(camp.name)
        params = self._params()
        for attempt in range(2, 100):
            if any(s.id == sid for s in store.studies()):
                if self.study_id is None:  # a new study whose id another pgrig took
                    sid = f"{new_study_id(camp.name)}-{attempt}"
                    continue
                self._check_resume(store.study(sid), params, store)
                store.set_status(sid, "running")
                planned = plan.step_ids(camp)
                done = len(planned & store.keys(sid))
                self.ui.info(
                    f"resuming [bold]{sid}[/bold]: {done} of {len(planned)} steps already recorded"
                )
                break
            try:
                store.begin_study(
                    Study(
                        id=sid,
                        name=camp.name,
                        target=self.label or self._label(),
                        started_at=now(),
                        status="running",
                        params=params,
                        pgrig_version=__version__,
                    )
                )
                break
            except StudyExists:
                continue  # begun by another pgrig since we looked: look again
        self.study = store.study(sid)
        return self.study

    def _check_resume(self, old: Study, params: dict[str, Any], store: Store) -> None:
        """Resume only our own, idle study: one another pgrig is running is left
        alone (and never marked failed), and one that measured other targets or
        other parameters never gets runs of this campaign mixed in."""
        pid = old.params.get("pid")
        if study_live(old):
            raise WorkdirError(
                f"study {old.id} in {store.path} is being run by pgrig process {pid}",
                hint="wait for it to finish, or run this one with another --results",
            )
        for key in ("targets", "workloads", "policy", "baseline"):
            before, now_ = _comparable(old.params.get(key)), _comparable(params.get(key))
            difference = _first_difference(before, now_)
            if difference is not None:
                raise UsageError(
                    f"study {old.id} in {store.path} was recorded with other {key} "
                    f"({difference}); resuming it would mix their runs"
                    + (f" (it came from {old.params.get('source')})" if key == "targets" else ""),
                    hint="give the campaign another name, or pass another --results",
                )

    def _label(self) -> str:
        if len(self.targets) != 1:
            return ", ".join(t.name for t in self.targets)
        only = self.targets[0]
        return only.kind.label(only)

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
            info.update(t.kind.describe(t))
            info["pg_version"] = t.bins.version
            info["pg_bin"] = str(t.bins.bin_dir)
            targets.append(info)
        params["targets"] = targets
        if Path(camp.source).is_file():  # not a study made on the command line
            # where `pgrig list` finds the plan again, from any directory
            params["campaign_file"] = str(Path(camp.source).resolve())
        if len(self.targets) == 1:  # the single-target summary the report shows first
            t = self.targets[0]
            params["profile"] = t.spec.profile
            params["pg_version"] = t.bins.version
        params["workloads"] = [registry.of(w).describe(w) for w in camp.workloads]
        return params

    # -- storage, probes and servers ----------------------------------------

    def _storage(self, stack: contextlib.ExitStack, rec: Recorder) -> None:
        """Build the storage of every target whose kind builds it (a recorded
        step each); a target whose storage cannot be built here is left out of
        the rest of the study."""
        kept = []
        for t in self.targets:
            step = lifecycle.build_step(t)
            if step is None:
                self._build(stack, t)  # nothing recorded: a kind's setup without a build (a host's)
                kept.append(t)
                continue
            t.ctx.build = partial(self._build, stack, t)
            try:
                built = rec.execute(step, t, record=step.id not in rec.done)
            finally:
                t.ctx.build = None  # built once: no later step may enter it again
            if built:
                kept.append(t)
            else:
                self.ui.fail(f"{t.name}: left out of this study (its storage could not be built)")
        self.targets = kept

    def _build(self, stack: contextlib.ExitStack, t: Target) -> tuple[Any, str]:
        """The target's storage, entered on ``stack`` for the rest of the study:
        what its build step's action (``Context.build``) runs."""
        try:
            return stack.enter_context(lifecycle.storage(t, self.ui, keep=self.keep)), ""
        except OptionRefused as exc:  # the user's option: exit 2 if nothing is left
            self._refused.append(exc)
            raise

    def _probes(self, rec: Recorder) -> None:
        if self.campaign.probes is None:
            return
        per_target = [
            (t, probe.steps(self.campaign.probes, t.name, where))
            for t in self.targets
            if (where := t.probe_directory) is not None
        ]
        # Probe by probe, target after target: the same probe runs close in time.
        for i in range(max((len(steps) for _, steps in per_target), default=0)):
            for t, steps in per_target:
                if i < len(steps):
                    rec.execute(steps[i], t)

    @contextlib.contextmanager
    def _servers(self, store: Store, study: Study) -> Iterator[None]:
        multi = len(self.targets) > 1
        with contextlib.ExitStack() as stack:
            servers = [
                lifecycle.server(
                    t, f"pgrig-{study.id}" + (f"-{t.name}" if multi else ""), study.id, self.ui,
                    keep=self.keep,
                )
                for t in self.targets
            ]  # fmt: skip
            if self.campaign.policy.concurrent:  # on machines of their own: started together
                _enter_at_once(stack, servers)
            else:
                for server in servers:
                    stack.enter_context(server)
            for t in self.targets:
                assert t.env is not None
                if t.profile is None and t.env.postgres is not None:
                    self._say_settings(t, t.env.postgres.settings, None)
                if multi:
                    store.set_target_environment(study.id, t.name, t.env)
                else:
                    store.set_environment(study.id, t.env)
            if self.recorder is not None:
                self.recorder.study = store.study(study.id)
            yield

    def _say_settings(self, t: Target, settings: dict[str, str], profile: str | None) -> None:
        """What the numbers will mean, before the user waits for them."""
        meaning = Meaning.of(settings, profile)
        self.ui.info(f"{t.name}: {meaning.line()}")
        for caveat in meaning.caveats():
            self.ui.info(f"  [yellow]note:[/yellow] read-write tps with {caveat}")

    # -- workloads ---------------------------------------------------------

    def _phase(self, phase: Phase, rec: Recorder) -> None:
        """Data on every target that still needs it, then every series."""
        pol = self.campaign.policy
        live = []
        for t in self.targets:
            data = list(phase.data(t))
            minimum = [
                step
                for series in phase.series
                for r in range(1, (pol.repeat if series.repeated else 1) + 1)
                for step in _with_after(series, t, r)
            ]
            extends = pol.until_ci_pct is not None and any(s.repeated for s in phase.series)
            if not (rec.pending(data) or rec.pending(minimum) or extends):
                continue  # a resumed campaign that already has all of it
            if self._data(t, data, rec):
                live.append(t)
        for series in phase.series:
            self._series(series, live, rec)

    def _data(self, t: Target, steps: Sequence[Step], rec: Recorder) -> bool:
        """Create the dataset (load or setup, then counts and checks); True if it
        is there. On a resumed campaign the data of a killed run is gone with its
        cluster, so the load runs again - but is recorded only once."""
        for step in steps:
            if step.creates_data:
                if not rec.execute(step, t, record=step.id not in rec.done):
                    self.ui.fail(f"{t.name}: no data; skipping its runs of this workload")
                    return False
                if self.campaign.policy.reset == "restore":
                    with self.ui.step(f"{t.name}: saving a pristine copy for reset = restore"):
                        workdb.save_pristine(t.ctx)
            else:
                rec.execute(step, t)
        return True

    def _series(self, series: Series, live: list[Target], rec: Recorder) -> None:
        """One point on every target, repeated as the policy says: ``repeat``
        times, or until the confidence interval of its headline figure is narrow
        enough; the target order rotates every repetition."""
        pol = self.campaign.policy
        rep = 1
        while live:
            order = pol.order(live, rep)
            if pol.concurrent and len(order) > 1:
                running = [t for t in order if series.make(t, rep).id not in rec.done]
                together = StartTogether(len(running)) if len(running) > 1 else None
                _at_once([partial(_point, series, t, rep, rec, together) for t in order], together)
            else:
                for t in order:
                    _point(series, t, rep, rec)
            if not series.repeated:
                break
            samples = [rec.metrics(series.make(t, r) for r in range(1, rep + 1)) for t in live]
            if not pol.more(rep, samples):
                break
            rep += 1


def _point(
    series: Series, t: Target, rep: int, rec: Recorder, together: StartTogether | None = None
) -> None:
    """One repetition of a point on one target, and what follows it; ``together``:
    its measured run starts with the other targets' (``concurrent = true``)."""
    run = series.make(t, rep)
    if run.id not in rec.done:
        rec.execute(run, t, together=together)
        for after in series.after(t, run):
            rec.execute(after, t)


def _at_once(points: Sequence[Callable[[], None]], together: StartTogether | None = None) -> None:
    """``concurrent = true``: the targets' points in threads of their own, started
    together (each target on machines of its own: ``lifecycle.check_concurrent``).
    A step's failure is recorded by the recorder; what escapes it (Ctrl-C in the
    main thread, a bug) is raised once every thread has ended. Ctrl-C or SIGTERM
    reach the main thread only: it stops the other threads' tools (remote ones
    too) rather than waiting for their runs to end."""
    with ThreadPoolExecutor(max_workers=len(points), thread_name_prefix="pgrig-target") as pool:
        futures = [pool.submit(p) for p in points]
        try:
            wait(futures)
        except BaseException:
            if together is not None:  # a thread waiting for the others must not wait on
                together.leave()
            with threads_cancelled():
                wait(futures)
            raise
    for f in futures:
        f.result()


def _enter_at_once(stack: contextlib.ExitStack, managers: Sequence[Any]) -> None:
    """Enter every context manager in a thread of its own; each one entered is
    on ``stack`` (left in reverse), and the first failure is raised once all ended."""
    with ThreadPoolExecutor(max_workers=len(managers), thread_name_prefix="pgrig-up") as pool:
        futures = [pool.submit(m.__enter__) for m in managers]
        wait(futures)
    failed = None
    for m, f in zip(managers, futures, strict=True):
        if f.exception() is None:
            stack.push(m.__exit__)
        elif failed is None:
            failed = f.exception()
    if failed is not None:
        raise failed


def _with_after(series: Series, t: Target, rep: int) -> list[Step]:
    run = series.make(t, rep)
    return [run, *series.after(t, run)]


def run_campaign(
    camp: Campaign,
    ui: Ui,
    *,
    results: Path,
    store: Path | str,
    yes: bool,
    keep: bool,
    study_id: str | None = None,
    resume_hint: str | None = None,
    label: str | None = None,
) -> CampaignRunner:
    """Check, run (or resume) and report a campaign - the front door every
    command shares. The report of what finished is written even after Ctrl-C,
    which then raises ``Interrupted``."""
    t0, machine = time.monotonic(), calibration.busy()
    runner = CampaignRunner(camp, ui, yes=yes, keep=keep, study_id=study_id, label=label)
    runner.preflight(results, store)  # bad input fails here, before anything is created
    with Store.open(store) as st:
        interrupted: KeyboardInterrupt | None = None
        try:
            runner.run(st)
        except KeyboardInterrupt as exc:
            interrupted = exc
        finally:
            if runner.study is not None:
                # each run's samples and -P points are read when it is drawn
                records, samples, progress = report_samples.read(st, runner.study.id)
                md, html = write_report(
                    runner.study, records, results, samples=samples, progress=progress
                )
                if closing := closing_warning(records):
                    ui.warn(closing)  # the last word before anyone quotes the numbers
                ui.data(f"report: {md}")
                ui.data(f"report: {html}")
                if runner.recorded_before:
                    measured = sum(1 for step in runner.recorded_before if step.monitored)
                    ui.info(
                        f"all {len(runner.recorded_before)} steps of {camp.name} "
                        f"({measured} measured runs) are recorded in {st.path}; nothing to do; "
                        f"the report: {md}"
                    )
    done = runner.study is not None and runner.study.status == "finished"
    # (targets measured at once overlap their steps: no overhead to tell apart)
    if (
        interrupted is None
        and runner.recorder is not None
        and done
        and not runner.recorded_before  # a run that measured nothing has no overhead to tell
        and not camp.policy.concurrent
    ):
        # what the plan adds beside the steps, as this machine measured it
        overhead = time.monotonic() - t0 - runner.recorder.busy_s
        calibration.record_on(plan.OVERHEAD_KIND, camp.name, len(camp.targets), overhead, machine)
    if interrupted is not None:
        raise Interrupted(
            "interrupted: the running tool and the clusters were stopped; "
            "finished results are kept" + (f"; {resume_hint}" if resume_hint else ""),
            signum=signal_number(interrupted),
        )
    if runner.failures:
        raise PartialFailure(
            f"{runner.failures} step(s) failed; the others are recorded",
            hint="the report gives each failure's reason"
            + (f"; {resume_hint} after fixing them" if resume_hint else ""),
        )
    return runner
