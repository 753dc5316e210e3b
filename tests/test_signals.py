"""The signal suite (issue 19): each command x each phase x {SIGINT, SIGTERM, SIGHUP}.

Every cell asserts the exit code docs/exit-codes.md gives the signal (130, 143,
129) and no traceback; that nothing of the study is left behind (no postgres,
pgbench, fio or FUSE process, no work directory, socket directory, mount, loop
device, cgroup, registry record or marked file in the target); and, for `pgrig
run`, that the study is marked interrupted with only what finished recorded,
and that a resume records every step exactly once. docs/exit-codes.md has the
matrix: which cell is tested where, and at which moment of its phase. The
cells of the storage lab and the lossy filesystem are tests/test_signals_lab.py's.

Real signals, sent to this process (``cli.main`` installs the handlers), at a
real moment of the phase: a watcher thread sends it once the phase's tool runs
(initdb, ``pgbench -i``, ``pgbench -T``, fio, pg_test_timing); where a phase has
no tool to watch or lasts milliseconds (teardown, report writing, the lab's
mkfs, the power cut), the function of that moment sends it as it begins (or
ends) and then runs for real. Nothing is mocked but the durability check's work
in the one cell of its start (the power-loss cells run it for real).

A server costs seconds to set up here, so the cells of one target share a
campaign: each signal's run is the resume of the run before, and one last
resume completes the study.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pgrig import ownership, proc
from pgrig.cluster import workdir
from pgrig.cluster.server import Cluster
from pgrig.conninfo import Conn
from pgrig.lossyfs import registry
from pgrig.report import html
from pgrig.storage import cgroups, devices, loopfs, state
from pgrig.storage.errors import CgroupError
from pgrig.store import Store
from test_faults import CAMPAIGN, _main, place

__all__ = ["place"]  # the fixture, shared with test_faults.py

SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
NAMES = [signal.Signals(s).name for s, _ in SIGNALS]

# -- when the signal goes ---------------------------------------------------------------


def _when(
    condition: Callable[[], bool],
    signum: int,
    timeout: float = 60,
    disarmed: threading.Event | None = None,
) -> threading.Thread:
    """Send ``signum`` to this process once ``condition`` holds (polled), unless
    ``disarmed`` is set first: the watcher then ends, rather than reading /proc
    every 20 ms for the rest of its minute."""

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (disarmed and disarmed.is_set()):
            if condition():
                os.kill(os.getpid(), signum)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _family() -> dict[int, str]:
    """This process's descendants, PID -> command name, from /proc."""
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
    found: dict[int, str] = {}
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier}
        found.update((pid, names[pid]) for pid in frontier)
    return found


def _named(pid: int, name: str) -> Callable[[], bool]:
    """Whether ``pid`` still is the process ``name`` (not a PID taken since)."""

    def same() -> bool:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip() == name
        except OSError:
            return False

    return same


def _descendants() -> list[str]:
    return list(_family().values())


def _child_argv(name: str, flag: str) -> Callable[[], bool]:
    """A descendant ``name`` runs with ``flag`` among its arguments: the phase's
    run of the tool, not its ``--version`` of the environment capture, nor
    another study's on this shared machine."""

    def running() -> bool:
        for pid in _family():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(name.encode()) and flag.encode() in argv:
                return True
        return False

    return running


Disarm = Callable[[], None]
Arm = Callable[[pytest.MonkeyPatch, int], Disarm]


def tool(condition: Callable[[], bool]) -> Arm:
    """The signal once ``condition`` holds (a tool of the phase runs), from a
    watcher thread; disarmed after the command, so that a watcher whose moment
    never came cannot hit a later run."""

    def arm(_mp: pytest.MonkeyPatch, signum: int) -> Disarm:
        # An Event, not a list emptied to disarm: `armed[0]` of an emptied list raised
        # IndexError in the watcher of a moment that never came, and that thread's
        # exception failed whichever test ran next.
        disarmed = threading.Event()
        _when(condition, signum, disarmed=disarmed)
        return disarmed.set

    return arm


