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

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig.registry.shared import LoadHostsRun
from pgrig.results import typed
from pgrig.store import Store
from pgrig.workloads.tpcc.model import TpccRun
from test_cli import pgrig
from test_txlog import at_rank

pytestmark = [pytest.mark.netns_hosts(3), pytest.mark.cluster, pytest.mark.slow]


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
        f'scripts = ["{tmp_path / "get.sql"}"]\nclients = [2]\nduration = [3]\n'
        "rate = 200\ndefines = { n = 1000 }\n"
    )


def campaign(
    tmp_path: Path,
    inventory: Path,
    host: str = "h1",
    *,
    durations: str = "3",
    more: str = "",
    name: str = "remote",
    warmup: int = 0,
) -> Path:
    """The study ``name`` (a run cleans what killed runs of its own study left:
    tests running at once keep apart by their names)."""
    path = tmp_path / "remote.toml"
    path.write_text(
        f'[campaign]\nname = "{name}"\ninventory = "{inventory}"\nwarmup = {warmup}\n'
        f'[[target]]\nname = "db"\nhost = "{host}"\nload_hosts = ["h2", "h3"]\n'
        f'directory = "{tmp_path / "logs"}"\nprofile = "stock"\n'
        '[target.set]\nfsync = "off"\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        f"clients = [2]\nthreads = 1\nduration = [{durations}]\ncount = false\n"
        # The probes on the host: tests/test_remote_probes.py
        "[probes]\ntiming = false\nfsync = false\nfio = false\n" + more
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
    # Within the HdrHistogram's bucket of the exact nearest rank (0.1%).
    assert at_rank(multi.p50_ms, pooled, 50)
    assert at_rank(multi.p99_ms, pooled, 99)
    for h in multi.hosts:  # each host's own figures from its own log
        own = [
            int(line.split()[2]) for f in h.log_files for line in Path(f).read_text().splitlines()
        ]
        assert at_rank(h.p99_ms, own, 99)


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
    TPC-C (1 warehouse, 2 connections per host), 3 s each, through `pgrig run`;
    each run warmed up for 1 s from the same load hosts (``Context.clients``)."""
    results = tmp_path / "results"
    path = campaign(
        tmp_path, netns_lab.write_inventory(), more=TPCC + custom_workload(tmp_path), warmup=1
    )
    planned = pgrig("plan", path)
    assert planned.returncode == 0, planned.stderr
    assert "target db: host h1, load from h2, h3 (" in planned.stdout
    done = pgrig("run", path, "--results", results, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    with Store.open(results / "results.sqlite") as st:
        study = st.study("remote")
        records = {r.key: r for r in st.runs("remote")}
    assert not [k for k in records if "/probe/" in k], "[probes] all false"
    # The study's environment is its one server's, read on h1 when it started;
    # this machine's is not read (nothing recorded before the server needs it),
    # nor sampled idle (the runs are watched on h1: docs/architecture.md).
    assert "capturing the environment" not in done.stderr
    assert "sampling the idle machine" not in done.stderr
    assert study.environment is not None and study.environment.postgres is not None
    report = (results / "report-remote.md").read_text()
    assert "## Load hosts" in report

    # TPC-B select-only
    run = records["db/tpcb/s1/select-only/c2/d3/r1"]
    assert run.status == "ok" and run.result is not None, run.reason
    assert run.params["warmup"] == 1
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
            assert at_rank(stats.p99_ms, pooled, 99)
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

    # Read on each load host once, recorded per host: its pgbench, its CPUs, and
    # the -j it ran with - asked (TPC-B's threads = 1), else from its own CPUs.
    tpcb_hosts = typed(records["db/tpcb/s1/select-only/c2/d3/r1/hosts"], LoadHostsRun)
    assert tpcb_hosts is not None and tpcb_hosts.server_version
    for h in tpcb_hosts.hosts:
        assert h.pgbench and h.pgbench.startswith("pgbench (PostgreSQL)"), h
        assert h.cpus == os.cpu_count() and h.threads == 1, h  # the namespaces share its CPUs
    assert [h.threads for h in multi.hosts] == [min(2, os.cpu_count() or 1)] * 2
    assert "pgbench of another major" not in report
    # issue 40.16: in the report too, not in the export only; and the answer
    # counts the clients as the table does
    for h in tpcb_hosts.hosts:
        assert h.pgbench is not None
        cell = f"| {h.pgbench.rsplit(' ', 1)[-1]} ({h.cpus} CPUs, -j {h.threads}) |"
        assert f"| {h.host} |" in report and cell in report, cell
    assert "at 2 clients on each of 2 load hosts (4 in all)" in " ".join(report.split())

    assert study is not None and study.params["targets"][0]["host"] == "h1"
    # The server on h1 is stopped (its directory removed with it, by HostedServer).
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


def test_a_workload_that_cannot_run_from_load_hosts_is_refused_up_front(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    path = campaign(
        tmp_path, netns_lab.write_inventory(), more='[[workload]]\ntype = "durability"\n'
    )
    done = pgrig("run", path, "--results", tmp_path / "results")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "target db: workload type durability cannot run from load hosts yet" in done.stderr
    assert not (tmp_path / "results" / "results.sqlite").exists()
