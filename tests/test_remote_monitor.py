"""The monitor on a server's host reached over SSH tells its processes apart:
a CPU hog beside the server there is named among the others and the run is
disturbed, as on this machine (tests/test_monitor_interference.py).

The host is a network namespace with sshd (tests/hosts_fixture.py), the server
made there through its executor, pgbench started there over the same SSH
connection (pgrig's own on that host), the hog started there over SSH and
detached (nobody's child: another process's load). What a namespace cannot
show that a second machine would: it shares this machine's kernel, CPUs and
/proc, so "the host's other processes" are this machine's (this test process
and other tests' load among them, never pgrig's there), and its clock and boot
time are this machine's (a real host's differ: the reader's look carries its
own, ``procview.Snapshot``). What it does show is the whole path: one reader
started through the SSH executor, one line per sample read back, the server's
postmaster found from its data directory on the host, pgrig's processes there
found below its SSH connection, and the same meter and ledger as here. Under
the old strategy (``WholeHost``) ``others`` was None and ``disturbed`` None
whatever ran beside the server.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from disturbance import _Here
from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig import monitor
from pgrig.cluster.hosted import HostedServer, ServerSpec
from pgrig.conninfo import Conn
from pgrig.hosts import inventory, preflight
from pgrig.hosts.executor import Executor
from pgrig.monitor import interference
from pgrig.monitor.model import MonitorResult
from pgrig.monitor.sampling import ProcessesThere
from pgrig.pgsource import binaries
from test_monitor_interference import CPU_HOG, hog_name

pytestmark = [pytest.mark.netns_hosts(1), pytest.mark.cluster, pytest.mark.slow]

SECONDS = 2


@dataclass(frozen=True)
class _Server:
    ex: Executor
    conn: Conn
    pgbench: str


@pytest.fixture(scope="module")
def server(bins: binaries.PgBinaries, netns_lab: Lab) -> Iterator[_Server]:  # noqa: F811
    """A throwaway server on h1, admitting h1 itself (pgbench runs there) and
    this machine (the monitor's statistics connection)."""
    (host,) = inventory.load(netns_lab.write_inventory()).hosts.values()
    h1 = netns_lab.hosts[0]
    spec = ServerSpec(
        bin_dir=str(bins.bin_dir),
        address=h1.address,
        bins=bins,
        clients=(f"{h1.address}/32", f"{netns_lab.bridge_address}/32"),
        settings=(("fsync", "off"),),
    )
    with preflight.opened([host]) as (ex,), HostedServer(ex, spec) as made:
        conn = made.conn()
        pgbench = str(bins.bin_dir / "pgbench")
        ex.run([pgbench, "-i", "-s", "1", "-q", *conn.args()], timeout=300, env=conn.env())
        yield _Server(ex, conn, pgbench)


@contextlib.contextmanager
def hogs_on(ex: Executor, name: str, count: int) -> Iterator[list[int]]:
    """CPU hogs started on the host over SSH, detached (sh prints the PID and
    exits: no process of pgrig's is their parent), stopped by PID after
    checking their name there."""
    pids: list[int] = []
    detach = ["sh", "-c", '"$@" >/dev/null 2>&1 </dev/null & echo $!', "sh"]
    try:
        for _ in range(count):
            out = ex.run([*detach, "python3", "-c", CPU_HOG, name], timeout=30, what="hog")
            pids.append(int(out.stdout))
        deadline = time.monotonic() + 5
        while any(_comm(ex, p) != name for p in pids):
            assert time.monotonic() < deadline, "the hogs did not start"
            time.sleep(0.05)
        yield pids
    finally:
        for pid in pids:
            if _comm(ex, pid) == name:
                ex.signal(pid, signal.SIGKILL)


def _comm(ex: Executor, pid: int) -> str | None:
    done = ex.run(["cat", f"/proc/{pid}/comm"], timeout=30, check=False, what="cat")
    return done.stdout.strip() if done.ok else None


def watched_run(srv: _Server) -> MonitorResult:
    """A short select-only pgbench on the server's host, watched from here."""
    with monitor.Watch(
        _Here(Path("/var/tmp"), conn=srv.conn, host=srv.ex, sampling=ProcessesThere), interval=0.5
    ) as watch:
        srv.ex.run(
            [srv.pgbench, "-S", "-c", "2", "-j", "1", "-T", str(SECONDS), *srv.conn.args()],
            timeout=60 + SECONDS,
            env=srv.conn.env(),
        )
    return watch.result(None)


def _explain(mon: MonitorResult) -> str:
    return f"{mon.others} | {mon.disturbed} | {mon.notes}"


@pytest.mark.exclusive
def test_a_cpu_hog_on_the_servers_host_is_named_and_disturbs_the_run(server: _Server) -> None:
    name = hog_name("rhog")
    ncpu = len([w for w in server.ex.read_text("/proc/stat").split("\n") if w[:3] == "cpu"]) - 1
    with hogs_on(server.ex, name, ncpu):
        mon = watched_run(server)
    assert mon.others is not None, _explain(mon)
    assert name in [p.name for p in mon.others.top], _explain(mon)
    assert interference.is_disturbed(mon), _explain(mon)
    assert name in interference.disturbance(mon)
    assert mon.verdict.cause == "starved", mon.verdict  # named from the host's own evidence
    # told apart as on this machine: the server's processes found by their
    # postmaster there, pgbench (started over pgrig's SSH connection) as the client
    inside = [s for s in mon.samples if s.in_run]
    assert inside, _explain(mon)
    assert any((s.cpu.server or 0) > 0 for s in inside), [s.cpu for s in inside]
    assert any((s.cpu.client or 0) > 0 for s in inside), [s.cpu for s in inside]
    assert not any("postmaster was not found" in n for n in mon.notes), mon.notes


@pytest.mark.exclusive
def test_a_run_on_the_servers_host_without_the_hog_does_not_name_it(server: _Server) -> None:
    mon = watched_run(server)
    assert mon.others is not None, _explain(mon)  # the old strategy: None
    assert hog_name("rhog") not in [p.name for p in mon.others.top]
    # pgrig's own processes there (pgbench, the reader) are counted as such, not
    # as others' (by name the others may hold other tests' pgbench: this machine's)
    inside = [s for s in mon.samples if s.in_run]
    assert any((s.cpu.client or 0) > 0 for s in inside), [s.cpu for s in inside]
    assert any((s.cpu.pgrig or 0) > 0 for s in mon.samples), [s.cpu for s in mon.samples]
    for s in mon.samples:  # the split adds up to the host's busy CPU
        c = s.cpu
        parts = (c.server or 0) + (c.client or 0) + (c.pgrig or 0) + (c.kernel or 0)
        assert parts + (c.other or 0) + c.irq + c.steal >= c.busy - 0.5, s
