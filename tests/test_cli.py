"""The real ``pgrig`` command end to end: tiny studies on real clusters with the real
tools, and every fault the core issue lists - each checked by exit code, message
and what is (not) left on disk."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgrig import proc
from pgrig.cluster import workdir
from pgrig.cluster.server import Cluster
from pgrig.conninfo import Conn
from pgrig.results import Study
from pgrig.store import Store

# The smallest study that still runs every TPC-B step for real.
TINY = [
    "--skip",
    "fsync,fio",
    "--timing-seconds",
    "1",
    "--scale",
    "1",
    "--clients",
    "1",
    "--duration",
    "2",
    "--modes",
    "select-only",
    "--no-count",
    # One run a point: no test here reads a second repeat (the suite's time, issue 18.8).
    "--repeat",
    "1",
    "--profile",
    "stock",
    "--set",
    "fsync=off",
]


def tiny(**options: str) -> list[str]:
    """TINY with some of its options changed: ``tiny(clients="1,2", duration="8")``."""
    args = list(TINY)
    for name, value in options.items():
        args[args.index(f"--{name}") + 1] = value
    return args


def pgrig(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgrig", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _default_sigint() -> None:
    # A shell running `make test &` (or a CI runner without job control) starts it
    # with SIGINT ignored, which children inherit; a user at a terminal has the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Every pgrig spawn() started: conftest's _no_spawned_pgrig_outlives_its_test
# kills those still running when their test ends, passed or failed.
SPAWNED: list[subprocess.Popen[str]] = []


def spawn(*args: str | Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "pgrig", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    SPAWNED.append(child)
    return child


def wait_for(predicate, timeout: float = 120, what: str = "condition", child=None):  # type: ignore[no-untyped-def]
    """``child``: the pgrig whose work is awaited; if it exits first, the wait ends
    with what it said (ci21 waited 240 s for a run that said nothing after)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if child is not None and child.poll() is not None:
            out, err = child.communicate(timeout=30)
            said = (out + err)[-3000:]
            raise AssertionError(f"pgrig exited {child.returncode} before {what}: {said}")
        time.sleep(0.1)
    if child is not None:  # still at work: interrupted as Ctrl-C would, for what it said
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate(timeout=30)
        raise AssertionError(f"timed out waiting for {what}; pgrig said: {(out + err)[-3000:]}")
    raise AssertionError(f"timed out waiting for {what}")


def recorded(results: Path, kind: str) -> int:
    """How many runs of ``kind`` the store in ``results`` holds; 0 while pgrig
    is still creating it (polled mid-open, the file exists before its tables)."""
    db = results / "results.sqlite"
    if not db.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            row = conn.execute("SELECT count(*) FROM runs WHERE kind = ?", (kind,)).fetchone()
            return int(row[0])
    except sqlite3.OperationalError:
        return 0


def postmaster_of(target: Path) -> tuple[Path, int] | None:
    for data in target.glob("pgrig-*/data"):
        pid = workdir.postmaster_pid(data)
        if pid is not None:
            return data, pid
    return None


def only_study(results: Path) -> tuple[str, dict[str, tuple[str, str | None]]]:
    with Store.open(results / "results.sqlite") as store:
        (study,) = store.studies()
        return study.status, {r.key: (r.status, r.reason) for r in store.runs(study.id)}


# -- bad input: clear error, nothing created ---------------------------------


def test_pg_bin_that_does_not_exist(disk_dir: Path) -> None:
    results = disk_dir / "results"
    done = pgrig("run", "--target", disk_dir, "--results", results, "--pg-bin", "/nonexistent")
    assert done.returncode == 3
    assert done.stderr.startswith("error: --pg-bin /nonexistent is not a directory")
    assert "hint:" in done.stderr and "Traceback" not in done.stderr
    assert list(disk_dir.iterdir()) == [], "nothing may be created"


