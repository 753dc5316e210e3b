"""Who owns what pgrig leaves on disk (pgrig.ownership): one host-aware
``owner_alive`` behind every record, and orphans of other studies left alone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from tests.conftest import make_disk_dir

from pgrig import lifecycle, lossyfs, ownership, proc, registry
from pgrig.cluster import workdir
from pgrig.hosts import owner
from pgrig.hosts.executor import TMP
from pgrig.hosts.local import LocalExecutor
from pgrig.lossyfs import registry as lossy_registry
from pgrig.lossyfs.registry import MountRecord
from pgrig.storage import state


def _dead_pid() -> int:
    with subprocess.Popen(["true"]) as gone:
        gone.wait(timeout=30)
    return gone.pid


def test_owner_alive_is_host_aware() -> None:
    dead = _dead_pid()
    me = socket.gethostname()
    assert not ownership.owner_alive(dead, me)
    assert ownership.owner_alive(dead, "another-host"), "another host's record is never dead"
    start = ownership.process_start_time(os.getpid())
    assert start is not None
    assert ownership.owner_alive(os.getpid(), me, start)
    assert not ownership.owner_alive(os.getpid(), me, start + 1), "a recycled PID is not the owner"


def test_every_record_asks_the_same_owner_alive() -> None:
    """The work directory's record and the lossy mount's record used to judge a
    record of another host dead: a run on host B would delete host A's live work."""
    dead = _dead_pid()
    common = {"owner_pid": dead, "host": "another-host", "created_at": time.time()}
    record = owner.Owner("another-host", dead, None, time.time(), "server", study="s")
    mount = MountRecord(fsname="f", mountpoint="/m", backing="/b", run_dir="/r", **common)  # type: ignore[arg-type]
    lab = state.Record(id="fs-1", kind="fs", owner_start=None, **common)  # type: ignore[arg-type]
    assert record.alive() and mount.owner_alive() and lab.owner_alive()
    here = {**common, "host": socket.gethostname()}
    assert not replace(record, controller=socket.gethostname()).alive()
    assert not MountRecord(
        fsname="f", mountpoint="/m", backing="/b", run_dir="/r", **here
    ).owner_alive()  # type: ignore[arg-type]  # noqa: E501


def test_removable_matches_the_campaign_not_a_prefix() -> None:
    assert ownership.removable("quick-20260101-010203", "quick")
    assert ownership.removable("seed001", "seed001")
    assert not ownership.removable("seed0011", "seed001")
    assert not ownership.removable("quick-x-20260101-010203", "quick")
    assert not ownership.removable("", "quick"), "an older pgrig's record: pgrig clean only"
    assert ownership.removable("anything", None)


def _orphan(parent: Path, name: str, study: str, **changes: str) -> Path:
    path = parent / name
    made = workdir.create(path, study=study)
    owner.write(LocalExecutor(), str(path), replace(made, pid=_dead_pid(), **changes))
    return path


