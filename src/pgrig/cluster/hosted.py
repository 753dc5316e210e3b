"""A throwaway PostgreSQL server on a host, made and run through its executor.

The same lifecycle as the cluster on this machine - one ``Postmaster``
(``pgrig.cluster.postmaster``) over the host's executor, as the cluster's runs
over ``LocalExecutor``:
initdb with the target's ``[target.initdb]`` (``initdb_options``: encoding,
locale, WAL segment size, checksums, ``--waldir``), the profile in pgrig.conf,
start, wait ready, revive after a crash (``Server``), tablespaces in
directories it makes, keep or remove - only what it made (``Made``). What
differs is data, its ``Access``: the server listens on the host's address with
a generated superuser password (scram-sha-256, never ``trust`` over TCP) and
admits only the networks named; and where it lives, ``/tmp/pgrig-server-*``
with an owner record (``pgrig.hosts.owner``). Nothing here asks which host it
is on: over ``LocalExecutor`` it is made on this machine the same way.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pgrig.cluster.postmaster import Access, InitdbOptions, Made, Postmaster, create_tablespace
from pgrig.conninfo import Conn
from pgrig.errors import HostUnusable
from pgrig.hosts import owner
from pgrig.hosts.executor import Executor, reconnect_s
from pgrig.hosts.owner import Workdir
from pgrig.pgsource.binaries import PgBinaries

OS_USER = "postgres"
READY_TIMEOUT_S = 60


@dataclass(frozen=True)
class ServerSpec:
    bin_dir: str  # on the host
    address: str  # the host's address the server listens on
    bins: PgBinaries  # this machine's, of the host's major: what initdb is told
    port: int = 5432
    clients: tuple[str, ...] = ()  # CIDRs admitted with scram-sha-256
    # Written into the data directory's pgrig.conf, included from postgresql.conf
    # (a profile rendered for the host, ``set.*`` over it), as a local cluster's.
    settings: tuple[tuple[str, str], ...] = ()
    header: str = ""  # pgrig.conf's first comment lines: where the settings came from
    initdb: InitdbOptions = InitdbOptions()
    wal_directory: str | None = None  # a directory on the host: the WAL goes below it


def make_workdir(ex: Executor) -> Workdir:
    """``/tmp/pgrig-server-*`` with its owner record: what ``pgrig hosts clean``
    judges. Refused unless the connection acts as root (the server is made as
    its OS user, and the probes' files removed, from here)."""
    if not ex.as_root():
        raise HostUnusable(
            f"host {ex.host.describe()}: a server is made there as root, and this "
            "connection is not root",
            hint=f"set ansible_user=root for {ex.name} at {ex.host.where}",
        )
    return owner.make(ex, "server")


class HostedServer(Made):
    """Use as a context manager: made and started on entry, stopped and removed on exit.
    Given a ``Workdir``, it is made there and the directory left to its maker (the
    directories it made elsewhere - WAL, tablespaces - it removes itself)."""

    # Where it is, once its work directory is known (``_made_in``).
    home: Workdir | None = None
    workdir = ""
    datadir: str
    logfile: str  # the server's log on its host (``pg_ctl -l``)
    access: Access

    def __init__(self, ex: Executor, spec: ServerSpec, workdir: Workdir | None = None) -> None:
        self.ex = ex
        self.spec = spec
        self._given = workdir
        self.password = secrets.token_urlsafe(18)
        self._extra: list[str] = []  # directories made outside the work directory
        self._kept = False
        if workdir is not None:
            self._made_in(workdir)

    def _made_in(self, home: Workdir) -> None:
        """Its paths and its ``Access`` in ``home``: its address with the password
        and scram for the networks named; peer on its socket, in the work directory
        (root there, as the server's user)."""
        spec = self.spec
        self.home, self.workdir = home, home.path
        self.datadir = f"{home.path}/data"
        self.logfile = f"{home.path}/server.log"
        self.access = Access(
            home.path, spec.port, spec.address, self.password, local_auth="peer",
            host_auth="scram-sha-256", clients=spec.clients, private_socket=False, pinned=True,
        )  # fmt: skip

    def conn(self, dbname: str = "postgres") -> Conn:
        return self.access.conn(dbname).guarded(name for name, _ in self.spec.settings)

    def __enter__(self) -> HostedServer:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        except HostUnusable:
            if exc[0] is None:
                raise
            # the error on its way out says it first (the step that found the host away)

    def _run(self, argv: Sequence[str], what: str) -> None:
        self.ex.run(argv, timeout=30, what=what)

    def _make_dir(self, path: str) -> str:
        """A new directory for the server's user; refused if it exists (never
        someone else's); removed with the server."""
        assert self.home is not None, "made in its work directory"
        self._run(["mkdir", "-m", "0700", "--", path], "mkdir")
        self._extra.append(path)
        # Marked and named in the owner record: after a kill -9 of pgrig, `pgrig
        # clean --inventory` removes it with the work directory.
        self.home.made_beside(path)
        self._run(["chown", "{}:{}".format(*self.ex.user_ids(OS_USER)), "--", path], "chown")
        return path

    def _create(self) -> None:
        ex, spec = self.ex, self.spec
        home = self.home
        if home is None:
            home = make_workdir(ex)
            self._made_in(home)
        uid, gid = ex.user_ids(OS_USER)
        # install -d on the directory mktemp made: its owner and mode in one command.
        ex.run(["install", "-d", "-o", uid, "-g", gid, "-m", "0755", "--", self.workdir],
               timeout=30, what="install")  # fmt: skip
        opts = spec.initdb
        if spec.wal_directory is not None:
            name = Path(self.workdir).name
            holder = self._make_dir(f"{spec.wal_directory.rstrip('/')}/{name}-wal")
            opts = replace(opts, waldir=Path(holder) / "pg_wal")
        self._pm = Postmaster(
            ex,
            bin_dir=spec.bin_dir,
            datadir=self.datadir,
            logfile=self.logfile,
            user=OS_USER,
            access=self.access,
        )
        self._pm.on_start = home.started  # each start's postmaster, into the owner record
        self._pm.initdb(opts, spec.bins, sync=False)
        self._pm.configure(dict(spec.settings), spec.bins.version_num, spec.header)
        self._pm.start(READY_TIMEOUT_S)

    # -- a restart with other settings (``pgrig.cluster.loadwal.Restartable``) --

    @property
    def settings(self) -> dict[str, str]:
        """The profile's settings, as its pgrig.conf holds them."""
        return dict(self.spec.settings)

    @property
    def bins(self) -> PgBinaries:
        return self.spec.bins

    # -- tablespaces, keep, close -------------------------------------------

    def create_tablespace(self, name: str, parent: str) -> str:
        """CREATE TABLESPACE in a new directory under ``parent`` on the host, named
        after the work directory (two servers may share ``parent``); the directory
        goes with the server."""
        location = self._make_dir(f"{parent.rstrip('/')}/{Path(self.workdir).name}-{name}")
        return create_tablespace(self.conn(), name, location)

    def keep(self) -> None:
        """Leave the server running past ``close`` (--keep): its owner record says
        so, and its password is left beside it for root on the host."""
        if not self.running() or self.home is None:
            return
        self.ex.write_bytes(f"{self.workdir}/password", self.password.encode() + b"\n", 0o600)
        self.home.keep()
        self._kept = True

    def close(self) -> None:
        """Stop it (fast, then harder); then remove the directories pgrig made."""
        if self._kept:
            return
        # Its host's SSH lost during the last step: reached again (bounded), else
        # `stop` read a closed connection as "not running" and left it running.
        if self.ex.connection_lost() and not self.ex.reconnect(bound := reconnect_s()):
            raise HostUnusable(
                f"lost the SSH connection to {self.ex.name} and could not reconnect in "
                f"{bound:g} s: the server in {self.workdir} there may still run",
                hint=f"once {self.ex.name} answers (pgrig hosts check -i FILE): pgrig clean "
                "--inventory FILE stops it and removes its directory (its pgrig is gone)",
            )
        self.stop(60)  # fast, immediate, then QUIT and KILL
        for path in reversed(self._extra):
            self.ex.remove_tree(path)
        self._extra.clear()
        if self.workdir and self._given is None:
            self.ex.remove_tree(self.workdir)
            self.workdir = ""
