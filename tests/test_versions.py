"""One pgrig across PostgreSQL majors: real 9.6 and 18 clusters (really downloaded,
see ``pg_releases``) made by pgrig's cluster code with the oltp profile fitted to
each major, driven by the newest pgbench through pgrig's own pgbench runner, and
sampled by the monitor. Plus the translation rules on their own."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_disk_dir
from pgrig.cluster import compat, profiles
from pgrig.cluster.server import (
    SUPERUSER,
    Cluster,
    InitdbOptions,
    initdb_version_args,
    server_os_user,
)
from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.monitor.pgstats import PgSampler
from pgrig.pgsource import binaries
from pgrig.pgsource.model import Installed
from pgrig.tools import pgbench

MACHINE = profiles.Machine(ram_bytes=24 * 2**30, cpus=2)
SMALL = {"shared_buffers": "128MB", "fsync": "off", "max_wal_size": "1GB"}

# -- the rules, on their own ---------------------------------------------------------


def adapt(settings: dict[str, str], known: set[str], version: str) -> compat.Adapted:
    from pgrig.pgsource.model import version_num

    return compat.adapt(settings, known=known, version=version, version_num=version_num(version))


def test_renamed_parameters_are_translated_both_ways() -> None:
    old = adapt(
        {"max_wal_size": "4GB", "wal_level": "replica"},
        {"checkpoint_segments", "wal_level"},
        "9.4.26",
    )
    assert old.applied == {"checkpoint_segments": "86", "wal_level": "hot_standby"}
    assert "3 x segments x 16MB" in old.translated[0].reason
    new = adapt(
        {"checkpoint_segments": "64", "wal_keep_segments": "8"},
        {"max_wal_size", "wal_keep_size"},
        "15.4",
    )
    assert new.applied == {"max_wal_size": "3072MB", "wal_keep_size": "128MB"}
    assert [t.name for t in new.translated] == ["checkpoint_segments", "wal_keep_segments"]


def test_wal_keep_segments_counts_the_clusters_segment_size() -> None:
    from pgrig.pgsource.model import version_num

    settings = {"checkpoint_segments": "64", "wal_keep_segments": "8"}
    known = {"max_wal_size", "wal_keep_size"}
    got = compat.adapt(
        settings, known=known, version="15.4", version_num=version_num("15.4"), segment_mb=64
    )
    # checkpoint_segments (9.4 and older) always counted 16MB segments
    assert got.applied == {"max_wal_size": "3072MB", "wal_keep_size": "512MB"}
    assert "segments x 64MB" in got.translated[1].reason
    back = compat.adapt(
        {"wal_keep_size": "512MB"},
        known={"wal_keep_segments"},
        version="12.1",
        version_num=version_num("12.1"),
        segment_mb=64,
    )
    assert back.applied == {"wal_keep_segments": "8"}


def test_values_a_major_spells_differently() -> None:
    got = adapt(
        {"wal_compression": "lz4", "wal_level": "hot_standby"},
        {"wal_compression", "wal_level"},
        "14.11",
    )
    assert got.applied == {"wal_compression": "on", "wal_level": "replica"}
    assert "pglz" in got.translated[0].reason
    same = adapt({"wal_compression": "lz4"}, {"wal_compression"}, "15.4")
    assert same.applied == {"wal_compression": "lz4"} and not same.translated


def test_missing_parameters_are_dropped_with_the_reason() -> None:
    got = adapt(
        {"max_parallel_workers": "2", "io_method": "worker", "stats_temp_directory": "x"},
        {"work_mem"},
        "9.6.24",
    )
    assert got.applied == {}
    reasons = {d.name: d.reason for d in got.dropped}
    assert (
        reasons["max_parallel_workers"]
        == "PostgreSQL 9.6 has no max_parallel_workers (added in 10)"
    )
    assert reasons["io_method"].endswith("(added in 18)")
    assert (
        "stats_temp_directory"
        in adapt({"stats_temp_directory": "x"}, {"work_mem"}, "16.2").notes[0]
    )
    assert (
        "(last in 14)"
        in adapt({"stats_temp_directory": "x"}, {"work_mem"}, "16.2").dropped[0].reason
    )


def test_parameter_no_major_knows_is_an_error() -> None:
    with pytest.raises(
        UsageError,
        match="unknown PostgreSQL 9.6 parameter 'shared_bufers'.*no major from 9.5 to 18",
    ) as err:
        adapt({"shared_bufers": "1GB"}, {"shared_buffers"}, "9.6.24")
    assert "shared_buffers" in (err.value.hint or "")


def test_initdb_options_across_majors() -> None:
    def bins(version: str) -> binaries.PgBinaries:
        return binaries.PgBinaries(Path("/nonexistent"), version, int(version.split(".")[0]))

    assert initdb_version_args(InitdbOptions(waldir=Path("/w")), bins("9.6.24")) == ["--xlogdir=/w"]
    assert initdb_version_args(InitdbOptions(waldir=Path("/w")), bins("10.23")) == ["--waldir=/w"]
    assert initdb_version_args(InitdbOptions(), bins("18.6")) == ["--no-data-checksums"]
    assert initdb_version_args(InitdbOptions(data_checksums=True), bins("18.6")) == [
        "--data-checksums"
    ]
    with pytest.raises(UsageError, match="PostgreSQL 10.23's initdb has no --wal-segsize"):
        initdb_version_args(InitdbOptions(wal_segsize_mb=1024), bins("10.23"))


def test_data_directory_tools_are_never_borrowed(tmp_path: Path) -> None:
    """A server-only build borrows pgbench from a newer install, but never a tool
    that reads the data directory: pg_checksums 18 on a 9.6 cluster would fail."""
    server, client = tmp_path / "96", tmp_path / "18"
    for d in (server, client):
        d.mkdir()
    for tool in ("pgbench", "pg_checksums"):
        (client / tool).write_text("#!/bin/sh\n")
        (client / tool).chmod(0o755)
    bins = binaries.PgBinaries(server, "9.6.24", 9, client_dir=client, client_version="18.1")
    assert bins.has("pgbench") and bins.path("pgbench") == client / "pgbench"
    assert not bins.has("pg_checksums")


def test_pgbench_partitions_refused_before_11() -> None:
    with pytest.raises(
        UsageError, match="--partitions needs PostgreSQL 11 or later; the server is 10.23"
    ):
        compat.check_pgbench_init("10.23", 100023, partitions=4)
    compat.check_pgbench_init("11.22", 110022, partitions=4)
    compat.check_pgbench_init("9.6.24", 90624, partitions=0)


# -- real clusters ---------------------------------------------------------------------


@pytest.fixture(scope="module", params=["9.6", "18"])
def versioned(
    request: pytest.FixtureRequest, pg_releases: dict[str, Installed]
) -> Iterator[Cluster]:
    """A real cluster of each major, configured with the oltp profile."""
    bins = binaries.find(str(pg_releases[request.param].bin_dir))
    base = make_disk_dir(f"pgrig-test-v{request.param}-")
    cluster = Cluster.create(bins, base / "work", study="versions", os_user=server_os_user())
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("oltp", machine=MACHINE).with_overrides(SMALL))
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
        shutil.rmtree(base, ignore_errors=True)


def conn_of(cluster: Cluster) -> Conn:
    return Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")


def test_cluster_runs_the_major_with_the_fitted_profile(versioned: Cluster) -> None:
    bins = versioned.bins
    with conn_of(versioned).connect() as db:
        num = db.execute("SELECT current_setting('server_version_num')::int").fetchone()
        assert num is not None and num[0] == bins.version_num
        shown = dict(
            db.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('synchronous_commit', 'data_checksums', 'wal_level')"
            ).fetchall()
        )
    assert shown["synchronous_commit"] == "off"  # the profile is applied
    assert shown["data_checksums"] == "off"  # 18 too: pgrig asks for what it measures
    assert shown["wal_level"] == "replica"
    adapted = versioned.adapted
    assert adapted is not None
    dropped = {d.name for d in adapted.dropped}
    conf = (versioned.datadir / "pgrig.conf").read_text()
    if bins.version_num < 100000:
        assert dropped == {"max_parallel_workers"}
        assert "# max_parallel_workers = 2 not set: PostgreSQL 9.6 has no" in conf
        assert bins.client_dir is not None  # pgbench and pg_isready borrowed
    else:
        assert dropped == set() and "not set" not in conf


def test_newest_pgbench_drives_the_major(versioned: Cluster, tmp_path: Path) -> None:
    bins = versioned.bins
    newest = pgbench.pgbench_version(bins.client_bin_dir)
    assert int(newest.split(".")[0]) >= max(15, bins.major)  # a newer client, not 9.6's
    conn = conn_of(versioned)
    for generate in ("client", "server"):  # -I g and -I G both work from 9.5 on
        loaded, _raw = pgbench.run_init(
            bins.client_bin_dir, conn, pgbench.InitOptions(scale=1, generate=generate)
        )
        assert loaded.scale == 1
    opts = pgbench.RunOptions(mode="select-only", clients=2, threads=2, duration_s=2)
    result, _raw = pgbench.run_bench(bins.client_bin_dir, conn, opts, tmp_path)
    assert result.transactions > 0 and result.tps > 0 and result.failed == 0


def test_partitions_really_fail_before_11(versioned: Cluster) -> None:
    """What check_pgbench_init refuses is what really fails (and only there)."""
    bins = versioned.bins
    argv = pgbench.init_argv(
        bins.client_bin_dir, conn_of(versioned), pgbench.InitOptions(scale=1, partitions=2)
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if bins.version_num < compat.PARTITIONS_FROM:
        assert done.returncode != 0 and "partition by range" in done.stderr
        with pytest.raises(UsageError):
            compat.check_pgbench_init(bins.version, bins.version_num, partitions=2)
    else:
        assert done.returncode == 0, done.stderr
        compat.check_pgbench_init(bins.version, bins.version_num, partitions=2)


def test_monitor_samples_the_major(versioned: Cluster) -> None:
    bins = versioned.bins
    conn = conn_of(versioned)
    pgbench.run_init(bins.client_bin_dir, conn, pgbench.InitOptions(scale=1))
    load = subprocess.Popen(
        [bins.path("pgbench"), "-c", "2", "-T", "3", "-n", *conn.args()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with conn.connect() as db:
            sampler = PgSampler(db)
            sampler.prime()
            time.sleep(1.5)
            db.execute("CHECKPOINT")
            time.sleep(0.5)
            sample = sampler.sample(2.0)
    finally:
        load.wait(timeout=60)
    assert sample is not None and sample.commits_s > 0
    assert sample.checkpoints >= 1 and sample.buffers_checkpoint_s > 0
    assert sum(sample.waits.values()) >= 1
    if bins.version_num >= 180000:  # WAL writes from pg_stat_io, relations apart from WAL
        assert sample.wal_writes_s and sample.wal_writes_s > 0 and sample.wal_mib_s
        assert sample.io and sample.buffers_backend_s is None
        assert sampler.notes == []  # the backends' process states read too
    else:
        assert sample.wal_mib_s is None and sample.io == {}
        assert any("9.6 reports only lock waits" in n for n in sampler.notes)
        # 9.6's pg_read_file reads no absolute path: the verdict is told
        assert any("process states not read (absolute path" in n for n in sampler.notes)


def test_wait_event_names_exist_in_the_major(versioned: Cluster) -> None:
    """Every wait event the verdict sorts into a cause is spelled as the server
    spells it: 17+ lists them in pg_wait_events (checked against 18); 9.6 has
    no such view, and the sampler says it reports lock waits only."""
    from pgrig.monitor import waits

    named = waits.WAL_EVENTS | waits.READ_EVENTS | waits.WRITE_EVENTS
    with conn_of(versioned).connect() as db:
        view = db.execute("SELECT to_regclass('pg_wait_events') IS NOT NULL").fetchone()
        if versioned.bins.version_num < 170000:
            assert view is not None and not view[0]
            return
        known = {
            f"{t}:{n}" for t, n in db.execute("SELECT type, name FROM pg_wait_events").fetchall()
        }
    old_spelling = waits.RENAMED_IN_17
    assert named - old_spelling <= known, sorted(named - old_spelling - known)
    assert old_spelling <= named and not old_spelling & known
    assert {"IO:AioIoCompletion", "IO:DataFileRead", "IO:WalSync"} <= known
    assert all(waits.wait_class(e) == "read" for e in ("IO:AioIoCompletion", "IO:DataFileRead"))


def test_pg_stat_io_reads_bytes_and_time(versioned: Cluster) -> None:
    """pg_stat_io as the AIO report reads it: reads, their bytes and time per backend
    type on 18 (16+); absent on 9.6, and the sampler says so."""
    conn = conn_of(versioned)
    with conn.connect() as db:
        sampler = PgSampler(db)
        if versioned.bins.version_num < 160000:
            assert not sampler.has_io and "pg_stat_io" not in sampler.sql
            assert any("pg_stat_io is not available" in n for n in sampler.notes)
            return
        db.execute(
            "CREATE TABLE io_probe AS SELECT g, repeat('x', 500) p FROM generate_series(1, 40000) g"
        )
        db.execute("CHECKPOINT")
        sampler.prime()
        db.execute("SELECT pg_stat_force_next_flush()")  # 15+: flush this backend's counters
        versioned.stop()
        versioned.start()  # empty shared_buffers: the scan must read
    with conn.connect() as db:
        sampler = PgSampler(db)
        sampler.prime()
        db.execute("SELECT count(*) FROM io_probe").fetchone()
        db.execute("SELECT pg_stat_force_next_flush()")
        sample = sampler.sample(1.0)
        db.execute("DROP TABLE io_probe")
    assert sample is not None
    reads = sum(v for k, v in sample.io.items() if k.endswith(":reads"))
    read_bytes = sum(v for k, v in sample.io.items() if k.endswith(":read_bytes"))
    assert reads > 0 and read_bytes >= reads * 8192  # 18 combines blocks into larger reads
    assert any(k.endswith(":read_time") for k in sample.io)  # track_io_timing is on (oltp)


def test_pg_amcheck_runs_or_says_why_per_version(versioned: Cluster) -> None:
    """9.6 cannot be checked (pg_amcheck needs amcheck 1.3, 14+), and the borrowed
    pg_amcheck is not tried against it; 18's wheel has contrib and really checks."""
    from pgrig.durability import verifier
    from pgrig.durability.clients import TABLES

    conn = conn_of(versioned)
    bins = versioned.bins
    assert bins.has("pg_amcheck")  # 18's own, or borrowed from the newest installed
    with conn.connect() as db:
        for table in TABLES:
            db.execute(f"DROP TABLE IF EXISTS {table}")
            db.execute(f"CREATE TABLE {table} AS SELECT g AS id FROM generate_series(1, 100) g")
            db.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
    why = verifier.amcheck_unavailable(bins, conn)
    check = verifier.amcheck(bins, conn, install_missing=True)
    if bins.version_num < verifier.AMCHECK_FROM:
        assert why is not None and "(1.3, PostgreSQL 14+)" in why
        assert check.ok is None and check.detail == f"not run: {why}"
    else:
        assert why is None
        assert check.ok is True, check.detail


