"""The throwaway cluster, its work directory, and the safety rules around them:
real initdb/pg_ctl/postgres, real directories, real signals."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pgrig import proc
from pgrig.cluster import profiles, workdir
from pgrig.cluster.hosted import HostedServer, ServerSpec
from pgrig.cluster.postmaster import Access
from pgrig.cluster.server import (
    LOOPBACK,
    SUPERUSER,
    Cluster,
    InitdbOptions,
    _free_port,
    _tcp_port,
    server_os_user,
)
from pgrig.conninfo import Conn
from pgrig.errors import BinaryNotFound, PgrigError, UsageError, WorkdirError
from pgrig.hosts import owner
from pgrig.hosts.local import LocalExecutor
from pgrig.pgsource import binaries

# -- binaries ---------------------------------------------------------------


def test_pg_bin_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFound, match="is not a directory") as err:
        binaries.find(tmp_path / "nope")
    assert err.value.hint and "--pg-bin" in err.value.hint


def test_pg_bin_without_initdb(tmp_path: Path) -> None:
    (tmp_path / "pgbench").write_text("")
    with pytest.raises(BinaryNotFound, match="holds no initdb"):
        binaries.find(tmp_path)


def test_binaries_found_without_pg_bin(bins: binaries.PgBinaries) -> None:
    assert bins.has("initdb") and bins.has("pgbench")
    assert bins.major >= 12
    assert bins.version.startswith(str(bins.major))


def test_debian_fallback_picks_newest(tmp_path: Path, bins: binaries.PgBinaries) -> None:
    # Two fake versions that point at the real binaries: the fallback must pick 16 over 9.6.
    for version in ("9.6", "16"):
        (tmp_path / version).mkdir()
        (tmp_path / version / "bin").symlink_to(bins.bin_dir)
    found = binaries._debian_bin_dirs(tmp_path)
    assert [p.parent.name for p in found] == ["16", "9.6"]


# -- profiles ---------------------------------------------------------------

MACHINE = profiles.Machine(ram_bytes=24 * 2**30, cpus=2)


def test_oltp_profile_is_sized_to_the_machine() -> None:
    oltp = profiles.load("oltp", machine=MACHINE)
    assert oltp.settings["shared_buffers"] == "6144MB"  # 25% of 24 GiB
    assert oltp.settings["effective_cache_size"] == "12288MB"
    assert oltp.settings["max_worker_processes"] == "4"
    assert oltp.settings["synchronous_commit"] == "off"
    assert profiles.load("stock", machine=MACHINE).settings == {}


def test_profile_file_with_unknown_parameter(tmp_path: Path, bins: binaries.PgBinaries) -> None:
    conf = tmp_path / "mine.conf"
    conf.write_text("shared_buffer = 1GB\n")
    profile = profiles.load(str(conf), machine=MACHINE)
    with pytest.raises(UsageError, match="unknown PostgreSQL .* parameter 'shared_buffer'") as err:
        profiles.validate(profile, bins)
    assert "shared_buffers" in (err.value.hint or "")


def test_profile_may_not_set_what_pgrig_owns(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("# comment\nlisten_addresses = '*'\n")
    with pytest.raises(UsageError, match=r"bad.conf:2: listen_addresses is set by pgrig"):
        profiles.load(str(conf), machine=MACHINE)


def test_unknown_profile_name_suggests() -> None:
    with pytest.raises(UsageError, match="unknown profile 'oltpp'") as err:
        profiles.load("oltpp")
    assert "did you mean 'oltp'" in (err.value.hint or "")


def test_overrides_and_rendering() -> None:
    over = profiles.parse_overrides(["work_mem=64MB", "application_name=it's"])
    text = profiles.render(over)
    assert "work_mem = 64MB" in text
    assert "application_name = 'it''s'" in text
    with pytest.raises(UsageError, match="expected name=value"):
        profiles.parse_overrides(["work_mem"])


# -- work directories --------------------------------------------------------


def test_workdir_with_foreign_files_is_refused_and_untouched(disk_dir: Path) -> None:
    foreign = disk_dir / "precious"
    foreign.mkdir()
    (foreign / "data.txt").write_text("keep me")
    with pytest.raises(WorkdirError, match="did not create"):
        workdir.create(foreign, study="t")
    with pytest.raises(WorkdirError, match="no pgrig owner record"):
        workdir.remove(foreign)
    assert (foreign / "data.txt").read_text() == "keep me"


def test_target_that_is_not_writable(disk_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a read-only filesystem")
    ro = disk_dir / "ro"
    ro.mkdir()
    proc.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro], timeout=30)
    try:
        with pytest.raises(WorkdirError, match="not writable"):
            workdir.check_target(ro)
    finally:
        proc.run(["umount", ro], timeout=30)


def test_missing_target(tmp_path: Path) -> None:
    with pytest.raises(WorkdirError, match="does not exist"):
        workdir.check_target(tmp_path / "absent")


def test_free_port_skips_a_taken_socket(tmp_path: Path) -> None:
    (tmp_path / ".s.PGSQL.5432").touch()
    (tmp_path / ".s.PGSQL.5433.lock").touch()
    assert _free_port(tmp_path) == 5434


def test_server_user_cannot_reach_private_directory(bins: binaries.PgBinaries) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root hands the server to another OS user")
    import tempfile

    private = Path(tempfile.mkdtemp(prefix="pgrig-private-"))  # 0700, owned by root
    try:
        with pytest.raises(WorkdirError, match="cannot write to"):
            Cluster.create(bins, private / "w", study="t", os_user=server_os_user())
        assert not (private / "w").exists()
    finally:
        shutil.rmtree(private)


# -- the cluster itself -------------------------------------------------------


def test_cluster_is_private_and_configured(cluster: Cluster, conn: Conn) -> None:
    with conn.connect() as c:
        settings = dict(
            c.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('listen_addresses', 'unix_socket_permissions', 'fsync', 'lc_collate')"
            ).fetchall()
        )
    assert settings["listen_addresses"] == ""
    assert settings["unix_socket_permissions"] == "0700"
    assert settings["fsync"] == "off"  # the override reached the server
    assert settings["lc_collate"] == "C"
    assert (cluster.socket_dir.stat().st_mode & 0o777) == 0o700
    made = workdir.record(cluster.workdir)  # the owner record a host's server has
    assert made is not None and made.kind == "server" and made.pid == os.getpid()
    assert cluster.postmaster_pid() in made.pids, "its postmaster, for `pgrig clean`"
    assert str(cluster.socket_dir) in made.elsewhere
    if os.geteuid() == 0:
        owner = cluster.datadir.stat().st_uid
        assert owner != 0, "the server must not run as root"


def test_initdb_options_reach_the_cluster(bins: binaries.PgBinaries, disk_dir: Path) -> None:
    c = Cluster.create(bins, disk_dir / "w", study="t", os_user=server_os_user())
    try:
        c.initdb(InitdbOptions(encoding="SQL_ASCII", wal_segsize_mb=64))
        # wal_keep_segments counts this cluster's 64MB segments, not the default 16MB.
        adapted = c.configure(profiles.load("stock").with_overrides({"wal_keep_segments": "3"}))
        assert "segments x 64MB" in adapted.notes[0]
        c.start()
        conn = Conn.socket(str(c.socket_dir), c.port, SUPERUSER, "postgres")
        with conn.connect() as db:
            row = db.execute(
                "SELECT current_setting('wal_segment_size'), current_setting('server_encoding'),"
                " current_setting('wal_keep_size')"
            ).fetchone()
        assert row == ("64MB", "SQL_ASCII", "192MB")
    finally:
        c.destroy()
    assert not (disk_dir / "w").exists()
    assert not c.socket_dir.exists()


@pytest.mark.parametrize("older", [False, True], ids=["record", "older-pgrigs-marker"])
def test_orphan_of_a_killed_pgrig_is_found_and_removed(
    bins: binaries.PgBinaries, disk_dir: Path, older: bool
) -> None:
    """A child process plays the pgrig that gets kill -9'd with its cluster running
    (a tablespace in another directory): the work directory's owner record, as a
    host's server's, names the postmaster and the directories made elsewhere, and
    `pgrig clean` stops and removes them as it does on a host (``owner.clean_one``).
    ``older``: the record turned into the marker an older pgrig wrote (no PID of
    its server): the server, found through postmaster.pid, is stopped too."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from pgrig.cluster import profiles\n"
        "from pgrig.pgsource import binaries\n"
        "from pgrig.cluster.server import Cluster, InitdbOptions, server_os_user\n"
        "c = Cluster.create(binaries.find(), Path(sys.argv[1]), study='victim',"
        " os_user=server_os_user())\n"
        "c.initdb(InitdbOptions()); c.configure(profiles.load('stock')); c.start()\n"
        "c.create_tablespace('t', Path(sys.argv[2]))\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    work, elsewhere = disk_dir / "victim", disk_dir / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    child = subprocess.Popen(
        [os.sys.executable, "-c", script, str(work), str(elsewhere)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "up"
        pid = workdir.postmaster_pid(work / "data")
        assert pid is not None and proc.pid_alive(pid)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        made = owner.read(LocalExecutor(), str(work))
        assert made is not None and made.pids == (pid,), made
        tablespace = elsewhere.resolve() / "victim-t"
        (socket_dir,) = [d for d in made.elsewhere if d != str(tablespace)]
        assert str(tablespace) in made.elsewhere and socket_dir.startswith("/tmp/pgrig-sock-")
        if older:  # as pgrig 0.x left it: its marker alone
            (work / owner.OWNER_FILE).unlink()
            marker = {
                "path": str(work.resolve()), "owner_pid": made.pid, "host": made.controller,
                "created_at": made.created, "study": "victim", "socket_dir": socket_dir,
                "pgrig_version": "0.9", "extra_dirs": [str(tablespace)], "owner_start": made.start,
            }  # fmt: skip
            (work / workdir.MARKER).write_text(json.dumps(marker))
        assert workdir.orphans() == [work.resolve()]
        removed = workdir.clean_orphans()
        assert removed == [str(work.resolve())]
        deadline = time.monotonic() + 10
        while proc.pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not proc.pid_alive(pid), "the orphan's postmaster must be stopped"
        assert not work.exists()
        assert list(elsewhere.iterdir()) == [] and not Path(socket_dir).exists()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()


def test_socket_dir_of_a_vanished_workdir_is_swept(tmp_path: Path) -> None:
    gone = tmp_path / "deleted-by-hand"
    sock = workdir.make_socket_dir(None, gone)
    foreign = Path(tempfile.mkdtemp(prefix="pgrig-sock-"))  # no marker: not ours
    try:
        # While the pgrig that made it runs, it is in use even if its work directory
        # cannot be seen (a lossy mount between a power loss and the remount).
        assert sock not in workdir.stale_socket_dirs()
        with subprocess.Popen(["true"]) as dead:
            dead.wait(timeout=30)
        _pid, host = (sock / workdir.SOCKET_OWNER).read_text().split()
        (sock / workdir.SOCKET_OWNER).write_text(f"{dead.pid} {host}")
        assert sock in workdir.stale_socket_dirs()
        workdir.clean_orphans()
        assert not sock.exists()
        assert foreign.exists(), "a directory without pgrig's marker is never removed"
    finally:
        shutil.rmtree(foreign, ignore_errors=True)
        shutil.rmtree(sock, ignore_errors=True)


def test_a_shutdown_that_hangs_says_so(bins: binaries.PgBinaries) -> None:
    """The postmaster alone SIGSTOPped: its fast shutdown cannot end; the stop
    says why before it falls back to immediate and SIGKILL (issue 33: it used to
    block 75 s, then kill the server without a word)."""
    from conftest import make_disk_dir

    base = make_disk_dir("pgrig-test-hang-")
    c = Cluster.create(bins, base / "work", study="test", os_user=server_os_user())
    try:
        c.initdb(InitdbOptions())
        c.configure(profiles.load("stock").with_overrides({"fsync": "off"}))
        c.start()
        pid = c.postmaster_pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        heard: list[str] = []
        began = time.monotonic()
        c.stop(timeout=8, said=heard.append)
        print(f"said after {time.monotonic() - began:.1f} s: {heard}")
        assert heard == [
            f"the server {c.pm.where} did not shut down in 4 s (its postmaster is stopped "
            "(SIGSTOP)): stopping it with -m immediate, then SIGKILL"
        ]
        assert not c.running()
    finally:
        with contextlib.suppress(ProcessLookupError):
            if (pid := c.postmaster_pid()) is not None:
                os.kill(pid, signal.SIGCONT)
        c.destroy()
        shutil.rmtree(base, ignore_errors=True)


def test_a_server_recovering_from_a_crash_is_stopped_at_once(bins: binaries.PgBinaries) -> None:
    """A backend killed as the OOM killer kills one: the postmaster restarts the
    others after a crash recovery, refusing connections until then. A fast
    shutdown asked in that window was seen to wait out its 30 s (issue 40.5:
    2 of 22 resumes of a 64 MiB target); such a server is stopped with -m
    immediate at once, which leaves it as the crash did. A second session,
    SIGSTOPped, holds the window open: the postmaster waits for it (up to the
    5 s after which it SIGKILLs its children)."""
    from conftest import make_disk_dir

    base = make_disk_dir("pgrig-test-crashstop-")
    c = Cluster.create(bins, base / "work", study="test", os_user=server_os_user())
    held: int | None = None
    try:
        c.initdb(InitdbOptions())
        c.configure(profiles.load("stock").with_overrides({"fsync": "off"}))
        c.start()
        with c.admin().connect() as victim, c.admin().connect() as holder:
            held = holder.info.backend_pid
            os.kill(held, signal.SIGSTOP)
            os.kill(victim.info.backend_pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while not c.pm.rejecting() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert c.pm.rejecting(), "the crash restart never began"
            heard: list[str] = []
            began = time.monotonic()
            c.stop(timeout=60, said=heard.append)
            took = time.monotonic() - began
            print(f"stopped in {took:.1f} s: {heard}")
        assert heard == [
            f"the server {c.pm.where} refuses connections (recovering from a crash, "
            "or starting or stopping): stopping it with -m immediate"
        ]
        assert not c.running()
        assert took < 15, f"{took:.1f} s: the fast shutdown's 30 s were waited"
    finally:
        if held is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(held, signal.SIGCONT)
        c.destroy()
        shutil.rmtree(base, ignore_errors=True)


# -- issue 43: a host's server made on this machine, by the same code -------------


def test_a_hosted_server_is_made_here_through_this_machines_executor(
    bins: binaries.PgBinaries,
) -> None:
    """pyinfra's @local: the server a remote target makes on a host, made on this
    machine by the same class over ``LocalExecutor`` - its owner record naming the
    postmaster, scram with the password over TCP, everything removed on close."""
    if os.geteuid() != 0:
        pytest.skip("a server on a host is made as root (make_workdir refuses otherwise)")
    ex = LocalExecutor()
    spec = ServerSpec(
        bin_dir=str(bins.bin_dir),
        address=LOOPBACK,
        bins=bins,
        port=_tcp_port(),
        clients=(f"{LOOPBACK}/32",),
        settings=(("fsync", "off"),),
    )
    with HostedServer(ex, spec) as server:
        home = Path(server.workdir)
        assert home.parent == Path("/tmp") and home.name.startswith("pgrig-server-")
        record = owner.read(ex, server.workdir)
        assert record is not None and record.kind == "server"
        assert record.pids == (server.postmaster_pid(),)
        with server.conn().connect() as db:
            row = db.execute(
                "SELECT current_setting('password_encryption'), "
                "current_setting('listen_addresses'), current_user"
            ).fetchone()
        assert row == ("scram-sha-256", LOOPBACK, SUPERUSER)
        wrong = Conn.tcp(LOOPBACK, spec.port, SUPERUSER, "postgres", "not-the-password")
        with pytest.raises(PgrigError, match="password authentication failed"):
            wrong.connect().close()
        pid = server.postmaster_pid()
        assert pid is not None
    assert not home.exists()
    with contextlib.suppress(FileNotFoundError):  # gone, or a zombie not reaped yet
        assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"


def test_what_tells_the_two_servers_apart_is_their_access() -> None:
    """The same initdb, pg_hba and pgrig.conf code for both; only the data differs."""
    here = Access("/tmp/pgrig-sock-x", 5433)
    there = Access(
        "/tmp/pgrig-server-y", 5432, "10.0.0.1", "pw", local_auth="peer",
        host_auth="scram-sha-256", clients=("10.0.0.2/32",), private_socket=False, pinned=True,
    )  # fmt: skip
    assert here.initdb() == ["--auth=trust"]
    assert there.initdb() == [
        "--auth-local=peer", "--auth-host=scram-sha-256", "--pwfile=/dev/stdin",
    ]  # fmt: skip
    # where it listens: in pgrig.conf here, on the command line there
    assert here.options() == {} and there.conf() == {}
    assert here.conf()["listen_addresses"] == ""
    assert here.conf()["unix_socket_permissions"] == "0700"
    assert there.options()["listen_addresses"] == "10.0.0.1"
    assert there.options()["password_encryption"] == "scram-sha-256"
    assert here.isready("pg_isready")[1:3] == ["-h", "/tmp/pgrig-sock-x"]
    assert there.isready("pg_isready")[1:3] == ["-h", "10.0.0.1"]
    # initdb of 10 on writes active replication lines: nothing to add here
    assert here.hba(100000) == ""
    assert there.hba(150000).splitlines() == [
        "",
        "# added by pgrig",
        "host all all 10.0.0.2/32 scram-sha-256",
        "host replication all 10.0.0.2/32 scram-sha-256",
    ]
    # before 10 initdb left its replication lines commented out
    assert there.hba(90600).splitlines()[-1].split() == ["local", "replication", "all", "peer"]
