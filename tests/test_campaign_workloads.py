"""Campaign workloads end to end: repeats until a confidence interval, a
durability workload, `pgrig tpcc study`. Apart from test_campaign.py so that
the two test workers share them (``--dist loadfile`` keeps a file on one)."""

from __future__ import annotations

from pathlib import Path

from conftest import full_report
from pgrig.store import Store
from test_campaign import pgrig, two_dirs, write


def test_auto_warmup_restore_and_repeat_until_ci(disk_dir: Path) -> None:
    a, _ = two_dirs(disk_dir)
    text = f"""\
[campaign]
name = "until-ci"
repeat = {{ until_ci_pct = 1300, min = 2, max = 4 }}
warmup = "auto"
warmup_max = 3
reset = "restore"
monitor = false  # on a shared machine disturbed runs would not count (test_interference_study)

[[target]]
name = "only"
directory = "{a}"
profile = "stock"
[target.set]
fsync = false

[probes]
timing = false
fsync = false
fio = false

[[workload]]
scales = [1]
modes = ["read-write"]
clients = [1]
duration = 1  # what it checks is the repeat, warm-up and reset policy, not a rate
count = false
"""
    results = disk_dir / "r"
    done = pgrig("run", write(disk_dir, text), "--results", results)
    assert done.returncode == 0, done.stderr
    with Store.open(results / "results.sqlite") as store:
        runs = [r for r in store.runs("until-ci") if r.kind == "pgbench_run"]
    # Two positive runs' 95% interval of the mean is under 12.71 x |a-b|/(a+b), so
    # within 1,271% whatever their spread: met at 2 runs, min wins (1000% was
    # missed beside two CPU hogs, ci16: one 1-s run starved against the other)
    assert [r.params["repeat"] for r in runs] == [1, 2]
    assert all(r.status == "ok" for r in runs), [r.reason for r in runs]
    assert runs[0].params["warmup"] == "auto" and runs[0].params["reset"] == "restore"
    for r in runs:
        assert r.result is not None and r.result["transactions"] > 0


def test_durability_as_a_campaign_workload(disk_dir: Path) -> None:
    a, _ = two_dirs(disk_dir)
    text = f"""\
[campaign]
name = "crash"

[[target]]
name = "only"
directory = "{a}"
profile = "stock"
[target.set]
synchronous_commit = "on"
[target.initdb]
data_checksums = true

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "durability"
method = "kill-postmaster"
crashes = 1
clients = 2
interval = 1
"""
    results = disk_dir / "r"
    done = pgrig("run", write(disk_dir, text), "--results", results)
    assert done.returncode == 0, done.stderr
    with Store.open(results / "results.sqlite") as store:
        (rec,) = [r for r in store.runs("crash") if r.kind == "durability"]
    assert rec.status == "ok", rec.reason
    assert rec.result is not None
    assert rec.result["acknowledged"] > 0 and rec.result["lost"] == 0
    assert len(rec.result["crashes"]) == 1 and not rec.result["failures"]
    report = full_report(results, "*.md").read_text()
    assert "urability" in report


def test_tpcc_as_a_campaign_workload(disk_dir: Path) -> None:
    """`pgrig tpcc study` is a one-target campaign with a tpcc workload: load,
    check, each mode's run followed by a check, all recorded, one report."""
    results = disk_dir / "r"
    done = pgrig(
        "tpcc",
        "study",
        "--target",
        disk_dir,
        "--results",
        results,
        "-w",
        "1",
        "-c",
        "2",
        "-T",
        "2",  # each mode's run and check recorded: any run with a New-Order in it
        "--profile",
        "stock",
        "--set",
        "fsync=off",
    )
    assert done.returncode == 0, done.stderr
    with Store.open(results / "results.sqlite") as store:
        (study,) = store.studies()
        runs = {r.key: r for r in store.runs(study.id)}
    assert runs["local/tpcc/load/w1"].status == "ok"
    for mode in ("server", "client"):
        run = runs[f"local/tpcc/run/{mode}/c2"]
        assert run.status == "ok", run.reason
        assert run.result is not None and run.result["tpmc"] > 0
        check = runs[f"local/tpcc/check/{mode}/c2"]
        assert check.status == "ok" and check.result is not None
        assert all(c["passed"] or c["skipped"] for c in check.result["conditions"])
    sized = {k: r for k, r in runs.items() if r.kind == "relation_sizes"}
    assert set(sized) == {"local/tpcc/sizes/after-load", "local/tpcc/sizes/after-runs"}
    report = full_report(results, "*.md").read_text()
    assert "tpmC" in report and "| tpcc.order_line | table |" in report
    assert not list(disk_dir.glob("pgrig-*"))
