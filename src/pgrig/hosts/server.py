"""A throwaway PostgreSQL server on a host, made and run through its executor.

The seam the remote target kind (issue 17 part 1) will plug into: initdb as
the server's OS user, a generated superuser password (scram-sha-256, never
``trust`` over TCP), listening on the host's address only, admitting only the
networks named, started as a process pgrig holds by PID, stopped fast, and its
directory removed - only the one it made.
"""

from __future__ import annotations

import secrets
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from psycopg.conninfo import make_conninfo

from pgrig.cluster import profiles
from pgrig.conninfo import Conn
from pgrig.errors import ClusterError, HostUnusable
from pgrig.hosts import owner
from pgrig.hosts.executor import Executor, Started

SUPERUSER = "postgres"
OS_USER = "postgres"
READY_TIMEOUT_S = 60


@dataclass(frozen=True)
class ServerSpec:
    bin_dir: str  # on the host
    address: str  # the host's address the server listens on
    port: int = 5432
    clients: tuple[str, ...] = ()  # CIDRs admitted with scram-sha-256
    # Written into the data directory's pgrig.conf, included from postgresql.conf
    # (a profile rendered for the host, ``set.*`` over it), as a local cluster's.
    settings: tuple[tuple[str, str], ...] = ()
    header: str = ""  # pgrig.conf's first comment lines: where the settings came from


@dataclass(frozen=True)
class Workdir:
    """A directory pgrig made on a host, its owner record inside."""

    path: str
    record: owner.Owner


def make_workdir(ex: Executor) -> Workdir:
    """``/tmp/pgrig-server-*`` with its owner record: what ``pgrig hosts clean``
    judges. Refused unless the connection acts as root (the server is made as
    its OS user, and the probes' files removed, from here)."""
    if ex.run(["id", "-u"], timeout=30, what="id").stdout.strip() != "0":
        # Through the preflight, a sudo user's commands run as root; a
        # connection made without it may not.
        raise HostUnusable(
            f"host {ex.host.describe()}: a server is made there as root, and this "
            "connection is not root",
            hint=f"set ansible_user=root for {ex.name} at {ex.host.where}",
        )
    path = ex.make_tempdir("pgrig-server-")
    record = owner.Owner.mine("server")
    owner.write(ex, path, record)
    return Workdir(path, record)