def test_a_run_removes_its_own_orphans_and_reports_other_studies() -> None:
    """Issue 21.7: ``pgrig run`` of one study never removes another study's orphans
    (it may be paused, or another machine's); it names them, and ``pgrig clean``
    removes them."""
    disk = make_disk_dir()
    try:
        own = _orphan(disk, "own", "quick-20260101-010203")
        other = _orphan(disk, "other", "seed001")
        foreign = _orphan(disk, "foreign", "quick-20260101-010203", controller="another-host")
        done = subprocess.run(
            [sys.executable, "-m", "pgrig", "run", "--target", str(disk), "--results",
             str(disk / "r"), "--skip", "fsync,fio,tpcb", "--timing-seconds", "1"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert not own.exists(), "the same study's next run removes its orphan"
        assert other.exists()
        assert (
            f"work directory {other.resolve()} (study seed001) is left by a pgrig run of another "
            "study, which no longer runs" in " ".join(done.stderr.split())
        )
        assert foreign.exists(), "another host's work directory is never an orphan here"
        clean = subprocess.run(
            [sys.executable, "-m", "pgrig", "clean"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert clean.returncode == 0, clean.stderr
        assert not other.exists()
        assert foreign.exists()
    finally:
        workdir.unregister(disk / "foreign")
        subprocess.run(["rm", "-rf", str(disk)], check=False)


def test_escalate_ends_with_kill_and_never_signals_a_stranger() -> None:
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time\n"
         "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline().strip() == "up"
        # A PID that is no longer the process meant: "gone", and never signalled.
        assert proc.escalate(stubborn.pid, (signal.SIGKILL,), grace=0.3, ours=lambda: False)
        assert stubborn.poll() is None
        assert not proc.escalate(stubborn.pid, (signal.SIGTERM,), grace=0.3)
        assert stubborn.poll() is None, "SIGTERM is ignored"
        started = time.monotonic()
        assert proc.escalate(stubborn.pid, (signal.SIGTERM, signal.SIGKILL), grace=2)
        assert stubborn.wait(timeout=5) == -signal.SIGKILL
        assert time.monotonic() - started < 5
    finally:
        if stubborn.poll() is None:
            stubborn.kill()
            stubborn.wait(timeout=10)
        if stubborn.stdout is not None:
            stubborn.stdout.close()


def test_lab_and_mount_records_of_other_studies_are_left_and_named(tmp_path: Path) -> None:
    """The lab's and the lossy filesystem's records carry their study too (taken
    from ``ownership.studying``); a run of another study names them and leaves them."""
    with ownership.studying("seed002-20260101-010203"):
        lab = state.save(state.new_record("cgroup", note="a dead run's cgroup"))
    lab = state.save(replace(lab, owner_pid=_dead_pid(), owner_start=None))
    mount = MountRecord(
        fsname="pgrig-lossyfs-test", mountpoint=str(tmp_path / "mnt"), backing=str(tmp_path),
        run_dir=str(tmp_path / "run"), owner_pid=_dead_pid(), host=socket.gethostname(),
        created_at=time.time(), study="seed002",
    )  # fmt: skip
    lossy_registry.write_record(mount)
    try:
        assert lab.study == "seed002-20260101-010203"
        left: list[str] = []
        assert [r.id for r in state.orphans("cgroup", study="other", left=left)] == []
        assert lossyfs.clean_orphans(study="other", left=left) == []
        assert left == [
            "storage lab cgroup a dead run's cgroup (study seed002-20260101-010203)",
            f"lossy mount {tmp_path / 'mnt'} (study seed002)",
        ]
        assert [r.id for r in state.orphans("cgroup", study="seed002")] == [lab.id]
        assert lossyfs.clean_orphans(study="seed002") == [str(tmp_path / "mnt")]
    finally:
        state.forget(lab)
        lossy_registry.drop_record(mount)


def _dead_owner() -> owner.Owner:
    """A record whose pgrig has exited (a real process, waited for)."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    start = ownership.process_start_time(gone.pid)
    gone.wait(timeout=30)
    return replace(owner.Owner.mine("load"), pid=gone.pid, start=start)


def test_two_cleans_that_meet_one_directory_remove_it_once_and_never_call_it_foreign() -> None:
    """ci run of stop 47: another test's clean was removing a dead pgrig's directory
    while this one read it, and this one reported it "left: no owner record".
    A clean claims a directory (an atomic rename) before removing it; the other
    skips what it did not claim. Prefixed apart from every other test's /tmp work."""
    prefix = f"pgrig-ownertest-{os.getpid()}-"
    dead = _dead_owner()
    made = []
    for i in range(24):
        d = Path(tempfile.mkdtemp(prefix=f"{prefix}{i}-", dir=TMP))
        (d / "data").mkdir()
        for j in range(50):
            (d / "data" / str(j)).write_bytes(b"x" * 512)
        owner.write(LocalExecutor(), str(d), dead)
        made.append(str(d))
    try:
        with ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda _: owner.clean(LocalExecutor(), prefixes=(prefix,)), "ab"))
        said = [(left.directory, left.action) for found in both for left in found]
        assert sorted(d for d, a in said if a == "removed") == sorted(made), said
        assert [s for s in said if s[1] != "removed"] == [], said
        assert not [d for d in made if Path(d).exists()]
        # A clean cut short between its claim and the removal: the next finishes it.
        d = Path(tempfile.mkdtemp(prefix=f"{owner.CLAIMED}{prefix}", dir=TMP))
        owner.write(LocalExecutor(), str(d), dead)
        made.append(str(d))
        (left,) = owner.clean(LocalExecutor(), prefixes=(prefix,))
        assert (left.directory, left.action) == (str(d), "removed")
        assert not d.exists()
    finally:
        for d in made:
            for path in (d, d.replace(f"{TMP}/", f"{TMP}/{owner.CLAIMED}", 1)):
                subprocess.run(["rm", "-rf", "--", path], check=False)


class _Counting(LocalExecutor):
    """This machine's executor, each access to the host counted (a command, a
    file read, a listing, a test): what is a round trip on an SSH host."""

    def __init__(self) -> None:
        super().__init__()
        self.accesses: list[str] = []

    def run(self, argv, **kwargs):  # type: ignore[no-untyped-def]
        self.accesses.append(f"run {argv[0]}")
        return super().run(argv, **kwargs)

    def read_bytes(self, path: str) -> bytes:
        self.accesses.append(f"read {path}")
        return super().read_bytes(path)

    def exists(self, path: str) -> bool:
        self.accesses.append(f"exists {path}")
        return super().exists(path)

    def listdir(self, path: str) -> list[str]:
        self.accesses.append(f"listdir {path}")
        return super().listdir(path)


def test_a_hosts_owner_records_are_read_in_one_command_however_many() -> None:
    """A clean read /tmp's listing, then each directory's record in a round trip
    of its own: its cost grew with what other runs left there. Now one command
    reads them all, and each is judged as before: a dead pgrig's, a live one's,
    one without a record, one made beside another (``made_beside``)."""
    prefix = f"pgrig-ownertest-{os.getpid()}-"
    made = [tempfile.mkdtemp(prefix=f"{prefix}{i}-", dir=TMP) for i in range(6)]
    try:
        dead, live, bare, beside, *more = made
        ex = LocalExecutor()
        owner.write(ex, dead, _dead_owner())
        owner.write(ex, live, owner.Owner.mine("load"))
        ex.write_bytes(f"{beside}/{owner.MARKER}", live.encode())
        for d in more:
            owner.write(ex, d, _dead_owner())
        counted = _Counting()
        said = {
            left.directory: left.verdict
            for left in owner.clean(counted, dry_run=True, prefixes=(prefix,))
        }
        assert counted.accesses == ["run /bin/sh"], counted.accesses
        assert said == {
            dead: "would remove", live: "alive", bare: "no record", beside: "beside",
            **{d: "would remove" for d in more},
        }  # fmt: skip
        assert all(Path(d).is_dir() for d in made), "a dry run removes nothing"
    finally:
        for d in made:
            subprocess.run(["rm", "-rf", "--", d], check=False)


def test_a_work_directory_an_older_pgrig_marked_is_still_cleaned() -> None:
    """Work directories made before the owner record carry a JSON marker (written
    here as those versions wrote it, with a socket directory and a tablespace's
    beside it): after an upgrade `pgrig clean` reads it as their record and
    removes them with what it names; a registered directory with neither record
    nor marker is never touched."""
    disk = make_disk_dir()
    old, beside, foreign = disk / "old", disk / "old-t", disk / "foreign"
    sock = Path(tempfile.mkdtemp(prefix="pgrig-sock-"))
    try:
        for d in (old, beside, foreign):
            d.mkdir()
        (foreign / "data.txt").write_text("keep me")
        for d in (beside, sock):
            (d / workdir.MARKER).write_text(str(old))  # as make_extra_dir wrote it
        (old / "data").mkdir()
        marker = {
            "path": str(old), "owner_pid": _dead_pid(), "host": socket.gethostname(),
            "created_at": time.time(), "study": "seed001", "socket_dir": str(sock),
            "pgrig_version": "0.9", "extra_dirs": [str(beside)], "owner_start": None,
        }  # fmt: skip
        (old / workdir.MARKER).write_text(json.dumps(marker))
        for d in (old, foreign):  # registered as those versions did
            entry = ownership.state_dir() / "workdirs" / workdir._registry_entry(d).name
            entry.parent.mkdir(parents=True, exist_ok=True)
            entry.write_text(str(d))
        legacy = workdir.record(old)
        assert legacy is not None and legacy.study == "seed001"
        assert legacy.elsewhere == (str(sock), str(beside))
        clean = subprocess.run(
            [sys.executable, "-m", "pgrig", "clean"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert clean.returncode == 0, clean.stderr
        assert f"removed the orphan work directory {old}" in clean.stdout, clean.stdout
        assert not old.exists() and not beside.exists() and not sock.exists()
        assert (foreign / "data.txt").read_text() == "keep me"
    finally:
        workdir.unregister(foreign)
        subprocess.run(["rm", "-rf", "--", str(disk), str(sock)], check=False)


def test_a_local_clean_cut_short_after_its_claim_is_finished() -> None:
    """A clean claims a dead pgrig's work directory (renames it, in its parent)
    before removing it, as on a host; one cut short between the two leaves the
    claimed name, which the next clean finishes - the registry still names the
    directory as it was made."""
    disk = make_disk_dir()
    try:
        work = _orphan(disk, "cut", "seed003")
        Path(work).rename(owner.claimed(str(work)))
        assert work.resolve() in workdir.orphans()
        assert str(work.resolve()) in workdir.clean_orphans()
        assert list(disk.iterdir()) == []
        assert work.resolve() not in workdir.orphans(), "forgotten once removed"
    finally:
        subprocess.run(["rm", "-rf", "--", str(disk)], check=False)


def _asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, ownership.Found]]:
    """Every registered kind's ``clean`` counted (what it was handed), in a state
    directory and a temporary directory of the test's own: the shared /tmp holds
    what other runs on this machine leave."""
    monkeypatch.setenv("PGRIG_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    asked: list[tuple[str, ownership.Found]] = []
    for kind in registry.target_kinds().values():

        def clean(
            study: str | None, others: list[str], found: ownership.Found, name: str = kind.name
        ) -> list[str]:  # noqa: E501
            asked.append((name, found))
            return []

        monkeypatch.setattr(kind, "clean", clean)
        # Hosts an earlier test of this worker reached (the remote kind lists
        # their /tmp at every start) are not this test's (ci34).
        monkeypatch.setattr(kind, "left_beyond", lambda: False)
    return asked


def test_a_run_start_with_nothing_left_asks_no_kind_to_clean(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 43: every kind was asked at every run's start, each looking in its
    own registry whether or not anything was left; found in one pass now, a kind
    with nothing there is not asked (nor one whose record directory is empty)."""
    asked = _asked(monkeypatch, tmp_path)
    (tmp_path / "state" / lossy_registry.RECORDS).mkdir(parents=True)  # emptied by a clean
    assert lifecycle.clean_orphans("seed001", []) == []
    assert asked == []
    # what a pgrig that still runs holds (this one) is not left either: a mount
    # record, a work directory and its socket directory in /tmp
    me = {"owner_pid": os.getpid(), "host": socket.gethostname(), "created_at": time.time()}
    lossy_registry.write_record(
        MountRecord(fsname="f", mountpoint="/m", backing="/b", run_dir="/r", **me)  # type: ignore[arg-type]
    )
    work = tmp_path / "work"
    workdir.create(work, study="seed001")
    workdir.make_socket_dir(None, work)
    assert lifecycle.clean_orphans(None, []) == []
    assert asked == []


def test_what_is_left_goes_to_the_kind_that_leaves_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked = _asked(monkeypatch, tmp_path)
    mounts = tmp_path / "state" / lossy_registry.RECORDS
    mounts.mkdir(parents=True)
    (mounts / "f.json").write_text("{}")
    sock = tmp_path / "tmp" / f"{workdir.SOCKET_PREFIX}x"
    sock.mkdir()
    lifecycle.clean_orphans(None, [])
    assert asked == [
        ("lossy", ownership.Found({lossy_registry.RECORDS: (mounts / "f.json",)})),
        ("directory", ownership.Found(scratch=(sock,))),
    ]


def test_a_left_mount_record_is_cleaned_through_the_one_pass(tmp_path: Path) -> None:
    """The user's line for a real leftover is what it was: a dead pgrig's lossy
    mount record (nothing mounted) undone at the next run's start."""
    dead = _dead_pid()
    record = MountRecord(
        fsname="pgrig-lossyfs-gone", mountpoint=str(tmp_path / "mnt"), backing=str(tmp_path),
        run_dir=str(tmp_path / "run"), owner_pid=dead, host=socket.gethostname(),
        created_at=time.time(), study="seed001",
    )  # fmt: skip
    lossy_registry.write_record(record)
    lines = lifecycle.clean_orphans("seed001", [])
    assert (
        f"unmounted the lossy filesystem on {tmp_path / 'mnt'} (left by a killed pgrig run)"
        in lines
    )
    assert not (lossy_registry.registry_dir() / "pgrig-lossyfs-gone.json").exists()
