"""A custom workload's setup files see its defines as psql variables, as its
pgbench scripts do (seed 001's schema loads ``:users`` rows, the number its
login script draws from)."""

from __future__ import annotations

from pathlib import Path

from pgrig.clients import OneHost
from pgrig.conninfo import Conn
from pgrig.pgsource import binaries
from pgrig.step import Context
from pgrig.ui import Ui
from pgrig.workloads.custom.spec import CustomSpec, ScriptSpec
from pgrig.workloads.custom.workload import setup_action


def test_setup_files_read_the_workloads_defines(
    bins: binaries.PgBinaries, conn: Conn, tmp_path: Path
) -> None:
    setup = tmp_path / "schema.sql"
    setup.write_text(
        "drop table if exists setup_users;\n"
        "create table setup_users as select generate_series(1, :users) as userid;\n"
    )
    script = tmp_path / "login.sql"
    script.write_text("\\set userid random(1, :users)\nselect :userid;\n")
    spec = CustomSpec(
        name="login", scripts=(ScriptSpec(script, 1),), setup=(setup,), defines={"users": "37"}
    )
    ctx = Context(
        clients=OneHost(bins.client_bin_dir),
        bins=bins,
        target=tmp_path,
        scratch=tmp_path,
        conn=conn,
    )
    with Ui(quiet=True).step("setup") as line:
        setup_action(spec, 0, "")(ctx, line)
    with conn.connect() as db:
        row = db.execute("select count(*), max(userid) from setup_users").fetchone()
        db.execute("drop table setup_users")
    assert row == (37, 37)