def test_tpcc_and_durability_sql_fit_the_major(versioned: Cluster) -> None:
    """What failed on 9.5/9.6 before: TPC-C's functions (PARALLEL SAFE is 9.6+),
    its free-connection count (backend_type is 10+), its loader's SET jit (11+),
    and the durability check's current_setting(name, true) (9.6+). The whole
    TPC-C and durability workloads ran on real 9.5 and 9.6 (docs/versions.md)."""
    from pgrig.durability import verifier
    from pgrig.workloads.tpcc import loader, sqlfiles

    conn = conn_of(versioned)
    version = versioned.bins.version_num
    with conn.connect() as db:
        assert 0 < loader.free_connections(db) < 200
        db.execute("DROP SCHEMA IF EXISTS tpcc CASCADE")
        db.execute(sqlfiles.sql("schema"))
        db.execute(sqlfiles.sql("functions", version))
        row = db.execute("SELECT tpcc.last_name(371)").fetchone()
        assert row is not None and row[0] == "PRICALLYOUGHT"
        db.execute("DROP SCHEMA tpcc CASCADE")
        shown = verifier.server_settings(db, ["fsync", "synchronous_commit", "io_method"])
    assert shown["fsync"] == "off" and shown["synchronous_commit"] == "off"  # SMALL, oltp
    assert ("io_method" in shown) == (version >= 180000)
    loader.run_parallel(conn, 2, [loader.Unit("probe", "SELECT 1") for _ in range(3)])
    # 9.5 has no PARALLEL clause: the functions are written without it there.
    assert " PARALLEL SAFE" in sqlfiles.sql("functions", 90624)
    assert " PARALLEL SAFE" not in sqlfiles.sql("functions", 90503)
    assert "backend_type =" not in sqlfiles.sql("free_connections", 90624)
    assert "backend_type =" in sqlfiles.sql("free_connections", 100000)
