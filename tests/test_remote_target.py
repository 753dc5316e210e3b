"""The remote target kind through `pgrig run`: the server on h1, pgbench from h2
and h3 (network namespaces with sshd, tests/hosts_fixture.py).

The namespaces share this machine's CPUs, clock and filesystem: PostgreSQL is
"installed" on every host because it is here, and clock offsets are ~0 by
construction. What the test checks is the plumbing and the arithmetic: the
campaign's hosts are reached, the server is made there and removed after, the
load comes from both load hosts at one barrier, and the report's merged
p50/p99 are those of the pooled per-transaction logs, computed here anew.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from hosts_fixture import Lab, netns_lab, owned_by  # noqa: F401  (the fixture)
from pgrig.results import typed
from pgrig.store import Store
from pgrig.targets.remote import LoadHostsRun
from pgrig.workloads.tpcc.model import TpccRun
from test_cli import pgrig, spawn, wait_for

pytestmark = [pytest.mark.netns_hosts(3), pytest.mark.cluster, pytest.mark.slow]


def nearest_rank(values: list[int], pct: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


TPCC = (
    '[[workload]]\ntype = "tpcc"\nwarehouses = 1\njobs = 1\nconnections = 2\nthreads = 1\n'
    'duration = 3\nmodes = ["server"]\ncheck = "none"\n'
)


def custom_workload(tmp_path: Path) -> str:
    """A custom workload: its setup run from here, its script (with a -D variable)
    copied to the load hosts, -R 200 in total."""
    (tmp_path / "kv.sql").write_text(
        "DROP TABLE IF EXISTS kv;\n"
        "CREATE TABLE kv AS SELECT g AS k, md5(g::text) AS v FROM generate_series(1, 1000) g;\n"
    )
    (tmp_path / "get.sql").write_text("\\set k random(1, :n)\nSELECT v FROM kv WHERE k = :k;\n")
    return (
        f'[[workload]]\ntype = "custom"\nname = "kv"\nsetup = ["{tmp_path / "kv.sql"}"]\n'
        f'scripts = ["{tmp_path / "get.sql"}"]\nclients = [2]\nthreads = 1\nduration = [3]\n'
        "rate = 200\ndefines = { n = 1000 }\n"
    )


def campaign(
    tmp_path: Path, inventory: Path, host: str = "h1", *, durations: str = "3", more: str = ""
) -> Path:
    path = tmp_path / "remote.toml"
    path.write_text(
        f'[campaign]\nname = "remote"\ninventory = "{inventory}"\n'
        f'[[target]]\nname = "db"\nhost = "{host}"\nload_hosts = ["h2", "h3"]\n'
        f'directory = "{tmp_path / "logs"}"\nprofile = "stock"\n'
        '[target.set]\nfsync = "off"\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        f"clients = [2]\nthreads = 1\nduration = [{durations}]\ncount = false\n" + more
    )
    return path


def latencies(files: Sequence[str], script: int | None = None) -> list[int]:
    """The logged latencies (us) of pgbench -l files, of one script (its -f number) or all."""
    out: list[int] = []
    for f in files:
        for line in Path(f).read_text().splitlines():
            cols = line.split()
            if script is None or int(cols[3]) == script:
                out.append(int(cols[2]))
    return out


def pooled_latencies(multi: LoadHostsRun, script: int | None = None) -> list[int]:
    """Every host's logged latencies, pooled."""
    assert all(h.log_files for h in multi.hosts), "a host's per-transaction log was not copied"
    return [v for h in multi.hosts for v in latencies(h.log_files, script)]


def check_merged(multi: LoadHostsRun) -> None:
    """The merged row is the hosts' sum and their pooled logs' percentiles."""
    assert [h.host for h in multi.hosts] == ["h2", "h3"]
    assert all(h.tps > 0 for h in multi.hosts)
    assert multi.tps == pytest.approx(sum(h.tps for h in multi.hosts))
    pooled = pooled_latencies(multi)
    assert multi.samples == len(pooled) > 0
    assert multi.p50_ms == nearest_rank(pooled, 50) / 1000
    assert multi.p99_ms == nearest_rank(pooled, 99) / 1000
    for h in multi.hosts:  # each host's own figures from its own log
        own = [
            int(line.split()[2]) for f in h.log_files for line in Path(f).read_text().splitlines()
        ]
        assert h.p99_ms == nearest_rank(own, 99) / 1000


