"""The recorder reads the store once: what repeats-until-CI asks of the
recorded runs is kept as they are recorded (issue 18: it reloaded every
record, raw output included, on each repetition)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pgrig import registry
from pgrig.errors import ToolError
from pgrig.recorder import Execution, Outcome, Recorder, StartTogether
from pgrig.step import Call, Running, Step, StepKey
from pgrig.store import Store
from pgrig.ui import Ui
from test_store import run_record, study


def _step(repeat: int) -> Step:
    key = StepKey("t", "tpcb", ("s1", "select-only", "c1", "d3"), repeat)
    return Step(key, "pgbench_run", f"run {repeat}", {"clients": 1}, action=Call("never.run"))


def _record(rec: Recorder, step: Step, result: dict[str, Any] | None, kind: str = "") -> None:
    if kind:  # the run's monitor record
        step = dataclasses.replace(step, key=step.key.below("monitor"), kind=kind)
    target: Any = SimpleNamespace(name="t", env=None)
    rec.record(Execution(step, target, "t0"), Outcome.ok(result, "raw output"))


def test_metrics_come_from_what_was_recorded_not_from_reloading_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.open(tmp_path / "r.sqlite")
    store.begin_study(study())
    store.record(dataclasses.replace(run_record(str(_step(1).key), tps=100.0), target="t"))
    recorder = Recorder(store, study(), Ui(quiet=True))

    def no_reload(study_id: str) -> list[object]:
        raise AssertionError("the recorder read every stored record again")

    monkeypatch.setattr(store, "runs", no_reload)
    steps = [_step(r) for r in (1, 2, 3)]
    _record(recorder, steps[1], run_record("x", tps=120.0).result)
    _record(recorder, steps[2], run_record("x", tps=500.0).result)
    # the third run's monitor record says other work disturbed it: not counted
    _record(recorder, steps[2], {"disturbed": {"reasons": ["a CPU hog"]}}, kind="monitor")
    assert recorder.recorded.metrics(steps) == [100.0, 120.0]
    assert recorder.recorded.pending(steps) is False
    monkeypatch.undo()

    # A resumed study: the same figures from one read of the store.
    resumed = Recorder(store, study(), Ui(quiet=True))
    assert resumed.recorded.metrics(steps) == [100.0, 120.0]
    store.close()


@dataclasses.dataclass(frozen=True)
class Started:
    at: float


def _target(name: str) -> Any:
    """What the recorder reads of a target when it has no cluster, monitor or cgroup."""
    ctx = SimpleNamespace(running=Running(), conn=None, memory=None, emulator=None)
    return SimpleNamespace(
        name=name,
        env=None,
        cluster=None,
        server=None,
        lost=None,
        ctx=ctx,
        spec=SimpleNamespace(kernel=()),
    )


STARTS: dict[str, float] = {}  # target -> when its run started


def _slow_prepare(seconds: float, fail: bool) -> Any:
    def prepare(ctx: Any, line: Any) -> None:
        time.sleep(seconds)
        if fail:
            raise ToolError("warm-up failed")

    return prepare


def _started(name: str) -> Any:
    def action(ctx: Any, line: Any) -> tuple[Any, str]:
        STARTS[name] = time.monotonic()
        return Started(STARTS[name]), ""

    return action


@pytest.fixture
def timed_actions() -> Iterator[None]:
    registry.register_action("test.slow-prepare", _slow_prepare)
    registry.register_action("test.started", _started)
    STARTS.clear()
    try:
        yield
    finally:
        registry.unregister_action("test.slow-prepare", _slow_prepare)
        registry.unregister_action("test.started", _started)


def test_targets_at_once_start_their_measured_runs_together(
    tmp_path: Path, timed_actions: None
) -> None:
    """concurrent = true: one target's prepare (a warm-up, a CHECKPOINT) takes 1.5 s
    longer than the other's; both runs must still start at the same moment. One
    whose prepare fails leaves, and the other does not wait for it."""
    store = Store.open(tmp_path / "r.sqlite")
    store.begin_study(study())
    rec = Recorder(store, study(), Ui(quiet=True))
    starts = STARTS

    def step(name: str, prepare_s: float, fail: bool = False) -> Step:
        key = StepKey(name, "tpcb", ("s1", "select-only", "c1", "d3"), 1)
        return Step(
            key, "toy", name, {},
            Call("test.started", {"name": name}),
            prepare=Call("test.slow-prepare", {"seconds": prepare_s, "fail": fail}),
            monitored=True,
        )  # fmt: skip

    def both(a: Step, b: Step) -> dict[str, bool]:
        together = StartTogether(2)
        with ThreadPoolExecutor(2) as pool:
            done = {
                s.key.target: pool.submit(rec.execute, s, _target(s.key.target), together=together)
                for s in (a, b)
            }
        return {name: f.result() for name, f in done.items()}

    assert both(step("a", 0.0), step("b", 1.5)) == {"a": True, "b": True}
    assert abs(starts["a"] - starts["b"]) < 0.2, starts

    starts.clear()
    began = time.monotonic()
    assert both(step("c", 0.0), step("d", 0.5, fail=True)) == {"c": True, "d": False}
    assert set(starts) == {"c"} and starts["c"] - began < 5, "c waited for the failed d"
    store.close()


def test_a_kind_that_declares_limits_gives_its_target_the_monitors_limits() -> None:
    """The recorder keeps a probe's result for its target's limits because the
    result's kind says so (``ResultKind.limits``), not because of its name: a
    plug-in's kind of the same results counts, and a kind that does not declare
    it is not kept."""
    from pgrig.recorder import Recorded
    from pgrig.results import FioResult, ResultKind, RunRecord, to_dict

    fio = FioResult("randread", "8k", "libaio", True, 1, 8, "64M", 5.0, 1234.0, 9.6,
                    800.0, 700.0, 2000.0, 3000.0)  # fmt: skip
    recorded = Recorded()
    recorded.kinds = {
        **recorded.kinds,
        "toy.disk": ResultKind("toy.disk", FioResult, limits=True),
        "toy.other": ResultKind("toy.other", FioResult),
    }

    def record(kind: str, target: str) -> RunRecord:
        return RunRecord("s", f"{target}/{kind}", kind, target, {}, "ok", "t0", "t1", to_dict(fio))

    recorded.remember(record("toy.disk", "a"))
    recorded.remember(record("toy.other", "b"))
    limits = recorded.limits("a")
    assert limits is not None and limits.randread_iops == 1234.0
    assert recorded.limits("b") is None
    assert registry.kinds()["fio"].limits and registry.kinds()["pg_test_fsync"].limits


def _fails(name: str) -> Any:
    def action(ctx: Any, line: Any) -> tuple[Any, str]:
        raise ToolError(f"step {name} failed")

    return action


def test_the_server_is_asked_only_after_a_step_that_may_have_changed_it(
    tmp_path: Path, cluster: Any, conn: Any, timed_actions: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: the recorder asked the server whether it was up before every step
    (three SSH round trips for a host's server). A server just started, or one
    a step ended well on, is up; it is asked again after a step that failed (a
    crash shows there) or that stops it on purpose - a real cluster, its
    ``running`` counted."""
    asked: list[str] = []
    real = cluster.running
    monkeypatch.setattr(cluster, "running", lambda: asked.append("running") or real())
    registry.register_action("test.fails", _fails)
    store = Store.open(tmp_path / "r.sqlite")
    store.begin_study(study())
    try:
        rec = Recorder(store, study(), Ui(quiet=True))
        target = _target("db")
        target.server = cluster
        target.ctx.conn = conn  # the steps' heartbeat asks this server between them

        def step(name: str, action: str, **more: Any) -> Step:
            key = StepKey("db", "toy", (name,), None)
            return Step(key, "toy", name, {}, Call(action, {"name": name}), **more)

        rec.server_up(target)
        assert rec.execute(step("a", "test.started"), target)
        assert rec.execute(step("b", "test.fails"), target) is False
        assert asked == [], "up since its start and after a step that ended well"
        assert rec.execute(step("c", "test.started"), target)
        assert asked == ["running"], "asked once after the failed step"
        assert rec.execute(step("d", "test.started", heartbeat=False), target)
        assert rec.execute(step("e", "test.started"), target)
        assert asked == ["running"] * 2, "asked after a step that may stop it on purpose"
    finally:
        registry.unregister_action("test.fails", _fails)
        store.close()
