"""Load from two hosts against a server on a third (network namespaces with sshd).

The server is a pgrig throwaway cluster started over SSH on h1, listening on
h1's address only, with scram-sha-256 and a generated password; h2 and h3 run
pgbench select-only through the waiter's barrier. The namespaces share this
machine's CPUs, clock and filesystem: the clock offsets are ~0 by
construction (the test checks they are measured small, not that clocks
agree), and the start spread is what the barrier achieves on one kernel.
"""

from __future__ import annotations

import math
import secrets
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conftest import make_disk_dir
from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig import proc
from pgrig.cluster import binaries, profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.hosts import inventory, load, preflight
from pgrig.hosts.executor import Executor
from pgrig.tools.pgbench.init import InitOptions, run_init
from pgrig.tools.pgbench.run import RunOptions

pytestmark = [pytest.mark.netns_hosts(3), pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def executors(netns_lab: Lab) -> Iterator[list[Executor]]:  # noqa: F811
    hosts = list(inventory.load(netns_lab.write_inventory()).hosts.values())
    with preflight.opened(hosts) as opened:
        yield opened


@pytest.fixture(scope="module")
def remote_server(
    bins: binaries.PgBinaries,
    executors: list[Executor],
    netns_lab: Lab,  # noqa: F811
) -> Iterator[Conn]:
    """A throwaway cluster made here, started on h1 over SSH, reachable on h1's address."""
    base = make_disk_dir("pgrig-test-hosts-server-")
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
        h1 = netns_lab.hosts[0]
        subnet = h1.address.rsplit(".", 1)[0] + ".0/24"
        (c.datadir / "pg_hba.conf").write_text(
            f"local all all trust\nhost all all {subnet} scram-sha-256\n"
        )
        user = c.os_user or proc.OsUser.lookup("postgres")
        server = executors[0].start(
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
                f"listen_addresses={h1.address}",
                "-c",
                f"port={c.port}",
            ]
        )
        conn = Conn(
            make_conninfo(
                host=h1.address,
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
        shutil.rmtree(base, ignore_errors=True)


def nearest_rank(values: list[int], pct: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def test_server_refuses_a_wrong_password(remote_server: Conn) -> None:
    wrong = remote_server.dsn.replace("password=", "password=x")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(Conn(wrong).conninfo()).close()


def test_two_load_hosts_merge_exactly(
    bins: binaries.PgBinaries, executors: list[Executor], remote_server: Conn, tmp_path: Path
) -> None:
    opts = RunOptions(
        mode="select-only",
        clients=2,
        threads=1,
        duration_s=3,
        transaction_log=True,
        statement_latencies=False,
    )
    result = load.run_pgbench(executors[1:], str(bins.bin_dir), remote_server, opts, tmp_path)
    assert [h.host for h in result.hosts] == ["h2", "h3"]
    assert [o.host for o in result.offsets] == ["h2", "h3"]
    for off in result.offsets:  # one kernel, one clock: measured near 0
        assert abs(off.offset_ms) <= off.uncertainty_ms + 1.0
    assert result.start_spread_ms < 10.0, result.describe()
    assert result.tps == pytest.approx(sum(h.pgbench.tps for h in result.hosts))
    for h in result.hosts:
        assert h.pgbench.tps > 0 and h.latency is not None
        assert h.latency.samples == h.pgbench.transactions
    # The merged percentiles are those of the pooled logs, computed here anew.
    pooled: list[int] = []
    for h in result.hosts:
        for f in h.log_files:
            pooled += [int(line.split()[2]) for line in Path(f).read_text().splitlines()]
    assert result.latency is not None
    assert (
        result.latency.samples == len(pooled) == sum(h.pgbench.transactions for h in result.hosts)
    )
    assert result.latency.p50_ms == nearest_rank(pooled, 50) / 1000
    assert result.latency.p99_ms == nearest_rank(pooled, 99) / 1000
    # ... and not any mean of the hosts' own p99s (they differ, so this can fail).
    assert "started within" in result.describe()