def report_rows(report: str, run: str, multi: LoadHostsRun, figure: bool = False) -> None:
    """The report's Load hosts rows of one run: a row per host, the bold merged row."""

    def cells(*values: float | None) -> list[str]:
        return ["-" if v is None else f"{v:,.0f}" for v in values] if figure else []

    for h in multi.hosts:
        row = [run, h.host, f"{h.tps:,.0f}", *cells(h.figure), f"{h.p50_ms:.3f}", f"{h.p99_ms:.3f}"]
        assert "| " + " | ".join(row) + " |" in report, row
    merged = [run, "all 2 (sum; pooled logs)", f"{multi.tps:,.0f}", *cells(multi.figure),
              f"{multi.p50_ms:.3f}", f"{multi.p99_ms:.3f}"]  # fmt: skip
    assert "| " + " | ".join(f"**{cell}**" for cell in merged) + " |" in report, merged
    assert f"spread {multi.start_spread_ms:.2f}" in report


def test_a_remote_target_runs_tpcb_and_tpcc_from_two_load_hosts(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Issue 17's suite test: server h1, load from h2 and h3, TPC-B select-only and
    TPC-C (1 warehouse, 2 connections per host), 3 s each, through `pgrig run`."""
    results = tmp_path / "results"
    path = campaign(tmp_path, netns_lab.write_inventory(), more=TPCC + custom_workload(tmp_path))
    planned = pgrig("plan", path)
    assert planned.returncode == 0, planned.stderr
    assert "target db: host h1, load from h2, h3 (" in planned.stdout
    done = pgrig("run", path, "--results", results, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    with Store.open(results / "results.sqlite") as st:
        study = st.study("remote")
        records = {r.key: r for r in st.runs("remote")}
    assert not [k for k in records if "/probe/" in k], "no probe of this machine's disk"
    report = (results / "report-remote.md").read_text()
    assert "## Load hosts" in report

    # TPC-B select-only
    run = records["db/tpcb/s1/select-only/c2/d3/r1"]
    assert run.status == "ok" and run.result is not None, run.reason
    multi = typed(records["db/tpcb/s1/select-only/c2/d3/r1/hosts"], LoadHostsRun)
    assert multi is not None and multi.figure_name is None
    check_merged(multi)
    assert run.result["tps"] == pytest.approx(multi.tps), "the run's tps is the hosts' sum"
    assert run.result["clients"] == 4, "2 clients on each of the 2 load hosts"
    assert run.result["latency"]["p99_ms"] == multi.p99_ms
    report_rows(report, "db/tpcb/s1/select-only/c2/d3/r1", multi, figure=True)

    # The verdict heard the load hosts: on this VM they share 2 busy CPUs, but
    # whether a run is client-bound depends on the load; the record says either way.
    monitor = records["db/tpcb/s1/select-only/c2/d3/r1/monitor"]
    assert monitor.status == "ok" and monitor.result is not None
    client_bound = monitor.result["verdict"]["cause"] == "client_host" or any(
        s.startswith("client-bound") for s in monitor.result["verdict"]["secondary"]
    )
    assert client_bound == (multi.client_bound is not None)

    # TPC-C: loaded once from here, driven from both load hosts.
    assert [k for k in records if k.startswith("db/tpcc/load")] == ["db/tpcc/load/w1"]
    tpcc = records["db/tpcc/run/server/c2"]
    assert tpcc.status == "ok" and tpcc.result is not None, tpcc.reason
    multi = typed(records["db/tpcc/run/server/c2/hosts"], LoadHostsRun)
    assert multi is not None and multi.figure_name == "tpmC"
    check_merged(multi)
    result = typed(tpcc, TpccRun)
    assert result is not None
    assert result.connections == 4, "2 connections on each of the 2 load hosts"
    assert result.tps == pytest.approx(multi.tps)
    assert all(h.figure and h.figure > 0 for h in multi.hosts)
    assert result.tpmc == pytest.approx(multi.figure) == sum(h.figure or 0 for h in multi.hosts)
    assert result.transactions == sum(t.transactions for t in result.types)
    for number, stats in enumerate(result.types):  # each type's percentiles, pooled
        pooled = pooled_latencies(multi, number)
        assert stats.samples == len(pooled)
        if pooled:
            assert stats.p99_ms == nearest_rank(pooled, 99) / 1000
    assert result.timeline and sum(p.tpm_total for p in result.timeline) > 0
    report_rows(report, "db/tpcc/run/server/c2", multi, figure=True)
    assert "| run | load host | tps | tpmC | p50 ms |" in report

    # A custom script from both load hosts, its rate shared between them.
    kv = records["db/kv/c2/d3/r1"]
    assert kv.status == "ok" and kv.result is not None, kv.reason
    multi = typed(records["db/kv/c2/d3/r1/hosts"], LoadHostsRun)
    assert multi is not None
    check_merged(multi)
    assert kv.result["statements_per_txn"] == 1, "counted from the script here"
    # -R 100 on each host, not 200 each: on this loaded VM a host may fall
    # behind its schedule, never ahead of it.
    assert 0 < kv.result["tps"] <= 200 * 1.2

    assert study is not None and study.params["targets"][0]["host"] == "h1"
    # The server on h1 is stopped (its directory removed with it, by RemoteServer).
    listing = subprocess.run(
        ["pgrep", "-f", f"listen_addresses={netns_lab.hosts[0].address}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert listing.stdout == "", "the remote server still runs"


def test_an_unknown_inventory_host_is_refused_before_anything_is_created(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    path = campaign(tmp_path, netns_lab.write_inventory(), host="db9")
    done = pgrig("run", path, "--results", results)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "'db9' is neither a host nor a group in the inventory" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (results / "results.sqlite").exists(), "nothing created"
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("fault", ["wrong key", "bad file"])
def test_an_unusable_inventory_is_refused_before_anything_is_created(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
    fault: str,
) -> None:
    """What test_hosts_cli.py and test_hosts_ssh.py check of `pgrig hosts`, through
    a campaign: a key the hosts refuse (exit 7), an inventory that cannot be read
    (exit 2), each named with its fix and nothing created."""
    inventory = tmp_path / "hosts.ini"
    if fault == "wrong key":
        other = tmp_path / "other_key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
            check=True,
            timeout=30,
        )
        inventory.write_text(
            netns_lab.inventory_ini().replace(str(netns_lab.client_key), str(other))
        )
        code, message = 7, f"host h1 (root@{netns_lab.hosts[0].address}:22) refused the key"
    else:
        inventory.write_text(netns_lab.inventory_ini() + "[load\n")
        code, message = 2, f"error: {inventory}:5: '[load' is not a section header"
    results = tmp_path / "results"
    done = pgrig("run", campaign(tmp_path, inventory), "--results", results)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]
    assert message in done.stderr and "hint: " in done.stderr
    assert "Traceback" not in done.stderr
    assert not (results / "results.sqlite").exists(), "nothing created"
    assert not (tmp_path / "logs").exists()


def _server_dir_of(pid: int) -> tuple[Path, int] | None:
    """The server directory a pgrig of ``pid`` made on a host, once its postmaster runs."""
    for d in Path("/tmp").glob("pgrig-server-*"):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads((d / ".pgrig-owner.json").read_text())
            if record["pid"] == pid and record["pids"]:
                return d, record["pids"][0]
    return None


def test_a_killed_run_is_cleaned_and_a_dying_load_host_fails_only_its_step(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    """kill -9 of pgrig with its server up on h1: the next run of the campaign stops
    that server and removes its directory; a dead pgrig's directory of another
    study is left and named. In that next run, kill -9 of h3's pgbench in the
    first measured run: that step is recorded failed naming h3, the next one (both
    hosts again) is measured, exit 6. (One test: each pgrig run costs half a minute.)"""
    path = campaign(tmp_path, netns_lab.write_inventory(), durations="8, 3")
    results = tmp_path / "results"
    other = Path(tempfile.mkdtemp(prefix="pgrig-server-", dir="/tmp"))
    gone = subprocess.Popen(["true"])
    gone.wait()
    (other / ".pgrig-owner.json").write_text(
        json.dumps({"controller": socket.gethostname(), "pid": gone.pid, "start": 1,
                    "created": 0.0, "kind": "server", "pids": [], "study": "another"})
    )  # fmt: skip
    killed = spawn("run", path, "--results", results)
    running: subprocess.Popen[str] | None = None
    try:
        workdir, postmaster = wait_for(
            lambda: _server_dir_of(killed.pid), timeout=180, what="the server on h1"
        )
        killed.kill()
        killed.communicate(timeout=30)  # its pipes closed too
        assert Path(f"/proc/{postmaster}").exists(), "the killed pgrig's server outlives it"
        running = spawn("run", path, "--results", results)
        found = wait_for(lambda: _both_running(netns_lab), timeout=240, what="pgbench on h2, h3")
        time.sleep(1)  # inside the measured run
        for pid in found["h3"]:
            os.kill(pid, signal.SIGKILL)
        out, err = running.communicate(timeout=300)
        out += err
        assert running.returncode == 6, out[-3000:]
        assert f"h1: removed {workdir} (its pgrig died)" in out
        assert not workdir.exists()
        assert not Path(f"/proc/{postmaster}").exists(), "its postmaster stopped"
        assert other.exists(), "another study's directory is left"
        assert f"{other} on h" in out and "`pgrig clean` removes it" in out
    finally:
        for p in (killed, running):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=30)
        shutil.rmtree(other, ignore_errors=True)

    with Store.open(results / "results.sqlite") as st:
        records = {r.key: r for r in st.runs("remote")}
    failed = records["db/tpcb/s1/select-only/c2/d8/r1"]
    assert failed.status == "failed"
    assert "pgbench failed on load host h3" in (failed.reason or "")
    assert "db/tpcb/s1/select-only/c2/d8/r1/hosts" not in records, "no per-host figures"
    after = records["db/tpcb/s1/select-only/c2/d3/r1"]
    assert after.status == "ok", after.reason
    multi = typed(records["db/tpcb/s1/select-only/c2/d3/r1/hosts"], LoadHostsRun)
    assert multi is not None and [h.host for h in multi.hosts] == ["h2", "h3"]
    assert "pgbench failed on load host h3" in (results / "report-remote.md").read_text()
    assert netns_lab.processes("pgbench") == {}


def test_a_workload_that_cannot_run_from_load_hosts_is_refused_up_front(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    path = campaign(
        tmp_path, netns_lab.write_inventory(), more='[[workload]]\ntype = "basebackup"\n'
    )
    done = pgrig("run", path, "--results", tmp_path / "results")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "target db: workload type basebackup cannot run from load hosts yet" in done.stderr
    assert not (tmp_path / "results" / "results.sqlite").exists()


def _both_running(lab: Lab) -> dict[str, list[int]] | None:  # noqa: F811
    """The load hosts' pgbench processes once both run (the measured run began)."""
    found = lab.processes("pgbench")
    return found if {"h2", "h3"} <= set(found) else None


def test_ctrl_c_stops_the_load_hosts_pgbench(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Ctrl-C to pgrig during a measured run from two load hosts: both pgbench
    processes and the server on h1 stopped, their directories removed, exit 130.
    (SIGTERM takes the same path, pgrig.errors.Signalled: it is tested on
    run_pgbench itself in test_hosts_load.py, and its exit code 143 in test_harness_faults.py.)"""
    signum, code = signal.SIGINT, 130
    results = tmp_path / "results"
    path = campaign(tmp_path, netns_lab.write_inventory(), durations="60")
    running = spawn("run", path, "--results", results)
    try:
        wait_for(lambda: _both_running(netns_lab), timeout=240, what="pgbench on h2, h3")
        time.sleep(1)
        stopped = time.monotonic()
        running.send_signal(signum)
        out, err = running.communicate(timeout=120)
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate(timeout=30)
    assert running.returncode == code, out[-3000:] + err[-3000:]
    assert time.monotonic() - stopped < 60, "stopped, not waited for"
    assert "Traceback" not in err
    assert netns_lab.processes("pgbench") == {}, "a load host's pgbench outlived pgrig"
    assert netns_lab.processes("postgres") == {}, "the server on h1 outlived pgrig"
    left = [d for d in Path("/tmp").glob("pgrig-*") if owned_by(d, running.pid)]
    assert left == [], "directories of the stopped pgrig left on the hosts"
