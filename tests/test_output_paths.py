"""Every output path of report, history, check, compare and export refused up
front, exit 2 naming the option, when it cannot be written (issue 40.6: each
ended in a traceback with exit 1 - a regression's code for `pgrig check` - after
the work); `check S --baseline S` refused; `compare A B --baseline A/t`, the
form --help gives, accepted. The real CLI in this process on a real store."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import test_history
from pgrig import files
from pgrig.errors import UsageError
from test_history import Done, gate_store

pgrig = test_history.pgrig  # the fixture: the command line in this process

UNWRITABLE = [
    ("/dev/full", "is a device, not a file"),
    ("/proc/pgrig-nope.xml", "cannot write in /proc"),
    ("/nonexistent/dir/x.xml", "the directory /nonexistent/dir does not exist"),
]


@pytest.mark.parametrize(("path", "says"), UNWRITABLE)
@pytest.mark.parametrize("option", ["--junit", "--summary"])
def test_check_refuses_an_output_it_cannot_write_before_judging(
    tmp_path: Path, pgrig: Callable[..., Done], option: str, path: str, says: str
) -> None:
    store = gate_store(tmp_path)
    done = pgrig("check", "nightly-02", "--baseline", "nightly-01", "--store", store,
                 option, path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"error: {option} {path}: {says}" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == "", "refused before the verdicts"


def test_check_refuses_a_study_as_its_own_baseline(
    tmp_path: Path, pgrig: Callable[..., Done]
) -> None:
    store = gate_store(tmp_path)
    done = pgrig("check", "nightly-02", "--baseline", "nightly-02", "--store", store)
    assert done.returncode == 2 and "a study against itself" in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("report", "nightly-01", "--out", "/dev/full"),
        ("history", "nightly", "--out", "/proc/pgrig-nope"),
        ("compare", "nightly-01", "nightly-02", "--out", "/dev/full"),
        ("export", "nightly-01", "-o", "/dev/full"),
        ("export", "nightly-01", "-o", "/nonexistent/dir/x.json"),
    ],
)
def test_report_history_compare_export_refuse_an_output_up_front(
    tmp_path: Path, pgrig: Callable[..., Done], argv: tuple[str, ...]
) -> None:
    store = gate_store(tmp_path)
    done = pgrig(*argv, "--store", store)
    assert done.returncode == 2, done.stderr
    assert f"error: {argv[-2]} {argv[-1]}: " in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*.pgrig-tmp")) and not list(tmp_path.glob("report*"))


def test_compare_takes_the_study_slash_target_form_of_its_help(
    tmp_path: Path, pgrig: Callable[..., Done]
) -> None:
    store = gate_store(tmp_path)
    done = pgrig("compare", "nightly-01", "nightly-02", "--baseline", "nightly-01/local",
                 "--store", store, "--out", tmp_path / "cmp")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "cmp").glob("*.md"))
    wrong = pgrig("compare", "nightly-01", "nightly-02", "--baseline", "nightly-01/other",
                  "--store", store, "--out", tmp_path / "cmp")  # fmt: skip
    assert wrong.returncode != 0 and "--baseline 'nightly-01/other' is not one of" in wrong.stderr


def test_a_stream_and_a_writable_place_pass(tmp_path: Path) -> None:
    for ok in ("/dev/stdout", "/dev/null", str(tmp_path / "new" / "dir")):
        files.output_path(Path(ok), "--x", directory=ok.endswith("dir"))
    files.output_path(tmp_path / "f.xml", "--junit")
    assert not list(tmp_path.glob(".pgrig-probe*")), "the probe is removed"
    with pytest.raises(UsageError, match="is a directory"):
        files.output_path(tmp_path, "--junit")


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait(timeout=10)
    return child.pid


def test_temporary_files_of_a_killed_pgrig_go_at_the_next_write_and_at_clean(
    tmp_path: Path, pgrig: Callable[..., Done], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 during `pgrig report` or `history --out` left .NAME.PID.pgrig-tmp
    files that neither a rerun nor `pgrig clean` removed (issue 40.7). A live
    pgrig's (this process's, another live PID's) are left alone."""
    monkeypatch.setenv("PGRIG_STATE_DIR", str(tmp_path / "state"))
    out = tmp_path / "out"
    out.mkdir()
    dead = _dead_pid()
    stale = out / f".report.md.{dead}.pgrig-tmp"
    other = out / f".other.html.{dead}.pgrig-tmp"
    live = out / f".report.md.{os.getppid()}.pgrig-tmp"
    for p in (stale, other, live):
        p.write_text("half a report")
    files.write_atomically(out / "report.md", "whole")
    assert not stale.exists(), "the rerun's write of that file removes it"
    assert other.exists() and live.exists()
    report = pgrig("report", "nightly-01", "--store", gate_store(tmp_path), "--out", out)
    assert report.returncode == 0, report.stderr
    done = pgrig("clean")
    assert done.returncode == 0, done.stderr
    assert f"removed {other}" in done.stdout
    assert not other.exists() and live.exists()


def test_a_closed_standard_output_is_said_not_a_traceback(tmp_path: Path) -> None:
    """`pgrig list >&-` ended in AttributeError: 'NoneType' object has no attribute
    'flush' (issue 40.7)."""
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "list", "--results", tmp_path],
        stderr=subprocess.PIPE, text=True, timeout=60,
        preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "error: standard output is closed" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_removed_working_directory_is_named_not_blamed_on_the_profile(tmp_path: Path) -> None:
    """It read "profile oltp: LOCATION: getInstallationPaths" (issue 40.8)."""
    gone = tmp_path / "gone"
    gone.mkdir()

    def enter_then_remove() -> None:
        os.chdir(gone)
        os.rmdir(gone)

    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "run", "--skip", "timing,fsync,fio"],
        capture_output=True, text=True, timeout=60, preexec_fn=enter_then_remove,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "the current directory no longer exists" in done.stderr
    assert "profile" not in done.stderr and "Traceback" not in done.stderr


def test_a_umask_that_denies_the_owner_is_not_blamed_on_the_profile(disk_dir: Path) -> None:
    """umask 777 read "profile oltp: could not access the server configuration
    file" (issue 40.8): pgrig keeps its own bits, the group's and others' stay
    as the umask says."""
    camp = disk_dir / "c.toml"
    (disk_dir / "data").mkdir()
    camp.write_text('[campaign]\nname = "u"\n[[target]]\nname = "t"\ndirectory = "data"\n'
                    '[[workload]]\ntype = "tpcb"\nscales = [1]\n')  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "plan", camp], capture_output=True, text=True,
        timeout=120, preexec_fn=lambda: os.umask(0o777),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
