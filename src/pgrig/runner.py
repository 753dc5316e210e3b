"""Runs a campaign: probes, then one server per target, then each workload's
phases with targets interleaved - every step recorded the moment it ends.

Order of business, so that whatever cannot work fails before anything is
created: binaries, directories, profiles, disk space, permission to touch
existing servers (``preflight``); then orphans of killed runs are cleaned up,
the study is opened (or resumed: steps already recorded are not run again)
and the steps run. ``pgrig run``, ``pgrig tpcc study`` and ``pgrig durability``
all come through here; the cluster lifecycle is ``pgrig.lifecycle``, the
recording ``pgrig.recorder``, the repeat policy ``pgrig.policy``, opening or
resuming the study ``pgrig.resume``, the order of the workloads' steps
``pgrig.schedule``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pgrig import (
    calibration,
    environment,
    lifecycle,
    monitor,
    ownership,
    plan,
    probe,
    resume,
    validate,
)
from pgrig.campaign import Campaign
from pgrig.errors import (
    Interrupted,
    PartialFailure,
    PgrigError,
    StoreLocked,
    signal_number,
)
from pgrig.meaning import Meaning
from pgrig.recorder import Recorder, now
from pgrig.registry.target import THIS_MACHINE, Target
from pgrig.report import samples as report_samples
from pgrig.report.monitor import closing_warning
from pgrig.report.writer import write as write_report
from pgrig.results import Study
from pgrig.schedule import Schedule, enter_at_once
from pgrig.step import Step
from pgrig.storage.errors import OptionRefused, StorageError
from pgrig.store import Store
from pgrig.ui import Ui, count, estimate

if TYPE_CHECKING:  # typeshed's name for any dataclass instance: no runtime class
    from _typeshed import DataclassInstance as Result


class CampaignRunner:
    """One campaign's study: its targets checked, built and started, its probes
    and workloads run and recorded, everything stopped and removed after."""

    def __init__(
        self,
        campaign: Campaign,
        ui: Ui,
        *,
        yes: bool = False,
        keep: bool = False,
        study_id: str | None = None,
        label: str | None = None,
        retry_failed: bool = False,
    ) -> None:
        self.campaign = campaign
        self.retry_failed = retry_failed  # run the study's failed steps once more
        self.retry_hint = "pgrig run FILE --retry-failed"  # the command that does (said)
        self.ui = ui
        self.yes = yes
        self.keep = keep
        self.study_id = study_id
        self.label = label  # what the study is "on" (default: the targets)
        self.study: Study | None = None
        self.resumed = False  # the study was in the store before this run (``_open``)
        self.targets: list[Target] = []
        self.plan: plan.Plan | None = None  # what ``preflight`` checked and sized
        self.recorder: Recorder | None = None
        self._planned = (0, 0.0)  # the plan's steps and seconds (``preflight``)
        self._estimated: dict[str, list[dict[str, float]]] = {}  # the estimates they read
        self._refused: list[OptionRefused] = []  # lab options mkfs or the kernel refused
        self._captured = False  # this machine's environment read (``_environment``)
        # A finished campaign run again: every step it expands to, found recorded
        # before anything was started (``_all_recorded``).
        self.recorded_before: list[Step] = []
        # The study's failed steps a plain resume leaves as they are (``_failed_before``)
        self.not_retried: list[str] = []

    @property
    def failures(self) -> int:
        return self.recorder.failures if self.recorder is not None else 0

    # -- checks before anything is created -------------------------------

    def preflight(self, results: Path | None = None, store: Path | str | None = None) -> None:
        """The validation pass ``pgrig plan`` shares (``pgrig.validate``)."""
        # The plan's steps and seconds, said when the study begins; the estimates
        # they come from watched (the machine then is compared with it now).
        with calibration.watching() as self._estimated:
            checked = validate.campaign(self.campaign, yes=self.yes, results=results, store=store)
            overhead = plan.overhead_s(self.campaign) if self.campaign.workloads else 0.0
        self._planned = (checked.steps, checked.seconds + overhead)
        for note in checked.warnings:
            self.ui.warn(note)
        self.targets = checked.targets
        self.plan = checked.plan
        for t in self.targets:  # looked up when used: a target's directory may appear late
            t.ctx = replace(t.ctx, peer=self._peer_directory)

    def _peer_directory(self, name: str) -> Path | None:
        return next((t.directory for t in self.targets if t.name == name), None)

    # -- the campaign ----------------------------------------------------

    def run(self, store: Store) -> Study:
        """Run (or resume) the campaign; call ``preflight`` first to fail before
        the store is created."""
        if not self.targets:
            self.preflight()
        self.study_id = self.study_id or resume.new_study_id(self.campaign.name)
        with ownership.studying(self.study_id):
            self._clean_orphans(self.campaign.name)
            # what the study records of its campaign and targets: made once, for
            # the check that all is recorded and for opening the study
            params = resume.params(self.campaign, self.targets)
            # A study of this id in the store is resumed: its failed steps, and
            # perhaps every step recorded already; a new one has neither. (Every
            # study is read: a damaged one refuses the store before anything is written.)
            found = next((s for s in store.studies() if s.id == self.study_id), None)
            if found is not None:
                self._failed_before(store)
                if (finished := self._all_recorded(store, params)) is not None:
                    return finished
            return self._run(store, params, found)

    def _failed_before(self, store: Store) -> None:
        """The study's failed steps: run again once with ``retry_failed`` (each
        earlier failure kept in the study), else said to be left as they are."""
        assert self.study_id is not None
        failed = resume.failed_steps(store, self.campaign, self.study_id)
        if not failed:
            return
        if self.retry_failed:
            resume.set_aside(store, self.campaign, self.study_id, failed)
            self.ui.info(
                f"retrying {count(len(failed), 'failed step')} of {self.study_id} once "
                "(the earlier failures stay recorded, as KEY/failed-N)"
            )
        else:
            self.not_retried = failed
            self.ui.warn(
                f"{count(len(failed), 'failed step')} of {self.study_id} "
                f"{'is' if len(failed) == 1 else 'are'} not retried; "
                f"`{self.retry_hint}` runs {'it' if len(failed) == 1 else 'them'} once more"
            )

    def _all_recorded(self, store: Store, params: resume.Params) -> Study | None:
        """The study, when every step the campaign expands to is recorded in it
        already (``resume.all_recorded``): then nothing is built, sampled or
        started for it. None when a step is missing."""
        assert self.study_id is not None
        planned = resume.all_recorded(store, self.campaign, self.study_id, params)
        if not planned:
            return None
        self.recorded_before = planned
        self.study = store.study(self.study_id)
        return self.study

    def _clean_orphans(self, campaign: str) -> None:
        """What a killed run of this study left; other studies' orphans are only
        reported (pgrig.ownership): their owner or ``pgrig clean`` removes them."""
        others: list[str] = []
        for line in lifecycle.clean_orphans(campaign, others):
            self.ui.info(line)
        for what in others:
            # "DIR on HOST": a host's, which only `pgrig clean` given the inventory reaches
            remover = "pgrig clean --inventory FILE" if " on " in what else "pgrig clean"
            self.ui.warn(
                f"{what} is left by a pgrig run of another study, which no longer runs; "
                f"`{remover}` removes it"
            )

    def _run(self, store: Store, params: resume.Params, found: Study | None) -> Study:
        study = self._open(store, params, found)
        pol = self.campaign.policy
        rec = self.recorder = Recorder(
            store,
            study,
            self.ui,
            monitor_runs=pol.monitor,
            wait_quiet_s=pol.wait_quiet_s,
            begun=not self.resumed,
        )
        steps, seconds = self._planned
        self.ui.info(
            f"campaign [bold]{study.id}[/bold]: {count(steps, 'step')} on "
            f"{len(self.targets)} target(s), about {estimate(seconds)}; "
            f"results go to {store.path}"
        )
        # The same caution as `pgrig plan`'s: whoever only runs should hear it too.
        if busier := calibration.load_note(self._estimated, calibration.busy()):
            self.ui.warn(busier)
        if self.campaign.workloads:
            for t in self.targets:
                if t.profile is not None:  # an existing server's are known once connected
                    self._say_settings(t, t.profile.settings, t.profile.name)
        planned = self.plan
        assert planned is not None  # made by ``preflight``: the plan it checked and sized
        status = "failed"
        try:
            with contextlib.ExitStack() as built:
                self._storage(built, rec, planned)
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
                if len(self.targets) > 1 or not self.campaign.workloads:
                    self._environment(rec)  # the study's, beside each target's (or alone)
                if pol.monitor and self.campaign.workloads and self._served_here():
                    rec.baseline = self._idle_baseline()
                self._probes(rec)
                if self.campaign.workloads and self.targets:
                    with self._servers(rec):
                        schedule = Schedule(pol, rec, self.ui, self.campaign.baseline)
                        for phase in planned.phases:
                            schedule.phase(phase, self.targets)
                self._end(rec, planned)
            status = "finished"
        except (KeyboardInterrupt, StoreLocked):  # a lock is no fault of the study's
            status = "interrupted"
            raise
        finally:
            # a study whose server never came up still says where it ran (the
            # recorder holds the study as stored: every environment goes through it)
            unsaid = status != "interrupted" and self.targets and not self._captured
            if unsaid and rec.study.environment is None:
                self._environment(rec)
            store.finish_study(study.id, status, now())
            self.study = store.study(study.id)
        return self.study

    def _environment(self, rec: Recorder) -> None:
        """This machine's environment as the study's, read once, after the
        targets' storage is built (its filesystems are what it describes). A
        study of one target and its workloads takes its server's
        (``TargetKind.server`` reads it where the server runs, ``_servers``
        stores it), so this one is read only when something needs it: a probe
        recorded before the server (the recorder takes its tools' versions
        from it), several targets (the study's beside each one's), no workload
        (no server), or a server that never came up."""
        if self._captured:
            return
        self._captured = True
        with self.ui.step("capturing the environment"):
            dirs = list(dict.fromkeys(t.directory for t in self.targets if t.directory))
            env = environment.capture(
                dirs or [Path.cwd()],
                bin_dir=self.targets[0].bins.bin_dir,
                locate=self.targets[0].bins.path,
            )
        rec.record_environment(env)

    def _end(self, rec: Recorder, planned: plan.Plan) -> None:
        """Each target's step at the end of the study (its emulated disks measured
        again), once its server is gone and before its storage is removed."""
        for t in self.targets:
            if (step := planned.targets[t.name].end) is not None:
                t.ctx = replace(t.ctx, conn=None)  # its server is gone: none to revive or pulse
                rec.execute(step, t)

    def _served_here(self) -> bool:
        """Does a target's server run on this machine? The idle baseline samples
        this machine, which says nothing of a server another host runs (its
        runs are watched there, ``Context.sampling``)."""
        return any(THIS_MACHINE in t.machines for t in self.targets)

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

    def _open(self, store: Store, params: resume.Params, found: Study | None = None) -> Study:
        """Begin the study, or resume ``found``, the study of this id the store
        held when the run began (``resume.open_study``)."""
        opened = resume.open_study(
            store, self.campaign, self.targets, self.study_id, found, params, self.ui, on=self.label
        )
        self.study, self.resumed = opened.study, opened.resumed
        return self.study

    # -- storage, probes and servers ----------------------------------------

    def _storage(self, stack: contextlib.ExitStack, rec: Recorder, planned: plan.Plan) -> None:
        """Build the storage of every target whose kind builds it (a recorded
        step each); a target whose storage cannot be built here is left out of
        the rest of the study."""
        kept = []
        for t in self.targets:
            step = planned.targets[t.name].build
            if step is None:
                self._build(stack, t)  # nothing recorded: a kind's setup without a build (a host's)
                kept.append(t)
                continue
            t.ctx = replace(t.ctx, build=partial(self._build, stack, t))
            try:
                built = rec.execute(step, t, record=step.id not in rec.done)
            finally:  # built once: no later step may enter it again
                t.ctx = replace(t.ctx, build=None)
            if built:
                kept.append(t)
            else:
                self.ui.fail(f"{t.name}: left out of this study (its storage could not be built)")
        self.targets = kept

    def _build(self, stack: contextlib.ExitStack, t: Target) -> tuple[Result, str]:
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
        if any(steps for _, steps in per_target):
            self._environment(rec)
        # Probe by probe, target after target: the same probe runs close in time.
        for i in range(max((len(steps) for _, steps in per_target), default=0)):
            for t, steps in per_target:
                if i < len(steps):
                    rec.execute(steps[i], t)

    @contextlib.contextmanager
    def _servers(self, rec: Recorder) -> Iterator[None]:
        """Every target's server up for the ``with`` block; each one's environment
        (read where it runs) recorded in the study (``Recorder.server_up``)."""
        study = rec.study
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
                enter_at_once(stack, servers)
            else:
                for server in servers:
                    stack.enter_context(server)
            for t in self.targets:
                env = rec.server_up(t, alone=not multi)
                assert env is not None  # read as it came up (``TargetKind.server``)
                if t.profile is None and env.postgres is not None:
                    self._say_settings(t, env.postgres.settings, None)
            yield

    def _say_settings(self, t: Target, settings: dict[str, str], profile: str | None) -> None:
        """What the numbers will mean, before the user waits for them."""
        line, notes = Meaning.of(settings, profile).said(t.name)
        self.ui.info(line)
        for note in notes:
            self.ui.info(f"  [yellow]note:[/yellow] {note}")


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
    retry_failed: bool = False,
    retry_hint: str | None = None,
) -> CampaignRunner:
    """Check, run (or resume) and report a campaign - the front door every
    command shares. The report of what finished is written even after Ctrl-C,
    which then raises ``Interrupted``."""
    t0, machine = time.monotonic(), calibration.busy()
    runner = CampaignRunner(
        camp, ui, yes=yes, keep=keep, study_id=study_id, label=label, retry_failed=retry_failed
    )
    if retry_hint:
        runner.retry_hint = retry_hint
    runner.preflight(results, store)  # bad input fails here, before anything is created
    with Store.open(store) as st:
        interrupted: KeyboardInterrupt | None = None
        try:
            runner.run(st)
        except KeyboardInterrupt as exc:
            interrupted = exc
        except BaseException:
            # the report of what is recorded, but never in place of the error (a full
            # disk said only "cannot write the report" when the store was full)
            if runner.study is not None:
                with contextlib.suppress(PgrigError):
                    _report(runner, runner.study, st, results, ui)
            raise
        if runner.study is not None:
            _report(runner, runner.study, st, results, ui)
            # the exit code says what the store holds: a failure this resume did not
            # run again is still the study's (it read exit 0 after a read-only fault)
            still = set(resume.failed_steps(st, camp, runner.study.id))
            earlier = [key for key in runner.not_retried if key in still]
        else:
            earlier = []
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
    read_only = runner.recorder.read_only if runner.recorder is not None else {}
    skipped = "".join(
        f"; {name}: {count(n, 'step')} skipped, its filesystem read-only ({path})"
        for name, (path, n) in read_only.items()
        if n
    )
    if runner.failures or earlier:
        failed = [f"{runner.failures} step(s) failed"] if runner.failures else []
        if earlier:
            failed.append(
                f"{count(len(earlier), 'step')} failed in an earlier run, not retried "
                "(the study keeps the failure)"
            )
        raise PartialFailure(
            f"{'; '.join(failed)}; the others are recorded{skipped}",
            hint="the report gives each failure's reason"
            + (f"; after fixing them, `{retry_hint}` runs them again" if retry_hint else "")
            + (
                f"; once the filesystem is writable again, {resume_hint} (the skipped steps)"
                if skipped and resume_hint
                else ""
            ),
        )
    return runner


def _report(runner: CampaignRunner, study: Study, st: Store, results: Path, ui: Ui) -> None:
    """The report of what is recorded, written at the end of every run (after
    Ctrl-C too); what to read first said last."""
    # each run's samples and -P points are read when it is drawn
    records, samples, progress = report_samples.read(st, study.id)
    md, html = write_report(study, records, results, samples=samples, progress=progress)
    if closing := closing_warning(records):
        ui.warn(closing)  # the last word before anyone quotes the numbers
    ui.data(f"report: {md}")
    ui.data(f"report: {html}")
    if runner.recorded_before:
        measured = sum(1 for step in runner.recorded_before if step.monitored)
        ui.info(
            f"all {len(runner.recorded_before)} steps of {runner.campaign.name} "
            f"({measured} measured runs) are recorded in {st.path}; nothing to do; "
            f"the report: {md}"
        )
