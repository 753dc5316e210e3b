"""One settings path (issue 40.3): a setting given in any case and in any form
PostgreSQL accepts reaches the server, and the report says what the server
reported running, marking a value it did not apply. The refusals of settings
pgrig owns are in test_bad_input.py (set-port, set-listen, axes-port, ...)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import full_report
from pgrig.conninfo import Conn
from pgrig.report import header
from pgrig.results import Cpu, Environment, PostgresInfo, Study
from test_cli import only_study, pgrig, tiny


def test_a_name_in_other_case_and_a_fraction_of_a_unit_reach_the_server(disk_dir: Path) -> None:
    """`Shared_Buffers` was dropped ("PostgreSQL 15 does not list Shared_Buffers")
    while the report claimed it; `0.5MB` was a syntax error blamed on the profile."""
    results = disk_dir / "r"
    done = pgrig(
        "run", "--target", disk_dir, "--results", results,
        "--set", "Shared_Buffers=24MB", "--set", "work_mem=0.5MB", *tiny(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "does not list" not in done.stderr
    status, _ = only_study(results)
    assert status == "finished"
    report = full_report(results).read_text()
    # the server's own words (current_setting): 0.5MB is 512kB
    assert "shared_buffers=24MB" in report and "work_mem=512kB" in report, report[:3000]
    assert "the server ran" not in report


def _env(settings: dict[str, str]) -> Environment:
    return Environment(
        captured_at="", hostname="h", os_release="", kernel="",
        cpu=Cpu(model="", sockets=1, cores_per_socket=1, threads_per_core=1, logical_cpus=1),
        memory_bytes=2**30,
        postgres=PostgresInfo(version="15", version_num=150000, bin_dir=None,
                              data_directory=None, settings=settings),
    )  # fmt: skip


def test_the_header_marks_a_setting_the_server_did_not_apply() -> None:
    study = Study(
        id="s", name="s", target="t", started_at="", status="finished",
        params={"targets": [{"name": "t", "profile": "oltp", "pg_version": "15",
                             "settings": {"shared_buffers": "64MB", "synchronous_commit": "false",
                                          "checkpoint_timeout": "300s", "old_knob": "1"}}]},
        target_environments={"t": _env({"shared_buffers": "6026MB", "synchronous_commit": "off",
                                        "checkpoint_timeout": "5min"})},
    )  # fmt: skip
    line = header.obtained_line(study, [])
    assert "shared_buffers=6026MB (asked 64MB: the server ran 6026MB)" in line, line
    assert "synchronous_commit=off," in line and "checkpoint_timeout=5min," in line, line
    assert "old_knob=1 (not among the server's settings: not applied)" in line, line


def test_settings_that_fail_pgrigs_own_sessions_leave_them_alone(disk_dir: Path) -> None:
    """default_transaction_read_only = on made CREATE DATABASE a traceback
    (ReadOnlySqlTransaction), statement_timeout = 1 another (QueryCanceled), each
    with a failed study (issue 40.4). pgrig's own sessions - the database, the
    load, the monitor - run at PostgreSQL's defaults for them; the benchmark's
    clients with the server's: select-only runs read-only."""
    results = disk_dir / "r"
    done = pgrig(
        "run", "--target", disk_dir, "--results", results,
        "--set", "default_transaction_read_only=on", "--set", "lock_timeout=1",
        "--set", "idle_in_transaction_session_timeout=1", *tiny(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    status, runs = only_study(results)
    assert status == "finished" and runs["local/tpcb/s1/select-only/c1/d2/r1"][0] == "ok", runs


def test_a_statement_timeout_fails_the_benchmark_not_pgrig(disk_dir: Path) -> None:
    results = disk_dir / "r"
    done = pgrig(
        "run", "--target", disk_dir, "--results", results, "--set", "statement_timeout=1",
        *tiny(),
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    _, runs = only_study(results)
    assert runs["local/tpcb/s1/init"][0] == "ok", "the load is pgrig's own session"
    # A select-only statement takes well under 1 ms on a quiet machine and over it
    # on a busy one: the benchmark's run may pass or fail, and fails only so.
    status, reason = runs["local/tpcb/s1/select-only/c1/d2/r1"]
    assert (done.returncode, status) in ((0, "ok"), (6, "failed")), done.stderr
    if status == "failed":
        # Under load the server can name a statement timeout's cancel "due to user
        # request" (ci15): the timer fired as the statement ended and disarmed it,
        # so the cancel found no timeout flag set. Either way it is the server's.
        assert re.search(r"canceling statement due to (statement timeout|user request)",
                         reason or ""), reason  # fmt: skip


def test_own_sessions_name_only_the_settings_the_server_has() -> None:
    conn = Conn("host=/tmp port=5432").guarded(["Statement_Timeout", "work_mem"])
    assert conn.own == "-c statement_timeout=0"
    assert "statement_timeout" in conn.conninfo()
    assert conn.args() == ["host=/tmp port=5432"], "never the benchmark's clients"
    assert "statement_timeout" in conn.env(own=True)["PGOPTIONS"]
    assert "statement_timeout" not in conn.env().get("PGOPTIONS", "")
    assert Conn("host=/tmp").guarded(["work_mem"]).conninfo().count("options") == 0
