"""Faults a user meets (issue 19), each closed by a test that failed before
its fix: concurrent studies on one store, a refused run beside a live one, a
campaign renamed onto another's study, a probe file left by kill -9, a full
results disk - and one signal policy for every command and phase (SIGINT 130,
SIGTERM 143, SIGHUP 129; what finished recorded once, nothing half-written).

Real signals, sent to this process while the phase runs: the handlers
``cli.main`` installs turn them into the same cleanup as Ctrl-C. Nothing here
starts a PostgreSQL server: the campaigns probe (pg_test_timing, a real tool)
and report, which is where the phases of interest are.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from conftest import make_disk_dir
from pgrig import cli, runner, validate
from pgrig.cluster import workdir
from pgrig.report import html
from pgrig.results import Study
from pgrig.store import Store

CAMPAIGN = """[campaign]
name = "{name}"
[[target]]
name = "t"
directory = "{directory}"
[probes]
timing = 1
fsync = false
fio = false
"""


@pytest.fixture
def place(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = make_disk_dir("pgrig-faults-")
    monkeypatch.chdir(path)
    (path / "data").mkdir()
    (path / "c.toml").write_text(CAMPAIGN.format(name="faults", directory=path / "data"))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    # Ctrl-C as in a terminal, also where the test runner ignores SIGINT (workers)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield path
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _main(*argv: str) -> int:
    try:
        cli.main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _study(store: Store, sid: str, *, status: str, pid: int, directory: str) -> None:
    store.begin_study(
        Study(
            id=sid,
            name=sid,
            target=directory,
            started_at="2026-01-01T00:00:00",
            status=status,
            params={"pid": pid, "targets": [{"name": "t", "directory": directory}]},
            pgrig_version="0",
        )
    )


# -- studies: ids, live studies, mixed records -------------------------------------------


def test_two_studies_begun_in_the_same_second_get_two_ids(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 3: the second died with sqlite3.IntegrityError (UNIQUE studies.id)."""
    from pgrig import plan

    monkeypatch.setattr(runner, "new_study_id", lambda name: f"{name}-20260101-000000")
    camp = plan.quick(place / "data")
    with Store.open(place / "s.sqlite") as st:
        first = runner.CampaignRunner(camp, cli.Ui(quiet=True))._open(st)
        second = runner.CampaignRunner(camp, cli.Ui(quiet=True))._open(st)
        assert first.id != second.id
        assert {s.id for s in st.studies()} == {first.id, second.id}


