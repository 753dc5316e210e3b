from __future__ import annotations

from pathlib import Path

import pytest

from pgrig.errors import BinaryNotFound, ParseError, WorkdirError
from pgrig.results import FsyncResult, from_dict, to_dict
from pgrig.tools import pg_test_fsync
from pgrig.tools.pg_test_fsync import fdatasync_8k

DATA = Path(__file__).parent / "data"
PG_BIN = Path("/usr/lib/postgresql/15/bin")

SECTIONS_8K = [
    "one 8kB write",
    "two 8kB writes",
    "open_sync sizes",
    "non-write descriptor",
    "non-synced writes",
]
METHODS = [
    "open_datasync",
    "fdatasync",
    "fsync",
    "fsync_writethrough",
    "open_sync",
    "open_datasync",
    "fdatasync",
    "fsync",
    "fsync_writethrough",
    "open_sync",
    "1 * 16kB open_sync write",
    "2 * 8kB open_sync writes",
    "4 * 4kB open_sync writes",
    "8 * 2kB open_sync writes",
    "16 * 1kB open_sync writes",
    "write, fsync, close",
    "write, close, fsync",
    "write",
]


def parse_file(name: str) -> FsyncResult:
    return pg_test_fsync.parse((DATA / name).read_text())


def sections(result: FsyncResult) -> list[str]:
    return list(dict.fromkeys(row.section for row in result.rows))


def test_parse_pg15_output() -> None:
    result = parse_file("pg_test_fsync_pg15.txt")
    assert result.seconds_per_test == 1.0
    assert sections(result) == SECTIONS_8K
    assert [row.method for row in result.rows] == METHODS
    headline = fdatasync_8k(result)
    assert headline is not None
    assert (headline.ops_per_sec, headline.usecs_per_op) == (9456.187, 106.0)
    row = result.find("open_sync sizes", "2 * 8kB open_sync writes")
    assert row is not None and row.ops_per_sec == 4646.252 and row.usecs_per_op == 215.0
    row = result.find("two 8kB writes", "fsync_writethrough")
    assert row is not None and row.ops_per_sec is None and row.usecs_per_op is None
    row = result.find("non-synced writes", "write")
    assert row is not None and row.ops_per_sec == 1567920.555
    assert from_dict(FsyncResult, to_dict(result)) == result


def test_parse_no_odirect_filesystem() -> None:
    # Captured on ramfs: open_datasync/open_sync print "n/a*" plus a two-line footnote.
    result = parse_file("pg_test_fsync_pg15_ramfs.txt")
    assert [row.method for row in result.rows] == METHODS
    for method in ("open_datasync", "open_sync"):
        row = result.find("one 8kB write", method)
        assert row is not None and row.ops_per_sec is None
    sizes = [row for row in result.rows if row.section == "open_sync sizes"]
    assert len(sizes) == 5 and all(row.ops_per_sec is None for row in sizes)
    row = result.find("two 8kB writes", "fdatasync")
    assert row is not None and row.ops_per_sec == 415814.635 and row.usecs_per_op == 2.0


def test_parse_seed000_pg12() -> None:
    result = parse_file("pg_test_fsync_seed000.txt")
    assert result.seconds_per_test == 5.0
    assert sections(result) == SECTIONS_8K
    assert [row.method for row in result.rows] == METHODS
    headline = fdatasync_8k(result)
    assert headline is not None
    assert (headline.ops_per_sec, headline.usecs_per_op) == (28216.659, 35.0)
    row = result.find("open_sync sizes", "16 * 1kB open_sync writes")
    assert row is not None and row.usecs_per_op == 505.0


def test_parse_seed001_pg92_16k_blocks() -> None:
    result = parse_file("pg_test_fsync_seed001.txt")
    assert result.seconds_per_test == 2.0
    assert sections(result) == [
        "one 16kB write",
        "two 16kB writes",
        "open_sync sizes",
        "non-write descriptor",
        "non-synced writes",
    ]
    assert [row.method for row in result.rows] == METHODS
    assert all(row.usecs_per_op is None for row in result.rows)
    headline = fdatasync_8k(result)
    assert headline is not None
    assert headline.section == "one 16kB write" and headline.ops_per_sec == 9873.674
    row = result.find("non-synced writes", "write")
    assert row is not None and row.ops_per_sec == 146398.402


def test_fdatasync_8k_absent() -> None:
    result = FsyncResult(seconds_per_test=1.0, rows=())
    assert fdatasync_8k(result) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Segmentation fault\n", "line 1 not understood: 'Segmentation fault'"),
        ("", "no 'N seconds per test' line"),
        ("5 seconds per test\n", "no results"),
        # A result row outside any section cannot be placed.
        ("5 seconds per test\n        fdatasync   9456.187 ops/sec\n", "line 2"),
        (
            "5 seconds per test\n"
            "Compare file sync methods using one 8kB write:\n"
            "  fdatasync 12 IOPS\n",
            "line 3",
        ),
    ],
)
def test_parse_garbage_raises(text: str, expected: str) -> None:
    with pytest.raises(ParseError) as info:
        pg_test_fsync.parse(text)
    assert "pg_test_fsync" in str(info.value)
    assert expected in str(info.value)


