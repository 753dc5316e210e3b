"""The workload interface: a workload added through the registry alone runs end
to end; the plan lists exactly what the runner runs; repeats until a
confidence interval stop on every workload's headline figure (TPC-C too);
and a results file written before the interface still resumes."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgrig import calibration, campaign, plan, registry
from pgrig.errors import UsageError
from pgrig.report.writer import write as write_report
from pgrig.results import SERVER
from pgrig.runner import run_campaign
from pgrig.store import Store
from pgrig.ui import Ui
from toy.workload import WORKLOAD as TOY

RESUME = Path(__file__).parent / "data" / "resume"


@pytest.fixture
def toy() -> Iterator[None]:
    registry.register(TOY)
    try:
        yield
    finally:
        registry.unregister(TOY)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def keys(results: Path, study: str) -> list[str]:
    with sqlite3.connect(results / "results.sqlite") as db:
        rows = db.execute("SELECT key FROM runs WHERE study_id = ? ORDER BY id", (study,))
        return [r[0] for r in rows]


def test_a_toy_workload_runs_through_the_registry_alone(
    toy: None, disk_dir: Path, tmp_path: Path
) -> None:
    camp = campaign.load(
        write(
            tmp_path / "toy.toml",
            f"""
[campaign]
name = "toy-study"
repeat = 2
monitor = false

[[target]]
name = "a"
directory = "{disk_dir}"
profile = "stock"

[[target]]
name = "b"
directory = "{disk_dir}"
profile = "stock"

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "toy"
rows = [1000, 20000]
""",
        )
    )
    expected = [r.key for r in plan.expand(camp).runs]
    assert expected[:4] == ["a/toy/n1000/r1", "b/toy/n1000/r1", "b/toy/n1000/r2", "a/toy/n1000/r2"]
    results = tmp_path / "results"
    runner = run_campaign(
        camp,
        Ui(quiet=True),
        results=results,
        store=results / "results.sqlite",
        yes=False,
        keep=False,
        study_id=camp.name,
    )
    assert runner.failures == 0
    # The plan listed exactly the steps the runner recorded, in its order.
    assert keys(results, camp.name) == expected
    with Store.open(results / "results.sqlite") as st:
        records = st.runs(camp.name)
        totals = {registry.typed_result(r).total for r in records}
        study = st.study(camp.name)
    assert totals == {1000 * 1001 // 2, 20000 * 20001 // 2}
    # What the run spent besides its steps (two servers made, started and removed,
    # the report) is what the next plan adds for two targets: the study's own
    # line, which the plan reads first (the machine's is fitted over whatever
    # other tests in this process recorded before, with other target counts).
    fixed, per_target = calibration.line(f"{plan.OVERHEAD_KIND}@{camp.name}") or (0.0, 0.0)
    measured = fixed + 2 * per_target
    assert 0.5 < measured < 300 and plan.expand(camp).overhead_s == pytest.approx(measured)
    md, _ = write_report(study, records, tmp_path / "report")
    text = md.read_text()
    assert "## Toy workload" in text and "200,010,000" in text
    assert list(disk_dir.iterdir()) == []


def test_until_ci_stops_tpcc_repeats_on_tpmc(disk_dir: Path, tmp_path: Path) -> None:
    # A 1000% interval holds after the minimum of 2 repeats - if the runner reads
    # TPC-C's tpmC. Reading only pgbench tps, it found no values and ran to max.
    camp = campaign.load(
        write(
            tmp_path / "tpcc.toml",
            f"""
[campaign]
name = "tpcc-ci"
repeat = {{ until_ci_pct = 1000, min = 2, max = 4 }}
monitor = false

[[target]]
name = "a"
directory = "{disk_dir}"
profile = "stock"

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "tpcc"
warehouses = 1
connections = 1
duration = 1
modes = ["server"]
""",
        )
    )
    results = tmp_path / "results"
    run_campaign(
        camp,
        Ui(quiet=True),
        results=results,
        store=results / "results.sqlite",
        yes=False,
        keep=False,
        study_id=camp.name,
    )
    runs = [k for k in keys(results, camp.name) if "/run/" in k]
    assert runs == ["a/tpcc/run/server/c1/r1", "a/tpcc/run/server/c1/r2"]


LEGACY_DIR = "/var/tmp/pgrig-legacy-m9e3"  # where legacy.toml's DIR was when it was recorded


def test_a_results_file_from_before_the_interface_resumes(disk_dir: Path, tmp_path: Path) -> None:
    """tests/data/resume/results.sqlite was recorded by pgrig 0.1.0 from legacy.toml.
    Remove the last steps of each workload from it: a run of today's pgrig
    records exactly those again, with the same keys, and nothing else."""
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(RESUME / "results.sqlite", results / "results.sqlite")
    shutil.copy(RESUME / "login.sql", tmp_path / "login.sql")
    toml = (RESUME / "legacy.toml").read_text().replace("DIR", str(disk_dir))
    path = write(tmp_path / "legacy.toml", toml)
    before = keys(results, "legacy")
    missing = [
        "a/tpcb/s1/select-only/c1/d1/r2",
        "a/login/c1/d1/r2",
        "a/tpcc/run/server/c1/r2",
        "a/tpcc/check/server/c1/r2",
        "a/durability",
    ]
    assert set(missing) <= set(before)
    with sqlite3.connect(results / "results.sqlite") as db:
        db.executemany("DELETE FROM runs WHERE key = ?", [(k,) for k in missing])
        # The same disk and script as then: a study recorded with other targets or
        # workloads is not resumed into (its runs would mix two disks).
        for then, now in ((LEGACY_DIR, disk_dir), ("/tmp/login.sql", tmp_path / "login.sql")):
            db.execute("UPDATE studies SET params = replace(params, ?, ?)", (then, str(now)))
    # Table and index sizes came after 0.1.0: a resume records them as new steps.
    planned = [r.key for r in plan.expand(campaign.load(path)).runs]
    assert [k for k in planned if "/sizes/" not in k] == before

    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "run", str(path), "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    after = [k for k in keys(results, "legacy") if "/sizes/" not in k]
    assert sorted(after) == sorted(before), "every key once, none new"
    assert after[-len(missing) :] == [k for k in before if k in missing], (
        "only the removed steps ran again"
    )


def test_versions_are_an_axis_of_the_campaign(
    pg_releases: dict[str, object], disk_dir: Path, tmp_path: Path
) -> None:
    """versions = [...] runs every target once per version, each on its own
    cluster with the same profile, interleaved - the seed 004 comparison."""
    camp = campaign.load(
        write(
            tmp_path / "v.toml",
            f"""
