"""Export (JSON, CSV, per-second CSV), import from another machine's results file,
and comparing studies across stores - through the real CLI (``cli.main`` in this
process, as test_history.py runs it: a process each cost 0.9 s of CPU, 10 of them).

The records are built in the test (test_store's helpers) rather than measured:
what is under test is how stored results travel, not the numbers."""

from __future__ import annotations

import csv
import io
import json
import secrets
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import test_history
from conftest import full_report
from pgrig.store import Store
from test_history import Done
from test_store import ENV, run_record, study

pgrig = test_history.pgrig  # the fixture: the command line in this process


def make_store(path: Path, sid: str, tps: list[float], *, directory: str = "/var/tmp") -> None:
    # named as run_record names its target
    target = {"name": "/var/tmp", "directory": directory, "pg_version": "15.4", "profile": "oltp"}
    with Store.open(path) as store:
        store.begin_study(replace(study(sid), params={"targets": [target]}))
        store.set_environment(sid, ENV)
        for i, value in enumerate(tps, start=1):
            rec = run_record(f"local/tpcb/s1/select-only/c1/d3/r{i}", tps=value)
            store.record(
                rec.__class__(
                    **{
                        **rec.__dict__,
                        "study": sid,
                        "params": {
                            "mode": "select-only",
                            "clients": 1,
                            "scale": 1,
                            "duration_s": 3,
                            "workload": "tpcb",
                            "repeat": i,
                        },
                    }
                )
            )
        store.finish_study(sid, "finished", "t9")


