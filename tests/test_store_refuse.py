"""The results store refuses what it cannot keep honestly (issue 33, item 3): a
damaged file or another program's database is refused with its path and left
byte for byte as it was; a store locked by another process is waited for,
said, and bounded; a study named twice is counted once; an import is whole or
nothing. In-process (``cli.main``) and without a server: each case takes
milliseconds, the lock cases about two seconds."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pgrig import cli
from pgrig.results import PgbenchRun, RunRecord, Study, to_dict
from pgrig.store import Store, backends


def _main(*argv: str | Path) -> int:
    try:
        cli.main([str(a) for a in argv])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _study(id: str, status: str = "finished", **params: object) -> Study:
    return Study(id=id, name=id, target="t", started_at="2026-01-01T00:00:00", status=status,
                 params={"targets": [{"name": "t"}], **params}, pgrig_version="0")  # fmt: skip


def _run(study: str, n: int) -> RunRecord:
    return RunRecord(study=study, key=f"t/timing/r{n}", kind="timing", target="t", params={},
                     status="failed", started_at="2026-01-01T00:00:00",
                     finished_at="2026-01-01T00:00:01", reason="a stand-in")  # fmt: skip


def _store(path: Path) -> Path:
    with Store.open(path) as st:
        st.begin_study(_study("s1"))
        for n in range(3):
            st.record(_run("s1", n))
    return path


def _garbage(p: Path) -> None:
    p.write_bytes(bytes(range(256)) * 16)


def _schema_abc(p: Path) -> None:
    _store(p)
    with sqlite3.connect(p) as db:
        db.execute("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'")


def _bad_json(p: Path) -> None:
    _store(p)
    with sqlite3.connect(p) as db:
        db.execute("UPDATE runs SET result = '{bad' WHERE key = 't/timing/r1'")


def _params_not_json(p: Path) -> None:
    _store(p)
    with sqlite3.connect(p) as db:
        db.execute("UPDATE studies SET params = '{bad' WHERE id = 's1'")


def _export_json(p: Path) -> None:
    """`pgrig export`'s file given as a store: it read "damaged", with sqlite3 .recover."""
    p.write_text(json.dumps({"schema": "pgrig-export/1", "studies": [], "runs": []}))


def _foreign(p: Path) -> None:
    with sqlite3.connect(p) as db:
        db.execute("CREATE TABLE contacts (name TEXT)")
        db.execute("INSERT INTO contacts VALUES ('ann')")


def _empty(p: Path) -> None:
    p.write_bytes(b"")


DAMAGED: list[tuple[str, Callable[[Path], None], int, tuple[str, ...]]] = [
    ("garbage", _garbage, 1, ("is damaged", ".recover")),
    ("schema-version-abc", _schema_abc, 1, ("schema_version is 'abc'",)),
    ("result-not-json", _bad_json, 1, ("s1/t/timing/r1 is not valid JSON",)),
    ("another-programs-database", _foreign, 2, ("another program's SQLite", "contacts")),
    # issue 40.6: a traceback in import; "damaged" with sqlite3 .recover
    ("params-not-json", _params_not_json, 1, ("study s1 is not valid JSON",)),
    ("export-json", _export_json, 2, ("is a pgrig export (JSON), not a results store",)),
    ("zero-length", _empty, 2, ("an empty file", "rm ")),
]


@pytest.mark.parametrize("command", ["list", "report", "export", "import", "run"])
@pytest.mark.parametrize(("make", "code", "says"), [d[1:] for d in DAMAGED],
                         ids=[d[0] for d in DAMAGED])  # fmt: skip
