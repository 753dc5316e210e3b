from __future__ import annotations

from pathlib import Path

import pytest

from pgrig.errors import BinaryNotFound, ParseError
from pgrig.tools import pg_test_timing

DATA = Path(__file__).parent / "data"
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_parse_pg15_output() -> None:
    result = pg_test_timing.parse(read("pg_test_timing_pg15.txt"))
    assert result.duration_s == 3.0
    assert result.per_loop_ns == 27.09
    assert len(result.histogram) == 14
    first, last = result.histogram[0], result.histogram[-1]
    assert (first.lt_us, first.percent, first.count) == (1, 97.42483, 107896492)
    assert (last.lt_us, last.percent, last.count) == (8192, 0.0, 3)
    assert [b.lt_us for b in result.histogram] == [2**i for i in range(14)]


def test_parse_seed000_kvm_clock_with_trailing_blanks() -> None:
    result = pg_test_timing.parse(read("pg_test_timing_seed000_kvmclock.txt"))
    assert result.per_loop_ns == 38.05
    assert result.duration_s == 3.0
    assert len(result.histogram) == 11
    assert result.histogram[3].count == 5550
    assert result.histogram[-1].lt_us == 1024 and result.histogram[-1].count == 1


def test_parse_seed000_tsc() -> None:
    result = pg_test_timing.parse(read("pg_test_timing_seed000_tsc.txt"))
    assert result.per_loop_ns == 31.93
    assert [b.count for b in result.histogram] == [90964258, 2973390, 731, 5394, 26, 2]


def test_parse_singular_second() -> None:
    text = read("pg_test_timing_pg15.txt").replace("for 3 seconds.", "for 1 second.")
    assert pg_test_timing.parse(text).duration_s == 1.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello world\n", "line 1 not understood: 'hello world'"),
        ("", "no 'Testing timing overhead"),
        ("Testing timing overhead for 3 seconds.\n", "no 'Per loop time"),
        (
            "Testing timing overhead for 3 seconds.\nPer loop time including overhead: 27.09 ns\n",
            "no histogram rows",
        ),
        # A bucket row before the histogram heading is not a bucket.
        ("Testing timing overhead for 3 seconds.\n     1     97.4  1078\n", "line 2"),
    ],
)
def test_parse_garbage_raises(text: str, expected: str) -> None:
    with pytest.raises(ParseError) as info:
        pg_test_timing.parse(text)
    assert "pg_test_timing" in str(info.value)
    assert expected in str(info.value)
    assert info.value.hint


def test_parse_truncated_histogram_row_raises() -> None:
    text = read("pg_test_timing_pg15.txt") + "  16384     0.0000\n"
    with pytest.raises(ParseError, match="line 19"):
        pg_test_timing.parse(text)


def test_run_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFound) as info:
        pg_test_timing.run(tmp_path, 1)
    assert info.value.hint


@pytest.mark.skipif(not (PG_BIN / "pg_test_timing").exists(), reason="PostgreSQL 15 not installed")
def test_run_real_tool() -> None:
    result, raw = pg_test_timing.run(PG_BIN, duration_s=1, timeout=30)
    assert result.duration_s == 1.0
    assert 0 < result.per_loop_ns < 100_000
    assert sum(b.count for b in result.histogram) > 1000
    assert sum(b.percent for b in result.histogram) == pytest.approx(100.0, abs=0.01)
    assert raw.startswith("Testing timing overhead for 1 second.")
