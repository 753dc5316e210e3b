"""TPC-C's active sets as a sweep over one load (seed 003: 1.2 TB of 12 TB
active): one load, each mode's runs at every active set keyed by it, the disk
and the estimate counting the load once, the report and the export showing
each set with its share of the loaded data, and a resume that repeats
nothing recorded (a resume of a partly recorded study is the runner's, tested
in test_campaign.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from pgrig import campaign, export, plan
from pgrig.errors import UsageError
from pgrig.report import compare
from pgrig.results import RunRecord, to_dict
from pgrig.runner import run_campaign
from pgrig.store import Store
from pgrig.ui import Ui
from pgrig.workloads.tpcc import driver, loader
from pgrig.workloads.tpcc.model import TpccRun, active_share

CAMPAIGN = """
[campaign]
name = "tpcc-active"
monitor = false

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
warehouses = 2
connections = 1
duration = 2
modes = {modes}
check = "{check}"
{active}
"""


def _campaign(
    tmp_path: Path,
    directory: Path,
    *,
    active: str = "active = [1, 2]",
    modes: str = '["server", "client"]',
    check: str = "end",
) -> campaign.Campaign:
    path = tmp_path / "tpcc.toml"
    path.write_text(CAMPAIGN.format(directory=directory, modes=modes, check=check, active=active))
    return campaign.load(path)


def test_the_plan_loads_once_and_runs_every_mode_at_each_active_set(tmp_path: Path) -> None:
    sweep = plan.expand(_campaign(tmp_path, tmp_path))
    keys = [r.key for r in sweep.runs]
    assert [k for k in keys if "/load/" in k] == ["a/tpcc/load/w2"]
    assert [k for k in keys if "/run/" in k] == [
        "a/tpcc/run/server/c1/a1",
        "a/tpcc/run/server/c1/a2",
        "a/tpcc/run/client/c1/a1",
        "a/tpcc/run/client/c1/a2",
    ]
    # check = "end": once, after the last run of the last mode at the last set
    assert [k for k in keys if "/check/" in k] == ["a/tpcc/check/load", "a/tpcc/check/client/c1/a2"]
    # One load: the same disk and the same load estimate as a single active set.
    single = plan.expand(_campaign(tmp_path, tmp_path, active=""))
    assert sweep.disk == single.disk
    loads = [[r.seconds for r in e.runs if "/load/" in r.key] for e in (sweep, single)]
    assert loads[0] == loads[1]
    runs = [sum(r.seconds for r in e.runs if "/run/" in r.key) for e in (sweep, single)]
    assert runs[0] == pytest.approx(2 * runs[1])
    # Without `active` the keys stay as studies recorded them before the sweep.
    assert "a/tpcc/run/server/c1" in [r.key for r in single.runs]


@pytest.mark.parametrize(
    ("active", "says"),
    [
        ("active = [1, 3]", "3: between 1 and the 2 warehouses"),
        ("active = [0, 1]", "0 is less than 1"),
        ("active = [2, 2]", "2 is given twice"),
        ('active = "half"', "active"),
    ],
)
def test_a_bad_active_set_names_the_key_and_value(tmp_path: Path, active: str, says: str) -> None:
    with pytest.raises(UsageError, match="active") as info:
        _campaign(tmp_path, tmp_path, active=active)
    assert says in str(info.value)


@pytest.mark.cluster
def test_one_load_serves_every_active_set_and_a_resume_repeats_nothing(
    disk_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    camp = _campaign(tmp_path, disk_dir, modes='["server"]', check="none")
    results = tmp_path / "results"
    store = results / "results.sqlite"

    def run() -> None:
        run_campaign(camp, Ui(quiet=True), results=results, store=store, yes=False,
                     keep=False, study_id=camp.name)  # fmt: skip

    run()
    with Store.open(store) as st:
        records = st.runs(camp.name)
    assert all(r.status == "ok" for r in records), [(r.key, r.reason) for r in records]
    (load,) = [r for r in records if r.kind == "tpcc_load"]
    assert load.result is not None
    loaded = load.result["database_bytes"]
    runs = {r.key: r for r in records if r.kind == "tpcc_run"}
    assert list(runs) == ["a/tpcc/run/server/c1/a1", "a/tpcc/run/server/c1/a2"]
    for k, r in zip((1, 2), runs.values(), strict=True):
        assert r.params["active"] == k and r.params["warehouses"] == 2
        assert r.result is not None and r.result["active"] == k and r.result["tpmc"] > 0
        # the run knows its load's size from tpcc.meta, not from another record
        assert r.result["loaded_bytes"] == loaded
        assert r.result["active_bytes"] == loaded * k // 2  # the set's share of the load

    report = (results / f"report-{camp.name}.md").read_text()
    for k in (1, 2):
        assert f"server-side, {k} of 2 warehouses active: " in report  # the summary's rows
        assert f"1 connections, {k} of 2 warehouses active" in report  # each run's mix
    assert "TPC-C: tpmC vs active warehouses" in report
    rows = list(csv.DictReader(io.StringIO(export.runs_csv(records))))
    exported = [
        (r["tpcc_run.active"], r["tpcc_run.active_bytes"]) for r in rows if r["kind"] == "tpcc_run"
    ]
    assert exported == [(str(k), str(active_share(loaded, k, 2))) for k in (1, 2)]
    dumped = json.loads(export.to_json([], records))
    assert [r["result"]["active"] for r in dumped["runs"] if r["kind"] == "tpcc_run"] == [1, 2]

    # A resume of the finished study neither loads nor runs again: every step
    # of the phase is recorded, whichever active set it measured.
    called: list[str] = []

    def refuse(*_args: object, **_kwargs: object) -> None:
        called.append("again")  # the runner would record a failure and go on
        raise AssertionError("a recorded step ran again")

    monkeypatch.setattr(loader, "load", refuse)
    monkeypatch.setattr(driver, "run", refuse)
    run()
    assert called == []
    with Store.open(store) as st:
        again = st.runs(camp.name)
    assert [(r.key, r.started_at) for r in again] == [(r.key, r.started_at) for r in records]
    assert not list(disk_dir.glob("pgrig-*"))


def _run_record(target: str, active: int, tpmc: float, repeat: int) -> RunRecord:
    loaded = 200 << 20
    result = TpccRun(
        mode="server", warehouses=2, active=active, connections=1, threads=1, duration_s=2.0,
        isolation="read committed", transactions=100, failed=0, retried=0, retries=0,
        serialization_failures=0, deadlock_failures=0, tpmc=tpmc, tpm_total=2 * tpmc,
        tps=tpmc / 30, rollbacks=0, latency_avg_ms=1.0, loaded_bytes=loaded,
        active_bytes=active_share(loaded, active, 2),
    )  # fmt: skip
    return RunRecord(
        study="s", key=f"{target}/tpcc/run/server/c1/a{active}/r{repeat}", kind="tpcc_run",
        target=target, status="ok", started_at="", finished_at="", result=to_dict(result),
        params={"workload": "tpcc", "mode": "server", "warehouses": 2, "active": active,
                "repeat": repeat},
    )  # fmt: skip


def test_the_comparison_has_a_row_per_active_set_with_its_data_size() -> None:
    """Two targets, two active sets, two repeats: one row per set (not the four
    runs of a target pooled into one figure), each target's median in it."""
    records = [
        _run_record(t, active, base + 1000 * active + 100 * rep, rep)
        for t, base in (("ext4", 5000.0), ("xfs", 8000.0))
        for active in (1, 2)
        for rep in (1, 2)
    ]
    table = compare.comparison_table(records, ["ext4", "xfs"], "ext4")
    rows = [r.cells for r in table.rows if r.cells[0].startswith("TPC-C tpmC")]
    assert [r[0] for r in rows] == [
        "TPC-C tpmC (tpcc, server-side, 1 of 2 warehouses active: 100.0 MiB of 200.0 MiB)",
        "TPC-C tpmC (tpcc, server-side, 2 of 2 warehouses active: 200.0 MiB of 200.0 MiB)",
    ]
    assert [(r[1].split()[0], r[2].split()[0]) for r in rows] == [
        ("6,150", "9,150"),
        ("7,150", "10,150"),
    ]