def test_not_enough_disk_is_refused_before_loading(disk_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small filesystem")
    small = disk_dir / "small"
    small.mkdir()
    proc.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0755", "tmpfs", small], timeout=30)
    try:
        done = pgrig("run", "--target", small, "--results", disk_dir / "r", "--scale", "100")
        assert done.returncode == 5, done.stderr
        assert "not enough free disk" in done.stderr
        assert "needs about 3.2 GiB" in done.stderr and "GiB free" in done.stderr
        assert list(small.iterdir()) == []
    finally:
        proc.run(["umount", small], timeout=30)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--clients", "1,x"], "--clients '1,x': expected integers"),
        (["--threads", "9", "--clients", "1,2"], "--threads 9 is greater than"),
        (["--skip", "fio,coffee"], "--skip 'coffee': must be one of"),
        (["--profile", "nosuch"], "unknown profile 'nosuch'"),
        (["--set", "shared_bufers=1GB"], "unknown PostgreSQL 15 parameter 'shared_bufers'"),
        (["--wal-segsize", "3"], "--wal-segsize 3: must be a power of 2"),
    ],
)
def test_bad_options(disk_dir: Path, args: list[str], message: str) -> None:
    done = pgrig("run", "--target", disk_dir, "--results", disk_dir / "r", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert list(disk_dir.iterdir()) == []


# -- an existing server ------------------------------------------------------


def test_existing_server_needs_yes_and_is_not_restarted(
    cluster: Cluster, conn: Conn, disk_dir: Path
) -> None:
    pid_before = cluster.postmaster_pid()
    results = disk_dir / "r"
    refused = pgrig(
        "run", "--dsn", conn.dsn, "--target", disk_dir, "--results", results, *TINY[:-4]
    )
    assert refused.returncode == 2
    assert "refusing to touch the existing server" in refused.stderr
    assert "--yes" in refused.stderr

    # The same through the libpq environment instead of --dsn.
    env = dict(
        os.environ,
        PGHOST=str(cluster.socket_dir),
        PGPORT=str(cluster.port),
        PGUSER="postgres",
        PGDATABASE="postgres",
    )
    refused_env = pgrig("run", "--target", disk_dir, "--results", results, *TINY[:-4], env=env)
    assert refused_env.returncode == 2 and "--yes" in refused_env.stderr

    # A server that answers and refuses (no such database): its hint said "start
    # that server", which runs already.
    missing = conn.with_dbname("no_such_db").dsn
    refused_db = pgrig(
        "run", "--dsn", missing, "--yes", "--target", disk_dir, "--results", results, *TINY[:-4]
    )
    assert refused_db.returncode == 2, refused_db.stderr
    said = " ".join(refused_db.stderr.split())
    assert 'database "no_such_db" does not exist' in said
    assert "answered and refused" in said and "start that server" not in said

    done = pgrig(
        "run", "--dsn", conn.dsn, "--yes", "--target", disk_dir, "--results", results, *TINY[:-4]
    )
    assert done.returncode == 0, done.stderr
    status, runs = only_study(results)
    assert status == "finished"
    assert runs["local/tpcb/s1/select-only/c1/d2/r1"][0] == "ok"
    assert cluster.postmaster_pid() == pid_before, "an existing server is never restarted"
    assert not list(disk_dir.glob("pgrig-*")), "no initdb for an existing server"


def test_tables_and_indexes_on_two_tablespace_directories(disk_dir: Path) -> None:
    """Seed 004 puts tables and indexes on two disks: pgrig creates both tablespaces
    in its cluster, pgbench -i uses them, and both directories go with the cluster."""
    tables, indexes = disk_dir / "disk1", disk_dir / "disk2"
    tables.mkdir()
    indexes.mkdir()
    for d in (tables, indexes):
        d.chmod(0o755)
    results = disk_dir / "r"
    done = pgrig(
        "run",
        "--target",
        disk_dir,
        "--results",
        results,
        *TINY,
        "--tablespace",
        tables,
        "--index-tablespace",
        indexes,
        "--keep",
    )
    assert done.returncode == 0, done.stderr
    with Store.open(results / "results.sqlite") as store:
        (study,) = store.studies()
        init = next(r for r in store.runs(study.id) if r.kind == "pgbench_init")
    assert init.status == "ok", init.reason
    assert init.params["tablespace"] == "pgrig_tables"
    assert init.params["index_tablespace"] == "pgrig_indexes"
    # --keep: the stopped cluster and its tablespaces stay; check where the files went.
    (table_dir,) = tables.iterdir()
    (index_dir,) = indexes.iterdir()
    assert any(table_dir.rglob("PG_*/*/*")), "table files in the first tablespace"
    assert any(index_dir.rglob("PG_*/*/*")), "index files in the second tablespace"
    (work,) = disk_dir.glob("pgrig-*")
    workdir.remove(work)
    assert list(tables.iterdir()) == [] and list(indexes.iterdir()) == []


@pytest.mark.parametrize(
    "args", [("--help",), ("list", "--store", "S"), ("export", "--store", "S")]
)
def test_output_that_cannot_be_written_is_said_not_a_traceback(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    """`pgrig list > file` on a full disk was an OSError traceback (issue 33's
    trial); now one error, exit 1, and nothing more as Python exits."""
    with Store.open(tmp_path / "s.sqlite") as st:
        st.begin_study(_stand_in_study())
    argv = [str(tmp_path / "s.sqlite") if a == "S" else a for a in args]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "pgrig", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: cannot write to standard output: No space left on device")
    assert "free some space" in done.stderr and "Traceback" not in done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr


def _stand_in_study() -> Study:
    return Study(id="s1", name="s1", target="t", started_at="2026-01-01T00:00:00",
                 status="finished", params={"targets": [{"name": "t"}]},
                 pgrig_version="0")  # fmt: skip


def test_a_reader_that_goes_away_ends_pgrig_quietly_with_141() -> None:
    """`pgrig list | head -1` as a shell sees it: the reader closed the pipe before
    pgrig wrote. A shell's own tools end by SIGPIPE (128 + 13) without a word;
    pgrig printed a BrokenPipeError traceback (issue 33's trial)."""
    with subprocess.Popen(
        [sys.executable, "-m", "pgrig", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # before pgrig has started: its first write meets no reader
        err = child.stderr.read()
        code = child.wait(timeout=60)
    assert code == 141, err
    assert err == "", err
