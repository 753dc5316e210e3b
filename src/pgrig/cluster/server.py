"""The throwaway cluster: initdb, configure, start, stop - as an unprivileged user.

The cluster listens only on a unix socket in a private 0700 directory
(``listen_addresses = ''``), so nothing outside this machine - and no other
user on it - can reach it. Starting waits for ``pg_isready`` with a timeout;
stopping escalates fast -> immediate -> SIGKILL of a verified postmaster PID.

Every command runs through this machine's executor (``LocalExecutor``), as a
server on another host runs through its SSH one: as the server's OS user and,
for a storage lab, in its cgroups (``Launch``). initdb, pg_hba.conf and
pgrig.conf are ``Postmaster``'s, told by an ``Access`` how the cluster is
reached; what is this module's is where it lives (a marked work directory, a
private socket directory) and what a storage study asks of it besides.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from pgrig import proc
from pgrig.cluster import compat, profiles, workdir
from pgrig.cluster.postmaster import (
    C_LOCALE,
    SUPERUSER,
    Access,
    Made,
    Postmaster,
    create_tablespace,
)

# initdb's options are ``Postmaster.initdb``'s; named here too, where the
# cluster's makers (targets, tests, bench) have always taken them from.
from pgrig.cluster.postmaster import InitdbOptions as InitdbOptions
from pgrig.cluster.postmaster import initdb_version_args as initdb_version_args
from pgrig.conninfo import Conn
from pgrig.errors import ClusterError, PgrigError, UsageError, WorkdirError
from pgrig.hosts import owner
from pgrig.hosts.executor import Executor, Launch
from pgrig.hosts.local import HERE
from pgrig.pgsource.binaries import PgBinaries

LOOPBACK = "127.0.0.1"  # where a cluster with listen = "tcp" listens
DEFAULT_OS_USERS = ("postgres", "pgrig")


class Server(Protocol):
    """What a study asks of the server pgrig made, on whichever host it runs: is it
    up, bring it back after a crash (``Recorder``), its PID there and its last words.
    Answered once, by ``pgrig.cluster.postmaster.Made``: ``Cluster`` (this machine)
    and ``HostedServer`` (a host through its executor) are one."""

    def running(self) -> bool: ...

    def restart_after_crash(self, timeout: float = 60) -> None: ...

    def accepting(self) -> bool: ...

    def wait_ready(self, timeout: float = 60) -> None: ...

    def postmaster_pid(self) -> int | None: ...

    def log_tail(self, lines: int = 5) -> str: ...


def server_os_user(name: str | None = None) -> proc.OsUser | None:
    """The account the server runs as: None when pgrig itself is not root.

    As root, use ``name`` (created if missing), else the existing ``postgres``
    account (Debian's packages make it), else create ``pgrig``.
    """
    if os.geteuid() != 0:
        return None
    candidates = [name] if name else list(DEFAULT_OS_USERS)
    for candidate in candidates:
        with contextlib.suppress(KeyError):
            return proc.OsUser.lookup(candidate)
    create = candidates[-1]
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    HERE.run(
        [
            useradd,
            "--system",
            "--user-group",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            "--home-dir",
            "/nonexistent",
            create,
        ],
        timeout=30,
        what="useradd",
    )
    return proc.OsUser.lookup(create)


# What useradd takes (Debian's NAME_REGEX): "bad name" got useradd's raw error.
_OS_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def checking_os_user(name: str | None = None) -> proc.OsUser | None:
    """The account a target's settings are checked as, creating none (`pgrig
    plan` added a mistyped os_user to /etc/passwd): the server's own where it
    exists, else ``nobody`` in its place, and the run creates it. A name
    useradd would refuse, and root (the server refuses it), are refused now."""
    if os.geteuid() != 0:
        return None
    if name is not None:
        if name == "root":
            raise UsageError(
                "root: PostgreSQL refuses to run as root",
                hint="leave os_user out (postgres, else pgrig) or name an unprivileged account",
            )
        if not _OS_NAME.fullmatch(name):
            raise UsageError(
                f"{name!r} is not an account name useradd accepts",
                hint="lower-case letters, digits, '_' and '-', starting with a letter, at most 32",
            )
    for candidate in [name] if name else list(DEFAULT_OS_USERS):
        with contextlib.suppress(KeyError):
            return proc.OsUser.lookup(candidate)
    return proc.OsUser.lookup("nobody")


def disk_usage(datadir: Path) -> int:
    """Bytes of the files under ``datadir``."""
    total = 0
    for root, _dirs, files in os.walk(datadir):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _tcp_port() -> int:
    """A port nothing listens on at 127.0.0.1: the kernel's choice of a free one
    (two clusters of targets compared at once never get the same)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _free_port(socket_dir: Path, start: int = 5432) -> int:
    for port in range(start, start + 100):
        if (
            not (socket_dir / f".s.PGSQL.{port}").exists()
            and not (socket_dir / f".s.PGSQL.{port}.lock").exists()
        ):
            return port
    raise ClusterError(f"no free port number for a socket in {socket_dir}")


def local_access(socket_dir: Path, *, tcp: bool) -> Access:
    """How a cluster on this machine is reached: its private socket, where trust
    is safe (the 0700 directory is the lock); with listen = "tcp" also 127.0.0.1,
    where any user of this machine could connect, with a password (md5 in
    pg_hba, which takes a SCRAM-stored one too, on 9.5 to 18 alike). Seeds 001
    and 003 drove the server over the network; pgrig's own sessions stay on the
    socket."""
    if tcp:
        return Access(str(socket_dir), _tcp_port(), LOOPBACK, secrets.token_urlsafe(18))
    return Access(str(socket_dir), _free_port(socket_dir))


class Cluster(Made):
    """A PostgreSQL cluster pgrig created in ``workdir`` on this machine; removed by
    ``destroy``. Its lifecycle is a ``Postmaster`` over this machine's executor
    (``Made``), the one a server on another host runs over its SSH executor."""

    def __init__(
        self,
        bins: PgBinaries,
        workdir_path: Path,
        *,
        os_user: proc.OsUser | None,
        access: Access,
        ex: Executor = HERE,
    ) -> None:
        self.bins = bins
        self.workdir = workdir_path
        self.datadir = workdir_path / "data"
        self.logfile = workdir_path / "server.log"
        self.os_user = os_user
        self.access = access
        self.socket_dir = Path(access.socket_dir)
        self.port = access.port
        self.password = access.password
        self.settings: dict[str, str] = {}
        self.adapted: compat.Adapted | None = None
        self._pm = Postmaster(
            ex,
            bin_dir=str(bins.bin_dir),
            datadir=str(self.datadir),
            logfile=str(self.logfile),
            user=os_user.name if os_user is not None else None,
            access=access,
            pg_isready=str(bins.path("pg_isready")),
        )
        self._pm.on_start = self._started

    @property
    def ex(self) -> Executor:
        return self.pm.ex

    def _started(self, pid: int) -> None:
        """Each start's postmaster into the work directory's owner record, as a
        host's server does (``HostedServer._started``): `pgrig clean` stops it
        after a kill -9 of pgrig."""
        # A record that cannot be written (a target turning read-only) fails no
        # start: `pgrig clean` finds the postmaster through postmaster.pid too.
        with contextlib.suppress(OSError, PgrigError):
            if workdir.record(self.workdir) is not None:
                owner.with_pid(self.ex, str(self.workdir.resolve()), None, pid)

    @property
    def cgroups(self) -> tuple[str, ...]:
        """The storage lab's cgroups (their cgroup.procs) every start goes into."""
        return self.pm.cgroups

    @cgroups.setter
    def cgroups(self, value: tuple[str, ...]) -> None:
        self.pm.cgroups = value

    # -- creation ----------------------------------------------------------

    @classmethod
    def create(
        cls,
        bins: PgBinaries,
        workdir_path: Path,
        *,
        study: str,
        os_user: proc.OsUser | None,
        tcp: bool = False,
    ) -> Cluster:
        """Make the marked work directory and the private socket directory."""
        workdir.create(workdir_path, study=study)
        socket_dir = workdir.make_socket_dir(os_user, workdir_path)
        workdir.made_beside(workdir_path, socket_dir, None)
        cluster = cls(bins, workdir_path, os_user=os_user, access=local_access(socket_dir, tcp=tcp))
        if os_user is not None:
            os.chown(workdir_path, os_user.uid, os_user.gid)
            # The server user must reach the work directory through every parent.
            if not cluster.ex.writable_by(workdir_path, os_user.name):
                workdir.remove(workdir_path)
                raise WorkdirError(
                    f"the server runs as OS user {os_user.name}, which cannot write to "
                    f"{workdir_path} (a parent directory is not searchable for it)",
                    hint="choose a --target that user can reach, e.g. under /var/tmp or /srv",
                )
        return cluster

    def moved(self, workdir_path: Path) -> Cluster:
        """The same stopped cluster seen at another path (its directory mounted
        there, e.g. the lossy filesystem over the directory initdb wrote to)."""
        moved = Cluster(
            self.bins, workdir_path, os_user=self.os_user, access=self.access, ex=self.ex
        )
        moved.settings = dict(self.settings)
        moved.adapted = self.adapted
        moved.cgroups = self.cgroups
        return moved

    def initdb(self, opts: InitdbOptions) -> None:
        self.pm.initdb(opts, self.bins)

    def conn(self, dbname: str) -> Conn:
        """How the clients connect: the private socket, or 127.0.0.1 with the password."""
        return self.access.conn(dbname).guarded(self.settings)

    def admin(self) -> Conn:
        """pgrig's own session on the private socket (also with clients over TCP)."""
        conn = Conn.socket(str(self.socket_dir), self.port, SUPERUSER, "postgres")
        return conn.guarded(self.settings)

    def wal_segment_mb(self) -> int | None:
        """The WAL segment size initdb gave this data directory, from pg_controldata
        (None where it does not say: it is 16MB before 11, fixed at build time)."""
        if not self.bins.has("pg_controldata"):
            return None
        done = self.ex.run(
            [str(self.bins.path("pg_controldata")), str(self.datadir)],  # -D: 9.6+ only,
            timeout=30,
            env=C_LOCALE,  # the field names are translated otherwise
            what="pg_controldata",
            launch=Launch(self.pm.user),
        )
        m = re.search(r"^Bytes per WAL segment:\s+(\d+)", done.stdout, re.MULTILINE)
        return int(m.group(1)) // 2**20 if m else None

    def configure(self, profile: profiles.Profile) -> compat.Adapted:
        """Write the profile - fitted to this server's major and WAL segment size - plus
        pgrig's own settings and include it from postgresql.conf. Returns what was
        translated or dropped."""
        adapted = profiles.adapt(profile, self.bins, self.os_user, segment_mb=self.wal_segment_mb())
        self.adapted = adapted
        changes = "".join(f"# {note}\n" for note in adapted.notes)
        header = (
            f"# profile: {profile.name} ({profile.source})\n"
            + "".join(f"# scaled to this machine: {note}\n" for note in profile.scaled)
            + (f"# fitted to PostgreSQL {adapted.version}:\n{changes}" if changes else "")
        )
        self.settings = self.pm.configure(adapted.applied, self.bins.version_num, header)
        return adapted

    # -- lifecycle: the one ``Postmaster`` -----------------------------------

    def start(
        self,
        timeout: float = 120,
        *,
        cgroups: tuple[str, ...] = (),
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """``Postmaster.start``; the log file is made first, for the server's user only
        (statements and their errors land there)."""
        if not self.logfile.exists():
            self.logfile.touch(mode=0o600)
            if self.os_user is not None:
                os.chown(self.logfile, self.os_user.uid, self.os_user.gid)
        self.pm.start(timeout, cgroups=cgroups, settings=settings)

    def create_tablespace(self, name: str, parent: Path) -> str:
        """CREATE TABLESPACE in a new directory under ``parent`` (another disk, as seed
        004 puts tables and indexes on two); the directory goes with the cluster."""
        # Named after the cluster's work directory (study and target): two targets
        # of a campaign (or a target's version variants) may share ``parent``.
        location = workdir.make_extra_dir(
            self.workdir, parent.resolve() / f"{self.workdir.name}-{name}", self.os_user
        )
        return create_tablespace(self.admin(), name, str(location))

    def destroy(self, said: Callable[[str], None] | None = None) -> None:
        """Stop and delete everything pgrig created for this cluster; ``said``
        hears of a server that hung in its shutdown."""
        self.stop(said=said)
        if self.workdir.exists():
            workdir.remove(self.workdir)
        # Out of sight - on a lossy mount between a power loss and the remount, its
        # holder removed after - the work directory cannot name its socket directory
        # any more (issue 19's power-loss run under SIGHUP left it in /tmp).
        workdir.remove_beside(self.socket_dir)

    def disk_usage(self) -> int:
        return disk_usage(self.datadir)


class ServerLost(ClusterError):
    """The server did not come back after a crash; its data directory and log are kept."""

    def __init__(self, message: str, *, datadir: Path | None, log: Path | None) -> None:
        where = (
            f"its data directory {datadir} and log {log} were kept for inspection"
            if datadir is not None
            else "it is not pgrig's server: look at its own log"
        )
        super().__init__(
            f"{message}; {where}",
            hint="read the end of the server log; remove the directory yourself when done"
            if datadir is not None
            else "start it again by hand",
        )
        self.datadir = datadir
        self.log = log
