"""The durability check on real throwaway clusters: it passes with
synchronous_commit = on, finds the commits synchronous_commit = off loses, names
a row deleted or changed behind its back, keeps the evidence when the server
does not come back, and refuses to crash an existing server without --yes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import full_report
from pgrig.cluster import workdir
from pgrig.commands.durability_study import DurabilityFailed, Options, execute
from pgrig.durability import verifier
from pgrig.durability.clients import PREFIX, delta_of
from pgrig.durability.crasher import ServerLost
from pgrig.durability.driver import DurabilityPlan
from pgrig.durability.model import DurabilityResult
from pgrig.results import from_dict
from pgrig.store import Store
from pgrig.ui import Ui

DATA = Path(__file__).parent / "data" / "durability"
SHORT = ["--crashes", "2", "--interval", "0.8", "--clients", "3", "--profile", "stock"]


def pgrig(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgrig", "durability", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stored_result(results: Path) -> DurabilityResult:
    with sqlite3.connect(results / "results.sqlite") as db:
        row = db.execute("SELECT status, result FROM runs WHERE kind = 'durability'").fetchone()
    assert row[0] == "ok"
    return from_dict(DurabilityResult, json.loads(row[1]))


def leftovers(target: Path) -> list[Path]:
    return list(target.glob("pgrig-*"))


# -- the real thing, end to end ------------------------------------------------


def test_synchronous_commit_on_loses_nothing(disk_dir: Path, tmp_path: Path) -> None:
    done = pgrig(
        "--target", disk_dir, "--results", tmp_path, *SHORT,
        "--set", "synchronous_commit=on", "--crash", "immediate",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "durability check passed" in done.stderr
    res = stored_result(tmp_path)
    assert len(res.crashes) == 2 and res.lost == 0 and res.ok
    assert res.acknowledged > 100
    assert res.settings["synchronous_commit"] == "on"
    assert res.settings["data_checksums"] == "on"
    assert all(c.recovery_s > 0 for c in res.crashes)
    names = {c.name: c.ok for c in res.checks}
    assert names[verifier.AMCHECK] is True and names[verifier.LOG] is True
    report = full_report(tmp_path, "report-durability-*.md").read_text()
    assert "PASSED" in report and "synchronous_commit | on" in report
    assert leftovers(disk_dir) == []


def test_synchronous_commit_off_loses_acknowledged_commits(disk_dir: Path, tmp_path: Path) -> None:
    # WAL still in wal_buffers when the processes die is gone; with a 10 s
    # wal_writer_delay the last partial WAL page is never written in time.
    done = pgrig(
        "--target", disk_dir, "--results", tmp_path, *SHORT,
        "--set", "synchronous_commit=off", "--set", "wal_writer_delay=10s",
        "--set", "wal_buffers=16MB", "--crash", "kill-postmaster",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "error: the durability check failed" in done.stderr
    assert "acknowledged in the last" in done.stderr and "lost" in done.stderr
    res = stored_result(tmp_path)
    assert res.lost > 0 and not res.ok
    assert res.lost == sum(c.loss.count for c in res.crashes if c.loss)
    # Losing commits is not corruption: the data that survived is consistent.
    final = {c.name: c.ok for c in res.checks}
    assert final[verifier.INVARIANTS] and final[verifier.DUPLICATES] and final[verifier.AMCHECK]
    report = full_report(tmp_path, "report-durability-*.md").read_text()
    assert "FAILED" in report and ("were lost" in report or "was lost" in report)
    assert leftovers(disk_dir) == []


def test_tampering_behind_the_checks_back_is_named(disk_dir: Path, tmp_path: Path) -> None:
    touched: dict[str, int] = {}

    def tamper(event: str, crash: int) -> None:
        if event == "crashed":
            return  # the server is down
        with psycopg_conn(disk_dir) as db:
            if event == "recovered" and crash == 1:
                row = db.execute(
                    f"DELETE FROM {PREFIX}history WHERE id = (SELECT min(id) FROM "
                    f"{PREFIX}history) RETURNING id"
                ).fetchone()
                touched["deleted"] = row[0]
            if event == "end":
                row = db.execute(
                    f"UPDATE {PREFIX}history SET delta = delta + 1 WHERE id = (SELECT max(id)"
                    f" FROM {PREFIX}history) RETURNING id"
                ).fetchone()
                touched["changed"] = row[0]

    opts = Options(
        plan=DurabilityPlan(method="kill-backend", crashes=1, clients=2, interval_s=0.8),
        target=disk_dir,
        profile="stock",
        overrides={"synchronous_commit": "on"},
    )
    with Store.open(tmp_path / "results.sqlite") as store, pytest.raises(DurabilityFailed) as err:
        execute(opts, Ui(quiet=True), store, tmp_path, on_event=tamper)
    message = str(err.value)
    deleted, changed = touched["deleted"], touched["changed"]
    assert f"first: id {deleted}" in message  # reported as a lost acknowledged commit
    assert f"history row id {changed}: delta {delta_of(changed) + 1}" in message
    assert "invariants" in message and "but its history rows sum to" in message
    res = stored_result(tmp_path)
    assert res.lost == 1 and res.crashes[0].loss is not None
    assert leftovers(disk_dir) == []


def psycopg_conn(target: Path):  # type: ignore[no-untyped-def]
    """A connection to the one cluster running under ``target``."""
    from pgrig.conninfo import Conn

    (work,) = leftovers(target)
    made = workdir.record(work)
    assert made is not None
    (socket_dir,) = [d for d in made.elsewhere if Path(d).name.startswith("pgrig-sock-")]
    port = next(Path(socket_dir).glob(".s.PGSQL.*.lock")).name.split(".")[-2]
    return Conn.socket(socket_dir, int(port), "postgres", "pgrig").connect()


def test_server_that_does_not_come_back_is_kept(disk_dir: Path, tmp_path: Path) -> None:
    def break_config(event: str, crash: int) -> None:
        if event == "crashed":
            (work,) = leftovers(disk_dir)
            with (work / "data" / "postgresql.auto.conf").open("a") as fh:
                fh.write("shared_buffers = 'plenty'\n")

    opts = Options(
        plan=DurabilityPlan(method="immediate", crashes=1, clients=2, interval_s=0.5),
        target=disk_dir,
        profile="stock",
    )
    with Store.open(tmp_path / "results.sqlite") as store, pytest.raises(ServerLost) as err:
        execute(opts, Ui(quiet=True), store, tmp_path, on_event=break_config)
    (work,) = leftovers(disk_dir)
    try:
        assert str(work / "data") in str(err.value) and "kept" in str(err.value)
        assert (work / "server.log").read_text().count("plenty") >= 1
        assert work not in workdir.orphans()
        with sqlite3.connect(tmp_path / "results.sqlite") as db:
            status, reason = db.execute("SELECT status, reason FROM runs").fetchone()
        assert status == "failed" and "did not come back" in reason
        assert list(tmp_path.glob("report-durability-*.html"))
    finally:
        workdir.remove(work)


# -- bad input ------------------------------------------------------------------


def test_existing_server_needs_yes(tmp_path: Path) -> None:
    done = pgrig("--dsn", "host=/nonexistent dbname=x", "--results", tmp_path)
    assert done.returncode == 2
    assert "refusing to crash an existing server" in done.stderr and "--yes" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "results.sqlite").exists()


def test_existing_server_cannot_be_restarted_by_pgrig(tmp_path: Path) -> None:
    done = pgrig("--dsn", "host=/nonexistent dbname=x", "--yes", "--crash", "immediate")
    assert done.returncode == 2
    assert "--crash immediate" in done.stderr and "kill-backend" in done.stderr


def test_bad_values_are_named(tmp_path: Path) -> None:
    done = pgrig("--crashes", "-1", "--results", tmp_path)
    assert done.returncode == 2 and "--crashes -1" in done.stderr


# -- the server log, on logs of real crashes --------------------------------------


@pytest.mark.parametrize("method", ["immediate", "kill-postmaster", "kill-backend"])
def test_crash_logs_hold_only_expected_lines(method: str) -> None:
    text = (DATA / f"server_{method}.log").read_text()
    killed = {1887} if method == "kill-backend" else set()
    assert verifier.unexpected_log_lines(text, killed) == []


def test_unexpected_log_lines_are_found() -> None:
    text = (DATA / "server_kill-backend.log").read_text()
    # A backend pgrig did not kill dying is not explained by the check.
    assert any("PID 1887" in line for line in verifier.unexpected_log_lines(text, set()))
    bad = (
        "2026-11-22 05:14:48.700 UTC [1900] ERROR:  invalid page in block 7 of relation "
        "base/16384/16390\n2026-11-22 05:14:48.700 UTC [1900] WARNING:  page verification "
        "failed, calculated checksum 1234 but expected 5678\n"
    )
    found = verifier.unexpected_log_lines(text + bad, {1887})
    assert len(found) == 2 and "invalid page" in found[0] and "checksum" in found[1]


# -- the user's own workload under the crashes (seed 001) ---------------------------

LOGIN_SCHEMA = """\
CREATE TABLE user_session (userid int PRIMARY KEY, login_count bigint NOT NULL DEFAULT 0);
CREATE TABLE user_login_rec (userid int NOT NULL, login_time timestamptz NOT NULL);
INSERT INTO user_session (userid) SELECT generate_series(1, 1000);
CREATE FUNCTION f_user_login(i_userid int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO user_login_rec VALUES (i_userid, now());
  UPDATE user_session SET login_count = login_count + 1 WHERE userid = i_userid;
END $$;
"""
LOGIN_CAMPAIGN = """\
[campaign]
name = "login-crash"

[[target]]
name = "disk"
directory = "{target}"
profile = "stock"
[target.set]
synchronous_commit = "on"

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "custom"
name = "login"
setup = ["schema.sql"]
scripts = ["login.sql"]
defines = {{ users = 1000 }}
clients = [2]
duration = 1

[[workload]]
type = "durability"
name = "login-durability"
method = "immediate"
crashes = 1
clients = 2
interval = 1.5
scripts = ["login.sql"]
defines = {{ users = 1000 }}
script_clients = 2
[[workload.checks]]
name = "a login record for every login counted"
sql = '''SELECT s.userid FROM user_session s LEFT JOIN user_login_rec r USING (userid)
         GROUP BY s.userid, s.login_count HAVING s.login_count <> count(r.userid)'''
[[workload.checks]]
name = "one session per user"
sql = "SELECT userid FROM user_session GROUP BY userid HAVING count(*) > 1"
[[workload.checks]]
name = "nobody logged in"
sql = "SELECT userid FROM user_login_rec LIMIT 5"
"""


def test_a_custom_workload_is_crashed_and_checked_by_its_own_checks(disk_dir: Path) -> None:
    """Seed 001: the login workload writes under the crashes, relaunched after
    each; its declared checks run after every recovery. "nobody logged in" is
    meant to break: it proves the checks run against the workload's data."""
    (disk_dir / "schema.sql").write_text(LOGIN_SCHEMA)
    (disk_dir / "login.sql").write_text(
        "\\set userid random(1, :users)\nSELECT f_user_login(:userid);\n"
    )
    target = disk_dir / "t"
    target.mkdir(mode=0o755)
    file = disk_dir / "login.toml"
    file.write_text(LOGIN_CAMPAIGN.format(target=target))
    results = disk_dir / "r"
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "run", file, "--results", results],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    with Store.open(results / "results.sqlite") as store:
        records = store.runs("login-crash")
    (rec,) = [r for r in records if r.kind == "durability"]
    assert rec.result is not None, (rec.status, rec.reason, done.stderr[-2000:])
    # the custom workload's own tables, after its setup and after its runs
    sized = {r.key: r.result for r in records if r.kind == "relation_sizes"}
    assert set(sized) == {"disk/login/sizes/after-load", "disk/login/sizes/after-runs"}
    after = sized["disk/login/sizes/after-runs"]
    assert after is not None and "user_login_rec" in {x["name"] for x in after["relations"]}
    res = from_dict(DurabilityResult, rec.result)
    assert res.lost == 0 and len(res.crashes) == 1
    after_crash = {c.name: c for c in res.crashes[0].checks}
    assert after_crash["a login record for every login counted"].ok is True
    assert after_crash["one session per user"].ok is True
    broken = after_crash["nobody logged in"]
    assert broken.ok is False and "rows break it" in broken.detail
    assert any("nobody logged in" in f for f in res.failures)
    report = full_report(results, "*.md").read_text()
    assert "nobody logged in" in report


def test_a_campaigns_durability_workload_asks_for_its_disk(tmp_path: Path) -> None:
    """`pgrig durability` refused a disk without 256 MiB free; the same check in a
    campaign (type = "durability") asked for nothing, so nothing was refused."""
    from pgrig import campaign, plan
    from pgrig.durability.workload import NEEDED_BYTES

    camp = campaign.parse(
        f'[campaign]\nname = "d"\n[[target]]\nname = "t"\ndirectory = "{tmp_path}"\n'
        "[probes]\ntiming = false\nfsync = false\nfio = false\n"
        '[[workload]]\ntype = "durability"\n',
        source="d.toml",
        base=tmp_path,
    )
    assert plan.disk_needs(camp) == {"t": NEEDED_BYTES}
