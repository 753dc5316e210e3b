"""A PostgreSQL server on a namespace host, for the hosts tests and bench/hosts_load.py."""

from __future__ import annotations

import contextlib
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from pgrig import proc
from pgrig.cluster import binaries, profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.hosts.executor import Executor
from pgrig.tools.pgbench.init import InitOptions, run_init


@contextlib.contextmanager
def remote_server(
    bins: binaries.PgBinaries, server_host: Executor, address: str, base: Path
) -> Iterator[Conn]:
    """A pgrig throwaway cluster made under ``base`` (scale-1 pgbench tables), started
    on ``server_host`` over SSH, reachable only on ``address`` with scram-sha-256 and a
    generated password."""
    c = Cluster.create(bins, base / "work", study="hosts", os_user=server_os_user())
    server = None
    try:
        c.initdb(InitdbOptions())
        c.configure(profiles.load("stock").with_overrides({"fsync": "off"}))
        c.start()
        password = secrets.token_urlsafe(18)
        local = Conn.socket(str(c.socket_dir), c.port, SUPERUSER, "postgres")
        with psycopg.connect(local.conninfo(), autocommit=True) as db:
            db.execute("SET password_encryption = 'scram-sha-256'")
            db.execute(f"ALTER ROLE {SUPERUSER} PASSWORD '{password}'")
        run_init(bins.bin_dir, local, InitOptions(scale=1), timeout=300)
        c.stop()
        subnet = address.rsplit(".", 1)[0] + ".0/24"
        (c.datadir / "pg_hba.conf").write_text(
            f"local all all trust\nhost all all {subnet} scram-sha-256\n"
        )
        user = c.os_user or proc.OsUser.lookup("postgres")
        server = server_host.start(
            [
                # setpriv execs (runuser forks): the PID is the postmaster's.
                "setpriv",
                f"--reuid={user.uid}",
                f"--regid={user.gid}",
                "--init-groups",
                "--",
                str(bins.bin_dir / "postgres"),
                "-D",
                str(c.datadir),
                "-c",
                f"listen_addresses={address}",
                "-c",
                f"port={c.port}",
            ]
        )
        conn = Conn(
            make_conninfo(
                host=address,
                port=str(c.port),
                user=SUPERUSER,
                dbname="postgres",
                password=password,
            )
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(conn.conninfo()).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield conn
    finally:
        if server is not None:
            server.signal(signal.SIGINT)  # fast shutdown
            server.wait(60, check=False)
        c.destroy()