def call(
    owner: Any, name: str, *, after: bool = False, when: Callable[..., bool] = lambda *_, **__: True
) -> Arm:
    """The signal as ``owner.name`` is called (``after``: once it returned) - the
    first call that ``when`` accepts; the real function runs all the same."""

    def arm(mp: pytest.MonkeyPatch, signum: int) -> Disarm:
        real = getattr(owner, name)
        sent: list[int] = []

        def hooked(*args: Any, **kwargs: Any) -> Any:
            if sent or not when(*args, **kwargs):
                return real(*args, **kwargs)
            sent.append(signum)
            if not after:
                os.kill(os.getpid(), signum)  # delivered at the next bytecode, here
                return real(*args, **kwargs)
            value = real(*args, **kwargs)
            os.kill(os.getpid(), signum)
            return value

        mp.setattr(owner, name, hooked)
        return lambda: mp.setattr(owner, name, real)

    return arm


# -- what must not be left ----------------------------------------------------------------

TOOLS = ("postgres", "pgbench", "fio", "initdb", "pg_ctl", "pg_test_", "mkfs", "losetup")


def _leftovers(place: Path) -> list[str]:
    return [
        str(p)
        for p in place.rglob("*")
        if p.name.endswith((".tmp", ".pgrig-tmp")) or p.name.startswith("pgrig-faults-t")
    ]


def _study_processes(place: Path) -> list[str]:
    """Processes working in ``place`` or naming it, wherever they were reparented:
    pg_ctl detaches the postmaster, the FUSE daemon has a session of its own."""
    where = str(place.resolve())
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        if int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd.startswith(where) or where in argv:
            found.append(f"{entry.name}: {argv.strip()}")
    return found


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _nothing_left(place: Path, where: str, cgroup_dirs: Sequence[Path] = ()) -> None:
    """No process, directory, mount, loop device, cgroup or record of the study."""
    ours = str(place.resolve())
    assert _study_processes(place) == [], where
    assert [c for c in _descendants() if c.startswith(TOOLS)] == [], where
    assert devices.mounts_under(ours) == [], f"{where}: a mount is left"
    loops = {d: f for d, f in devices.loop_backing_files().items() if f.startswith(ours)}
    assert loops == {}, f"{where}: loop devices left"
    assert [d for d in cgroup_dirs if d.exists()] == [], f"{where}: a cgroup is left"
    me = os.getpid()
    assert [r.id for r in state.load_all() if r.owner_pid == me] == [], f"{where}: lab records"
    records = registry.registry_dir().glob("*.json")
    mounts = [p.name for p in records if json.loads(p.read_text())["owner_pid"] == me]
    assert mounts == [], f"{where}: lossy mount records"
    sockets = [
        p.parent
        for p in Path("/tmp").glob(f"pgrig-sock-*/{workdir.MARKER}")
        if _text(p).startswith(ours)  # other studies' come and go meanwhile
    ]
    assert sockets == [], f"{where}: socket directories"
    run_dirs = [  # a lossy mount's, its marker naming the mountpoint
        p.parent
        for p in Path("/tmp").glob(f"{registry.RUN_PREFIX}*/{registry.RUN_MARKER}")
        if _text(p).startswith(ours)
    ]
    assert run_dirs == [], f"{where}: lossy filesystems' run directories"
    entries = [p for p in (ownership.state_dir() / "workdirs").glob("*") if ours in p.read_text()]
    assert entries == [], f"{where}: work directories still registered"
    assert list((place / "data").iterdir()) == [], f"{where}: the target holds a leftover"
    assert _leftovers(place) == [], where


@pytest.fixture(autouse=True)
def _sweep(place: Path) -> Iterator[None]:
    """A failing cell must not leave its servers, mounts, loop devices or cgroups
    on the shared machine: what this process still owns is undone (`pgrig clean`
    would not: their owner, this process, is alive)."""
    yield
    me = os.getpid()
    # A cell that failed while its tool ran (a wait that timed out on a loaded
    # machine) left the tool running as this process's child: every later cell
    # found it (`_nothing_left`) and failed too, and its Popen, collected in
    # another test, failed that one with "subprocess is still running" - 18
    # failures from one. Stopped and reaped here: the cell that left it failed.
    for pid, name in _family().items():
        if name.startswith(TOOLS):
            proc.escalate(pid, (signal.SIGTERM, signal.SIGKILL), grace=5, ours=_named(pid, name))
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
    gc.collect()  # a leaked Popen warns now, in the test that leaked it
    for pid_file in place.rglob("postmaster.pid"):
        workdir.stop_orphan_server(pid_file.parent)
    for mount in registry.registry_dir().glob("*.json"):
        record = registry.MountRecord(**json.loads(mount.read_text()))
        if record.owner_pid == me:
            if record.fs_pid is not None:
                proc.escalate(record.fs_pid, (signal.SIGTERM, signal.SIGKILL), grace=5)
            registry.lazy_unmount(record.mountpoint, record.fsname)
            registry.remove_run_dir(Path(record.run_dir))
            registry.drop_record(record)
    for lab in state.load_all():
        if lab.owner_pid == me:
            devices.undo(lab)
            for group in lab.cgroups:
                with contextlib.suppress(CgroupError):
                    cgroups.remove_dir(Path(group))
            state.forget(lab)