def test_a_damaged_or_foreign_store_is_refused_and_left_as_it_was(
    command: str,
    make: Callable[[Path], None],
    code: int,
    says: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "bad.sqlite"
    make(bad)
    before = hashlib.sha256(bad.read_bytes()).hexdigest()
    into = tmp_path / "into.sqlite"
    argv: dict[str, tuple[str | Path, ...]] = {
        "list": ("list", "--store", bad),
        "report": ("report", "--store", bad, "--out", tmp_path / "out"),
        "export": ("export", "--store", bad),
        "import": ("import", bad, "--store", into),
        "run": ("run", "--skip", "timing,fsync,fio,tpcb", "--store", bad, "--results", tmp_path),
    }
    if command == "run" and make in (_bad_json,):
        pytest.skip("a run writes a new study: it reads no other study's runs")
    got = _main(*argv[command])
    err = capsys.readouterr().err
    assert got == code, err
    assert "Traceback" not in err and str(bad) in err
    for text in says:
        assert text in err, err
    assert hashlib.sha256(bad.read_bytes()).hexdigest() == before, "the store was written to"
    assert not into.exists() and not (tmp_path / "out").exists(), "nothing was created"


@pytest.mark.parametrize("store", ["mysql://u@h/db", "sqlite:///x", "redis://h"])
@pytest.mark.parametrize("command", ["list", "run"])
def test_a_store_uri_of_another_database_is_refused(
    store: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """It was taken for a file path: `./mysql:/u@h/db` made, exit 0."""
    monkeypatch.chdir(tmp_path)
    extra = ("--skip", "timing,fsync,fio,tpcb") if command == "run" else ()
    assert _main(command, *extra, "--store", store) == 2
    err = capsys.readouterr().err
    assert f"--store {store.split('://')[0]}://" in err and "postgresql://" in err, err
    assert list(tmp_path.iterdir()) == []


# -- a store another process holds locked ---------------------------------------------


@contextmanager
def _held(path: Path, seconds: float) -> Iterator[None]:
    """Another process holding the store with `BEGIN EXCLUSIVE` (as sqlite3's shell
    would), for ``seconds`` or until the block ends."""
    with subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "db.execute('BEGIN EXCLUSIVE'); print('held', flush=True)\n"
         "time.sleep(float(sys.argv[2])); db.execute('COMMIT')\n",
         str(path), str(seconds)],
        stdout=subprocess.PIPE, text=True,
    ) as holder:  # fmt: skip
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        try:
            yield
        finally:
            if holder.poll() is None and seconds > 5:
                holder.kill()
            holder.wait(timeout=30)


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "LOCK_GLANCE_S", 0.2)
    monkeypatch.setattr(backends, "LOCK_WAIT_S", 2.0)