[campaign]
name = "versions"
versions = ["9.6", "15", "18"]
monitor = false

[[target]]
name = "a"
directory = "{disk_dir}"
profile = "stock"
set = {{ shared_buffers = "64MB", max_parallel_workers = 2 }}

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "tpcb"
scales = [1]
modes = ["select-only"]
clients = [1]
duration = 1
count = false
""",
        )
    )
    assert [(t.name, t.pg_bin) for t in camp.targets] == [
        ("pg9.6", "9.6"), ("pg15", "15"), ("pg18", "18"),
    ]  # fmt: skip
    results = tmp_path / "results"
    run_campaign(
        camp, Ui(quiet=True), results=results, store=results / "results.sqlite",
        yes=False, keep=False, study_id=camp.name,
    )  # fmt: skip
    with Store.open(results / "results.sqlite") as st:
        study = st.study(camp.name)
        records = st.runs(camp.name)
    versions = {t: e.postgres.version.split()[0] for t, e in study.target_environments.items()}
    assert versions["pg9.6"].startswith("9.6.") and versions["pg18"].startswith("18.")
    assert versions["pg15"].startswith("15.")
    ok = {r.target for r in records if r.kind == "pgbench_run" and r.status == "ok"}
    assert ok == {"pg9.6", "pg15", "pg18"}
    md, _ = write_report(study, records, tmp_path / "report")
    text = md.read_text()
    assert "| pg9.6 (baseline) | pg15 | pg15 vs pg9.6 | pg18 | pg18 vs pg9.6 |" in text
    # Seed 004's table: versions as columns, each against the baseline.
    assert "## PostgreSQL versions" in text
    assert "| scale | clients | pg9.6 (9.6." in text and "| pg18 vs pg9.6 |" in text
    # What the profile became per major: dropped on 9.6, with the reason, in the report.
    v96, v18 = versions["pg9.6"], versions["pg18"]
    assert f"| pg9.6 | {v96} | max_parallel_workers = 2 not set: PostgreSQL 9.6 has no" in text
    assert f"| pg18 | {v18} | (nothing: every setting applied as written) |" in text
    # Provenance (seed 004's study said every version ran "the same (newest)
    # pgbench" and stored no tool version for the server-only 9.6): each record
    # names the server build that served it and the pgbench that drove it.
    sources = {"pg9.6": "maven:zonky", "pg15": "debian", "pg18": None}
    for rec in (r for r in records if r.kind == "pgbench_run"):
        server = rec.tool_versions[SERVER]
        assert server.startswith(f"PostgreSQL {versions[rec.target]} "), server
        assert "compiled by" in server, server
        if sources[rec.target]:
            assert server.endswith(f"from {sources[rec.target]}"), server
        driver = re.search(r"\(PostgreSQL\) (\d+)", rec.tool_versions["pgbench"])
        assert driver is not None and int(driver.group(1)) >= 15, rec.tool_versions
    assert "same (newest) pgbench" not in text
    prov = text[text.index("**Provenance") :]
    assert "| pg9.6 | 9.6." in prov and "| maven:zonky | pgbench (PostgreSQL) 1" in prov


def test_versions_and_pg_bin_do_not_mix(tmp_path: Path) -> None:
    text = (
        '[campaign]\nname = "x"\nversions = ["15"]\n'
        f'[[target]]\nname = "a"\ndirectory = "{tmp_path}"\npg_bin = "/usr/bin"\n'
    )
    with pytest.raises(UsageError, match="versions axis picks the binaries"):
        campaign.load(write(tmp_path / "x.toml", text))


def test_a_slow_runs_progress_line_keeps_its_decimals() -> None:
    """pg18-aio's sequential scan ran 1.46 tps; its line said "1 tps" (the report
    said 1.46): the headline formats a rate as the report does."""
    from dataclasses import replace

    from pgrig.results import PgbenchRun
    from test_store import run_record

    run = registry.typed_result(run_record("t/tpcb/s1/select-only/c1/d3/r1"))
    assert isinstance(run, PgbenchRun)
    assert registry.headline("pgbench_run", replace(run, tps=1.458456)) == ": 1.46 tps"
    assert registry.headline("pgbench_run", replace(run, tps=51508.97)) == ": 51,509 tps"
