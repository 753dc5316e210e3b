"""What a crash model can and cannot prove: a process crash keeps the kernel's
page cache, so settings that only matter when it is lost are reported as NOT
TESTED, and the command exits non-zero unless --allow-untested."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import full_report
from pgrig.durability.model import POWER_LOSS, PROCESS, Cut, untested_by
from test_durability import SHORT, pgrig, stored_result


def test_which_settings_a_process_crash_cannot_test() -> None:
    safe = {"fsync": "on", "full_page_writes": "on", "wal_sync_method": "fdatasync"}
    assert untested_by(PROCESS, safe) == ()
    risky = safe | {"fsync": "off", "full_page_writes": "off", "wal_sync_method": "open_datasync"}
    names = [u.split(" = ")[0] for u in untested_by(PROCESS, risky)]
    assert names == ["fsync", "full_page_writes", "wal_sync_method"]
    assert untested_by(POWER_LOSS, risky, "torn") == (), "a power loss tests them"
    assert untested_by(POWER_LOSS, risky, "random-subset") == ()
    # A `drop` power loss keeps or loses whole pages: no torn page for full_page_writes.
    (only,) = untested_by(POWER_LOSS, risky, "drop")
    assert only.startswith("full_page_writes = off") and "torn" in only


def test_a_torn_run_that_tore_no_data_page_tested_nothing() -> None:
    """Defect 19.17: torn pages in the WAL, or tears that left a page as it was, are
    no test of full_page_writes: the PASS must say so (and exit non-zero)."""
    fpw_off = {"full_page_writes": "off"}
    wal = Cut("torn", 40, 1, 0, torn="d/pg_wal/0001 at 0: 2,048 of 4,096 bytes", torn_changed=900)
    same = Cut("torn", 40, 1, 0, torn="d/base/5/1259 at 0: 2,048 bytes", torn_data_page=True)
    (note,) = untested_by(POWER_LOSS, fpw_off, "torn", [wal, same])
    assert note.startswith("full_page_writes = off") and "none of the 2 torn pages" in note
    assert "pg_wal/0001" in note and "shared_buffers" in note
    assert "nothing for recovery to repair" in wal.sentence()
    data = replace(same, torn_changed=2048, torn_rewritten=True)
    assert untested_by(POWER_LOSS, fpw_off, "torn", [wal, data]) == ()
    assert "rewritten by recovery" in data.sentence()
    assert "left as torn" in replace(data, torn_rewritten=False).sentence()


def test_fsync_off_is_not_tested_by_a_process_crash(disk_dir: Path, tmp_path: Path) -> None:
    done = pgrig(
        "--target", disk_dir, "--results", tmp_path, *SHORT,
        "--set", "fsync=off", "--set", "synchronous_commit=on",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "cannot test" in done.stderr and "fsync = off" in done.stderr
    assert "--allow-untested" in done.stderr
    res = stored_result(tmp_path)
    assert res.ok and res.lost == 0 and res.untested

    again = pgrig(
        "--target", disk_dir, "--results", tmp_path / "b", *SHORT,
        "--set", "fsync=off", "--allow-untested",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "NOT TESTED" in again.stderr
    report = full_report(tmp_path / "b", "report-durability-*.md").read_text()
    assert "NOT TESTED by this process crash: fsync = off" in report
