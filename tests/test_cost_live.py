"""The per-transaction cost against a direct measurement: a real pgbench run
under the monitor, with pg_stat_wal read by hand before and after it."""

from __future__ import annotations

import re

import pytest

from pgrig import monitor
from pgrig.cluster.server import SUPERUSER, Cluster
from pgrig.conninfo import Conn
from pgrig.pgsource import binaries
from pgrig.report import cost
from pgrig.results import RunRecord, to_dict
from pgrig.step import Context, Running
from pgrig.tools import pgbench

pytestmark = pytest.mark.cluster


def wal_bytes(conn: Conn) -> float:
    with conn.connect() as c:
        row = c.execute("SELECT wal_bytes FROM pg_stat_wal").fetchone()
    assert row is not None
    return float(row[0])


def test_wal_bytes_per_transaction_agree_with_pg_stat_wal(
    bins: binaries.PgBinaries, cluster: Cluster
) -> None:
    conn = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
    pgbench.run_init(bins.bin_dir, conn, pgbench.InitOptions(scale=1))
    ctx = Context(
        bins=bins,
        target=cluster.workdir,
        scratch=cluster.workdir,
        conn=conn,
        running=Running(server_pid=cluster.postmaster_pid()),
    )
    opts = pgbench.RunOptions(mode="read-write", clients=2, threads=1, duration_s=2)
    before = wal_bytes(conn)
    with monitor.Watch(ctx) as watch:
        run, _ = pgbench.run_bench(bins.bin_dir, conn, opts, cluster.workdir)
    direct = (wal_bytes(conn) - before) / run.transactions
    mon = watch.result(run)
    assert mon.totals is not None and mon.totals.wal_bytes is not None
    # TPC-B read-write at scale 1: three updates, an insert, full pages after the
    # load's checkpoint - a few hundred bytes to a few kB a transaction.
    assert 100 < direct < 20_000, direct
    rec = RunRecord(
        study="s", key="t/run", kind="pgbench_run", target="t",
        params={"workload": "tpcb", "scale": 1, "duration_s": 2, "mode": "read-write",
                "clients": 2},
        status="ok", started_at="", finished_at="", result=to_dict(run),
    )  # fmt: skip
    mon_rec = RunRecord(
        study="s", key="t/run/monitor", kind="monitor", target="t", params={},
        status="ok", started_at="", finished_at="", result=to_dict(mon),
    )  # fmt: skip
    table = cost.cost_table([rec, mon_rec], ["t"])
    assert table is not None
    shown = float(re.sub(",", "", str(table.rows[0].cells[3])))
    # The monitor's window is the timed run's whole seconds; the direct figure
    # the whole run: the same transactions, give or take the edges.
    assert 0.67 * direct < shown < 1.5 * direct, (shown, direct)
    cpu = float(str(table.rows[0].cells[5]))
    assert 0.001 < cpu < 50, cpu  # server CPU ms per transaction
    print(f"WAL bytes/xact: report {shown:,.0f}, pg_stat_wal directly {direct:,.0f}; "
          f"WAL syncs/commit {table.rows[0].cells[4]}; CPU ms/xact {cpu}")  # fmt: skip
