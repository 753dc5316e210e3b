"""pgbench: parsers on output captured from PostgreSQL 15.18 on this machine (and
seed 000's PostgreSQL 12 text), then the real pgbench against a throwaway server."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pgrig import proc
from pgrig.conninfo import Conn
from pgrig.errors import BinaryNotFound, ParseError, ToolError, UsageError
from pgrig.results import LatencySummary, ProgressPoint, StatementLatency
from pgrig.tools import pgbench as pb
from pgrig.tools.pgbench import program

DATA = Path(__file__).parent / "data"
PG_BIN = Path(os.environ.get("PGRIG_TEST_BIN_DIR", "/usr/lib/postgresql/15/bin"))

CONN = Conn.socket("/tmp/sock", 5432, "postgres", "bench")

TPCB_SQL = (
    "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
    "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
    "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
    "VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);",
)


def read(name: str) -> str:
    return (DATA / name).read_text()


def run_fixture(name: str, mode: str | None = None) -> pb.PgbenchRun:
    return pb.parse_run(
        read(f"pgbench_{name}.stdout.txt"), read(f"pgbench_{name}.stderr.txt"), mode=mode
    )


# --------------------------------------------------------------------------
# pgbench -i


@pytest.mark.parametrize(
    ("fixture", "opts", "elapsed", "steps"),
    [
        (
            "init_s1_client",
            pb.InitOptions(scale=1),
            0.14,
            {
                "drop tables": 0.00,
                "create tables": 0.00,
                "client-side generate": 0.06,
                "vacuum": 0.04,
                "primary keys": 0.05,
            },
        ),
        (
            "init_s2_client",
            pb.InitOptions(scale=2),
            0.23,
            {
                "drop tables": 0.01,
                "create tables": 0.00,
                "client-side generate": 0.11,
                "vacuum": 0.05,
                "primary keys": 0.06,
            },
        ),
        (
            "init_s1_server",
            pb.InitOptions(scale=1, generate="server"),
            0.16,
            {
                "drop tables": 0.01,
                "create tables": 0.00,
                "server-side generate": 0.08,
                "vacuum": 0.04,
                "primary keys": 0.03,
            },
        ),
        (
            "init_s2_server_unlogged_part2",
            pb.InitOptions(scale=2, generate="server", unlogged=True, partitions=2),
            0.28,
            {
                "drop tables": 0.01,
                "create tables": 0.01,
                "server-side generate": 0.11,
                "vacuum": 0.11,
                "primary keys": 0.05,
            },
        ),
        (
            "init_s2_client_unlogged_part2",
            pb.InitOptions(scale=2, unlogged=True, partitions=2),
            0.28,
            {
                "drop tables": 0.01,
                "create tables": 0.01,
                "client-side generate": 0.10,
                "vacuum": 0.12,
                "primary keys": 0.05,
            },
        ),
    ],
)
def test_parse_init(
    fixture: str, opts: pb.InitOptions, elapsed: float, steps: dict[str, float]
) -> None:
    result = pb.parse_init(read(f"pgbench_{fixture}.stderr.txt"), opts)
    assert result.scale == opts.scale
    assert result.rows == 100_000 * opts.scale
    assert result.elapsed_s == elapsed
    assert result.steps == steps
    generate_s = next(v for k, v in steps.items() if k.endswith("generate"))
    assert result.rows_per_s == pytest.approx(result.rows / generate_s)
    assert (result.generate, result.partitions, result.unlogged) == (
        opts.generate,
        opts.partitions,
        opts.unlogged,
    )


def test_parse_init_without_done_line_fails() -> None:
    with pytest.raises(ParseError, match="done in"):
        pb.parse_init("dropping old tables...\ncreating tables...\n", pb.InitOptions(scale=1))


def test_parse_init_zero_seconds_generate_is_clamped_to_resolution() -> None:
    text = read("pgbench_init_s1_client.stderr.txt").replace("generate 0.06 s", "generate 0.00 s")
    assert pb.parse_init(text, pb.InitOptions(scale=1)).rows_per_s == pytest.approx(10_000_000)


def test_init_progress_lines() -> None:
    lines = read("pgbench_init_s2_client.stderr.txt").splitlines()
    assert [p for p in map(pb.parse_init_progress, lines) if p] == [
        (100_000, 200_000),
        (200_000, 200_000),
    ]
    server = read("pgbench_init_s1_server.stderr.txt").splitlines()
    assert not any(map(pb.parse_init_progress, server))
    # Seed 000, PostgreSQL 12, with the trailing blanks it was pasted with.
    seed = "1000000000 of 1000000000 tuples (100%) done (elapsed 1058.21 s, remaining 0.00 s)      "
    assert pb.parse_init_progress(seed) == (1_000_000_000, 1_000_000_000)


def test_the_command_lines_name_pgbench_where_it_was_found_without_looking_here() -> None:
    """A load host's pgbench is looked for on that host (the target's check), not
    on this machine: a directory that does not exist here still makes the argv
    (the lookup ``program.binary`` does refuses it, for the checks before a study)."""
    there = "/opt/on-the-load-host/bin"
    opts = pb.RunOptions(mode="select-only", clients=1, threads=1, duration_s=1)
    assert pb.run_argv(there, CONN, opts, None)[0] == f"{there}/pgbench"
    assert pb.init_argv(there, CONN, pb.InitOptions(scale=1))[0] == f"{there}/pgbench"
    with pytest.raises(BinaryNotFound, match="not a directory"):
        program.binary(there)


def test_init_argv() -> None:
    bin_dir = PG_BIN
    assert pb.init_argv(bin_dir, CONN, pb.InitOptions(scale=10)) == [
        str(bin_dir / "pgbench"),
        "-i",
        "-s",
        "10",
        "--init-steps=dtgvp",
        "host=/tmp/sock port=5432 user=postgres dbname=bench",
    ]
    opts = pb.InitOptions(
        scale=3,
        generate="server",
        partitions=4,
        unlogged=True,
        tablespace="tbs1",
        index_tablespace="tbs2",
        fillfactor=90,
    )
    assert pb.init_argv(bin_dir, CONN, opts)[1:-1] == [
        "-i",
        "-s",
        "3",
        "--init-steps=dtGvp",
        "--partitions=4",
        "--unlogged-tables",
        "--tablespace=tbs1",
        "--index-tablespace=tbs2",
        "-F",
        "90",
    ]


@pytest.mark.parametrize(
    "kwargs",
    [{"scale": 0}, {"scale": 1, "generate": "both"}, {"scale": 1, "partitions": -1}],
)
def test_init_options_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        pb.InitOptions(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Timed runs: reports


def test_parse_run_select_only_pg15() -> None:
    run = run_fixture("run_select_only", mode="select-only")
    assert run.transaction_type == "<builtin: select only>"
    assert (run.scale, run.query_mode, run.clients, run.threads) == (1, "prepared", 2, 2)
    assert run.duration_s == 3.0
    assert run.transactions == 164265
    assert run.failed == 0
    assert run.tps == 54790.650450
    assert run.latency_avg_ms == 0.031
    assert run.latency_stddev_ms == 0.039
    assert run.initial_connection_ms == 4.565
    assert run.statements_per_txn == 1
    assert run.statements == (
        StatementLatency(0.000, "\\set aid random(1, 100000 * :scale)", 0),
        StatementLatency(0.031, "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;", 0),
    )
    assert run.progress == (
        ProgressPoint(1.0, 53687.7, 0.033, 0.038, 0, None),
        ProgressPoint(2.0, 45628.0, 0.036, 0.047, 0, None),
    )
    assert run.latency is None


def test_parse_run_read_write_pg15() -> None:
    run = run_fixture("run_read_write")
    assert run.mode == "read-write"
    assert run.transaction_type == "<builtin: TPC-B (sort of)>"
    assert run.transactions == 6284
    assert run.tps == 2095.901851
    assert (run.latency_avg_ms, run.latency_stddev_ms) == (0.951, 0.251)
    assert run.initial_connection_ms == 5.764
    assert run.statements_per_txn == 5
    assert run.qps == pytest.approx(2095.901851 * 5)
    assert [s.command for s in run.statements][4:] == ["BEGIN;", *TPCB_SQL, "END;"]
    assert [s.latency_ms for s in run.statements] == [
        0.001,
        0.0,
        0.0,
        0.0,
        0.079,
        0.114,
        0.103,
        0.119,
        0.163,
        0.091,
        0.282,
    ]
    assert {s.failures for s in run.statements} == {0}
    assert [p.tps for p in run.progress] == [2151.9, 2098.9, 2032.0]
    assert run.progress[2] == ProgressPoint(3.0, 2032.0, 0.982, 0.310, 0, None)


def test_parse_run_multiple_scripts() -> None:
    run = run_fixture("run_custom", mode="custom")
    assert run.transaction_type == "multiple scripts"
    assert (run.clients, run.threads, run.transactions) == (2, 1, 20321)
    assert run.tps == 6785.437138
    assert run.latency_avg_ms == 0.291
    # 15187 transactions of 2 SQL statements, 5134 of 1: 1.75 per transaction.
    assert run.statements_per_txn == 2
    assert len(run.statements) == 6
    assert run.statements[3] == StatementLatency(
        0.313, "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;", 0
    )
    assert len(run.progress) == 3


def test_parse_run_rate_limited() -> None:
    run = run_fixture("run_rate_limit")
    assert run.mode == "select-only"
    assert (run.transactions, run.tps) == (1448, 483.625696)
    assert run.latency_avg_ms == 0.225
    assert run.initial_connection_ms == 5.550
    assert run.progress == (
        ProgressPoint(1.0, 494.0, 0.231, 0.142, 0, 0.095),
        ProgressPoint(2.0, 456.0, 0.241, 0.295, 0, 0.118),
    )


@pytest.mark.parametrize(
    ("fixture", "mode", "transactions", "tps", "avg", "stddev", "per_txn", "sql_ms"),
    [
        # Seed 000 pasted PostgreSQL 12 text with trailing blanks and two tps lines.
        ("select_only", "select-only", 75279853, 627126.432692, 0.204, 0.557, 1, [0.205]),
        (
            "tpcb",
            "read-write",
            3073411,
            25600.289357,
            4.997,
            25.946,
            5,
            [3.458, 0.339, 0.220, 0.206, 0.196],
        ),
    ],
)
def test_parse_run_seed000_pg12(
    fixture: str,
    mode: str,
    transactions: int,
    tps: float,
    avg: float,
    stddev: float,
    per_txn: int,
    sql_ms: list[float],
) -> None:
    run = pb.parse_run(read(f"pgbench_run_seed000_{fixture}.txt"))
    assert run.mode == mode
    assert (run.scale, run.clients, run.threads, run.duration_s) == (10000, 128, 128, 120.0)
    assert run.transactions == transactions
    assert run.tps == tps  # "excluding connections establishing"
    assert (run.latency_avg_ms, run.latency_stddev_ms) == (avg, stddev)
    assert run.initial_connection_ms is None
    assert run.failed == 0
    assert run.statements_per_txn == per_txn
    sql = [s for s in run.statements if pb.is_sql_statement(s.command)]
    assert [s.latency_ms for s in sql] == sql_ms
    assert {s.failures for s in run.statements} == {None}


def test_seed000_qps_is_tps_times_five() -> None:
    # The seed: "The read/write tps is 25,595, and the read/write qps is 127,975"
    # (it quoted the "including connections establishing" tps).
    run = pb.parse_run(read("pgbench_run_seed000_tpcb.txt"))
    assert int(25595.742845) * run.statements_per_txn == 127_975
    assert run.tps_including_connections == 25595.742845  # as pgbench 12 printed it


def test_tps_including_connections_from_pgbench_15s_parts() -> None:
    """pgbench 14+ prints the connection time, not the tps with it: the figure seed
    004 quoted comes from the parts, transactions / (transactions / tps + time)."""
    run = run_fixture("run_select_only", mode="select-only")
    assert run.tps_including_printed is None
    expected = 164265 / (164265 / 54790.650450 + 4.565e-3)
    assert run.tps_including_connections == pytest.approx(expected)
    assert run.tps_including_connections < run.tps


def test_parse_run_without_statement_block_uses_builtin_counts() -> None:
    text = read("pgbench_run_read_write.stdout.txt").split("statement latencies")[0]
    run = pb.parse_run(text)
    assert run.statements == ()
    assert run.statements_per_txn == 5


def test_parse_run_killed_report_is_still_readable() -> None:
    # run_bench never uses it (pgbench exits 2), but the parser must not choke.
    run = run_fixture("run_killed")
    assert (run.transactions, run.duration_s) == (5323, 10.0)
    assert len(run.progress) == 2
    assert "Run was aborted" in read("pgbench_run_killed.stderr.txt")


def test_parse_run_not_a_report() -> None:
    with pytest.raises(ParseError, match="transaction type"):
        pb.parse_run(
            read("pgbench_run_noserver.stdout.txt"), read("pgbench_run_noserver.stderr.txt")
        )


def test_tool_error_carries_stderr_excerpt() -> None:
    err = ToolError("pgbench failed", returncode=2, stderr=read("pgbench_run_killed.stderr.txt"))
    assert "Run was aborted; the above results are incomplete." in str(err)


def test_parse_progress_other_lines() -> None:
    assert pb.parse_progress("pgbench (15.18 (Debian 15.18-0+deb12u1))") is None
    # The PostgreSQL 12 form has no failures.
    assert pb.parse_progress("progress: 3.0 s, 12345.6 tps, lat 1.234 ms stddev 2.345") == (
        ProgressPoint(3.0, 12345.6, 1.234, 2.345, None, None)
    )


def test_parse_version() -> None:
    text = read("pgbench_version.stdout.txt")
    assert pb.parse_version(text) == "15.18 (Debian 15.18-0+deb12u1)"
    with pytest.raises(ParseError):
        pb.parse_version("psql (PostgreSQL) 15.18")


def test_sql_statement_counting() -> None:
    assert pb.count_script_statements(read("pgbench_custom_script.sql")) == 2
    script = "\\set aid random(1, 10)\nBEGIN;\nSELECT 1; -- one\nSELECT\n  2;\nEND;\n"
    assert pb.count_script_statements(script) == 2
    assert not pb.is_sql_statement("\\set x 1")
    assert not pb.is_sql_statement("begin;")
    assert not pb.is_sql_statement("START TRANSACTION ISOLATION LEVEL SERIALIZABLE;")
    assert pb.is_sql_statement("ENDPOINT_TABLE_UPDATE();")  # only the keyword END counts


# --------------------------------------------------------------------------
# Timed runs: options, argv, transaction logs


def test_run_argv() -> None:
    opts = pb.RunOptions(mode="read-write", clients=8, threads=4, duration_s=30)
    assert pb.run_argv(PG_BIN, CONN, opts, None) == [
        str(PG_BIN / "pgbench"),
        "-n",
        "-M",
        "prepared",
        "-c",
        "8",
        "-j",
        "4",
        "-T",
        "30",
        "-P",
        "1",
        "-r",
        "-b",
        "tpcb-like",
        *CONN.args(),
    ]
    custom = pb.RunOptions(
        mode="custom",
        scripts=(("/s/a.sql", 3), ("/s/b.sql", 1)),
        defines=(("foo", "bar"),),
        rate=500,
        latency_limit_ms=1.5,
        transaction_log=True,
        sampling_rate=0.25,
        no_vacuum=False,
        statement_latencies=False,
        query_mode="simple",
    )
    argv = pb.run_argv(PG_BIN, CONN, custom, Path("/w/pgrig_txlog_x"))
    assert argv[1:-1] == [
        "-M",
        "simple",
        "-c",
        "1",
        "-j",
        "1",
        "-T",
        "60",
        "-P",
        "1",
        "-f",
        "/s/a.sql@3",
        "-f",
        "/s/b.sql@1",
        "-D",
        "foo=bar",
        "-R",
        "500",
        "-L",
        "1.5",
        "-l",
        "--log-prefix=/w/pgrig_txlog_x",
        "--sampling-rate=0.25",
    ]


def test_log_sampling_rate() -> None:
    assert pb.log_sampling_rate(pb.RunOptions(sampling_rate=0.5)) == 0.5
    auto = pb.RunOptions(duration_s=60, sampling_rate="auto", expected_tps=10_000)
    assert pb.log_sampling_rate(auto) == 0.0833  # 50,000 / (10,000 x 60)
    # A rate limit is the estimate when there is no better one: 6,000 fits.
    limited = pb.RunOptions(duration_s=60, sampling_rate="auto", rate=100)
    assert pb.log_sampling_rate(limited) == 1.0
    # Unknown machine: assume it is fast.
    assert pb.log_sampling_rate(pb.RunOptions(duration_s=60, sampling_rate="auto")) == 0.00833
    huge = pb.RunOptions(duration_s=3600, sampling_rate="auto", expected_tps=1e9)
    assert pb.log_sampling_rate(huge) == 1e-6


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "write-only"},
        {"clients": 0},
        {"duration_s": 0},
        {"mode": "custom"},
        {"scripts": (("a.sql", 1),)},
        {"sampling_rate": 0},
        {"sampling_rate": 1.5},
        {"sampling_rate": "sometimes"},
        {"rate": 0},
        {"query_mode": "fast"},
        {"defines": (("no spaces", "1"),)},
    ],
)
def test_run_options_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        pb.RunOptions(**kwargs)  # type: ignore[arg-type]


def test_parse_transaction_logs() -> None:
    # The exact nearest ranks: an HdrHistogram at 3 digits keeps every value
    # under 2,048 us apart, and 2,721 is the top of its 2-us bucket. Percentiles
    # it rounds up are tested against their tolerance in test_txlog.py.
    rw = [DATA / "pgbench_txlog_rw.7285.log", DATA / "pgbench_txlog_rw.7285.1.log"]
    assert pb.parse_transaction_logs(rw, 1.0) == LatencySummary(
        samples=600, sampling_rate=1.0, p50_ms=0.881, p95_ms=1.212, p99_ms=1.581, max_ms=3.493,
        p90_ms=1.117, digits=3,
    )  # fmt: skip
    sampled = [DATA / "pgbench_txlog_select.7261.log", DATA / "pgbench_txlog_select.7261.1.log"]
    assert pb.parse_transaction_logs(sampled, 0.01) == LatencySummary(
        samples=600, sampling_rate=0.01, p50_ms=0.022, p95_ms=0.111, p99_ms=0.181, max_ms=0.242,
        p90_ms=0.085, digits=3,
    )  # fmt: skip
    # -R with -L: two of the 300 lines say "skipped" instead of a time.
    rate = [DATA / "pgbench_txlog_rate.7379.log"]
    assert pb.parse_transaction_logs(rate, 1.0) == LatencySummary(
        samples=298, sampling_rate=1.0, p50_ms=0.212, p95_ms=0.384, p99_ms=2.721, max_ms=4.083,
        p90_ms=0.32, digits=3,
    )  # fmt: skip


def test_parse_transaction_logs_empty_and_bad(tmp_path: Path) -> None:
    empty = tmp_path / "pgrig_txlog_a.1"
    empty.write_text("")
    assert pb.parse_transaction_logs([empty], 1.0) is None
    aggregated = tmp_path / "pgrig_txlog_a.2"
    aggregated.write_text("1795321839 100 2000\n")
    with pytest.raises(ParseError, match="not a pgbench transaction log line") as caught:
        pb.parse_transaction_logs([aggregated], 1.0)
    assert caught.value.hint is not None and "aggregate" in caught.value.hint


def test_transaction_log_files_exact_names(tmp_path: Path) -> None:
    for name in (
        "pgrig_txlog_ab12.7285",
        "pgrig_txlog_ab12.7285.1",
        "pgrig_txlog_ab12.7285.12",
        # Not ours: another run's prefix, a copy, a different file.
        "pgrig_txlog_ab123.7285",
        "pgrig_txlog_ab12.7285.bak",
        "pgrig_txlog_ab12",
        "xpgrig_txlog_ab12.7285",
    ):
        (tmp_path / name).write_text("")
    (tmp_path / "pgrig_txlog_ab12.1.2.3").mkdir()
    found = pb.transaction_log_files(tmp_path, "pgrig_txlog_ab12")
    assert [p.name for p in found] == [
        "pgrig_txlog_ab12.7285",
        "pgrig_txlog_ab12.7285.1",
        "pgrig_txlog_ab12.7285.12",
    ]


# --------------------------------------------------------------------------
# The real pgbench against a throwaway server


needs_pg = pytest.mark.skipif(
    not (PG_BIN / "pgbench").is_file(), reason=f"no PostgreSQL binaries in {PG_BIN}"
)


@contextmanager
def throwaway_server() -> Iterator[tuple[Conn, Path]]:
    """initdb + start a server on a Unix socket only; stop and remove it afterwards."""
    user = proc.OsUser.lookup("postgres") if os.geteuid() == 0 else None
    # Not pytest's tmp_path: that is private to root, and the server runs as postgres.
    base = Path(tempfile.mkdtemp(prefix="pgrig-test-pgbench-"))
    if user is not None:
        os.chown(base, user.uid, user.gid)
    data = base / "data"
    pg_ctl = PG_BIN / "pg_ctl"
    try:
        proc.run(
            [PG_BIN / "initdb", "-D", data, "--auth=trust", "-U", "postgres", "--no-sync"],
            timeout=120,
            user=user,
        )
        options = f"-c listen_addresses='' -c unix_socket_directories={base} -c fsync=off"
        proc.run(
            [
                pg_ctl,
                "-D",
                data,
                "-l",
                base / "server.log",
                "-w",
                "-t",
                "60",
                "-o",
                options,
                "start",
            ],
            timeout=90,
            user=user,
        )
        yield Conn.socket(str(base), 5432, "postgres", "postgres"), data
    finally:
        if (data / "postmaster.pid").exists():
            proc.run(
                [pg_ctl, "-D", data, "-m", "fast", "-w", "stop"], timeout=60, user=user, check=False
            )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Conn, Path]]:
    with throwaway_server() as conn_data:
        yield conn_data


@needs_pg
def test_pgbench_version_real() -> None:
    assert pb.pgbench_version(PG_BIN).startswith("15.")


@needs_pg
@pytest.mark.cluster
def test_run_init_real(server: tuple[Conn, Path]) -> None:
    conn, _ = server
    seen: list[tuple[int, int]] = []
    result, raw = pb.run_init(
        PG_BIN, conn, pb.InitOptions(scale=1), on_progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(100_000, 100_000)]
    assert result.rows == 100_000
    assert result.elapsed_s > 0
    assert result.rows_per_s > 0
    assert "client-side generate" in result.steps
    assert "done in" in raw


@needs_pg
@pytest.mark.cluster
@pytest.mark.parametrize(("mode", "per_txn"), [("select-only", 1), ("read-write", 5)])
def test_run_bench_real(server: tuple[Conn, Path], tmp_path: Path, mode: str, per_txn: int) -> None:
    conn, _ = server
    pb.run_init(PG_BIN, conn, pb.InitOptions(scale=1, generate="server"))
    points: list[ProgressPoint] = []
    opts = pb.RunOptions(
        mode=mode,  # type: ignore[arg-type]
        clients=2,
        threads=2,
        duration_s=2,
        transaction_log=True,
        sampling_rate="auto",
        expected_tps=10_000,  # 2 s x 10,000 tps fits the auto target: every transaction logged
    )
    run, raw = pb.run_bench(PG_BIN, conn, opts, tmp_path, on_progress=points.append)
    assert run.mode == mode
    assert run.transactions > 0
    assert run.tps > 0
    assert len(points) >= 1
    assert run.progress == tuple(points)
    assert run.statements_per_txn == per_txn
    assert run.latency is not None
    assert run.latency.samples > 0
    assert run.latency.sampling_rate == 1.0
    assert run.latency.p50_ms <= run.latency.p99_ms <= run.latency.max_ms
    assert "tps = " in raw
    # The exact command line is kept with the result (issue 30), its password never.
    assert run.argv[0].endswith("pgbench") and run.argv[run.argv.index("-c") :][:2] == ("-c", "2")
    assert not any("password" in a for a in run.argv)
    assert list(tmp_path.iterdir()) == []  # the transaction logs are gone


@needs_pg
@pytest.mark.cluster
def test_run_bench_server_killed(tmp_path: Path) -> None:
    with throwaway_server() as (conn, data):
        pb.run_init(PG_BIN, conn, pb.InitOptions(scale=1, generate="server"))
        user = proc.OsUser.lookup("postgres") if os.geteuid() == 0 else None

        killed: list[float] = []

        def kill_server(point: ProgressPoint) -> None:
            if not killed:
                killed.append(point.t_s)
                proc.run(
                    [PG_BIN / "pg_ctl", "-D", data, "-m", "immediate", "stop"],
                    timeout=60,
                    user=user,
                    check=False,
                )

        opts = pb.RunOptions(
            mode="read-write", clients=2, threads=2, duration_s=20, transaction_log=True
        )
        with pytest.raises(ToolError) as caught:
            pb.run_bench(PG_BIN, conn, opts, tmp_path, on_progress=kill_server, timeout=30)
    assert killed
    assert caught.value.returncode == 2
    assert "aborted" in str(caught.value)
    assert caught.value.hint is not None and "server log" in caught.value.hint
    assert list(tmp_path.iterdir()) == []


def test_open_loop_run_reports_lag_late_and_skipped() -> None:
    """pgbench -R 500 -L 1 --latency-limit: captured on this machine."""
    run = run_fixture("run_rate_limit")
    assert (run.lag_avg_ms, run.lag_max_ms) == (0.106, 4.032)
    assert run.skipped == 2
    assert (run.late, run.latency_limit_ms) == (9, 1.0)
    closed = run_fixture("run_select_only")
    assert closed.lag_avg_ms is None and closed.skipped is None and closed.late is None
