"""Steps are data (issue 17, part 2): every step of every example campaign, as
``pgrig plan`` expands it, is plain data that pickles and round-trips equal,
holds no function anywhere, and names actions that ``pgrig.registry.ACTIONS``
resolves with the arguments it gives. So a step can be sent to another host's
executor and resolved there; a closure could not."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import pickle
from pathlib import Path, PurePath
from typing import Any

import pytest

from pgrig import campaign, plan, registry
from pgrig.errors import PgrigError
from pgrig.step import Call, Step

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CAMPAIGNS = sorted(EXAMPLES.glob("*.toml"))
LEAVES = (str, int, float, bool, bytes, type(None), PurePath, enum.Enum)


@pytest.fixture(autouse=True)
def _own_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGRIG_STATE_DIR", str(tmp_path / "state"))


def not_data(value: Any, where: str = "step") -> list[str]:
    """Where ``value`` holds something that is not plain data (a function, a
    class, a lock, any object but a frozen dataclass), as paths into it."""
    if isinstance(value, LEAVES):
        return []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return [f"{where}: a mutable {type(value).__name__}"]
        return [
            found
            for f in dataclasses.fields(value)
            for found in not_data(getattr(value, f.name), f"{where}.{f.name}")
        ]
    if isinstance(value, dict):
        return [
            found
            for k, v in value.items()
            for found in (*not_data(k, f"{where} key"), *not_data(v, f"{where}[{k!r}]"))
        ]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [found for i, v in enumerate(value) for found in not_data(v, f"{where}[{i}]")]
    return [f"{where}: {type(value).__name__} {value!r}"]


def calls(step: Step) -> list[Call]:
    return [c for c in (step.action, step.prepare) if c is not None]


def planned(path: Path) -> list[Step]:
    """The steps ``pgrig plan`` lists for a campaign file, in the runner's order."""
    return [step for _, step in plan.steps(campaign.load(path))]


def test_every_example_campaign_is_here() -> None:
    assert len(CAMPAIGNS) >= 8, f"examples/ holds {len(CAMPAIGNS)} campaigns"


@pytest.mark.parametrize("path", CAMPAIGNS, ids=lambda p: p.stem)
def test_every_planned_step_is_data(path: Path) -> None:
    steps = planned(path)
    assert steps, f"{path.name} plans no step"
    for step in steps:
        assert not_data(step) == [], f"{path.name}: {step.id} is not plain data"
        assert pickle.loads(pickle.dumps(step)) == step, f"{path.name}: {step.id}"
        for call in calls(step):
            made = registry.ACTIONS.get(call.name)
            assert made is not None, f"{step.id}: no action {call.name!r} is registered"
            # The arguments fit the action's parameters: what mypy cannot check.
            inspect.signature(made).bind(**call.args)


# No example runs TPC-C: its steps are checked on this campaign.
TPCC = """
[campaign]
name = "tpcc-steps"
[[target]]
name = "a"
directory = "{directory}"
[[workload]]
type = "tpcc"
warehouses = 1
duration = 5
"""


def test_every_registered_action_is_planned_by_a_campaign(tmp_path: Path) -> None:
    """The examples and a TPC-C campaign name every action pgrig registers: none
    escapes the check above."""
    (tmp_path / "tpcc.toml").write_text(TPCC.format(directory=tmp_path))
    test_every_planned_step_is_data(tmp_path / "tpcc.toml")
    paths = [*CAMPAIGNS, tmp_path / "tpcc.toml"]
    used = {c.name for path in paths for step in planned(path) for c in calls(step)}
    assert used == set(registry.ACTIONS)


def test_a_closure_in_a_step_is_caught() -> None:
    """The check above fails on what steps were before: a closure as the action,
    or a function hidden in a call's arguments."""
    step = planned(CAMPAIGNS[0])[0]
    closure = dataclasses.replace(step, action=lambda ctx, line: (None, ""))  # type: ignore[arg-type]
    assert not_data(closure) == [f"step.action: function {closure.action!r}"]
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(closure)
    hidden = dataclasses.replace(step, action=Call("probe.timing", {"seconds": lambda: 3}))
    assert len(not_data(hidden)) == 1 and "step.action.args['seconds']" in not_data(hidden)[0]


def test_an_unknown_action_is_refused_by_name() -> None:
    with pytest.raises(PgrigError, match="no step action named 'nowhere.run'"):
        registry.resolve(Call("nowhere.run"))
