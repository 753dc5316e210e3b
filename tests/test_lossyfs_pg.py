"""PostgreSQL 15 on the lossy filesystem: crash, power loss, recovery.

The server runs as the unprivileged ``postgres`` user on the FUSE mount (so
``allow_other`` and the reported ownership are exercised), is stopped with
``pg_ctl stop -m immediate`` and then loses power.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import psycopg
import pytest
from psycopg import sql

from conftest import make_disk_dir
from pgrig import lossyfs, proc
from pgrig.cluster import profiles, workdir
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.errors import ClusterError
from pgrig.lossyfs import LossyMount, registry
from pgrig.pgsource import binaries

REASON = lossyfs.available()
pytestmark = [
    pytest.mark.skipif(REASON is not None, reason=f"no FUSE here: {REASON}"),
    pytest.mark.cluster,
    pytest.mark.slow,
]


@dataclass
class Rig:
    mount: LossyMount
    cluster: Cluster

    @property
    def conn(self) -> Conn:
        c = self.cluster
        return Conn.socket(str(c.socket_dir), c.port, SUPERUSER, "postgres")

    def crash(self, mode: lossyfs.Mode = "drop", **kw: object) -> lossyfs.PowerLossReport:
        c = self.cluster
        proc.run(
            [c.bins.path("pg_ctl"), "stop", "-D", c.datadir, "-m", "immediate", "-w", "-t", "60"],
            timeout=90,
            user=c.os_user,
        )
        report = self.mount.power_loss(mode, **kw)  # type: ignore[arg-type]
        self.mount.remount()
        return report

    def recovered_rows(self, table: str = "t") -> int:
        """Rows in ``table`` after crash recovery; raises if the server or it is broken."""
        self.cluster.restart_after_crash(timeout=120)
        with self.conn.connect() as db:
            row = db.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
            row = row.fetchone()
        assert row is not None
        return int(row[0])


def commit_rows(rig: Rig, first: int, count: int) -> None:
    """One transaction per row: each COMMIT returned means durable (fsync, sync commit)."""
    with rig.conn.connect() as db:
        for i in range(first, first + count):
            db.execute("INSERT INTO t VALUES (%s, repeat('x', 300))", (i,))


@dataclass(frozen=True)
class Setup:
    metadata: lossyfs.MetadataModel = "journal"
    settings: tuple[tuple[str, str], ...] = ()
    page_size: int = 4096
    checksums: bool = False


@pytest.fixture
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    setup: Setup = request.param
    try:
        bins = binaries.find()
    except Exception as exc:  # pragma: no cover - make test installs PostgreSQL
        pytest.skip(f"PostgreSQL binaries not found: {exc}")
    base = make_disk_dir("pgrig-test-lossypg-")
    (base / "backing").mkdir()
    mount = LossyMount(
        base / "backing",
        base / "mnt",
        metadata=setup.metadata,
        page_size=setup.page_size,
        seed=11,
    )
    cluster: Cluster | None = None
    try:
        # initdb at the disk's speed into the backing directory: what it holds when
        # the filesystem mounts counts as synced (as pgrig durability --power-loss does).
        made = cluster = Cluster.create(
            bins, mount.backing / "work", study="lossy", os_user=server_os_user()
        )
        made.initdb(InitdbOptions(data_checksums=setup.checksums))
        settings = {
            "synchronous_commit": "on",
            "recovery_init_sync_method": "syncfs",  # nothing unsynced after a remount
            **dict(setup.settings),
        }
        made.configure(profiles.load("stock").with_overrides(settings))
        mount.start()
        cluster = made.moved(mount.mountpoint / "work")
        workdir.unregister(made.workdir)
        # Other pgrig runs sweep a socket directory whose work directory is gone,
        # as it is between a power loss and the remount.
        workdir.anchor_socket_dir(cluster.socket_dir, base)
        cluster.start()
        with Rig(mount, cluster).conn.connect() as db:
            db.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
        yield Rig(mount, cluster)
    finally:
        try:
            if cluster is not None:
                cluster.stop()
                if mount.mounted:
                    cluster.destroy()
                shutil.rmtree(cluster.socket_dir, ignore_errors=True)
        finally:
            try:
                mount.unmount()
            finally:
                shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("rig", [Setup(metadata="strict")], indirect=True)
def test_strict_metadata_exposes_unsynced_relation_file_names(rig: Rig) -> None:
    """PostgreSQL never fsyncs a directory after creating a relation file: it relies on
    the filesystem committing the new name with the file's fsync, as ext4 and xfs do.
    Under the strict POSIX model the names made before a checkpoint are lost, and the
    WAL replayed after that checkpoint cannot bring their early pages back."""
    commit_rows(rig, 0, 100)
    with rig.conn.connect() as db:
        db.execute("CHECKPOINT")
    commit_rows(rig, 100, 10)
    report = rig.crash("drop")
    assert report.lost_files > 0
    try:
        rows = rig.recovered_rows()
    except (psycopg.Error, ClusterError):
        return  # e.g. 'index "t_pkey" contains unexpected zero page at block 0'
    assert rows < 110


@pytest.mark.parametrize("rig", [Setup()], indirect=True)
def test_clean_orphans_stops_the_server_on_the_mount_first(rig: Rig) -> None:
    commit_rows(rig, 0, 10)
    with subprocess.Popen(["true"]) as gone:
        gone.wait(timeout=30)
    record = rig.mount.record
    assert record is not None
    registry.write_record(replace(record, owner_pid=gone.pid))  # as if pgrig was killed
    postmaster = rig.cluster.postmaster_pid()
    assert postmaster is not None
    assert lossyfs.clean_orphans() == [str(rig.mount.mountpoint)]
    assert not proc.pid_alive(postmaster)
    assert not rig.mount.mounted
    assert (rig.mount.backing / "work" / "data" / "PG_VERSION").is_file()


TORN = dict(page_size=8192, checksums=True)


@pytest.mark.parametrize(
    "rig",
    [
        Setup(settings=(("full_page_writes", "off"), ("shared_buffers", "128kB")), **TORN),
        Setup(settings=(("full_page_writes", "on"), ("shared_buffers", "128kB")), **TORN),
    ],
    ids=["full_page_writes=off", "full_page_writes=on"],
    indirect=True,
)
def test_a_torn_heap_page_needs_full_page_writes(rig: Rig) -> None:
    """Tiny shared_buffers: the UPDATE's backends evict dirty heap pages, written but
    not fsynced until the next checkpoint. Tear one of them (4 KiB of 8 KiB): replaying
    the WAL onto half a page fails unless a full-page image comes first."""
    with rig.conn.connect() as db:
        db.execute("CREATE TABLE h (id int, pad text)")
        db.execute("INSERT INTO h SELECT g, repeat('a', 300) FROM generate_series(1, 2000) g")
        db.execute("CHECKPOINT")
        db.execute("UPDATE h SET pad = repeat('b', 300) WHERE id % 7 = 0")
        row = db.execute("SELECT pg_relation_filepath('h'), current_setting('full_page_writes')")
        path, fpw = row.fetchone() or ("", "")
    report = rig.crash("torn", torn_bytes=4096, only=f"work/data/{path}")
    assert report.torn is not None and report.torn[0] == f"work/data/{path}"
    if fpw == "on":
        assert rig.recovered_rows("h") == 2000
        return
    with pytest.raises(ClusterError, match="WAL redo|invalid page|checksum"):
        rig.recovered_rows("h")


@pytest.mark.parametrize("rig", [Setup()], indirect=True)
def test_a_failed_fsync_panics_and_recovery_loses_nothing(rig: Rig) -> None:
    """fsyncgate: EIO from fsync (the lossy filesystem's injected disk error) makes
    PostgreSQL PANIC (data_sync_retry = off since 11.2/10.7/9.6.12/9.5.16) rather
    than retry over lost pages; crash recovery replays the WAL: every committed
    row is there."""
    commit_rows(rig, 0, 30)
    with rig.conn.connect() as db:
        row = db.execute("SHOW data_sync_retry").fetchone()
        assert row is not None and row[0] == "off"
        db.execute("UPDATE t SET pad = 'changed' WHERE id < 10")
    rig.mount.fail_syncs(1)
    with pytest.raises(psycopg.OperationalError), rig.conn.connect() as db:
        db.execute("CHECKPOINT")  # its fsync fails: the server PANICs
    log = rig.cluster.logfile.read_text(errors="replace")
    assert "PANIC" in log and "Input/output error" in log, log[-2000:]
    assert rig.mount.stats()["failed_syncs"] == 1
    # the postmaster reinitializes by itself (restart_after_crash): crash recovery
    deadline = time.monotonic() + 60
    while True:
        try:
            with rig.conn.connect() as db:
                counts = db.execute(
                    "SELECT count(*), count(*) FILTER (WHERE pad = 'changed') FROM t"
                ).fetchone()
            break
        except ClusterError:  # "the database system is in recovery mode"
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert counts == (30, 10)  # every commit, the update whose pages failed included
    log = rig.cluster.logfile.read_text(errors="replace")
    assert "all server processes terminated; reinitializing" in log
    assert "redo done" in log


def test_old_minors_that_retry_a_failed_fsync_are_flagged() -> None:
    from pgrig.cluster import fsyncgate

    assert fsyncgate.retries_failed_fsync(110001) and not fsyncgate.retries_failed_fsync(110002)
    assert fsyncgate.retries_failed_fsync(90515) and not fsyncgate.retries_failed_fsync(90516)
    assert fsyncgate.retries_failed_fsync(90611) and not fsyncgate.retries_failed_fsync(90612)
    assert fsyncgate.retries_failed_fsync(100006) and not fsyncgate.retries_failed_fsync(150018)
    assert fsyncgate.retries_failed_fsync(90424)  # 9.4: never fixed
    assert "9.5.3 retries a failed fsync" in (fsyncgate.warning("9.5.3", 90503) or "")
    assert fsyncgate.warning("15.18", 150018) is None
