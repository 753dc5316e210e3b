"""The suite's own scheduling hints stay true: a renamed file would silently
lose its place (tests/conftest.py's LONG_FILES, EXCLUSIVE_FILES), and without
`--no-loadscope-reorder` xdist would ignore the order LONG_FILES sets."""

from __future__ import annotations

from pathlib import Path

from conftest import EXCLUSIVE_FILES, LONG_FILES

HERE = Path(__file__).resolve().parent


def test_the_files_the_suite_schedules_by_name_exist() -> None:
    files = {p.name for p in HERE.glob("test_*.py")}
    assert set(LONG_FILES) <= files, sorted(set(LONG_FILES) - files)
    assert set(EXCLUSIVE_FILES) <= files, sorted(set(EXCLUSIVE_FILES) - files)
    assert not set(LONG_FILES) & set(EXCLUSIVE_FILES), "an exclusive file runs alone anyway"


def test_make_test_hands_out_files_in_collection_order() -> None:
    makefile = (HERE.parent / "Makefile").read_text()
    (parallel,) = [line for line in makefile.splitlines() if "--dist loadfile" in line]
    assert "--no-loadscope-reorder" in parallel
