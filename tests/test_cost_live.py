"""The per-transaction cost against a direct measurement: a real TPC-B (scale 1)
and a real TPC-C (one warehouse) run under the monitor, with pg_stat_wal and
pg_stat_database read by hand before and after each."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgrig import monitor
from pgrig.clients import OneHost
from pgrig.cluster.server import SUPERUSER, Cluster
from pgrig.conninfo import Conn
from pgrig.pgsource import binaries
from pgrig.policy import LatencyTarget
from pgrig.report import cost
from pgrig.report.evidence import Evidence
from pgrig.results import RunRecord, to_dict
from pgrig.step import Context, Running
from pgrig.tools import pgbench
from pgrig.workloads.tpcc import driver, loader

pytestmark = pytest.mark.cluster


@dataclass(frozen=True)
class Counters:
    wal_bytes: float
    wal_fpi: float
    wal_sync: float
    wal_sync_ms: float
    commits: float

    def per_commit_since(self, before: Counters) -> dict[str, float]:
        commits = self.commits - before.commits
        return {
            name: (getattr(self, name) - getattr(before, name)) / commits
            for name in ("wal_bytes", "wal_fpi", "wal_sync", "wal_sync_ms")
        }


def counters(conn: Conn) -> Counters:
    with conn.connect() as c:
        row = c.execute(
            "SELECT wal_bytes, wal_fpi, wal_sync, wal_sync_time,"
            " (SELECT sum(xact_commit) FROM pg_stat_database) FROM pg_stat_wal"
        ).fetchone()
    assert row is not None
    return Counters(*(float(v) for v in row))


@pytest.fixture(scope="module")
def conn(cluster: Cluster) -> Iterator[Conn]:
    """The fixture's cluster runs with fsync = off, which counts no WAL sync:
    this module turns it on, with the syncs' timing, for its own cluster."""
    admin = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
    with admin.connect() as c:
        c.autocommit = True
        c.execute("ALTER SYSTEM SET fsync = on")
        c.execute("ALTER SYSTEM SET track_wal_io_timing = on")
        c.execute("SELECT pg_reload_conf()")
    yield admin


def context(bins: binaries.PgBinaries, cluster: Cluster, conn: Conn) -> Context:
    return Context(
        clients=OneHost(bins.client_bin_dir),
        bins=bins,
        target=cluster.workdir,
        scratch=cluster.workdir,
        conn=conn,
        running=Running(server_pid=cluster.postmaster_pid()),
    )


def records(kind: str, params: dict[str, object], run: object, mon: object) -> list[RunRecord]:
    rec = RunRecord(
        study="s", key="t/run", kind=kind, target="t", params=params,
        status="ok", started_at="", finished_at="", result=to_dict(run),
    )  # fmt: skip
    mon_rec = RunRecord(
        study="s", key="t/run/monitor", kind="monitor", target="t", params={},
        status="ok", started_at="", finished_at="", result=to_dict(mon),
    )  # fmt: skip
    return [rec, mon_rec]


def shown(records: list[RunRecord]) -> dict[str, float]:
    """The cost table's one row, read back as numbers."""
    table = cost.cost_table(records, ["t"])
    assert table is not None and len(table.rows) == 1
    wal, syncs, cpu, _device, _ckpt = (str(c) for c in table.rows[0].cells[3:])
    m = re.fullmatch(r"([\d,]+) \(([\d.]+) FPI\)", wal)
    s = re.fullmatch(r"([\d.]+) \(([\d.]+) ms\)", syncs)
    assert m is not None and s is not None, (wal, syncs)
    return {
        "wal_bytes": float(m[1].replace(",", "")),
        "wal_fpi": float(m[2]),
        "wal_sync": float(s[1]),
        "wal_sync_ms": float(s[2]),
        "cpu_ms": float(cpu),
    }


def agree(report: dict[str, float], direct: dict[str, float], what: str) -> None:
    """The monitor's window is the timed run's whole seconds, the direct figures the
    whole run (the connections and the first, FPI-heavy, instants included): the
    same transactions give or take the edges."""
    print(f"{what}: report {report}, pg_stat_wal directly {direct}")
    for name in ("wal_bytes", "wal_sync"):
        assert 0.6 * direct[name] <= report[name] <= 1.6 * direct[name], (name, report, direct)
    # Full-page images and the sync wait bunch up at the run's start and on a
    # loaded machine: a looser band, but the same order of magnitude.
    for name in ("wal_fpi", "wal_sync_ms"):
        assert 0.25 * direct[name] <= report[name] <= 4 * direct[name] + 0.01, (name, report)
    assert 0.001 < report["cpu_ms"] < 200


