"""TPC-C: parsers on real pgbench output, then the real thing on a throwaway
cluster - load 1 warehouse, cardinalities and all twelve consistency conditions,
timed runs in both modes (mix within tolerance, conditions still hold), a broken
row caught by its condition, bad input refused before anything starts."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pgrig import load
from pgrig.clients import OneHost
from pgrig.cluster.server import Cluster
from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.pgsource.binaries import PgBinaries
from pgrig.policy import RunPolicy
from pgrig.results import RunRecord, Study, to_dict
from pgrig.step import Context
from pgrig.tools import pgbench
from pgrig.tools.pgbench import txlog
from pgrig.ui import Ui
from pgrig.workloads import copybin
from pgrig.workloads.tpcc import checks, driver, loader, sqlfiles
from pgrig.workloads.tpcc import report as report_tpcc
from pgrig.workloads.tpcc import steps as tpcc_steps
from pgrig.workloads.tpcc.model import TRANSACTIONS, WEIGHTS, TpccLoad, TpccRun
from recording_clients import Recording

DATA = Path(__file__).parent / "data"


# --------------------------------------------------------------------------
# Parsers and scripts: no server


def test_parse_scripts_reads_each_script_block() -> None:
    blocks = driver.parse_scripts((DATA / "tpcc_pgbench_server_stdout.txt").read_text())
    assert [b["transactions"] for b in blocks] == [8976, 8634, 814, 802, 742]
    assert blocks[0]["number of failed transactions"] == 0
    assert blocks[1]["latency average"] > 0


def test_parse_totals_reads_retries_and_failures() -> None:
    totals = driver.parse_totals((DATA / "tpcc_pgbench_client_stdout.txt").read_text())
    assert totals == {
        "serialization_failures": 0,
        "deadlock_failures": 0,
        "retried": 0,
        "retries": 0,
    }


def test_parse_logs_groups_latencies_by_script(tmp_path: Path) -> None:
    log = tmp_path / "txlog.1"
    log.write_text((DATA / "tpcc_txlog.txt").read_text() + "3 99 failed 1 1795324650 1 0\n")
    summary = txlog.parse_logs([log])
    assert sorted(summary.latencies) == [0, 1, 2, 3]
    assert summary.latencies[0].samples == 27
    assert summary.latencies[1].samples == 26  # the failed one is not a latency sample
    bad = tmp_path / "bad.1"
    bad.write_text("not a log line\n")
    with pytest.raises(Exception, match="not a pgbench transaction log line"):
        txlog.parse_logs([bad])


def test_timeline_counts_new_orders_per_interval() -> None:
    completed = {0: {0: 2, 1: 1}, 1: {0: 1, 1: 1, 3: 1}}  # per second from the start
    points = driver.timeline(completed, duration_s=2, sampling_rate=0.5)
    assert [(p.t_s, p.tpmc, p.tpm_total) for p in points] == [
        (1, 2 * 60 / 0.5, 3 * 60 / 0.5),
        (2, 1 * 60 / 0.5, 2 * 60 / 0.5),
    ]
    longer = driver.timeline({0: {s: 1 for s in range(-1, 41)}}, duration_s=40, sampling_rate=1)
    assert [p.t_s for p in longer] == list(range(2, 41, 2))  # 2-s intervals, none before 0
    assert {p.tpmc for p in longer} == {2 * 60 / 2}


def test_load_hosts_merge_host_by_host(tmp_path: Path) -> None:
    """Two load hosts' runs as one TPC-C result (pgrig.load): counts and
    tpmC summed, each type's percentiles from both logs pooled, and the tpmC
    timeline on this machine's clock - h3's clock runs 100 s ahead, its
    completions brought back by its offset (the namespace hosts of the suite
    share one clock, so only this test can see the offset applied)."""
    stdout = (DATA / "tpcc_pgbench_server_stdout.txt").read_text()
    own = DATA / "tpcc_txlog.txt"
    ahead = tmp_path / "h3.log.1"
    ahead.write_text(
        "".join(
            " ".join([*c[:4], str(int(c[4]) + 100), *c[5:]]) + "\n"
            for c in (line.split() for line in own.read_text().splitlines())
        )
    )
    run = pgbench.parse_run(stdout, "", mode="custom")
    hosts = tuple(
        load.HostLoad(name, run, None, 0.0, (str(log),), stdout)
        for name, log in (("h2", own), ("h3", ahead))
    )
    multi = load.MultiLoad(
        hosts=hosts,
        offsets=(load.ClockOffset("h2", 0.0, 0.1, 12), load.ClockOffset("h3", 100_000.0, 0.1, 12)),
        start_spread_ms=0.0,
        start_spread_uncertainty_ms=0.1,
        tps=2 * run.tps,
        latency=None,
        start_at=1795324646.0,
    )
    facts = driver.RunFacts(driver.RunOptions(duration_s=10), 1, 1, 1.0, None)
    merged = driver.merged_result(multi, facts)
    single = driver.build_result(stdout, "", [own], facts, started_epoch=1795324646.0)
    assert merged.transactions == 2 * single.transactions == 2 * 19970
    assert merged.connections == 2 * single.connections
    assert merged.tpmc == pytest.approx(2 * driver.host_tpmc(hosts[0]))
    assert merged.tpmc == pytest.approx(2 * single.tpmc)
    for both, one in zip(merged.types, single.types, strict=True):
        assert both.transactions == 2 * one.transactions
        assert both.samples == 2 * one.samples
        assert both.latency_avg_ms == pytest.approx(one.latency_avg_ms)
        if one.samples:  # the same samples twice: the same nearest ranks
            assert both.p99_ms == one.p99_ms
    assert [p.tpm_total for p in merged.timeline] == [2 * p.tpm_total for p in single.timeline]
    assert sum(p.tpm_total for p in single.timeline) > 0


def test_run_constant_follows_clause_2_1_6_1() -> None:
    for c_load in (0, 50, 128, 200, 255):
        for _ in range(50):
            delta = abs(driver.run_constant(c_load) - c_load)
            assert 65 <= delta <= 119 and delta not in (96, 112)


def test_client_new_order_script_has_fifteen_lines() -> None:
    text = sqlfiles.script("client", "new_order")
    assert "@N" not in text and "--@" not in text
    assert text.count("INSERT INTO tpcc.order_line") == 15
    assert "\\set i_15 " in text and "\\if 15 <= :ol_cnt" in text
    assert sqlfiles.script("client", "delivery").count("DELETE FROM tpcc.new_order") == 10


def test_every_condition_has_a_query() -> None:
    numbers = [n for n, _title, query in checks.conditions() if query.upper().startswith("SELECT")]
    assert numbers == list(range(1, 13))


def test_bad_run_options_are_refused() -> None:
    for opts, message in (
        (driver.RunOptions(mode="both"), "--mode"),
        (driver.RunOptions(connections=0), "--connections 0"),
        (driver.RunOptions(connections=2, threads=3), "--threads 3"),
        (driver.RunOptions(isolation="chaos"), "--isolation"),
        (driver.RunOptions(active=0), "--active 0"),
    ):
        with pytest.raises(UsageError, match=message):
            opts.validate()


def test_copy_rows_pack_variable_fields_and_nulls() -> None:
    """Binary COPY rows: a fixed int4, a varchar cut to its length, a NULL, and
    numeric in the base-10,000 form numeric_recv takes (-10.00, 0.25)."""
    text = np.frombuffer(b"abcdXYZW", np.uint8).reshape(2, 4)
    got = copybin.rows(
        [
            copybin.int4([7, 8], 2),
            copybin.Field(text, np.array([2, 4])),
            copybin.Field(np.array([1, 2], dtype=">i4"), null=np.array([False, True])),
            copybin.money([-1_000, 5], 2),
            copybin.fraction(2_500, 2),
        ]
    )
    money_neg = struct.pack(">i7h", 14, 3, 1, 0x4000, 2, 0, 10, 0)
    money_5c = struct.pack(">i7h", 14, 3, 1, 0, 2, 0, 0, 500)
    quarter = struct.pack(">i5h", 10, 1, -1, 0, 4, 2500)
    first = struct.pack(">hii", 5, 4, 7) + struct.pack(">i", 2) + b"ab"
    first += struct.pack(">ii", 4, 1) + money_neg + quarter
    second = struct.pack(">hii", 5, 4, 8) + struct.pack(">i", 4) + b"XYZW"
    second += struct.pack(">i", -1) + money_5c + quarter
    assert got == first + second


# --------------------------------------------------------------------------
# The real thing


@pytest.fixture(scope="module")
def db(cluster) -> Iterator[Conn]:  # type: ignore[no-untyped-def]
    admin = Conn.socket(str(cluster.socket_dir), cluster.port, "postgres", "postgres")
    with admin.connect() as c:
        c.execute("DROP DATABASE IF EXISTS tpcc_test")
        c.execute("CREATE DATABASE tpcc_test")
    yield admin.with_dbname("tpcc_test")


def _wal_lsn(conn: Conn) -> str:
    with conn.connect() as c:
        row = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _wal_since(conn: Conn, lsn: str) -> int:
    return _count(conn, f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn}')::bigint")


def _wal_settings(conn: Conn) -> list[Any]:
    with conn.connect() as c:
        return [c.execute(f"SHOW {name}").fetchone() for name in ("wal_level", "max_wal_senders")]


MINIMAL_LOAD: dict[str, Any] = {}  # what the module's load at wal_level=minimal left


@pytest.fixture(scope="module")
def loaded(db: Conn, cluster: Cluster) -> Conn:
    """One warehouse, loaded as a study loads its own cluster: at wal_level=minimal."""
    lsn, postmaster, settings = _wal_lsn(db), cluster.postmaster_pid(), _wal_settings(db)
    result = loader.load(db, 1, jobs=2, minimal_wal=cluster)
    MINIMAL_LOAD.update(
        result=result, wal=_wal_since(db, lsn), postmaster=postmaster, settings=settings
    )
    assert result.warehouses == 1 and result.rows > 590_000
    assert result.per_warehouse_s.keys() == {"1"}
    assert result.database_bytes > 90_000_000 and result.mb_per_s > 0
    with db.connect() as c:  # what every run reads for its active data's share
        assert checks.loaded(c).load_bytes == result.database_bytes
    return db


def _count(conn: Conn, sql: str) -> int:
    with conn.connect() as c:
        row = c.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def _row_counts(conn: Conn) -> tuple[int, int]:
    """Rows inserted into order_line and deleted from new_order (pg_stat_user_tables,
    flushed when pgbench's sessions end)."""
    with conn.connect() as db:
        db.execute("SELECT pg_stat_clear_snapshot()")
        row = db.execute(
            "SELECT sum(n_tup_ins) FILTER (WHERE relname = 'order_line'),"
            " sum(n_tup_del) FILTER (WHERE relname = 'new_order')"
            " FROM pg_stat_user_tables WHERE schemaname = 'tpcc'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.cluster
def test_load_one_warehouse_cardinalities(loaded: Conn) -> None:
    expected = {
        "warehouse": 1,
        "district": 10,
        "customer": 30_000,
        "history": 30_000,
        "orders": 30_000,
        "new_order": 9_000,
        "item": 100_000,
        "stock": 100_000,
    }
    for table, n in expected.items():
        assert _count(loaded, f"SELECT count(*) FROM tpcc.{table}") == n, table
    lines = _count(loaded, "SELECT count(*) FROM tpcc.order_line")
    assert lines == _count(loaded, "SELECT sum(o_ol_cnt) FROM tpcc.orders")
    assert 5 * 30_000 < lines < 15 * 30_000
    # 10% ORIGINAL in I_DATA and S_DATA, 10% bad credit, 30% undelivered orders
    for sql, low, high in (
        ("SELECT count(*) FROM tpcc.item WHERE i_data LIKE '%ORIGINAL%'", 9_000, 11_000),
        ("SELECT count(*) FROM tpcc.stock WHERE s_data LIKE '%ORIGINAL%'", 9_000, 11_000),
        ("SELECT count(*) FROM tpcc.customer WHERE c_credit = 'BC'", 2_600, 3_400),
        ("SELECT count(*) FROM tpcc.orders WHERE o_carrier_id IS NULL", 9_000, 9_000),
    ):
        assert low <= _count(loaded, sql) <= high, sql
    # the first 1,000 customers of a district carry the 1,000 last names in order
    assert (
        _count(loaded, "SELECT count(DISTINCT c_last) FROM tpcc.customer WHERE c_id <= 1000")
        == 1000
    )
    assert (
        _count(
            loaded, "SELECT count(*) FROM tpcc.customer WHERE c_id = 1 AND c_last <> 'BARBARBAR'"
        )
        == 0
    )
    # each district's orders go to a permutation of its customers
    assert (
        _count(loaded, "SELECT count(*) FROM (SELECT DISTINCT o_d_id, o_c_id FROM tpcc.orders) x")
        == 30_000
    )
    with loaded.connect() as c:
        names = {
            r[0]
            for r in c.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'tpcc'"
            ).fetchall()
        }
    assert "customer_last_name" in names and "order_line_pkey" in names


def _autovacuum(admin: Conn, off: bool) -> None:
    with admin.connect() as c:
        c.execute("ALTER SYSTEM SET autovacuum = off" if off else "ALTER SYSTEM RESET autovacuum")
        c.execute("SELECT pg_reload_conf()")


def _all_visible(conn: Conn) -> dict[str, bool]:
    """Per big table: every page all-visible (ANALYZE copies the count from the map)."""
    with conn.connect() as c:
        return {
            name: visible == pages > 0
            for name, visible, pages in c.execute(
                "SELECT relname, relallvisible, relpages FROM pg_class"
                " WHERE relnamespace = 'tpcc'::regnamespace"
                " AND relname IN ('stock', 'customer', 'order_line', 'history', 'orders')"
            ).fetchall()
        }


@pytest.mark.cluster
def test_whole_tables_are_frozen_without_a_vacuum(loaded: Conn) -> None:
    with loaded.connect() as c:
        version = c.info.server_version
    assert all(_all_visible(loaded).values()) == (version >= loader.FREEZE_MAPS_FROM)
    assert _all_visible(loaded).keys() == {"stock", "customer", "order_line", "history", "orders"}


@pytest.mark.cluster
def test_a_load_in_warehouse_ranges_is_vacuumed_and_consistent(db: Conn) -> None:
    """Four jobs: the big tables load in two ranges each, unfrozen, then VACUUM."""
    admin = db.with_dbname("postgres")
    with admin.connect() as c:
        c.execute("DROP DATABASE IF EXISTS tpcc_ranges")
        c.execute("CREATE DATABASE tpcc_ranges")
    ranged = admin.with_dbname("tpcc_ranges")
    # Autovacuum off while this load runs: an autoanalyze of a table the load has
    # just filled holds a snapshot, which can hold back the horizon of the load's
    # own VACUUM, and the pages after it are then not all-visible (ci27: stock,
    # once in four fresh clones). The module's own cluster; set back below.
    _autovacuum(admin, off=True)
    try:
        lsn = _wal_lsn(ranged)
        result = loader.load(ranged, 2, jobs=4)
        # At the server's own settings (no cluster given) every page goes through the WAL.
        assert result.wal_level is None and _wal_since(ranged, lsn) > result.database_bytes / 2
        assert not any(name.startswith("restart") for name in result.phases)
        assert result.table_rows["stock"] == 200_000 and result.table_rows["customer"] == 60_000
        assert "vacuum analyze (connection-s)" in result.phases
        # each warehouse is complete once every range holding it is copied
        assert result.per_warehouse_s.keys() == {"1", "2"}
        assert checks.check(ranged).passed
        caption = _load_caption(result)
        assert f"binary COPY over {result.jobs} parallel connections" in caption
        assert "at the server's own WAL settings" in caption and "VACUUM ANALYZE" in caption
        assert all(_all_visible(ranged).values())
    finally:
        _autovacuum(admin, off=False)
        with admin.connect() as c:
            c.execute("DROP DATABASE IF EXISTS tpcc_ranges")


@pytest.mark.cluster
def test_a_load_at_minimal_wal_writes_little_wal_and_restores_the_profile(
    loaded: Conn, cluster: Cluster
) -> None:
    """Whole tables copied in the transaction that truncated them, and the index
    builds, write no WAL at wal_level=minimal; the server is back at the
    profile's settings (restarted) before anything runs on the data."""
    result = MINIMAL_LOAD["result"]
    assert result.wal_level == "minimal"
    assert MINIMAL_LOAD["wal"] < result.database_bytes / 10, MINIMAL_LOAD["wal"]
    assert list(result.phases)[0] == "restart at wal_level=minimal"
    assert "restart at the profile's settings" in result.phases
    assert _wal_settings(loaded) == MINIMAL_LOAD["settings"]
    assert MINIMAL_LOAD["settings"][0] == ("replica",)
    assert cluster.postmaster_pid() != MINIMAL_LOAD["postmaster"]
    # The report says so, from the record (it said "rows generated inside the
    # server" long after the loader had moved to the client).
    caption = _load_caption(result)
    assert caption.startswith("TPC-C load (rows built in numpy and sent in binary COPY over ")
    assert f"over {result.jobs} parallel connection" in caption
    assert "copies and index builds at wal_level=minimal" in caption
    assert "inside the server" not in caption


def _load_caption(result: TpccLoad) -> str:
    """The load table's caption for a record of ``result``."""
    record = RunRecord(
        study="s", key="tpcc/load/w1", kind="tpcc_load", target="t", params={},
        status="ok", started_at="", finished_at="", result=to_dict(result),
    )  # fmt: skip
    table = report_tpcc.load_table([record])
    assert table is not None
    return table.caption


@pytest.mark.cluster
def test_every_condition_holds_after_the_load(loaded: Conn) -> None:
    result = checks.check(loaded)
    assert [c.number for c in result.conditions] == list(range(1, 13))
    assert result.passed, result.failures
    assert all(c.skipped is None and c.checked > 0 for c in result.conditions)


@pytest.mark.cluster
@pytest.mark.slow
def test_runs_keep_the_mix_and_the_database_consistent(
    loaded: Conn, bins: PgBinaries, tmp_path: Path
) -> None:
    tmp_path.chmod(0o755)
    server, raw = driver.run(
        bins.bin_dir,
        loaded,
        driver.RunOptions(mode="server", connections=2, duration_s=10, warehouses=1),
        tmp_path,
    )
    assert "tps = " in raw
    assert server.argv[0].endswith("pgbench") and "-c" in server.argv  # kept (issue 30)
    total = sum(t.transactions for t in server.types)
    # pgbench's per-script counts and its total can differ by the few in flight at -T
    assert server.transactions > 500
    assert total == pytest.approx(server.transactions, abs=server.connections * 10)
    for t in server.types:
        share = 100.0 * t.transactions / total
        tolerance = 3.0 if t.weight > 10 else 1.5
        assert abs(share - t.weight) <= tolerance, (t.name, share)
        assert t.samples == pytest.approx(t.transactions, abs=server.connections * 10)
        assert t.p50_ms is not None and t.p50_ms <= t.p99_ms  # type: ignore[operator]
    assert server.tpmc == pytest.approx(server.tps * 60 * server.types[0].transactions / total)
    assert server.failed == 0 and server.timeline
    # about 1% of New-Orders roll back; they count as completed
    assert 0 < server.rollbacks < 0.04 * server.types[0].transactions
    after = checks.check(loaded)
    assert after.passed, after.failures
    assert [c.number for c in after.conditions if c.skipped] == [11]

    before = _row_counts(loaded)
    client, _ = driver.run(
        bins.bin_dir,
        loaded,
        driver.RunOptions(mode="client", connections=2, duration_s=5, isolation="repeatable read"),
        tmp_path,
    )
    assert client.mode == "client" and client.isolation == "repeatable read"
    assert all(t.transactions > 0 for t in client.types)
    # qps's statement counts hold on this run: 10 order lines per New-Order (5-15),
    # 10 districts delivered per Delivery (pgbench's counts leave out the few in flight)
    lines, delivered = (a - b for a, b in zip(_row_counts(loaded), before, strict=True))
    new_orders = client.stats("new_order").transactions  # type: ignore[union-attr]
    deliveries = client.stats("delivery").transactions  # type: ignore[union-attr]
    assert lines / new_orders == pytest.approx(10, abs=1.0)
    assert delivered == pytest.approx(10 * deliveries, abs=client.connections * 10)
    assert client.qps == pytest.approx(client.tps * client.statements_per_txn)  # type: ignore[operator]
    assert 15 < client.statements_per_txn < 25  # type: ignore[operator]
    assert checks.check(loaded).passed
    assert list(tmp_path.iterdir()) == []  # scripts and logs are removed

    # the report section from these very results
    records = [
        RunRecord(
            study="s",
            key=f"tpcc/run/{r.mode}/c2",
            kind="tpcc_run",
            target="t",
            params={"mode": r.mode},
            status="ok",
            started_at="",
            finished_at="",
            result=to_dict(r),
        )
        for r in (server, client)
    ]
    study = Study(id="s", name="tpcc", target="t", started_at="", status="finished")
    section = report_tpcc.section(study, records)
    assert section is not None
    summary = section.blocks[0]
    cells = [row.cells for row in summary.rows]  # type: ignore[union-attr]
    assert cells[0][0].startswith("server-side") and cells[1][0].startswith("client-side")
    assert cells[0][4] == f"{server.tpmc:,.0f}"
    assert cells[1][6] == f"{client.qps:,.0f}"
    assert any("qps: SQL statements" in n for n in summary.notes)  # type: ignore[union-attr]
    assert any(getattr(b, "name", "") == "tpcc-tpmc" for b in section.blocks)


@pytest.mark.cluster
def test_a_schema_loaded_before_load_bytes_existed_still_reads(loaded: Conn) -> None:
    """Runs take the active data's share from tpcc.meta.load_bytes; a schema
    loaded before that column existed reads as unknown, not as an error."""
    with loaded.connect() as c:
        c.execute("ALTER TABLE tpcc.meta RENAME COLUMN load_bytes TO load_bytes_kept")
        try:
            assert checks.loaded(c).load_bytes is None
        finally:
            c.execute("ALTER TABLE tpcc.meta RENAME COLUMN load_bytes_kept TO load_bytes")
    with loaded.connect() as c:
        assert checks.loaded(c).load_bytes is not None


@pytest.mark.cluster
def test_a_broken_row_fails_its_condition(loaded: Conn) -> None:
    with loaded.connect() as c:
        c.execute("UPDATE tpcc.district SET d_next_o_id = d_next_o_id + 1 WHERE d_id = 3")
    try:
        result = checks.check(loaded)
        failed = {c.number: c.offending for c in result.failures}
        assert failed == {2: 1}
        done = subprocess.run(
            [sys.executable, "-m", "pgrig", "tpcc", "check", "--dsn", loaded.dsn],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1
        assert " 2 FAIL" in done.stdout and "1 of 10 offending" in done.stdout
    finally:
        with loaded.connect() as c:
            c.execute("UPDATE tpcc.district SET d_next_o_id = d_next_o_id - 1 WHERE d_id = 3")
    assert checks.check(loaded).passed


@pytest.mark.cluster
def test_bad_input_is_refused_before_anything_starts(
    loaded: Conn, db: Conn, bins: PgBinaries, tmp_path: Path
) -> None:
    def refused(opts: driver.RunOptions, message: str) -> None:
        with pytest.raises(UsageError, match=message):
            driver.run(bins.bin_dir, loaded, opts, tmp_path)

    refused(driver.RunOptions(warehouses=2), "holds 1 loaded warehouses")
    refused(driver.RunOptions(active=2), "only 1 warehouses are loaded")
    refused(driver.RunOptions(connections=1000), "free connections")
    with pytest.raises(UsageError, match="already holds a tpcc schema"):
        loader.load(loaded, 1)
    with pytest.raises(UsageError, match="must be at least 1"):
        loader.load(loaded, 0)
    empty = db.with_dbname("postgres")
    with pytest.raises(UsageError, match="no TPC-C schema"):
        checks.check(empty)
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "tpcc", "run", "--dsn", loaded.dsn, "-w", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: --warehouses 3: the database holds 1")
    assert "hint:" in done.stderr and "Traceback" not in done.stderr


def test_weights_are_the_specification_mix() -> None:
    assert [WEIGHTS[t] for t in TRANSACTIONS] == [45, 43, 4, 4, 4]
    assert TpccRun.__dataclass_params__.frozen  # type: ignore[attr-defined]


@pytest.mark.cluster
def test_a_tpcc_step_asks_its_clients_not_where_they_run(
    loaded: Conn, bins: PgBinaries, tmp_path: Path
) -> None:
    """The warm-up and the measured run of a TPC-C step go through ``Context.clients``
    (a toy that records, two "hosts": the connections are checked for both)."""
    tmp_path.chmod(0o755)
    toy = Recording(OneHost(bins.client_bin_dir))
    ctx = Context(bins=bins, target=tmp_path, scratch=tmp_path, clients=toy, conn=loaded)
    tp = tpcc_steps.TpccPlan(warehouses=1, connections=1, duration_s=2, max_tries=7)
    with Ui(quiet=True).step("tpcc") as line:
        tpcc_steps.prepare_action(tp, tpcc_steps.Point("server"), RunPolicy(warmup=1))(ctx, line)
        result, raw = tpcc_steps.run_action(tp, tpcc_steps.Point("server"))(ctx, line)
    assert [what for what, _ in toy.asked] == ["warm", "drive"]
    (_, warm), (_, run) = toy.asked
    assert warm.extra == run.extra == ("--max-tries=7", "--failures-detailed")
    assert warm.opts.duration_s == 1 and not warm.opts.transaction_log
    assert run.opts.transaction_log and run.figure is not None and run.figure[0] == "tpmC"
    assert isinstance(result, TpccRun) and result.transactions > 0 and result.tpmc > 0
    assert "tps = " in raw and "--max-tries=7" in result.argv
