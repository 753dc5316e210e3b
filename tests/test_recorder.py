"""The recorder reads the store once: what repeats-until-CI asks of the
recorded runs is kept as they are recorded (issue 18: it reloaded every
record, raw output included, on each repetition)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pgrig.recorder import Recorder
from pgrig.step import Call, Step, StepKey
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
    rec.record(step, target, "t0", "ok", None, result, "raw output")


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
    assert recorder.metrics(steps) == [100.0, 120.0]
    assert recorder.pending(steps) is False
    monkeypatch.undo()

    # A resumed study: the same figures from one read of the store.
    resumed = Recorder(store, study(), Ui(quiet=True))
    assert resumed.metrics(steps) == [100.0, 120.0]
    store.close()