class RemoteServer:
    """Use as a context manager: made and started on entry, stopped and removed on exit.
    Given a ``Workdir``, it is made there and the directory left to its maker."""

    def __init__(self, ex: Executor, spec: ServerSpec, workdir: Workdir | None = None) -> None:
        self.ex = ex
        self.spec = spec
        self._given = workdir
        self.workdir = workdir.path if workdir is not None else ""
        self.password = secrets.token_urlsafe(18)
        self._process: Started | None = None
        self._record: owner.Owner | None = None
        self._kept = False

    @property
    def datadir(self) -> str:
        return f"{self.workdir}/data"

    def conn(self, dbname: str = "postgres") -> Conn:
        return Conn(
            make_conninfo(
                host=self.spec.address,
                port=str(self.spec.port),
                user=SUPERUSER,
                dbname=dbname,
                password=self.password,
            )
        )

    def _as_server_user(self, ids: tuple[str, str], argv: Sequence[str]) -> list[str]:
        # setpriv execs (runuser forks): a started server's PID is the postmaster's.
        return ["setpriv", f"--reuid={ids[0]}", f"--regid={ids[1]}", "--init-groups", "--", *argv]

    def __enter__(self) -> RemoteServer:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        ex, spec = self.ex, self.spec
        home = self._given or make_workdir(ex)
        self.workdir, record = home.path, home.record
        uid = ex.run(["id", "-u", OS_USER], timeout=30, what="id").stdout.strip()
        gid = ex.run(["id", "-g", OS_USER], timeout=30, what="id").stdout.strip()
        ids = (uid, gid)
        ex.run(["chown", f"{uid}:{gid}", self.workdir], timeout=30, what="chown")
        ex.run(["chmod", "0755", self.workdir], timeout=30, what="chmod")
        pwfile = f"{self.workdir}/pw"
        ex.write_bytes(pwfile, self.password.encode() + b"\n", mode=0o600)
        ex.run(["chown", f"{uid}:{gid}", pwfile], timeout=30, what="chown")
        initdb = [
            f"{spec.bin_dir}/initdb",
            "-D",
            self.datadir,
            "-U",
            SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth-local=peer",
            "--auth-host=scram-sha-256",
            "--no-sync",
        ]
        ex.run(self._as_server_user(ids, initdb), timeout=300, what="initdb")
        ex.run(["rm", "-f", pwfile], timeout=30, what="rm")
        hba = "".join(f"host all all {cidr} scram-sha-256\n" for cidr in spec.clients)
        old = ex.read_text(f"{self.datadir}/pg_hba.conf")
        ex.write_bytes(f"{self.datadir}/pg_hba.conf", (old + hba).encode(), mode=0o600)
        ex.run(["chown", f"{uid}:{gid}", f"{self.datadir}/pg_hba.conf"], timeout=30, what="chown")
        self._configure(uid, gid)
        # pgrig's own, on the command line: over anything a profile could say.
        options = {
            "listen_addresses": spec.address,
            "port": str(spec.port),
            "unix_socket_directories": self.workdir,
            "password_encryption": "scram-sha-256",
        }
        argv = [f"{spec.bin_dir}/postgres", "-D", self.datadir]
        for key, value in options.items():
            argv += ["-c", f"{key}={value}"]
        self._process = ex.start(self._as_server_user(ids, argv))
        self._record = owner.with_pid(ex, self.workdir, record, self._process.pid)
        self._wait_ready()

    def _configure(self, uid: str, gid: str) -> None:
        """The settings into pgrig.conf, included from postgresql.conf."""
        conf = f"{self.datadir}/pgrig.conf"
        text = self.spec.header + profiles.render(dict(self.spec.settings))
        self.ex.write_bytes(conf, text.encode(), mode=0o600)
        main = f"{self.datadir}/postgresql.conf"
        old = self.ex.read_text(main)
        self.ex.write_bytes(main, (old + "\ninclude = 'pgrig.conf'\n").encode(), mode=0o600)
        self.ex.run(["chown", f"{uid}:{gid}", conf, main], timeout=30, what="chown")

    def _wait_ready(self) -> None:
        isready = [
            f"{self.spec.bin_dir}/pg_isready",
            "-h",
            self.spec.address,
            "-p",
            str(self.spec.port),
            "-t",
            "2",
        ]
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                done = self._process.wait(10, check=False)
                raise ClusterError(
                    f"the server on {self.ex.name} exited ({done.returncode}) while starting",
                    hint=done.stderr.strip()[-400:] or None,
                )
            if self.ex.run(isready, timeout=30, check=False, what="pg_isready").ok:
                return
            time.sleep(0.2)
        raise ClusterError(
            f"the server on {self.ex.name} is not ready after {READY_TIMEOUT_S} s",
            hint=f"its log is the stderr of {self.spec.bin_dir}/postgres on {self.ex.name}",
        )

    def keep(self) -> None:
        """Leave the server running past ``close`` (--keep): its owner record says
        so, and its password is left beside it for root on the host."""
        if self._process is None or self._process.poll() is not None or self._record is None:
            return
        self.ex.write_bytes(f"{self.workdir}/password", self.password.encode() + b"\n", 0o600)
        owner.write(self.ex, self.workdir, replace(self._record, kept=True))
        self._kept = True

    def close(self) -> None:
        """Fast shutdown (SIGINT), KILL if it lingers; then remove the directory pgrig made."""
        if self._kept:
            return
        if self._process is not None and self._process.poll() is None:
            self._process.signal(signal.SIGINT)
            self._process.wait(60, check=False)  # past 60 s: TERM, KILL, then ToolTimeout
        if self.workdir and self._given is None:
            self.ex.remove_tree(self.workdir)
            self.workdir = ""
