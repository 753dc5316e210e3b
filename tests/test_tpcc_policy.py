"""TPC-C under the run policy: reset, warm-up and CHECKPOINT before each
measured run, the consistency check as a choice, the pristine copy counted by
the disk check, and plan estimates calibrated from this machine's loads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pgrig import calibration, campaign, plan
from pgrig.errors import UsageError
from pgrig.runner import run_campaign
from pgrig.ui import Ui
from pgrig.workloads.tpcc.steps import LOAD_KIND

CAMPAIGN = """
[campaign]
name = "tpcc-policy"
repeat = 2
monitor = false
{policy}

[[target]]
name = "a"
directory = "{directory}"
profile = "stock"
set = {{ fsync = "off" }}

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "tpcc"
warehouses = 1
connections = 1
duration = 1
modes = {modes}
{workload}
"""


def _campaign(tmp_path: Path, directory: Path, *, policy: str = "", workload: str = "",
              modes: str = '["server", "client"]') -> campaign.Campaign:  # fmt: skip
    path = tmp_path / "tpcc.toml"
    text = CAMPAIGN.format(policy=policy, directory=directory, workload=workload, modes=modes)
    path.write_text(text)
    return campaign.load(path)


def _checks(expansion: plan.Expansion) -> list[str]:
    return [r.key for r in expansion.runs if "/check/" in r.key]


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ("each", ["load", "server/c1/r1", "server/c1/r2", "client/c1/r1", "client/c1/r2"]),
        ("end", ["load", "client/c1/r2"]),
        ("none", ["load"]),
    ],
)
def test_the_check_after_runs_is_a_choice(tmp_path: Path, check: str, expected: list[str]) -> None:
    camp = _campaign(tmp_path, tmp_path, workload=f'check = "{check}"')
    assert _checks(plan.expand(camp)) == [f"a/tpcc/check/{e}" for e in expected]


def test_a_bad_check_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="check") as info:
        _campaign(tmp_path, tmp_path, workload='check = "sometimes"')
    assert "each" in str(info.value) or "each" in (info.value.hint or "")


def test_runs_carry_the_policy_and_restore_doubles_the_disk(tmp_path: Path) -> None:
    reuse = plan.expand(_campaign(tmp_path, tmp_path))
    restore = plan.expand(
        _campaign(tmp_path, tmp_path, policy='reset = "restore"\nwarmup = 3\ncheckpoint = false')
    )
    run = next(r for r in restore.runs if "/run/" in r.key)
    plain = next(r for r in reuse.runs if "/run/" in r.key)
    # the warm-up and the restore are in the estimate
    assert run.seconds >= plain.seconds + 3
    data = restore.disk["a"] - reuse.disk["a"]
    assert data > 0 and reuse.disk["a"] - data > 0  # one more copy of the data, no more


def test_a_runs_estimate_counts_no_check_and_nothing_per_warehouse(tmp_path: Path) -> None:
    """The check after a run is a step of its own: the run's estimate is the
    warm-up, the run and the reset (seed003's 15 s runs planned 30 s with the
    check counted again, 21-24 s real)."""

    def run_seconds(warehouses: int) -> float:
        _campaign(tmp_path, tmp_path, policy="warmup = 5", workload='check = "each"')
        path = tmp_path / "tpcc.toml"  # written by _campaign, at one warehouse
        path.write_text(path.read_text().replace("warehouses = 1", f"warehouses = {warehouses}"))
        camp = campaign.load(path)
        return next(r.seconds for r in plan.expand(camp).runs if "/run/" in r.key)

    assert run_seconds(1) == run_seconds(8) == 1 + 5 + 2  # duration, warm-up, reset


def test_the_load_estimate_follows_what_this_machine_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGRIG_STATE_DIR", str(tmp_path / "state"))
    camp = _campaign(tmp_path, tmp_path)
    before = next(r.seconds for r in plan.expand(camp).runs if "/load/" in r.key)
    calibration.record(LOAD_KIND, 1, 40.0)
    after = next(r.seconds for r in plan.expand(camp).runs if "/load/" in r.key)
    assert after == pytest.approx(40.0) != before
    calibration.record(LOAD_KIND, 3, 100.0)  # two sizes: a line through both
    assert calibration.estimate(LOAD_KIND, 10, lambda w: 0) == pytest.approx(10 + 30 * 10)


@pytest.mark.cluster
def test_restore_and_warmup_run_before_each_measured_run(disk_dir: Path, tmp_path: Path) -> None:
    """With reset = "restore" every run starts from the loaded data: the check
    at the end sees exactly two runs since the load (the warm-up and the last
    measured run), not the four the two repeats made."""
    camp = _campaign(
        tmp_path, disk_dir, policy='reset = "restore"\nwarmup = 1', workload='check = "end"',
        modes='["server"]',
    )  # fmt: skip
    results = tmp_path / "results"
    run_campaign(camp, Ui(quiet=True), results=results, store=results / "results.sqlite",
                 yes=False, keep=False, study_id=camp.name)  # fmt: skip
    with sqlite3.connect(results / "results.sqlite") as db:
        rows = dict(
            db.execute("SELECT key, result FROM runs WHERE key LIKE '%/check/%'").fetchall()
        )
        statuses = dict(db.execute("SELECT key, status FROM runs").fetchall())
    assert set(rows) == {"a/tpcc/check/load", "a/tpcc/check/server/c1/r2"}
    assert all(s == "ok" for s in statuses.values()), statuses
    assert "2 run(s) since" in rows["a/tpcc/check/server/c1/r2"]
    assert "2 run(s) since" not in rows["a/tpcc/check/load"]


def test_load_jobs_without_the_parallel_loader_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tpcb.toml"
    path.write_text(
        f'[campaign]\nname = "j"\n\n[[target]]\nname = "a"\ndirectory = "{tmp_path}"\n\n'
        '[[workload]]\ntype = "tpcb"\nload_jobs = 4\n'
    )
    with pytest.raises(UsageError, match=r"load_jobs: 4: only pgrig's loader") as info:
        campaign.load(path)
    assert "parallel" in (info.value.hint or "")
    path.write_text(path.read_text() + 'generate = "parallel"\n')
    (spec,) = campaign.load(path).workloads
    assert spec.load_jobs == 4  # type: ignore[attr-defined]