def test_tpcb_cost_agrees_with_pg_stat_wal(
    bins: binaries.PgBinaries, cluster: Cluster, conn: Conn
) -> None:
    pgbench.run_init(bins.bin_dir, conn, pgbench.InitOptions(scale=1))
    # No CHECKPOINT first: at scale 1 the full-page burst after one fills the
    # first second, which the monitor's whole-second window weighs differently.
    opts = pgbench.RunOptions(mode="read-write", clients=2, threads=1, duration_s=3)
    before = counters(conn)
    with monitor.Watch(context(bins, cluster, conn)) as watch:
        run, _ = pgbench.run_bench(bins.bin_dir, conn, opts, cluster.workdir)
    direct = counters(conn).per_commit_since(before)
    mon = watch.result(run)
    assert mon.totals is not None and mon.totals.wal_bytes is not None
    # TPC-B read-write at scale 1: three updates, an insert, full pages after the
    # load's checkpoint - a few hundred bytes to a few kB a transaction.
    assert 100 < direct["wal_bytes"] < 20_000, direct
    params = {"workload": "tpcb", "scale": 1, "duration_s": 3, "mode": "read-write", "clients": 2}
    agree(shown(records("pgbench_run", params, run, mon)), direct, "TPC-B")


@pytest.fixture(scope="module")
def tpcc_db(conn: Conn) -> Conn:
    """One warehouse, loaded once for this module's TPC-C runs."""
    with conn.connect() as c:
        c.autocommit = True
        c.execute("DROP DATABASE IF EXISTS tpcc_cost")
        c.execute("CREATE DATABASE tpcc_cost")
    db = conn.with_dbname("tpcc_cost")
    loader.load(db, 1, jobs=2)
    return db


def test_tpcc_cost_agrees_with_pg_stat_wal(
    bins: binaries.PgBinaries, cluster: Cluster, conn: Conn, tpcc_db: Conn, tmp_path: Path
) -> None:
    db = tpcc_db
    with db.connect() as c:
        c.execute("CHECKPOINT")
    tmp_path.chmod(0o755)
    opts = driver.RunOptions(mode="server", connections=2, duration_s=3, warehouses=1)
    before = counters(conn)
    with monitor.Watch(context(bins, cluster, db)) as watch:
        run, _ = driver.run(bins.bin_dir, db, opts, tmp_path)
    direct = counters(conn).per_commit_since(before)
    mon = watch.result(run)  # type: ignore[arg-type]  # the watch reads duration_s and progress
    # A TPC-C transaction writes several kB of WAL (the study: about 10 kB).
    assert 500 < direct["wal_bytes"] < 100_000, direct
    params = {"workload": "tpcc", "mode": "server", "warehouses": 1, "active": 1,
              "connections": 2, "duration_s": 3}  # fmt: skip
    rows = records("tpcc_run", params, run, mon)
    assert cost.case_label(rows[0]) == "TPC-C server-side, 2 connections, 3 s"
    agree(shown(rows), direct, "TPC-C")


def test_a_tpcc_rate_sweep_gives_the_throughput_within_the_goal(
    bins: binaries.PgBinaries, tpcc_db: Conn, tmp_path: Path
) -> None:
    """TPC-C's own rate (pgbench -R over the five scripts), two offered rates, and
    the report's "highest tpmC with New-Order p99 <= X" read from them."""
    tmp_path.chmod(0o755)
    records = []
    for rate in (20.0, 60.0):
        opts = driver.RunOptions(mode="server", connections=2, duration_s=2, warehouses=1,
                                 rate=rate)  # fmt: skip
        run, _ = driver.run(bins.bin_dir, tpcc_db, opts, tmp_path)
        assert "-R" in run.argv and float(run.argv[run.argv.index("-R") + 1]) == rate
        # open loop: about the offered rate, never far past it
        assert run.tps < 1.5 * rate, (rate, run.tps)
        params = {"workload": "tpcc", "mode": "server", "warehouses": 1, "active": 1,
                  "connections": 2, "duration_s": 2, "rate": rate,
                  "latency_target": "p99 <= 1000 ms"}  # fmt: skip
        records.append(RunRecord(
            study="s", key=f"t/tpcc/run/server/c2/R{rate:g}", kind="tpcc_run", target="t",
            params=params, status="ok", started_at="", finished_at="", result=to_dict(run),
        ))  # fmt: skip
    goal = LatencyTarget.parse("p99 <= 1000 ms")
    table = cost.target_table(records, ["t"], goal)
    (row,) = table.rows
    assert row.cells[0] == "TPC-C server-side, 2 s"
    # both rates stay within a second on this machine: the higher rate's tpmC
    best = max(records, key=lambda r: float(r.params["rate"]))
    tpmc = f"{float((best.result or {})['tpmc']):,.0f}"
    assert str(row.cells[1]).startswith(f"{tpmc} tpmC at 2 connections, 60 tps offered")
    (figure,) = cost.rate_figures(records, ["t"], goal)
    assert [s.label for s in figure.series] == ["t", "the goal: p99 <= 1000 ms"]
    assert figure.series[0].x == (20.0, 60.0)
    (said,) = cost.goal_rule(Evidence(tuple(records), ("t",), "t"))
    assert said.text.startswith("Within p99 <= 1000 ms, TPC-C server-side, 2 s: t ")
