"""`pgrig plan`'s time estimates: what a step finds already there, and what the
machine measured (issue 21.7; bench/plan_estimate.py compares them with the
seed examples' real times)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pgrig import calibration, campaign, plan, registry
from pgrig.commands.quick import campaign_of
from pgrig.commands.run import run as run_command
from pgrig.durability.workload import DurabilitySpec
from pgrig.durability.workload import calibration_kind as durability_kind
from pgrig.units import MB
from pgrig.workloads.basebackup import spec as bb_spec
from pgrig.workloads.basebackup.steps import backup_estimate, calibration_kind
from pgrig.workloads.tpcb.spec import TpcbSpec
from pgrig.workloads.tpcb.steps import load_estimate, load_kind
from test_cli import TINY, pgrig

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CAMPAIGN = """
[campaign]
name = "est"
[[target]]
name = "a"
directory = "{directory}"
[[workload]]
type = "tpcb"
scales = [20]
modes = ["read-write"]
clients = [1]
duration = 5
count = false
[[workload]]
type = "basebackup"
scale = {backup_scale}
"""


@pytest.fixture(autouse=True)
def _own_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGRIG_STATE_DIR", str(tmp_path / "state"))


def _expand(tmp_path: Path, backup_scale: int) -> dict[str, float]:
    path = tmp_path / "est.toml"
    path.write_text(CAMPAIGN.format(directory=tmp_path, backup_scale=backup_scale))
    return {r.key: r.seconds for r in plan.expand(campaign.load(path)).runs}


def test_a_backup_of_the_data_loaded_before_plans_no_second_load(tmp_path: Path) -> None:
    """seed002: the TPC-B load of scale 50, then a base backup of scale 50 - the
    data step finds the tables and keeps them (1 s real), the plan said 80 s."""
    same = _expand(tmp_path, 20)
    assert same["a/tpcb/s20/init"] == pytest.approx(load_estimate(TpcbSpec(), 20))
    assert same["a/basebackup/s20/data"] < 5
    other = _expand(tmp_path, 30)  # another scale: loaded again
    assert other["a/basebackup/s30/data"] == pytest.approx(load_estimate(TpcbSpec(), 30))


def test_the_backup_estimate_follows_the_copies_this_machine_made(tmp_path: Path) -> None:
    spec = bb_spec.BasebackupSpec(scale=50)
    before = backup_estimate(spec)
    calibration.record(calibration_kind(spec), bb_spec.copy_bytes(50) / MB, 9.0)
    assert backup_estimate(spec) == pytest.approx(9.0) != before
    assert _expand(tmp_path, 50)["a/basebackup/s50/backup/r1"] == pytest.approx(9.0)
    tar = bb_spec.BasebackupSpec(scale=50, format="tar", compress="gzip:5")
    assert backup_estimate(tar) == before  # another format: not calibrated by the plain copy


def test_a_storage_that_loaded_slower_is_planned_from_its_own_loads(tmp_path: Path) -> None:
    """seed000: the load on the latency layer took 151 s, on the plain directory
    beside it 18 s; one line for the machine planned both alike."""
    slow = tmp_path / "slow"
    slow.mkdir()
    path = tmp_path / "two.toml"
    text = CAMPAIGN.format(directory=tmp_path, backup_scale=20)
    path.write_text(text.replace("[[workload]]", f'[[target]]\nname = "b"\ndirectory = "{slow}"\n'
                                 "[[workload]]", 1))  # fmt: skip
    kind = load_kind(TpcbSpec())
    calibration.record_on(kind, str(tmp_path), 20, 10.0)
    calibration.record_on(kind, str(slow), 20, 100.0)
    runs = {r.key: r.seconds for r in plan.expand(campaign.load(path)).runs}
    assert runs["a/tpcb/s20/init"] == pytest.approx(10.0)
    assert runs["b/tpcb/s20/init"] == pytest.approx(100.0)
    # a storage that never loaded: the machine's latest load of that size
    assert load_estimate(TpcbSpec(), 20, "/elsewhere") == pytest.approx(100.0)


def test_a_crash_check_is_planned_from_what_its_crashes_cost_here(tmp_path: Path) -> None:
    """seed001's login-crash: 3 crashes, 5 s apart, planned 40 s, took 104 s: each
    crash's recovery, the workload's checks and the scripts' relaunch cost more
    than the 5 s allowed for them."""
    camp = campaign.load(EXAMPLES / "seed001-login.toml")
    spec = next(w for w in camp.workloads if isinstance(w, DurabilitySpec))
    key = "disk/login-crash"
    before = next(r.seconds for r in plan.expand(camp).runs if r.key == key)
    target = camp.targets[0]
    storage = plan.PlannedTarget.of(target, registry.target_kind(target)).storage
    calibration.record_on(durability_kind(spec), storage, spec.crashes, 89.0)
    after = next(r.seconds for r in plan.expand(camp).runs if r.key == key)
    assert after == pytest.approx(spec.crashes * spec.interval_s + 89.0) != before


def test_what_a_run_spends_besides_its_steps_comes_from_the_same_study_first(
    tmp_path: Path,
) -> None:
    """seed000's five targets spent 193 s besides their steps; seed002's two loop
    filesystems 29 s: a line through other studies planned seed002 at 77 s."""
    path = tmp_path / "est.toml"
    path.write_text(CAMPAIGN.format(directory=tmp_path, backup_scale=20))
    camp = campaign.load(path)
    calibration.record(plan.OVERHEAD_KIND, 5, 193.0)
    assert plan.expand(camp).overhead_s == pytest.approx(193.0 / 5)  # the machine's line
    calibration.record_on(plan.OVERHEAD_KIND, "est", 1, 12.0)
    assert plan.expand(camp).overhead_s == pytest.approx(12.0)


# -- the calibration file: bounded, and how busy the machine was ----------------------


def _file() -> Path:
    return calibration.state_dir() / calibration.FILE


def test_an_older_calibration_file_is_read_and_new_points_say_how_busy(tmp_path: Path) -> None:
    """A file of an older pgrig has no load per point: read as before, its load unknown."""
    kind = load_kind(TpcbSpec())
    _file().parent.mkdir(parents=True, exist_ok=True)
    _file().write_text(json.dumps({kind: [{"size": 10.0, "seconds": 30.0, "at": 1.0}]}))
    with calibration.watching() as seen:
        assert load_estimate(TpcbSpec(), 20) == pytest.approx(60.0)
    assert seen == {kind: [{"size": 10.0, "seconds": 30.0, "at": 1.0}]}
    assert calibration.load_note(seen, calibration.Busy(9.0)) is None  # unknown: no claim
    before = calibration.busy()
    calibration.record(kind, 20, 50.0, before)
    (old, new) = json.loads(_file().read_text())[kind]
    assert "load" not in old and new["load"] == pytest.approx(before.load, abs=1e-3)
    assert new["load"] == pytest.approx(os.getloadavg()[0] / (os.cpu_count() or 1), abs=2)
    if calibration.PSI_CPU.exists():  # this kernel's pressure stall information
        assert 0 <= new["cpu_some"] <= 100
    else:
        assert "cpu_some" not in new


def test_gone_directories_and_the_oldest_kinds_leave_the_file(tmp_path: Path) -> None:
    """The file had 52 kinds after a day here, most of them temporary directories
    (``pgrig-scale-*``, /tmp/ci3) that no plan will ever name again."""
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    kept.mkdir()
    gone.mkdir()
    for storage in (str(kept), str(gone), f"{gone}: ESSD PL1", "storage lab: xfs", "host db1"):
        calibration.record_on("tpcb:client", storage, 10, 20.0)
    gone.rmdir()
    calibration.record("tpcc", 1, 5.0)  # any save bounds the file
    kinds = set(json.loads(_file().read_text()))
    assert kinds == {"tpcc", "tpcb:client", *(f"tpcb:client@{s}" for s in
                     (kept, "storage lab: xfs", "host db1"))}  # fmt: skip
    data = {f"k{i}": [{"size": 1.0, "seconds": 1.0, "at": float(i)}] for i in range(70)}
    _file().write_text(json.dumps(data))
    calibration.record("k5", 2, 1.0)  # measured now: the newest
    kinds = set(json.loads(_file().read_text()))
    assert len(kinds) == calibration.MAX_KINDS
    assert kinds == {f"k{i}" for i in range(70 - calibration.MAX_KINDS + 1, 70)} | {"k5"}


def test_load_note_compares_the_machine_now_with_then() -> None:
    def seen(*loads: float) -> dict[str, list[dict[str, float]]]:
        return {"tpcc": [{"size": 1.0, "seconds": 9.0, "at": 1.0, "load": x} for x in loads]}

    assert calibration.load_note(seen(0.5, 0.6, 0.7), calibration.Busy(0.8)) is None
    assert calibration.load_note(seen(0.1), calibration.Busy(0.3)) is None  # idle both times
    busier = calibration.load_note(seen(0.4, 0.5, 3.0), calibration.Busy(2.0, 60.0))
    assert busier is not None and "4.0x busier" in busier and "load 2.00 per CPU" in busier
    assert "3 measurement(s)" in busier and "load 0.50 per CPU" in busier
    quieter = calibration.load_note(seen(6.0), calibration.Busy(1.0))
    assert quieter is not None and "6.0x quieter" in quieter


def test_plan_warns_when_its_calibration_was_recorded_on_a_far_busier_machine(
    disk_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Recorded at a load of 500 per CPU (written into the file): no machine here is
    that busy now, so ``pgrig plan`` must say the estimate may be off."""
    from pgrig import cli

    path = disk_dir / "est.toml"
    path.write_text(CAMPAIGN.format(directory=disk_dir, backup_scale=20))
    calibration.record(load_kind(TpcbSpec()), 20, 33.0, calibration.Busy(500.0, 99.0))
    cli.main(["plan", str(path)])
    out, err = capsys.readouterr()
    assert "33 s  a/tpcb/s20/init" in out  # the estimate itself is not rescaled
    said = " ".join(err.split())
    assert "warning: this machine is" in said and "x quieter now" in said
    assert "load 500.00 per CPU, 99% of the time a task waited for a CPU" in said


