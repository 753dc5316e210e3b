"""``listen = "tcp"``: the throwaway cluster listens on 127.0.0.1 and the
clients come over TCP with a password (seeds 001 and 003 drove their servers
over the network); without it, the private unix socket only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from pgrig.cluster import profiles, workdir
from pgrig.cluster.server import Cluster, InitdbOptions, server_os_user
from pgrig.pgsource import binaries
from pgrig.store import Store


def _campaign(disk_dir: Path, listen: str) -> Path:
    camp = disk_dir / f"{listen}.toml"
    camp.write_text(
        f'[campaign]\nname = "{listen}"\nmonitor = false\n'
        f'[[target]]\nname = "t"\ndirectory = "{disk_dir}"\nlisten = "{listen}"\n'
        '[target.set]\nlog_connections = "on"\n'
        "[probes]\ntiming = false\nfsync = false\nfio = false\n"
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [2]\nduration = 1\n"
    )
    return camp


def _run(camp: Path, results: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgrig", "run", str(camp), "--results", str(results), "--keep"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("listen", ["tcp", "socket"])
def test_pgbench_comes_over_tcp_only_when_asked(disk_dir: Path, listen: str) -> None:
    done = _run(_campaign(disk_dir, listen), disk_dir / "r")
    assert done.returncode == 0, done.stderr
    (work,) = disk_dir.glob(f"pgrig-{listen}*")
    try:
        log = (work / "server.log").read_text()
        with Store.open(disk_dir / "r" / "results.sqlite") as store:
            (study,) = store.studies()
            runs = [r for r in store.runs(study.id) if r.kind == "pgbench_run"]
    finally:
        workdir.remove(work)
    assert runs and all(r.status == "ok" for r in runs), [r.reason for r in runs]
    # log_connections: where each of pgbench's connections came from.
    pgbench = [line for line in log.splitlines() if "application_name=pgbench" in line]
    received = [line for line in log.splitlines() if "connection received: host=" in line]
    tcp = [line for line in received if "host=127.0.0.1" in line]
    assert len(pgbench) >= 2, log[-2000:]
    if listen == "tcp":
        assert len(tcp) >= len(pgbench), log[-2000:]
        assert (
            "clients over TCP to 127.0.0.1"
            in (disk_dir / "r").joinpath(f"report-{listen}.md").read_text()
        )
    else:
        assert tcp == [] and all("host=[local]" in line for line in received)


def test_a_tcp_cluster_wants_its_password(bins: binaries.PgBinaries, disk_dir: Path) -> None:
    os_user = server_os_user()
    cluster = Cluster.create(bins, disk_dir / "pgrig-tcp-check", study="t", os_user=os_user,
                             tcp=True)  # fmt: skip
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("stock"))
        cluster.start()
        conn = cluster.conn("postgres")
        with conn.connect() as db:
            row = db.execute("select inet_client_addr()::text").fetchone()
        assert row is not None and row[0].startswith("127.0.0.1")
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(
                host="127.0.0.1", port=cluster.port, user="postgres", dbname="postgres",
                password="wrong", connect_timeout=10,
            ).close()  # fmt: skip
    finally:
        cluster.destroy()


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ('listen = "udp"', "'udp' is not a way to listen"),
        ('dsn = "host=/tmp"\nlisten = "tcp"', "listen apply only to a cluster pgrig creates"),
    ],
)
def test_listen_refuses_what_it_cannot_do(tmp_path: Path, target: str, says: str) -> None:
    camp = tmp_path / "c.toml"
    camp.write_text(
        f'[campaign]\nname = "c"\n[[target]]\nname = "t"\ndirectory = "{tmp_path}"\n{target}\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nclients = [1]\nduration = 1\n'
    )
    done = subprocess.run([sys.executable, "-m", "pgrig", "plan", str(camp)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
