"""The SQLite results store: runs recorded one by one survive the process."""

from __future__ import annotations

import json
import secrets
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pgrig.conninfo import Conn
from pgrig.errors import StoreError, UsageError
from pgrig.registry import typed_result
from pgrig.results import (
    Cpu,
    Environment,
    PgbenchRun,
    ProgressPoint,
    RunRecord,
    Study,
    to_dict,
)
from pgrig.store import Store
from pgrig.store import backends as store_backends

ENV = Environment(
    captured_at="2026-11-22T04:00:00+00:00",
    hostname="h",
    os_release="Debian GNU/Linux 12 (bookworm)",
    kernel="6.1",
    cpu=Cpu("AMD EPYC", 1, 2, 1, 2),
    memory_bytes=24 * 2**30,
)


def study(sid: str = "quick-1") -> Study:
    return Study(id=sid, name="quick", target="/var/tmp", started_at="t0", status="running")


def run_record(key: str, tps: float = 100.0) -> RunRecord:
    result = PgbenchRun(
        mode="select-only",
        transaction_type="<builtin: select only>",
        scale=1,
        query_mode="prepared",
        clients=1,
        threads=1,
        duration_s=3,
        transactions=300,
        failed=0,
        tps=tps,
        latency_avg_ms=0.02,
        latency_stddev_ms=None,
        initial_connection_ms=1.0,
        statements_per_txn=1,
        progress=(ProgressPoint(1.0, tps, 0.02),),
    )
    return RunRecord(
        study="quick-1",
        key=key,
        kind="pgbench_run",
        target="/var/tmp",
        params={"clients": 1},
        status="ok",
        started_at="t1",
        finished_at="t2",
        result=to_dict(result),
        raw="tps = 100",
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | Path]:
    """The same tests against a SQLite file and a real PostgreSQL database."""
    if request.param == "sqlite":
        yield tmp_path / "r.sqlite"
        return
    conn = request.getfixturevalue("conn")
    name = f"store_{secrets.token_hex(4)}"
    with conn.connect() as db:
        db.execute(f'CREATE DATABASE "{name}"')
    try:
        yield conn.with_dbname(name).dsn
    finally:
        with conn.connect() as db:
            db.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_round_trip(location: str | Path) -> None:
    with Store.open(location) as store:
        store.begin_study(study())
        store.set_environment("quick-1", ENV)
        store.record(run_record("a"))
        store.record(
            RunRecord(
                study="quick-1",
                key="b",
                kind="fio",
                target="/var/tmp",
                params={},
                status="skipped",
                started_at="t",
                finished_at="t",
                reason="fio not installed",
            )
        )
        store.finish_study("quick-1", "finished", "t9")
    with Store.open(location) as store:
        got = store.study("quick-1")
        assert got.status == "finished" and got.environment == ENV
        runs = store.runs("quick-1")
        assert [r.key for r in runs] == ["a", "b"]
        result = typed_result(runs[0])
        assert isinstance(result, PgbenchRun) and result.progress[0].tps == 100.0
        assert result.qps == 100.0
        assert typed_result(runs[1]) is None and runs[1].reason == "fio not installed"


def test_a_run_is_never_recorded_twice(location: str | Path) -> None:
    with Store.open(location) as store:
        store.begin_study(study())
        store.record(run_record("a"))
        with pytest.raises(StoreError, match="already recorded"):
            store.record(run_record("a"))
        assert len(store.runs("quick-1")) == 1
        # the failed insert left no transaction open: the store still works
        store.record(run_record("b"))
        assert [r.key for r in store.runs("quick-1")] == ["a", "b"]


