"""Tests that judge CPU shares, I/O rates or latencies ask pgrig's own monitor
whether other processes disturbed what they measured, and never read a ratio
as pgrig's defect when another process took the CPU or the disk.

    value = undisturbed(lambda: measure(), watched_by(target))   # a measurement in this process
    value = undisturbed(measure, unless_met(watched_by(target), ok))  # disturbed and short only
    study = undisturbed(lambda: run_study(), study_disturbance)  # a study with its monitor on
    quiet_first(target)   # before a test's own hog: the monitor must be able to name it

A disturbed measurement is thrown away and made again, at most ``ATTEMPTS``
times, each repeat after a (bounded) wait for the machine to quiet down; when every one was
disturbed the test is skipped with the monitor's own reasons - the property
was not judged, which is not the same as held or broken. An undisturbed one is
returned for the test to judge as it would on a quiet machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from pgrig import monitor, registry
from pgrig.hosts.local import HERE
from pgrig.monitor import interference
from pgrig.monitor.model import MonitorResult
from pgrig.monitor.sampling import ProcessesHere
from pgrig.monitor.watched import HostSampling
from pgrig.store import Store

if TYPE_CHECKING:
    from pgrig.conninfo import Conn
    from pgrig.hosts.executor import Executor
    from pgrig.monitor.verdict import Finding

T = TypeVar("T")
ATTEMPTS = 3
QUIET_WAIT_S = 20.0  # before a repeat: the longest wait for the machine to quiet down


def undisturbed(
    measure: Callable[[], T],
    disturbed: Callable[[Callable[[], T]], tuple[T, str | None]],
    attempts: int = ATTEMPTS,
) -> T:
    """``measure()``'s result from an attempt the monitor saw undisturbed.
    ``disturbed(measure)`` runs it and says why it was disturbed (None: it was not)."""
    reasons = []
    for attempt in range(attempts):
        # Before a repeat only: the monitor judges every attempt itself, so a
        # wait before the first (a 3-s probe on a quiet machine, ~8 tests of the
        # exclusive phase) only spares a busy machine one attempt.
        if attempt:
            interference.wait_quiet(QUIET_WAIT_S)
        value, reason = disturbed(measure)
        if reason is None:
            return value
        reasons.append(reason)
    pytest.skip(
        f"not judged: other load disturbed all {attempts} attempts (pgrig's monitor): "
        + " | ".join(reasons)
    )


@dataclass(frozen=True)
class _Here:
    """What the monitor reads of a measured step (pgrig.monitor.watched.Watched):
    this machine, the storage under ``target``, a server if the test started one."""

    target: Path
    server_pid: int | None = None
    conn: Conn | None = None
    host: Executor = HERE
    sampling: type[HostSampling] = ProcessesHere
    host_devices: tuple[str, ...] = ()
    load_finding: Finding | None = None
    load_imbalance: str | None = None
    client_started: float | None = None


def watched_by(
    target: Path, server_pid: int | None = None
) -> Callable[[Callable[[], T]], tuple[T, str | None]]:
    """A measurement made in this process (its children are ours: fio, dd,
    pgbench), watched by pgrig's monitor as a run is; a server the test started
    (daemonized by pg_ctl, so not our child) is named by ``server_pid``."""

    def run(measure: Callable[[], T]) -> tuple[T, str | None]:
        with monitor.Watch(_Here(target, server_pid), interval=0.5) as watch:
            value = measure()
        mon = watch.summary(None)
        return value, interference.disturbance(mon) if interference.is_disturbed(mon) else None

    return run


def unless_met(
    disturbed: Callable[[Callable[[], T]], tuple[T, str | None]], met: Callable[[T], bool]
) -> Callable[[Callable[[], T]], tuple[T, str | None]]:
    """``disturbed``, but a measurement that ``met(value)`` is kept whatever the
    monitor saw: other load explains a shortfall (a rate under its cap), never a
    figure that reached it - so a busy machine costs no repeat then."""

    def run(measure: Callable[[], T]) -> tuple[T, str | None]:
        value, reason = disturbed(measure)
        return value, None if met(value) else reason

    return run


def study_disturbance(measure: Callable[[], Path]) -> tuple[Path, str | None]:
    """A study run with its monitor on: ``measure()`` returns its results file;
    disturbed when the monitor marked any of its runs so (the runs' own flags)."""
    results = measure()
    with Store.open(results) as store:
        records = [r for s in store.studies() for r in store.runs(s.id) if r.kind == "monitor"]
    reasons = []
    for rec in records:
        mon = registry.typed_result(rec)
        if isinstance(mon, MonitorResult) and interference.is_disturbed(mon):
            reasons.append(f"{rec.key.removesuffix('/monitor')}: {interference.disturbance(mon)}")
    if not reasons:
        return results, None
    return results, f"{len(reasons)} of {len(records)} runs disturbed, the first {reasons[0]}"


def quiet_first(target: Path | None = None) -> None:
    """For a test that loads the machine on purpose (a CPU hog, a disk writer)
    and judges what the monitor says of that load: another session's load
    beside it can push the test's own hog out of the processes named (83% of
    the CPU taken by others, the hog not among the top three: docs/bench.md).
    Waits (bounded) for the machine to quiet down, else skips with who was busy."""
    # 1.5-s probes (the default 3 s): "is another process busy now" needs no
    # longer window, and five hog tests of the exclusive phase begin with one
    quiet, probe = interference.wait_quiet(QUIET_WAIT_S, target=target, probe_s=1.5)
    if not quiet:
        pytest.skip(
            f"not judged: before the test's own load, other processes took "
            f"{probe.other_pct + probe.steal_pct:.0f}% of the machine for {QUIET_WAIT_S:.0f} s "
            f"(pgrig's monitor): {interference.names(probe.top)}"
        )