def test_parse_output_cut_mid_test_raises() -> None:
    # What a killed pg_test_fsync leaves: a label whose numbers never came.
    lines = (DATA / "pg_test_fsync_pg15.txt").read_text().splitlines()
    text = "\n".join(lines[:8]) + "\n        open_sync                     \n"
    with pytest.raises(ParseError, match="line 9 not understood: 'open_sync'"):
        pg_test_fsync.parse(text)


def test_run_refuses_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "pgrig_fsync.tmp"
    target.write_text("someone's data")
    with pytest.raises(WorkdirError) as info:
        pg_test_fsync.run(PG_BIN, tmp_path, seconds=1)
    assert "already exists" in str(info.value)
    assert target.read_text() == "someone's data"


def test_run_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkdirError):
        pg_test_fsync.run(PG_BIN, tmp_path / "nope", seconds=1)


def test_run_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFound):
        pg_test_fsync.run(tmp_path, tmp_path, seconds=1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(not (PG_BIN / "pg_test_fsync").exists(), reason="PostgreSQL 15 not installed")
def test_run_real_tool(tmp_path: Path) -> None:
    # About 16 tests x 1 s: the shortest pg_test_fsync can do.
    lines: list[str] = []
    result, raw = pg_test_fsync.run(PG_BIN, tmp_path, seconds=1, timeout=120, on_line=lines.append)
    assert result.seconds_per_test == 1.0
    assert [row.method for row in result.rows] == METHODS
    headline = fdatasync_8k(result)
    assert headline is not None and headline.ops_per_sec is not None and headline.ops_per_sec > 0
    assert raw.startswith("1 second per test")
    assert sum("ops/sec" in line for line in lines) == pg_test_fsync.TIMED_TESTS
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------
# Orderings physics forbids: noise, not findings


def test_a_busy_machine_inverts_what_the_tests_do() -> None:
    """Captured on this 2-core VM under a load average of 12 (make run, 2 s per test)."""
    result = pg_test_fsync.parse((DATA / "pg_test_fsync_pg15_busy.txt").read_text())
    found = {(i.observed.section, i.observed.method, i.expected.method) for i in
             pg_test_fsync.inversions(result)}  # fmt: skip
    assert ("two 8kB writes", "fsync", "fsync") in found  # two writes per sync beat one
    assert ("two 8kB writes", "open_datasync", "open_datasync") in found
    assert ("one 8kB write", "fsync", "fdatasync") in found  # a full sync beat a data-only one
    assert ("open_sync sizes", "8 * 2kB open_sync writes", "4 * 4kB open_sync writes") in found
    assert len(found) == 6
    two = next(i for i in pg_test_fsync.inversions(result) if i.why.startswith("it writes"))
    assert two.describe() == (
        "open_datasync (two 8kB writes) ran 55% faster than open_datasync (one 8kB write), "
        "though it writes twice as much per sync"
    )


def test_quiet_captures_keep_their_order() -> None:
    for name in ("pg_test_fsync_seed000.txt", "pg_test_fsync_seed001.txt"):
        assert pg_test_fsync.inversions(pg_test_fsync.parse((DATA / name).read_text())) == []
    ramfs = pg_test_fsync.parse((DATA / "pg_test_fsync_pg15_ramfs.txt").read_text())
    assert pg_test_fsync.inversions(ramfs) == [], "n/a rows are not compared"
    pg15 = pg_test_fsync.inversions(
        pg_test_fsync.parse((DATA / "pg_test_fsync_pg15.txt").read_text())
    )
    assert [(i.observed.method, round(i.pct)) for i in pg15] == [("open_sync", 4)]


def test_a_tie_is_no_inversion() -> None:
    """pg_test_fsync's own rounding makes ties: "ran 0% faster" was a warning once."""
    from pgrig.results import FsyncResult, FsyncRow

    def result(fsync: float) -> FsyncResult:
        one = "one 8kB write"
        return FsyncResult(
            2.0, (FsyncRow(one, "fdatasync", 3346.0, 298.9), FsyncRow(one, "fsync", fsync, 299.0))
        )

    assert pg_test_fsync.inversions(result(3346.0)) == []
    assert pg_test_fsync.inversions(result(3350.0)) == []  # 0.1%: printed as 0%
    (real,) = pg_test_fsync.inversions(result(3400.0))
    assert "ran 2% faster" in real.describe()


def test_repeated_runs_are_keyed_so_old_files_resume(tmp_path: Path) -> None:
    """One run keeps pgrig 0.1's key; repeats are r1..rN, like workload repeats."""
    from pgrig import probe

    once = probe.steps(probe.ProbeSpec(fio=None, timing_s=None), "local", tmp_path)
    assert [s.id for s in once] == ["local/probe/pg_test_fsync"]
    assert "repeat" not in once[0].params
    three = probe.steps(probe.ProbeSpec(fio=None, timing_s=None, fsync_repeat=3), "t", tmp_path)
    assert [s.id for s in three] == [f"t/probe/pg_test_fsync/r{i}" for i in (1, 2, 3)]
    assert [s.params["repeat"] for s in three] == [1, 2, 3]
    assert three[1].label.endswith(", run 2 of 3")


def test_console_headline_is_the_seeds_fdatasync_8k() -> None:
    from pgrig import registry

    result = pg_test_fsync.parse((DATA / "pg_test_fsync_pg15.txt").read_text())
    assert registry.headline("pg_test_fsync", result) == ": fdatasync 8K 9,456 ops/s"