def test_records_survive_a_killed_writer(tmp_path: Path) -> None:
    """Each record is committed on its own: SIGKILL after the second loses nothing."""
    path = tmp_path / "r.sqlite"
    code = (
        "import os, signal, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from pgrig.store import Store\n"
        "from test_store import study, run_record\n"
        "s = Store.open(__import__('pathlib').Path(sys.argv[1]))\n"
        "s.begin_study(study())\n"
        "s.record(run_record('a')); s.record(run_record('b'))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(Path(__file__).parent)], timeout=60
    )
    assert done.returncode == -9
    with Store.open(path) as store:
        assert [r.key for r in store.runs("quick-1")] == ["a", "b"]
        assert store.study("quick-1").status == "running"


def test_unknown_study_names_recent_ones(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        store.begin_study(study())
        with pytest.raises(StoreError, match="no study 'nope'") as err:
            store.study("nope")
        assert "quick-1" in (err.value.hint or "")


def test_unreachable_postgresql_store(tmp_path: Path) -> None:
    # bad input (exit 2), as an unreachable --dsn is (issue 33's trial: it was exit 1)
    with pytest.raises(UsageError, match="cannot open results store"):
        Store.open(f"postgresql://nobody@/nodb?host={tmp_path}&connect_timeout=2")


def test_unwritable_store(tmp_path: Path) -> None:
    (tmp_path / "dir.sqlite").mkdir()  # read "unable to open database file", exit 1
    with pytest.raises(UsageError, match="dir.sqlite is a directory, not a file"):
        Store.open(tmp_path / "dir.sqlite")


def test_a_locked_postgresql_store_fails_the_write_instead_of_hanging(
    conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another session holding the runs table: the write gives up after the lock
    timeout (it waited for ever before)."""
    monkeypatch.setattr(store_backends, "PG_LOCK_TIMEOUT_S", 0.5)
    name = f"store_{secrets.token_hex(4)}"
    with conn.connect() as db:
        db.execute(f'CREATE DATABASE "{name}"')
    try:
        with Store.open(conn.with_dbname(name).dsn) as store:
            store.begin_study(study())
            with conn.with_dbname(name).connect(autocommit=False) as holder:
                holder.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
                started = time.monotonic()
                with pytest.raises(StoreError, match="lock timeout"):
                    store.record(run_record("a"))
                assert time.monotonic() - started < 30
    finally:
        with conn.connect() as db:
            db.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_samples_are_read_one_run_at_a_time(location: str | Path) -> None:
    """A study's records without the monitor's per-second samples, and one run's
    samples on their own: what the report reads (issue 18.6)."""
    watched = {"verdict": {"cause": "cpu"}, "samples": [{"t_s": 1.0}, {"t_s": 2.0}]}
    with Store.open(location) as store:
        store.begin_study(study())
        store.record(run_record("a"))
        mon = store.record(replace(run_record("a/monitor"), kind="monitor", result=watched))
        assert mon.id is not None
        light = store.runs("quick-1", without_samples=("monitor",))
        assert [r.key for r in light] == ["a", "a/monitor"]
        assert light[1].result == {"verdict": {"cause": "cpu"}, "samples": []}
        assert light[0].result == store.runs("quick-1")[0].result  # the rest unchanged
        assert store.runs("quick-1")[1].result == watched
        assert list(store.samples(mon.id)) == [{"t_s": 1.0}, {"t_s": 2.0}]
        assert list(store.samples(light[0].id or 0)) == []  # a run without samples


def test_progress_points_are_read_one_run_at_a_time(location: str | Path) -> None:
    """A study's records without pgbench's -P points, and one run's points on
    their own, each number as it was stored (issue 18.6): the report's reads."""
    points = [
        {"t_s": 1.0, "tps": 1234.5678901234567, "latency_ms": 0.1, "lag_ms": None},
        {"t_s": 2.0, "tps": 1e-05, "latency_ms": 3.0, "lag_ms": 2.5e300},
    ]
    run = {"tps": 617.3, "progress": points}
    both = {"progress": points, "samples": [{"t_s": 1.0}]}  # a kind holding both lists
    watched = {"verdict": {"cause": "cpu"}, "samples": [{"t_s": 1.0}]}
    with Store.open(location) as store:
        store.begin_study(study())
        a = store.record(replace(run_record("a"), kind="pgbench_run", result=run))
        store.record(replace(run_record("a/monitor"), kind="monitor", result=watched))
        b = store.record(replace(run_record("b"), kind="both", result=both))
        assert a.id is not None and b.id is not None
        lean = store.runs(
            "quick-1",
            without_samples=("monitor", "both"),
            without_progress=("pgbench_run", "both"),
        )
        assert [r.result for r in lean] == [
            {"tps": 617.3, "progress": []},
            {"verdict": {"cause": "cpu"}, "samples": []},
            {"progress": [], "samples": []},
        ]
        assert list(store.progress(a.id)) == points
        assert list(store.progress(b.id)) == points
        assert [r.result for r in store.runs("quick-1")] == [run, watched, both]
        assert list(store.progress(lean[1].id or 0)) == []  # a record without points


def test_samples_streamed_in_are_all_of_the_run_or_none_of_it(location: str | Path) -> None:
    """A run's samples go to rows of their own as they come (from a monitor's
    spool: never all in memory), in the run's transaction: a failure half way
    keeps neither the run nor any of its samples, and a resumed study records it
    anew (issue 18.6). Read back, the run is what it was with its samples inline."""
    watched = {"verdict": {"cause": "cpu"}, "samples": []}
    rec = replace(run_record("a/monitor"), kind="monitor", result=watched)

    def cut_short() -> Iterator[dict[str, float]]:
        yield {"t_s": 1.0}
        yield {"t_s": 2.0}
        raise KeyboardInterrupt  # Ctrl-C while the samples go in

    with Store.open(location) as store:
        store.begin_study(study())
        with pytest.raises(KeyboardInterrupt):
            store.record(rec, cut_short())
        assert store.runs("quick-1") == []
        assert store._db.execute("SELECT count(*) AS n FROM samples") == [{"n": 0}]
        stored = store.record(rec, ({"t_s": float(t)} for t in range(1, 4)))
        assert stored.id is not None
        samples = [{"t_s": 1.0}, {"t_s": 2.0}, {"t_s": 3.0}]
        assert store.runs("quick-1")[0].result == {**watched, "samples": samples}
        assert store.runs("quick-1", without_samples=("monitor",))[0].result == watched
        assert list(store.samples(stored.id)) == samples
        assert store._db.execute("SELECT value FROM meta WHERE key = 'schema_version'") == [
            {"value": "2"}
        ]


def test_a_store_of_schema_1_is_read_as_before_and_upgraded_by_its_first_sample_rows(
    tmp_path: Path,
) -> None:
    """Stores written before the samples table hold the samples in the result's
    JSON: read the same; once a run's samples go to rows, the store says schema 2
    so that an older pgrig refuses it instead of drawing runs without samples."""
    path = tmp_path / "old.sqlite"
    inline = {"verdict": {"cause": "cpu"}, "samples": [{"t_s": 1.0}, {"t_s": 2.0}]}
    with Store.open(path) as store:
        store.begin_study(study())
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.execute(  # a monitor record as schema 1 wrote it, its samples inline
        "INSERT INTO runs (study_id, key, kind, target, params, status, result, raw,"
        " tool_versions, started_at, finished_at) VALUES ('quick-1', 'old/monitor',"
        " 'monitor', 't', '{}', 'ok', ?, '', '{}', 't1', 't2')",
        (json.dumps(inline),),
    )
    db.commit()
    db.close()
    with Store.open(path) as store:
        (old,) = store.runs("quick-1")
        assert old.result == inline and old.id is not None
        assert list(store.samples(old.id)) == inline["samples"]
        assert store.runs("quick-1", without_samples=("monitor",))[0].result == {
            **inline,
            "samples": [],
        }
        assert store.version == 1
        store.record(replace(run_record("new/monitor"), kind="monitor", result=inline))
        assert store.version == 2
        assert [r.result for r in store.runs("quick-1")] == [inline, inline]
    with Store.open(path) as store:
        assert store.version == 2