def test_a_lock_shorter_than_the_wait_is_waited_for_and_said(
    tmp_path: Path, short_waits: None, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s.sqlite")
    with _held(store, 0.8):
        assert _main("list", "--store", store) == 0
    out, err = capsys.readouterr()
    assert "s1\tfinished" in out
    assert f"results store {store} is locked by another process; waiting up to 2 s" in err


def test_a_lock_held_past_the_wait_is_a_clear_error_and_the_study_not_failed(
    tmp_path: Path, short_waits: None, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s.sqlite")
    with _held(store, 20):
        got = _main("list", "--store", store)
    err = capsys.readouterr().err
    assert got == 1, err
    assert f"results store {store} stayed locked by another process for 2 s" in err, err
    assert "fuser -v" in err and "Traceback" not in err
    with Store.open(store) as st:
        assert st.study("s1").status == "finished"


# -- named twice, counted once; an import whole or not at all -------------------------


def test_a_study_named_twice_is_counted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s.sqlite")
    assert _main("export", "s1", "s1", "--store", store, "--format", "csv") == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == 1 + 3, rows  # the header and s1's three runs, once
    assert _main("compare", "s1", "s1", "--store", store) == 2
    assert "two different studies" in capsys.readouterr().err


def test_an_import_of_a_running_study_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "other.sqlite"
    with Store.open(source) as st:
        st.begin_study(_study("live", status="running", pid=os.getpid() - 0))
    into = tmp_path / "into.sqlite"
    # this process is the "pgrig" that runs it, seen from another: a live pid
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with sqlite3.connect(source) as db:
            db.execute("UPDATE studies SET params = json_set(params, '$.pid', ?)", (child.pid,))
        assert _main("import", source, "--store", into) == 2
    finally:
        child.kill()
        child.wait(timeout=30)
    err = capsys.readouterr().err
    assert "study live is still running" in err, err
    assert not into.exists()
    # once its pgrig is gone: imported, and said to be interrupted
    assert _main("import", source, "--store", into) == 0
    assert "live was interrupted" in capsys.readouterr().err


# -- no room for the report ----------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs")
def test_no_room_for_the_report_keeps_the_previous_one_and_says_how_to_write_it_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s.sqlite")
    out = tmp_path / "small"
    out.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", out], check=True, timeout=30)
    try:
        assert _main("report", "s1", "--store", store, "--out", out) == 0
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        # the rest of the filesystem taken
        with (out / "filler").open("wb", buffering=0) as filler, pytest.raises(OSError):
            while True:
                filler.write(b"\0" * 65536)
        capsys.readouterr()
        # refused up front as a disk too full (issue 40.6): it wrote, and failed
        assert _main("report", "s1", "--store", store, "--out", out) == 5
        err = capsys.readouterr().err
        assert "No space left on device" in err and "free some space there" in err, err
        assert "Traceback" not in err
        after = {p.name: p.read_bytes() for p in out.iterdir() if p.name != "filler"}
        assert after == before, "the previous report is left whole, and no temporary file"
    finally:
        subprocess.run(["umount", out], check=True, timeout=30)


def test_an_export_to_a_device_is_refused_as_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o /dev/full` read "give a file in an existing, writable directory", exit 2
    (issue 33's trial). A device named as the output is refused up front as what
    it is (issue 40.6); a full disk is no bad input (exit 5, test above)."""
    store = _store(tmp_path / "s.sqlite")
    assert _main("export", "--store", store, "-o", "/dev/full") == 2
    err = capsys.readouterr().err
    assert "-o /dev/full: is a device, not a file" in err, err
    assert _main("export", "--store", store, "-o", tmp_path / "no" / "x.json") == 2


@pytest.mark.parametrize(
    ("store", "code", "says"),
    [
        ("data", 2, "results store data is a directory, not a file"),
        ("loop.sqlite", 2, "loop.sqlite is a symbolic link that leads to no file"),
        ("postgresql://u@127.0.0.1:1/db", 2, "cannot open results store user=u"),
    ],
)
def test_a_store_that_is_no_file_or_cannot_be_reached_is_bad_input(
    store: str, code: int, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A directory read "unable to open database file" and an unreachable store
    server exited 1 (issue 33's trial): a store the user named wrong is exit 2."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "loop.sqlite").symlink_to("loop.sqlite")
    assert _main("list", "--store", store) == code
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err


def test_an_import_whose_ids_are_taken_copies_nothing_and_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 1 after the first studies were copied (issue 33's trial); the same file as
    source and store read "already holds a study"."""
    into = _store(tmp_path / "into.sqlite")
    other = tmp_path / "other.sqlite"
    with Store.open(other) as st:
        st.begin_study(_study("s0"))
        st.begin_study(_study("s1"))
    before = hashlib.sha256(into.read_bytes()).hexdigest()
    assert _main("import", other, "--store", into) == 2
    err = capsys.readouterr().err
    assert "already holds 's1'; nothing was imported" in err and "--as NEW_ID" in err, err
    assert hashlib.sha256(into.read_bytes()).hexdigest() == before, "s0 was copied"
    assert _main("import", into, "--store", into) == 2
    assert "the same file" in capsys.readouterr().err
    assert _main("import", other, "s1", "--as", "s9", "--store", into) == 0


def _pgbench_store(path: Path, edit: str) -> Path:
    """A store holding one real-shaped pgbench record, then edited with SQL."""
    run = PgbenchRun(mode="select-only", transaction_type="<builtin: select only>", scale=1,
                     query_mode="prepared", clients=1, threads=1, duration_s=2.0,
                     transactions=2000, failed=0, tps=1000.0, latency_avg_ms=1.0,
                     latency_stddev_ms=None, initial_connection_ms=None,
                     statements_per_txn=1)  # fmt: skip
    with Store.open(path) as st:
        st.begin_study(_study("s1"))
        st.record(RunRecord(study="s1", key="t/tpcb/r1", kind="pgbench_run", target="t",
                            params={}, status="ok", started_at="2026-01-01T00:00:00",
                            finished_at="2026-01-01T00:00:02",
                            result=to_dict(run)))  # fmt: skip
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE runs SET result = {edit} WHERE key = 't/tpcb/r1'")
    return path


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ("json_set(result, '$.tps', '1000')", "tps is '1000' (str), not float"),
        ("json_remove(result, '$.tps')", "tps is missing"),
        ("json_set(result, '$.progress', 3)", "progress is int, not a list"),
    ],
)
def test_an_import_checks_each_record_before_anything_is_written(
    edit: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Such records were imported, and report, history, check, compare and the CSV
    export of them ended in tracebacks (issue 40.6)."""
    source = _pgbench_store(tmp_path / "other.sqlite", edit)
    into = tmp_path / "into.sqlite"
    assert _main("import", source, "--store", into) == 2
    err = capsys.readouterr().err
    assert f"the result of s1/t/tpcb/r1 (pgbench_run) is not a record pgrig wrote: {says}" in err
    assert "Traceback" not in err and not into.exists()


def test_an_import_of_an_unedited_record_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _pgbench_store(tmp_path / "other.sqlite", "result")
    assert _main("import", source, "--store", tmp_path / "into.sqlite") == 0, capsys.readouterr()