def _recorded(results: Path) -> tuple[str, list[str]]:
    """The study's status and its recorded step keys; the store is whole."""
    with sqlite3.connect(results / "results.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Store.open(results / "results.sqlite") as st:
        (study,) = st.studies()
        return study.status, [r.key for r in st.runs(study.id)]


# -- pgrig run: the phases of a server, one campaign per target ----------------------------

INIT, LOADED, RUN, AFTER = (
    "t/tpcb/s1/init",
    "t/tpcb/s1/sizes/after-load",
    "t/tpcb/s1/select-only/c1/d2/r1",
    "t/tpcb/s1/sizes/after-runs",
)
TPCB = """[campaign]
name = "faults"
monitor = false
[[target]]
name = "t"
{target}
profile = "stock"
[probes]
timing = false
fsync = false
fio = false
[[workload]]
type = "tpcb"
scales = [1]
modes = ["select-only"]
clients = [1]
duration = 2
count = false
"""


@dataclass(frozen=True)
class Cell:
    """One signal at one moment of one phase, and what is recorded after it."""

    phase: str
    signum: int
    moment: str  # in words: the failure messages and docs/exit-codes.md say it
    arm: Arm
    recorded: frozenset[str]
    # A recorded step taken out of the store before the cell's run: a campaign
    # whose every step is recorded starts nothing when run again, so a teardown
    # cell needs one step left to do (its server set up, then torn down).
    redo: str | None = None

    def __str__(self) -> str:
        return f"{self.phase} / {signal.Signals(self.signum).name} ({self.moment})"


def _phase(phase: str, moment: str, arm: Arm, recorded: tuple[str, ...] = ()) -> list[Cell]:
    return [Cell(phase, s, moment, arm, frozenset(recorded)) for s, _ in SIGNALS]


DATA = (INIT, LOADED)
ALL = (INIT, LOADED, RUN, AFTER)

ON_THE_WAY = "pgbench -T runs"
DIRECTORY_CELLS = [
    *_phase("initdb", "initdb runs", tool(_child_argv("initdb", "-D"))),
    # pgbench -i under one signal here: the existing server below takes all three
    # (one server for its six runs), and so do the measured run there and in a
    # memory cgroup (test_signals_lab.py), itself a throwaway cluster.
    Cell(
        "pgbench -i",
        signal.SIGHUP,
        "pgbench -i runs",
        tool(_child_argv("pgbench", "-i")),
        frozenset(),
    ),
    # After the first of these every step is recorded, and a resume starts nothing:
    # the other two redo the last step, then tear the server down, the moment
    # their signal is sent in.
    Cell(
        "teardown",
        signal.SIGINT,
        "right after the last step is recorded",
        call(Store, "record", after=True, when=lambda _st, rec, *_: rec.key == AFTER),
        frozenset(ALL),
    ),
    Cell(
        "teardown",
        signal.SIGTERM,
        "as the cluster is destroyed",
        call(Cluster, "destroy"),
        frozenset(ALL),
        redo=AFTER,
    ),
    Cell(
        "teardown",
        signal.SIGHUP,
        "as the work directory is removed",
        call(workdir, "remove"),
        frozenset(ALL),
        redo=AFTER,
    ),
]
SERVER_CELLS = [
    *_phase("pgbench -i", "pgbench -i runs", tool(_child_argv("pgbench", "-i"))),
    *_phase("measured run", ON_THE_WAY, tool(_child_argv("pgbench", "-T")), DATA),
]


def _chain(
    cells: Sequence[Cell],
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    final: tuple[str, ...],
    *options: str,
    cgroup_dirs: Sequence[Path] = (),
) -> None:
    """Each cell's run resumes the one before; the last resume completes the study."""
    results = place / "pgrig-results"
    for cell in cells:
        if cell.redo is not None:
            with sqlite3.connect(results / "results.sqlite") as db:
                db.execute("DELETE FROM runs WHERE key = ?", (cell.redo,))
        disarm = cell.arm(monkeypatch, cell.signum)
        try:
            code = _main("run", "c.toml", "-q", *options)
        finally:
            disarm()
        err = capsys.readouterr().err
        assert code == 128 + cell.signum, f"{cell}: exit {code}\n{err}"
        assert "interrupted" in err and "Traceback" not in err, f"{cell}: {err}"
        assert "pgrig run c.toml" in err, f"{cell}: no resume hint"
        _nothing_left(place, str(cell), cgroup_dirs)
        status, keys = _recorded(results)
        assert status == "interrupted", f"{cell}: the study is {status}"
        assert sorted(keys) == sorted(cell.recorded), f"{cell}: recorded {keys}"
    assert _main("run", "c.toml", "-q", *options) == 0, capsys.readouterr().err
    _nothing_left(place, "the last resume", cgroup_dirs)
    status, keys = _recorded(results)
    assert status == "finished" and sorted(keys) == sorted(final), keys


def test_run_of_a_throwaway_cluster_signalled(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """initdb and the teardown under SIGINT, SIGTERM and SIGHUP, pgbench -i under
    one: the cluster and its work directory go."""
    (place / "c.toml").write_text(TPCB.format(target=f'directory = "{place / "data"}"'))
    _chain(DIRECTORY_CELLS, place, monkeypatch, capsys, ALL)


PROBE = "pgrig-test-probe"


def _sessions(conn: Conn) -> list[str]:
    """The server's client sessions but this test's own (a probe just closed
    can still be listed while its backend exits)."""
    with conn.with_params(application_name=PROBE).connect() as db:
        rows = db.execute(
            "SELECT application_name FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND application_name <> %s",
            (PROBE,),
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_run_on_an_existing_server_signalled(
    place: Path,
    conn: Conn,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pgbench -i and the measured run under SIGINT, SIGTERM and SIGHUP, on one
    server set up for them all (``dsn``): pgbench and its sessions are gone, the
    server is left running."""
    (place / "c.toml").write_text(TPCB.format(target=f'dsn = "{conn.conninfo()}"'))
    _chain(SERVER_CELLS, place, monkeypatch, capsys, ALL, "--yes")
    deadline = time.monotonic() + 10
    while (left := _sessions(conn)) and time.monotonic() < deadline:  # backends end as clients go
        time.sleep(0.1)
    assert left == []


# -- pgrig run: probes, fio, the storage lab's setup, report writing -----------------------


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=NAMES)
def test_run_signalled_during_a_probe(
    signum: int, code: int, place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tool is stopped, the study marked interrupted, the report of what
    finished written, the hint names --results; the resume runs the step once."""
    watcher = _when(_child_argv("pg_test_timing", "-d"), signum)
    assert _main("run", "c.toml", "--results", "res", "-q") == code
    watcher.join()
    err = capsys.readouterr().err
    assert "pgrig run c.toml --results res" in err  # defect 9: the hint keeps --results
    _nothing_left(place, "probe")
    assert _recorded(place / "res") == ("interrupted", [])
    assert (place / "res" / "report-faults.html").exists()
    assert _main("run", "c.toml", "--results", "res", "-q") == 0
    assert _recorded(place / "res") == ("finished", ["t/probe/pg_test_timing"])


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=NAMES)
def test_run_signalled_during_fio(
    signum: int, code: int, place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fio stopped, its file gone, nothing recorded; the resume measures the
    pattern once."""
    probes = "[probes]\ntiming = false\nfsync = false\n"
    fio = '[probes.fio]\npatterns = ["randread"]\nsize = "16M"\nruntime = 1\n'
    (place / "c.toml").write_text(
        CAMPAIGN.format(name="faults", directory=place / "data").split("[probes]")[0] + probes + fio
    )
    watcher = _when(_child_argv("fio", "--output-format=json"), signum)
    assert _main("run", "c.toml", "-q") == code, capsys.readouterr().err
    watcher.join()
    _nothing_left(place, f"fio / {signal.Signals(signum).name}")
    assert _recorded(place / "pgrig-results") == ("interrupted", [])
    assert _main("run", "c.toml", "-q") == 0, capsys.readouterr().err
    status, keys = _recorded(place / "pgrig-results")
    assert status == "finished" and len(keys) == 1 and "fio" in keys[0], keys
    _nothing_left(place, "fio's resume")


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=NAMES)
def test_run_signalled_while_the_lab_filesystem_is_made(
    signum: int,
    code: int,
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Storage-lab setup: the signal as mkfs starts (the backing file and loop
    device exist): no loop device, mount, backing file or registry record left."""
    call(loopfs.LoopFilesystem, "_mkfs")(monkeypatch, signum)
    lab = f'fs = "ext4"\nsize = "256MiB"\nbase = "{place}"'
    (place / "c.toml").write_text(TPCB.format(target=lab))
    assert _main("run", "c.toml", "-q") == code, capsys.readouterr().err
    _nothing_left(place, f"lab setup / {signal.Signals(signum).name}")
    assert [p for p in place.rglob("*") if p.name.startswith("pgrig-fs-")] == []
    assert _recorded(place / "pgrig-results") == ("interrupted", [])


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=NAMES)
def test_run_signalled_while_the_lab_filesystem_is_removed(
    signum: int,
    code: int,
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Storage-lab teardown: the signal as the filesystem is unmounted (after a
    probe in it): the unmount, the detach and the removal finish all the same;
    the resume builds the lab again and records nothing twice."""
    disarm = call(devices, "_umount")(monkeypatch, signum)
    lab = f'fs = "ext4"\nsize = "256MiB"\nbase = "{place}"'
    text = CAMPAIGN.replace('directory = "{directory}"', lab).format(name="faults")
    (place / "c.toml").write_text(text)
    where = f"lab teardown / {signal.Signals(signum).name}"
    assert _main("run", "c.toml", "-q") == code, capsys.readouterr().err
    _nothing_left(place, where)
    keys = ["t/lab", "t/probe/pg_test_timing"]
    assert _recorded(place / "pgrig-results") == ("interrupted", keys), where
    disarm()
    assert _main("run", "c.toml", "-q") == 0, capsys.readouterr().err
    _nothing_left(place, f"{where}: the resume")
    assert _recorded(place / "pgrig-results") == ("finished", keys), where


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=NAMES)
def test_run_signalled_while_the_report_is_written(
    signum: int,
    code: int,
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Defect 7: SIGTERM exited 130 and left half a report; SIGINT was ignored."""
    # the Markdown is written: the signal comes as the HTML is drawn
    disarm = call(html, "render")(monkeypatch, signum)
    assert _main("run", "c.toml", "-q") == code
    assert not (place / "pgrig-results" / "report-faults.html").exists()
    _nothing_left(place, f"report writing / {signal.Signals(signum).name}")
    assert _recorded(place / "pgrig-results")[1] == ["t/probe/pg_test_timing"]
    disarm()
    assert _main("report") == 0  # what was measured is whole: the report comes back
    assert (place / "pgrig-results" / "report-faults.html").exists()


# -- pgrig report ---------------------------------------------------------------------


def test_report_signalled_while_writing(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pgrig report` under each signal: its exit code, the previous report kept
    whole, no temporary file."""
    assert _main("run", "c.toml", "-q") == 0
    page = place / "pgrig-results" / "report-faults.html"
    before = page.read_bytes()
    for signum, code in SIGNALS:
        disarm = call(html, "render")(monkeypatch, signum)
        assert _main("report") == code, signal.Signals(signum).name
        disarm()
        assert page.read_bytes() == before
        assert _leftovers(place) == []
    assert "interrupted" in capsys.readouterr().err


# -- pgrig durability -----------------------------------------------------------------


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=NAMES)
def test_durability_signalled_as_it_begins(
    signum: int,
    code: int,
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Defect 7: durability exited 130 for SIGTERM and SIGHUP. Here the signal
    arrives where its work begins (the work itself is the next test's)."""
    from pgrig.commands import durability_study

    def execute(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signum)
        time.sleep(5)
        raise AssertionError("the signal did not interrupt")

    monkeypatch.setattr(durability_study, "execute", execute)
    assert _main("durability", "--target", str(place / "data"), "-q") == code
    assert "interrupted" in capsys.readouterr().err
