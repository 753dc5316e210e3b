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
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig.results import typed
from pgrig.store import Store
from pgrig.targets.remote import LoadHostsRun
from test_cli import pgrig, spawn, wait_for

pytestmark = [pytest.mark.netns_hosts(3), pytest.mark.cluster, pytest.mark.slow]


def nearest_rank(values: list[int], pct: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def campaign(tmp_path: Path, inventory: Path, host: str = "h1") -> Path:
    path = tmp_path / "remote.toml"
    path.write_text(
        f'[campaign]\nname = "remote"\ninventory = "{inventory}"\n'
        f'[[target]]\nname = "db"\nhost = "{host}"\nload_hosts = ["h2", "h3"]\n'
        f'directory = "{tmp_path / "logs"}"\nprofile = "stock"\n'
        '[target.set]\nfsync = "off"\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [2]\nthreads = 1\nduration = 3\ncount = false\n"
    )
    return path


def test_a_remote_target_runs_tpcb_from_two_load_hosts(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    path = campaign(tmp_path, netns_lab.write_inventory())
    planned = pgrig("plan", path)
    assert planned.returncode == 0, planned.stderr
    assert "target db: host h1, load from h2, h3 (" in planned.stdout
    done = pgrig("run", path, "--results", results, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    with Store.open(results / "results.sqlite") as st:
        study = st.study("remote")
        records = {r.key: r for r in st.runs("remote")}
    assert not [k for k in records if "/probe/" in k], "no probe of this machine's disk"
    run = records["db/tpcb/s1/select-only/c2/d3/r1"]
    hosts_rec = records["db/tpcb/s1/select-only/c2/d3/r1/hosts"]
    assert run.status == "ok" and run.result is not None, run.reason
    multi = typed(hosts_rec, LoadHostsRun)
    assert multi is not None
    assert [h.host for h in multi.hosts] == ["h2", "h3"]
    assert all(h.tps > 0 for h in multi.hosts)
    assert multi.tps == pytest.approx(sum(h.tps for h in multi.hosts))
    assert run.result["tps"] == pytest.approx(multi.tps), "the run's tps is the hosts' sum"
    assert run.result["clients"] == 4, "2 clients on each of the 2 load hosts"

    # The merged percentiles are those of the pooled logs, computed here anew.
    pooled: list[int] = []
    for h in multi.hosts:
        assert h.log_files, f"{h.host}: no per-transaction log copied"
        for f in h.log_files:
            pooled += [int(line.split()[2]) for line in Path(f).read_text().splitlines()]
    assert multi.samples == len(pooled) > 0
    assert multi.p50_ms == nearest_rank(pooled, 50) / 1000
    assert multi.p99_ms == nearest_rank(pooled, 99) / 1000
    assert run.result["latency"]["p99_ms"] == multi.p99_ms

    # The verdict heard the load hosts: on this VM they share 2 busy CPUs, but
    # whether a run is client-bound depends on the load; the record says either way.
    monitor = records["db/tpcb/s1/select-only/c2/d3/r1/monitor"]
    assert monitor.status == "ok" and monitor.result is not None
    client_bound = monitor.result["verdict"]["cause"] == "client_host" or any(
        s.startswith("client-bound") for s in monitor.result["verdict"]["secondary"]
    )
    assert client_bound == (multi.client_bound is not None)

    assert study is not None and study.params["targets"][0]["host"] == "h1"
    report = (results / "report-remote.md").read_text()
    assert "## Load hosts" in report
    for h in multi.hosts:
        assert f"| {h.host} | {h.tps:,.0f} | {h.p50_ms:.3f} | {h.p99_ms:.3f} |" in report
    merged = ("all 2 (sum; pooled logs)", f"{multi.tps:,.0f}", f"{multi.p50_ms:.3f}",
              f"{multi.p99_ms:.3f}")  # fmt: skip
    assert "| " + " | ".join(f"**{cell}**" for cell in merged) + " |" in report, "the merged row"
    assert f"spread {multi.start_spread_ms:.2f}" in report

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


def _server_dir_of(pid: int) -> tuple[Path, int] | None:
    """The server directory a pgrig of ``pid`` made on a host, once its postmaster runs."""
    for d in Path("/tmp").glob("pgrig-server-*"):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads((d / ".pgrig-owner.json").read_text())
            if record["pid"] == pid and record["pids"]:
                return d, record["pids"][0]
    return None


def test_a_run_cleans_what_its_killed_run_left_on_the_hosts(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    """kill -9 of pgrig with its server up on h1: the next run of the campaign stops
    that server and removes its directory; a dead pgrig's directory of another
    study is left and named."""
    path = campaign(tmp_path, netns_lab.write_inventory())
    results = tmp_path / "results"
    other = Path(tempfile.mkdtemp(prefix="pgrig-server-", dir="/tmp"))
    gone = subprocess.Popen(["true"])
    gone.wait()
    (other / ".pgrig-owner.json").write_text(
        json.dumps({"controller": socket.gethostname(), "pid": gone.pid, "start": 1,
                    "created": 0.0, "kind": "server", "pids": [], "study": "another"})
    )  # fmt: skip
    killed = spawn("run", path, "--results", results)
    try:
        workdir, postmaster = wait_for(
            lambda: _server_dir_of(killed.pid), timeout=180, what="the server on h1"
        )
        killed.kill()
        killed.communicate(timeout=30)  # its pipes closed too
        assert Path(f"/proc/{postmaster}").exists(), "the killed pgrig's server outlives it"
        done = pgrig("run", path, "--results", results, timeout=600)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-3000:]
        assert f"h1: removed {workdir} (its pgrig died)" in out
        assert not workdir.exists()
        assert not Path(f"/proc/{postmaster}").exists(), "its postmaster stopped"
        assert other.exists(), "another study's directory is left"
        assert f"{other} on h" in out and "`pgrig clean` removes it" in out
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.communicate(timeout=30)
        shutil.rmtree(other, ignore_errors=True)


def test_a_workload_that_cannot_run_from_load_hosts_is_refused_up_front(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    path = campaign(tmp_path, netns_lab.write_inventory())
    path.write_text(path.read_text() + '[[workload]]\ntype = "tpcc"\n')
    done = pgrig("run", path, "--results", tmp_path / "results")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "target db: workload type tpcc cannot run from load hosts yet" in done.stderr
    assert not (tmp_path / "results" / "results.sqlite").exists()
