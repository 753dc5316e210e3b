"""The order a campaign's workload steps run in: each phase's data on every
target, then its series point by point - every target before the next point,
the target order rotated every repetition, repeated as the policy says; with
``concurrent = true`` the targets' points run at once, in threads of their own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import wait
from functools import partial
from typing import Any

from pgrig import proc, workdb
from pgrig.policy import RunPolicy
from pgrig.proc import threads_cancelled
from pgrig.recorder import Recorder, StartTogether
from pgrig.registry.target import Target
from pgrig.registry.workload import Phase, Series
from pgrig.step import Step
from pgrig.ui import Ui


class Schedule:
    """Runs the phases of a campaign's workloads on its live targets."""

    def __init__(
        self, policy: RunPolicy, recorder: Recorder, ui: Ui, baseline: str | None = None
    ) -> None:
        self.policy = policy
        self.rec = recorder
        self.ui = ui
        self.baseline = baseline  # what ``until_diff_pct`` measures each difference against

    def phase(self, phase: Phase, targets: Sequence[Target]) -> None:
        """Data on every target that still needs it, then every series."""
        pol, rec = self.policy, self.rec
        live = []
        for t in targets:
            data = list(phase.data(t))
            # A resumed campaign may have all of it; the series' steps are made to
            # ask only when the data is recorded (a new study's is not), and the
            # policy whether it may add repeats only when they all are.
            minimum = (
                step
                for series in phase.series
                for r in range(1, (pol.repeat if series.repeated else 1) + 1)
                for step in _with_after(series, t, r)
            )
            if not (
                rec.recorded.pending(data)
                or rec.recorded.pending(minimum)
                or (pol.adaptive and any(s.repeated for s in phase.series))
            ):
                continue
            if self._data(t, data):
                live.append(t)
        for series in phase.series:
            self._series(series, live)

    def _data(self, t: Target, steps: Sequence[Step]) -> bool:
        """Create the dataset (load or setup, then counts and checks); True if it
        is there. On a resumed campaign the data of a killed run is gone with its
        cluster, so the load runs again - but is recorded only once."""
        rec = self.rec
        for step in steps:
            if step.creates_data:
                if not rec.execute(step, t, record=step.id not in rec.done):
                    if t.name not in rec.read_only:  # said once for all its steps
                        self.ui.fail(f"{t.name}: no data; skipping its runs of this workload")
                    return False
                if self.policy.reset == "restore":
                    with self.ui.step(f"{t.name}: saving a pristine copy for reset = restore"):
                        workdb.save_pristine(t.ctx)
            else:
                rec.execute(step, t)
        return True

    def _series(self, series: Series, live: list[Target]) -> None:
        """One point on every target, repeated as the policy says: ``repeat``
        times, or until the confidence interval of its headline figure (or of
        its differences to the baseline) is narrow enough - within ``max_repeat``
        and the plan's time for that many; the target order rotates every
        repetition."""
        pol, rec = self.policy, self.rec
        rep = 1
        started = time.monotonic()
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
            samples = [
                rec.recorded.metrics((series.make(t, r) for r in range(1, rep + 1)),
                                     disturbed=pol.until_decided)
                for t in live
            ]  # fmt: skip
            names = [t.name for t in live]
            estimate = sum(series.make(t, rep).estimate_s for t in live)
            more = pol.more(
                rep,
                samples,
                baseline=names.index(self.baseline) if self.baseline in names else 0,
                elapsed_s=time.monotonic() - started,
                rep_estimate_s=0.0 if pol.concurrent else estimate,
            )
            if not more:
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
    with proc.ContextPool(max_workers=len(points), thread_name_prefix="pgrig-target") as pool:
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


def enter_at_once(stack: contextlib.ExitStack, managers: Sequence[Any]) -> None:
    """Enter every context manager in a thread of its own; each one entered is
    on ``stack`` (left in reverse), and the first failure is raised once all ended."""
    with proc.ContextPool(max_workers=len(managers), thread_name_prefix="pgrig-up") as pool:
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
