"""The suite's own scheduling hints stay true: a renamed file would silently
lose its place (tests/conftest.py's LONG_FILES), without
`--no-loadscope-reorder` xdist would ignore the order LONG_FILES sets, and the
exclusive phase collects only the files that say so."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

import conftest
from conftest import EXCLUSIVE_TEXT, LONG_FILES

HERE = Path(__file__).resolve().parent


def test_the_files_the_suite_schedules_by_name_exist() -> None:
    files = {p.name for p in HERE.glob("test_*.py")}
    assert set(LONG_FILES) <= files, sorted(set(LONG_FILES) - files)
    whole = {
        p.name
        for p in HERE.glob("test_*.py")
        if "pytestmark = pytest.mark.exclusive" in p.read_text()
    }
    assert not set(LONG_FILES) & whole, "an exclusive file runs alone anyway"


def test_make_test_hands_out_files_in_collection_order() -> None:
    makefile = (HERE.parent / "Makefile").read_text()
    (parallel,) = [line for line in makefile.splitlines() if "--dist loadfile" in line]
    assert "--no-loadscope-reorder" in parallel


def test_make_test_collects_the_exclusive_phase_from_the_files_that_mark_it() -> None:
    makefile = (HERE.parent / "Makefile").read_text()
    (exclusive,) = [line for line in makefile.splitlines() if "-m exclusive" in line]
    assert "$$(grep -l 'mark\\.exclusive' tests/test_*.py)" in exclusive
    assert EXCLUSIVE_TEXT == "mark.exclusive"


def test_a_test_marked_exclusive_where_the_makefile_cannot_see_it_is_refused(
    tmp_path: Path,
) -> None:
    """A marker added from outside the file (a conftest, a plug-in) would leave its
    test out of both phases: the parallel one deselects it, the exclusive one does
    not collect its file. (A stand-in for pytest's item: the two things the hook reads.)"""

    @dataclass
    class Item:
        path: Path

        def get_closest_marker(self, name: str) -> object:
            return name == "exclusive" or None

    quiet = tmp_path / "test_quiet.py"
    quiet.write_text("def test_it():\n    pass\n")
    with pytest.raises(pytest.UsageError, match="test_quiet.py has tests marked exclusive"):
        conftest.pytest_collection_modifyitems([Item(quiet)])  # type: ignore[list-item]
    quiet.write_text("pytestmark = pytest.mark.exclusive\n")
    conftest.pytest_collection_modifyitems([Item(quiet)])  # type: ignore[list-item]
