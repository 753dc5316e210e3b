"""A first run from a checkout the server's account cannot reach (issue 33): a
root user's clone under /root (mode 700 on Debian) or a `mktemp -d` directory.
The quick study goes to /var/tmp and says so; a campaign's target there is
refused before anything is created, exit 4, naming the directory that blocks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgrig.commands import quick
from test_cli import pgrig

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the server runs as another account as root"
)


@pytest.fixture
def private() -> Iterator[Path]:
    """A directory as `mktemp -d` makes it (mode 700, root's), with a checkout in it."""
    top = Path(tempfile.mkdtemp(prefix="pgrig-first-run-"))
    assert top.stat().st_mode & 0o777 == 0o700
    (top / "checkout").mkdir(mode=0o755)
    yield top / "checkout"
    shutil.rmtree(top)


def test_the_quick_study_leaves_a_directory_its_server_cannot_reach(
    private: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(private)
    chosen = quick._default_directory({"os_user": None, "quiet": False})
    assert chosen == quick.FALLBACK
    err = capsys.readouterr().err
    assert f"cannot pass {private.parent}" in err and "/var/tmp" in err
    monkeypatch.chdir("/var/tmp")
    assert quick._default_directory({"os_user": None, "quiet": False}) == Path("/var/tmp")


def test_a_campaign_target_out_of_reach_is_refused_before_anything(private: Path) -> None:
    data = private / "data"
    data.mkdir()
    path = private / "c.toml"
    path.write_text(
        f'[campaign]\nname = "first-run"\n[[target]]\nname = "t"\ndirectory = "{data}"\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nclients = [1]\nduration = [1]\n'
    )
    for command in ("plan", "run"):
        done = pgrig(command, path, *(["--results", private / "res"] if command == "run" else []))
        assert done.returncode == 4, done.stderr
        assert f"cannot pass {private.parent} (mode 700, owner root)" in done.stderr
        assert "hint: " in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in data.iterdir()) == [], "nothing created in the target"
    assert not (private / "res").exists(), "no study, no store"


REPOSITORY = Path(__file__).resolve().parents[1]


def test_a_fresh_clone_under_a_private_directory_runs_the_quick_study(private: Path) -> None:
    """Issue 33's done-when: `git clone` into a mode-700 directory, then the quick
    study's first steps from the clone, as `make run` starts them (a tiny TPC-B:
    the cluster's creation is where it used to fail, after two minutes of probes).
    It either runs in a directory the server's account can reach and says so, or
    is refused before any probe, exit 4, naming the directory."""
    clone = private / "pgrig"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(REPOSITORY), str(clone)],
        check=True,
        timeout=120,
    )
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    for name in [v for v in env if v.startswith("PG") and v != "PGRIG_STATE_DIR"]:
        del env[name]
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "run", "--skip", "timing,fsync,fio", "--scale", "1",
         "--clients", "1", "--duration", "1", "--repeat", "1", "--modes", "select-only"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    if done.returncode == 4:  # refused: before any probe, naming what blocks
        assert f"cannot pass {private.parent}" in done.stderr, done.stderr
        assert not (clone / "pgrig-results").exists(), "a refusal creates nothing"
        return
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert f"cannot pass {private.parent}" in first and str(quick.FALLBACK) in first, first
    (report,) = [
        p
        for p in (clone / "pgrig-results").glob("report-quick-*.md")
        if re.fullmatch(r"report-quick-\d{8}-\d{6}\.md", p.name)
    ]
    assert f"target local: {quick.FALLBACK}," in report.read_text()
    # Its own work directory (named by its study): other pgrig runs on the machine
    # (another worker's, another checkout's) make theirs in the same place meanwhile.
    study = report.stem.removeprefix("report-")
    assert not (quick.FALLBACK / f"pgrig-{study}").exists(), "its work directory is removed"


def test_a_state_directory_that_cannot_be_made_is_refused_before_anything(
    private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user with HOME=/nonexistent: a PermissionError traceback, and a marked work
    directory left that `pgrig clean` called "nothing to clean" (issue 33)."""
    data = private.parent / "data"  # not reached: refused first
    path = private / "c.toml"
    path.write_text(
        f'[campaign]\nname = "first-run"\n[[target]]\nname = "t"\ndirectory = "{data}"\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nclients = [1]\nduration = [1]\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "PGRIG_STATE_DIR"}
    env["XDG_STATE_HOME"] = "/dev/null/state"  # cannot be made, even by root
    done = pgrig("plan", path, env=env)
    assert done.returncode == 4, done.stderr
    assert "pgrig keeps its records of what it made in /dev/null/state/pgrig" in done.stderr
    assert "PGRIG_STATE_DIR" in done.stderr and "Traceback" not in done.stderr