def test_run_warns_as_plan_does_when_its_calibration_was_recorded_on_a_far_busier_machine(
    disk_dir: Path,
) -> None:
    """Whoever runs without planning first hears the same caution as ``pgrig plan``."""
    calibration.record(load_kind(TpcbSpec()), 20, 33.0, calibration.Busy(500.0, 99.0))
    done = pgrig("run", "--target", disk_dir, "--results", disk_dir / "r", *TINY)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "warning: this machine is" in said and "x quieter now" in said


# `make run` in 5 minutes on a fresh clone (issue 41.4): the venv took 18 s on
# a quiet fresh clone and 40 s at load average 11-17 (docs/bench.md, "The quick
# study's time"), so the quick study's steps get 300 - 30 s.
MAKE_RUN_S = 300.0
VENV_S = 30.0


def test_the_quick_study_at_its_defaults_leaves_make_run_under_five_minutes() -> None:
    """`pgrig run` with no option, its steps as the plan estimates them (about
    15% above what they took here): a default that lengthens the quick study (10 s
    runs planned 398 s, another mode or client count) fails here before a fresh
    clone's `make run` does. The load's estimate is left out: it comes from this
    machine's earlier loads (4-20 s at scale 10), the others from the defaults."""
    ctx = run_command.make_context("run", [])
    quick = campaign_of(ctx.params, set())
    planned = sum(s.estimate_s for _, s in plan.steps(quick) if s.kind != "pgbench_init")
    assert planned <= MAKE_RUN_S - VENV_S, f"the quick study plans {planned:.0f} s"