def test_export_json_and_csv(tmp_path: Path, pgrig: Callable[..., Done]) -> None:
    make_store(tmp_path / "results.sqlite", "quick-1", [100.0, 110.0])
    out = pgrig("export", "--results", tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["schema"] == "pgrig-export/1"
    assert [s["id"] for s in data["studies"]] == ["quick-1"]
    assert [r["result"]["tps"] for r in data["runs"]] == [100.0, 110.0]
    assert "raw" not in data["runs"][0]

    table = pgrig("export", "quick-1", "--results", tmp_path, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert [r["pgbench_run.tps"] for r in rows] == ["100", "110"]
    assert rows[0]["mode"] == "select-only" and rows[0]["status"] == "ok"

    series = pgrig("export", "--results", tmp_path, "--format", "csv", "--series")
    lines = list(csv.DictReader(io.StringIO(series.stdout)))
    assert len(lines) == 2 and float(lines[1]["tps"]) == 110.0


def test_import_and_compare_across_machines(tmp_path: Path, pgrig: Callable[..., Done]) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    make_store(ours / "results.sqlite", "box-a", [100.0, 101.0, 99.0])
    make_store(theirs / "results.sqlite", "box-b", [150.0, 151.0, 149.0], directory="/data01")
    imported = pgrig("import", theirs / "results.sqlite", "--results", ours)
    assert imported.returncode == 0, imported.stderr
    assert "imported box-b" in imported.stdout
    again = pgrig("import", theirs / "results.sqlite", "--results", ours)
    assert again.returncode == 2 and "already holds 'box-b'; nothing was imported" in again.stderr
    assert "--as" in again.stderr

    compared = pgrig("compare", "box-a", "box-b", "--results", ours)
    assert compared.returncode == 0, compared.stderr
    report = full_report(ours, "report-compare-*.md").read_text()
    assert "| box-a (baseline) | box-b | box-b vs box-a |" in report
    assert "**▲ +50.0% (95% CI" in report  # a real difference over 3 runs each: marked
    # each target as its own study described it: it said "storage lab, PostgreSQL None"
    assert "target box-b: /data01, PostgreSQL 15.4, profile oltp" in report
    assert "PostgreSQL None" not in report
    # two studies ran at different times, not interleaved in one
    assert "come from 2 studies (box-a, box-b), run at different times" in report
    assert "interleaved" not in report

    bad = pgrig("compare", "box-a", "box-b", "--results", ours, "--baseline", "box-c")
    assert bad.returncode == 2 and "--baseline 'box-c' is not one of" in bad.stderr


def test_a_team_pools_results_in_a_postgresql_store(  # type: ignore[no-untyped-def]
    tmp_path: Path, conn, pgrig: Callable[..., Done]
) -> None:
    """--store postgresql://...: the same schema in a real PostgreSQL database."""
    name = f"pool_{secrets.token_hex(4)}"
    with conn.connect() as db:
        db.execute(f'CREATE DATABASE "{name}"')
    uri = conn.with_dbname(name).dsn
    try:
        make_store(tmp_path / "results.sqlite", "box-a", [100.0, 101.0])
        imported = pgrig("import", tmp_path / "results.sqlite", "--store", uri)
        assert imported.returncode == 0, imported.stderr
        listed = pgrig("list", "--store", uri)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[1].startswith("box-a\tfinished\t2/2 ok")  # under a header
        out = pgrig("export", "--store", uri)
        assert [r["result"]["tps"] for r in json.loads(out.stdout)["runs"]] == [100.0, 101.0]
    finally:
        with conn.connect() as db:
            db.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_csv_numbers_are_written_as_the_tools_print_them() -> None:
    """No binary-float tails (37742.044525000005): at most 6 decimals, derived
    rates 1, trailing zeros dropped; integers, text and missing values unchanged."""
    from pgrig import export

    assert export.number(37742.044525000005) == "37742.044525"
    assert export.number(0.1 + 0.2) == "0.3"
    assert export.number(2.0) == "2"
    assert export.number(-1e-9) == "0"
    assert export.number(290697.6744186, 1) == "290697.7"
    assert [export.number(v) for v in (7, None, "x")] == [7, None, "x"]
    rec = run_record("local/tpcb/s1/select-only/c1/d3/r1", tps=37742.044525000005)
    (row,) = csv.DictReader(io.StringIO(export.runs_csv([rec])))
    assert row["pgbench_run.tps"] == "37742.044525"
    assert row["pgbench_run.latency_avg_ms"] == "0.02"
    (second,) = csv.DictReader(io.StringIO(export.series_csv([rec])))
    assert (second["t_s"], second["tps"]) == ("1", "37742.044525")


def test_csv_has_p90_and_pg_test_timing_per_loop() -> None:
    """Columns for the figures records gained: a pgbench run's p90 latency and
    pg_test_timing's ns per loop; a record made before p90 was kept has an empty cell."""
    from pgrig import export
    from pgrig.results import LatencySummary, PgbenchRun, to_dict, typed
    from pgrig.tools import pg_test_timing

    old = run_record("local/tpcb/s1/select-only/c1/d3/r1")
    latency = LatencySummary(
        samples=300,
        sampling_rate=1.0,
        p50_ms=0.5,
        p95_ms=0.9,
        p99_ms=1.1,
        max_ms=2.0,
        p90_ms=0.8,
        digits=3,
    )
    result = replace(typed(old, PgbenchRun), latency=latency)
    new = replace(old, key="local/tpcb/s1/select-only/c1/d3/r2", result=to_dict(result))
    without_p90 = replace(latency, p90_ms=None, digits=None)
    older = replace(old, key="r3", result=to_dict(replace(result, latency=without_p90)))
    text = (Path(__file__).parent / "data" / "pg_test_timing_pg15.txt").read_text()
    timing = replace(
        old,
        key="local/probe/pg_test_timing",
        kind="pg_test_timing",
        result=to_dict(pg_test_timing.parse(text)),
    )
    rows = list(csv.DictReader(io.StringIO(export.runs_csv([new, older, timing]))))
    assert [r["pgbench_run.latency_p90_ms"] for r in rows] == ["0.8", "", ""]
    assert rows[0]["pgbench_run.latency_p95_ms"] == "0.9"
    expected = export.number(pg_test_timing.parse(text).per_loop_ns)
    assert [r["pg_test_timing.per_loop_ns"] for r in rows] == ["", "", expected]
    assert expected
