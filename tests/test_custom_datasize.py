"""The size of a custom workload's data, read from its setup SQL before it runs
(issue 21.7: seed001's plan said "needs about 0.0 GiB" for a million users)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig import calibration, campaign, plan
from pgrig.cluster.server import SUPERUSER, Cluster
from pgrig.conninfo import Conn
from pgrig.hosts.local import HERE
from pgrig.pgsource.binaries import PgBinaries
from pgrig.units import GB, MB
from pgrig.workloads.custom import datasize
from pgrig.workloads.custom.workload import SETUP_KIND

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCHEMA = (EXAMPLES / "seed001" / "schema.sql").read_text()
TABLES = "('user_info', 'user_session', 'user_login_rec', 'user_logout_rec')"


def test_statements_keep_function_bodies_and_escaped_quotes_whole() -> None:
    stmts = list(datasize.statements(SCHEMA))
    assert [s.split()[0].lower() for s in stmts].count("create") == 6  # 4 tables, 2 functions
    assert any(s.startswith("create or replace function f_user_login") and "return;" in s
               for s in stmts)  # fmt: skip
    assert datasize._literal("E'I\\'m'") == "I'm" and datasize._literal("'a' || 'b'") is None


def test_rows_come_from_generate_series_and_nothing_from_what_the_text_hides() -> None:
    made = "create table t (id int primary key, v text);\n"
    small = datasize.estimate(made + "insert into t select generate_series(1, 1000), 'x';")
    big = datasize.estimate(made + "insert into t select generate_series(1, 100000), 'x';")
    assert 50 < big / small < 150  # heap and index grow with the rows (pages round up)
    assert datasize.estimate(made + "copy t from '/tmp/t.csv';") == 0  # a floor, not a guess
    longer = datasize.estimate(
        made + f"insert into t select generate_series(1, 100000), '{'y' * 200}';"
    )
    assert longer > 3 * big  # the inserted literal's width counts


def test_seed001_schema_size_within_10_percent_on_a_real_cluster(
    bins: PgBinaries, cluster: Cluster, conn: Conn, tmp_path: Path
) -> None:
    """Seed 001's setup with 50,000 users run by psql: its tables and indexes
    against the estimate from the text alone."""
    sql = datasize.substitute(SCHEMA, {"users": "50000"})
    script = tmp_path / "schema.sql"
    script.write_text(sql)
    script.chmod(0o644)
    with conn.connect() as db:
        db.execute("DROP DATABASE IF EXISTS sized")
        db.execute("CREATE DATABASE sized")
    there = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "sized")
    HERE.run(
        [str(bins.path("psql")), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(script),
         *there.args()],
        timeout=120, env=there.env(), what="psql",
    )  # fmt: skip
    with there.connect() as db:
        row = db.execute(
            f"SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE relname IN {TABLES}"
        ).fetchone()
    assert row is not None
    real = int(row[0])
    estimate = datasize.estimate(sql)
    assert abs(estimate - real) / real < 0.10, (estimate, real)


def test_seed001_plan_needs_its_data_and_times_the_setup_from_the_calibration() -> None:
    camp = campaign.load(EXAMPLES / "seed001-login.toml")
    need = plan.disk_needs(camp)["disk"]
    assert need > 0.4 * GB  # 250 MiB of tables and indexes, the WAL of loading them
    data = datasize.of_files([EXAMPLES / "seed001" / "schema.sql"], {"users": "1000000"})
    assert 200 * MB < data < 300 * MB
    setup = next(r for r in plan.expand(camp).runs if r.key == "disk/login/setup")
    calibration.record(SETUP_KIND, data / MB, 3 * setup.seconds + 7)  # measured here: slower
    again = next(r for r in plan.expand(camp).runs if r.key == "disk/login/setup")
    assert again.seconds == pytest.approx(3 * setup.seconds + 7)