def test_a_refused_run_leaves_the_live_study_running(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 4: the refusal (exit 4) used to mark the live study failed."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Store.open(place / "pgrig-results" / "results.sqlite") as st:
            _study(st, "faults", status="running", pid=live.pid, directory=str(place))
        assert _main("run", "c.toml") == 4
        assert f"pgrig process {live.pid}" in capsys.readouterr().err
        with Store.open(place / "pgrig-results" / "results.sqlite") as st:
            assert st.study("faults").status == "running"
            assert st.runs("faults") == []
    finally:
        live.kill()
        live.wait()


def test_a_campaign_of_the_same_name_on_another_disk_is_not_resumed_into(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 5: it resumed the old study and added runs measured elsewhere."""
    assert _main("run", "c.toml", "-q") == 0
    other = place / "elsewhere"
    other.mkdir()
    (other / "c.toml").write_text(CAMPAIGN.format(name="faults", directory=other))
    capsys.readouterr()
    assert _main("run", str(other / "c.toml"), "-q") == 2
    err = capsys.readouterr().err
    assert "other targets" in err and "directory" in err and str(other) in err
    assert "another name" in err and "--results" in err
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        assert [r.target for r in st.runs("faults")] == ["t"]
        assert st.study("faults").status == "finished"
    # the same campaign again resumes: nothing left to run, nothing recorded twice
    assert _main("run", "c.toml", "-q") == 0
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        assert len(st.runs("faults")) == 1


# -- files pgrig leaves in a target ---------------------------------------------------


def test_a_probe_file_left_by_kill_9_is_cleaned_and_only_that_file(place: Path) -> None:
    """Defect 6: pgrig_fio.tmp blocked the resume and `pgrig clean` ignored it."""
    ours, theirs = place / "data" / "pgrig_fio.tmp", place / "data" / "other.tmp"
    for path in (ours, theirs):
        code = (
            "import os, sys; from pathlib import Path; from pgrig.cluster import workdir; "
            f"workdir.create_exclusively(Path({str(path)!r})); os._exit(0)"
        )
        subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))
    assert ours.exists() and theirs.exists()
    # someone replaced the second file since: same name, not the file pgrig made
    theirs.unlink()
    theirs.write_text("someone's data")
    assert _main("clean") == 0
    assert not ours.exists()
    assert theirs.read_text() == "someone's data"
    workdir.create_exclusively(ours)  # the next fio step can create it again
    workdir.remove_file(ours)


# -- the results directory ------------------------------------------------------------


def test_a_full_results_disk_is_refused_before_the_study(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 13: the whole study ran, then the HTML write failed with ENOSPC."""
    real = validate.shutil.disk_usage

    def full(path: Any) -> Any:
        usage = real(path)
        return usage._replace(free=1024 * 1024) if "res" in str(path) else usage

    (place / "res").mkdir()
    monkeypatch.setattr(validate.shutil, "disk_usage", full)
    assert _main("run", "c.toml", "--results", "res") == 5
    err = capsys.readouterr().err
    assert "--results" in err and "MiB free" in err
    assert list((place / "res").iterdir()) == []


def test_a_report_write_that_fails_leaves_no_temporary_file(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 13: a 0-byte .report-*.html.tmp was left, and the hint named --out."""
    assert _main("run", "c.toml", "-q") == 0
    real = Path.write_bytes

    def enospc(self: Path, data: bytes) -> int:
        if self.name.endswith(".html.tmp"):
            real(self, b"")
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", enospc)
    capsys.readouterr()
    assert _main("report", "--out", "again") == 1
    err = capsys.readouterr().err
    assert "No space left" in err and "--out" in err
    assert [p.name for p in (place / "again").iterdir() if p.name.endswith(".tmp")] == []


# -- signals ----------------------------------------------------------------------------

SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]


def _when(condition: Callable[[], bool], signum: int, timeout: float = 60) -> threading.Thread:
    """Send ``signum`` to this process once ``condition`` holds (polled)."""

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                os.kill(os.getpid(), signum)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _descendants() -> list[str]:
    """The command names of this process's descendants, from /proc."""
    parent: dict[int, int] = {}
    names: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        pid = int(stat.parent.name)
        names[pid] = text[text.index("(") + 1 : text.rindex(")")]
        parent[pid] = int(text[text.rindex(")") + 2 :].split()[1])
    found, frontier = [], {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier}
        found += [names[pid] for pid in frontier]
    return found


def _child_running(name: str) -> Callable[[], bool]:
    return lambda: any(name in comm for comm in _descendants())


def _leftovers(place: Path) -> list[str]:
    return [
        str(p)
        for p in place.rglob("*")
        if p.name.endswith((".tmp", ".pgrig-tmp")) or p.name.startswith("pgrig-faults-t")
    ]


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=lambda v: str(v))
def test_run_signalled_during_a_probe(
    signum: int, code: int, place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tool is stopped, the study marked interrupted, the report of what
    finished written, the hint names --results; the resume runs the step once."""
    watcher = _when(_child_running("pg_test_timing"), signum)
    assert _main("run", "c.toml", "--results", "res", "-q") == code
    watcher.join()
    err = capsys.readouterr().err
    assert "pgrig run c.toml --results res" in err  # defect 9: the hint keeps --results
    assert not _child_running("pg_test_timing")()
    with Store.open(place / "res" / "results.sqlite") as st:
        assert st.study("faults").status == "interrupted"
        assert st.runs("faults") == []
    assert (place / "res" / "report-faults.html").exists()
    assert _leftovers(place) == []
    assert _main("run", "c.toml", "--results", "res", "-q") == 0
    with Store.open(place / "res" / "results.sqlite") as st:
        assert [r.key for r in st.runs("faults")] == ["t/probe/pg_test_timing"]
        assert st.study("faults").status == "finished"


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=lambda v: str(v))
def test_run_signalled_while_the_report_is_written(
    signum: int,
    code: int,
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Defect 7: SIGTERM exited 130 and left half a report; SIGINT was ignored."""
    real = html.render
    sent: list[int] = []

    def drawing(*args: Any, **kwargs: Any) -> Any:
        if not sent:
            sent.append(signum)
            # the Markdown is written; delivered at the next bytecode, before the HTML
            os.kill(os.getpid(), signum)
        return real(*args, **kwargs)

    monkeypatch.setattr(html, "render", drawing)
    assert _main("run", "c.toml", "-q") == code
    assert sent == [signum]
    assert not (place / "pgrig-results" / "report-faults.html").exists()
    assert _leftovers(place) == []
    monkeypatch.setattr(html, "render", real)
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        assert [r.key for r in st.runs("faults")] == ["t/probe/pg_test_timing"]
    assert _main("report") == 0  # what was measured is whole: the report comes back
    assert (place / "pgrig-results" / "report-faults.html").exists()


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=lambda v: str(v))
def test_durability_signalled(
    signum: int,
    code: int,
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Defect 7: durability exited 130 for SIGTERM and SIGHUP. The check itself
    needs a server: here the signal arrives where its work begins."""
    from pgrig.durability import cli as durability_cli

    def execute(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signum)
        time.sleep(5)
        raise AssertionError("the signal did not interrupt")

    monkeypatch.setattr(durability_cli, "execute", execute)
    assert _main("durability", "--target", str(place / "data"), "-q") == code
    assert "interrupted" in capsys.readouterr().err


def test_a_signal_during_teardown_still_removes_the_work_directory(
    bins: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 8: a signal right after the last run left the stopped cluster's
    work directory until the next run. The signal now waits for the removal."""
    from types import SimpleNamespace

    from pgrig.cluster import profiles
    from pgrig.cluster.server import Cluster, InitdbOptions, server_os_user
    from pgrig.errors import Signalled
    from pgrig.targets import directory

    base = make_disk_dir("pgrig-teardown-")
    real = workdir.remove
    cluster = Cluster.create(bins, base / "work", study="teardown", os_user=server_os_user())
    previous = signal.signal(signal.SIGTERM, cli._raise_signalled)
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("stock"))
        cluster.start()
        real = workdir.remove

        def remove(path: Path) -> None:
            monkeypatch.setattr(workdir, "remove", real)  # once: the cleanup below is real
            os.kill(os.getpid(), signal.SIGTERM)  # as the removal begins
            real(path)

        monkeypatch.setattr(workdir, "remove", remove)
        with pytest.raises(Signalled):
            directory.KIND._dispose(  # the throwaway kinds' teardown
                cast(Any, SimpleNamespace(lost=None)), cluster, False, cli.Ui(quiet=True)
            )
        assert not cluster.workdir.exists()
    finally:
        monkeypatch.setattr(workdir, "remove", real)
        signal.signal(signal.SIGTERM, previous)
        if cluster.workdir.exists():
            cluster.destroy()
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def test_report_signalled_while_writing(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pgrig report` under each signal: its exit code, the previous report kept
    whole, no temporary file."""
    assert _main("run", "c.toml", "-q") == 0
    page = place / "pgrig-results" / "report-faults.html"
    before = page.read_bytes()
    real = html.render
    for signum, code in SIGNALS:

        def drawing(*args: Any, signum: int = signum, **kwargs: Any) -> Any:
            os.kill(os.getpid(), signum)
            return real(*args, **kwargs)

        monkeypatch.setattr(html, "render", drawing)
        assert _main("report") == code, signal.Signals(signum).name
        assert page.read_bytes() == before
        assert _leftovers(place) == []
    assert "interrupted" in capsys.readouterr().err


def test_list_does_not_call_a_failed_check_ok(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 18: a durability check that lost commits was listed "1/1 ok"."""
    from dataclasses import asdict

    from pgrig.durability.model import DurabilityResult
    from pgrig.results import RunRecord

    lost = DurabilityResult("immediate", 4, 3, 5.0, 1, "15", lost=2, failures=("2 lost",))
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        _study(st, "d", status="finished", pid=1, directory=str(place))
        st.record(
            RunRecord(
                study="d",
                key="local/durability",
                kind="durability",
                target="local",
                params={},
                status="ok",
                started_at="2026-01-01T00:00:00",
                finished_at="2026-01-01T00:00:09",
                result=asdict(lost),
            )
        )
    assert _main("list") == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("d\t")]
    assert "0/1 ok, 1 check(s) failed" in line


# -- more phases: initdb, pgbench -i, the storage lab's setup --------------------------

TPCB = """[campaign]
name = "faults"
[[target]]
name = "t"
directory = "{directory}"
profile = "stock"
[probes]
timing = false
fsync = false
fio = false
[[workload]]
type = "tpcb"
scales = [1]
clients = [1]
duration = 1
"""


def _child_argv(name: str, flag: str) -> Callable[[], bool]:
    """A descendant ``name`` runs with ``flag`` among its arguments."""

    def running() -> bool:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(name.encode()) and flag.encode() in argv:
                return name in " ".join(_descendants())
        return False

    return running


# One signal per phase (each with a server to set up costs seconds): every phase
# and every signal is covered once.
PHASES = [
    ("initdb", _child_running("initdb"), signal.SIGTERM, 143),
    ("pgbench -i", _child_argv("pgbench", "-i"), signal.SIGHUP, 129),
]


@pytest.mark.parametrize(
    ("phase", "condition", "signum", "code"), PHASES, ids=[p[0] for p in PHASES]
)
def test_run_signalled_while_the_cluster_is_set_up(
    phase: str,
    condition: Callable[[], bool],
    signum: int,
    code: int,
    place: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 19's interruptions during initdb and `pgbench -i`: the exit code of the
    signal, no server process, no work directory, the study interrupted with
    nothing recorded; the resume (after `pgbench -i` only: a whole run costs 10 s
    and more here) runs every step once."""
    (place / "c.toml").write_text(TPCB.format(directory=place / "data"))
    watcher = _when(condition, signum)
    assert _main("run", "c.toml", "-q") == code, capsys.readouterr().err
    watcher.join()
    assert not _child_running("postgres")() and not _child_running(phase.split()[0])()
    assert list((place / "data").iterdir()) == [], "the work directory was left"
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        assert st.study("faults").status == "interrupted"
        assert [r for r in st.runs("faults") if r.kind != "environment"] == []
    assert _leftovers(place) == []
    if phase == "initdb":
        return
    assert _main("run", "c.toml", "-q") == 0, capsys.readouterr().err
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        keys = [r.key for r in st.runs("faults")]
        assert len(keys) == len(set(keys)) and any("tpcb" in k for k in keys), keys
        assert st.study("faults").status == "finished"
    assert list((place / "data").iterdir()) == []


def test_run_signalled_while_the_lab_filesystem_is_made(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 19's interruption during storage-lab setup: SIGINT as mkfs starts (the
    backing file and loop device exist): exit 130, no loop device, mount, backing
    file or registry record left."""
    from pgrig.storage import loopfs, state

    real = loopfs.LoopFilesystem._mkfs

    def mkfs(self: loopfs.LoopFilesystem, *args: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        return real(self, *args)

    monkeypatch.setattr(loopfs.LoopFilesystem, "_mkfs", mkfs)
    lab = TPCB.replace(
        'directory = "{directory}"\n', f'fs = "ext4"\nsize = "256MiB"\nbase = "{place}"\n'
    )
    (place / "c.toml").write_text(lab)
    assert _main("run", "c.toml", "-q") == 130, capsys.readouterr().err
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True, check=True)
    assert str(place) not in loops.stdout
    assert str(place) not in Path("/proc/self/mountinfo").read_text()
    assert [p for p in place.rglob("*") if p.name.startswith("pgrig-fs-")] == []
    assert not state.registry_dir().exists() or list(state.registry_dir().iterdir()) == []
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        assert st.study("faults").status == "interrupted"


def test_run_signalled_during_fio(place: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 19's interruption during fio (SIGINT, 130): fio stopped, its file gone,
    nothing recorded; the resume measures the pattern once."""
    probes = "[probes]\ntiming = false\nfsync = false\n"
    fio = '[probes.fio]\npatterns = ["randread"]\nsize = "16M"\nruntime = 1\n'
    (place / "c.toml").write_text(
        CAMPAIGN.format(name="faults", directory=place / "data").split("[probes]")[0] + probes + fio
    )
    watcher = _when(_child_running("fio"), signal.SIGINT)
    assert _main("run", "c.toml", "-q") == 130, capsys.readouterr().err
    watcher.join()
    assert not _child_running("fio")()
    assert list((place / "data").iterdir()) == [], "fio's file was left"
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        assert st.study("faults").status == "interrupted"
        assert st.runs("faults") == []
    assert _main("run", "c.toml", "-q") == 0, capsys.readouterr().err
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        keys = [r.key for r in st.runs("faults")]
        assert len(keys) == 1 and "fio" in keys[0], keys
    assert list((place / "data").iterdir()) == []
