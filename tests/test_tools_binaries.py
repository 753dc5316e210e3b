"""The PostgreSQL tools pgrig runs from a bin directory: what the user sees when
the directory or the tool is wrong, or the tool prints something unknown.

The "unknown output" cases run a stand-in executable (a two-line shell script)
in place of the tool: the real tools cannot be made to print garbage.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pgrig.errors import BinaryNotFound, ParseError, UsageError
from pgrig.tools import pg_test_fsync, pg_test_timing
from pgrig.tools import pgbench as pb

Call = Callable[[Path, Path], Any]

# How each tool module is first invoked with a bin directory (and a scratch directory).
TOOLS: list[tuple[str, Call]] = [
    ("pgbench", lambda bin_dir, _scratch: pb.pgbench_version(bin_dir, timeout=30)),
    ("pg_test_timing", lambda bin_dir, _scratch: pg_test_timing.run(bin_dir, 1, timeout=30)),
    (
        "pg_test_fsync",
        lambda bin_dir, scratch: pg_test_fsync.run(bin_dir, scratch, seconds=1, timeout=30),
    ),
]
IDS = [name for name, _ in TOOLS]


def _assert_names_the_fix(exc: BinaryNotFound) -> None:
    assert exc.hint is not None
    assert "--pg-bin" in exc.hint and "pg_bin" in exc.hint
    assert "--bin-dir" not in exc.hint


@pytest.mark.parametrize(("tool", "call"), TOOLS, ids=IDS)
def test_bin_dir_missing(tmp_path: Path, tool: str, call: Call) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(BinaryNotFound) as info:
        call(tmp_path / "no-such-bin", scratch)
    assert str(tmp_path / "no-such-bin") in str(info.value)
    assert tool in str(info.value)
    _assert_names_the_fix(info.value)
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(("tool", "call"), TOOLS, ids=IDS)
def test_tool_missing_from_bin_dir(tmp_path: Path, tool: str, call: Call) -> None:
    bin_dir, scratch = tmp_path / "bin", tmp_path / "scratch"
    bin_dir.mkdir()
    scratch.mkdir()
    with pytest.raises(BinaryNotFound) as info:
        call(bin_dir, scratch)
    assert str(info.value) == f"{tool} not found in {bin_dir}"
    _assert_names_the_fix(info.value)
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(("tool", "call"), TOOLS, ids=IDS)
def test_tool_not_executable(tmp_path: Path, tool: str, call: Call) -> None:
    bin_dir, scratch = tmp_path / "bin", tmp_path / "scratch"
    bin_dir.mkdir()
    scratch.mkdir()
    (bin_dir / tool).write_text("#!/bin/sh\n")
    (bin_dir / tool).chmod(0o644)
    with pytest.raises(BinaryNotFound, match="is not executable") as info:
        call(bin_dir, scratch)
    assert info.value.hint is not None and "chmod +x" in info.value.hint


@pytest.mark.parametrize(("tool", "call"), TOOLS, ids=IDS)
def test_tool_output_not_understood(tmp_path: Path, tool: str, call: Call) -> None:
    bin_dir, scratch = tmp_path / "bin", tmp_path / "scratch"
    bin_dir.mkdir()
    scratch.mkdir()
    stand_in = bin_dir / tool
    stand_in.write_text("#!/bin/sh\necho 'Something new from a future version'\n")
    stand_in.chmod(0o755)
    with pytest.raises(ParseError) as info:
        call(bin_dir, scratch)
    assert tool in str(info.value)
    assert "Something new from a future version" in str(info.value)
    assert info.value.hint
    # pg_test_fsync's test file is removed whatever the outcome.
    assert list(scratch.iterdir()) == []


def test_fsync_seconds_below_one_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        pg_test_fsync.run(tmp_path, tmp_path, seconds=0)
    assert "pg_test_fsync" in str(info.value) and "0 seconds" in str(info.value)
    assert info.value.hint is not None and "--fsync-seconds" in info.value.hint


def test_timing_duration_below_one_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        pg_test_timing.run(tmp_path, duration_s=0)
    assert "pg_test_timing" in str(info.value) and "0 seconds" in str(info.value)
    assert info.value.hint is not None and "--timing-seconds" in info.value.hint
