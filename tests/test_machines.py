"""Many machines in one study (issue 17 part 7): two namespace hosts, each with
its own throwaway server and pgbench on the server's own host (seed 000), run
at once by one `pgrig run` of one campaign file; one store, one report with
seed 000's side-by-side table and each machine's environment read on it.

The namespaces (tests/hosts_fixture.py) share this VM's kernel, CPUs and
filesystem: the two "machines" are the same hardware, so the test checks
where each figure came from (the inventory host, its address, its data
directory), not that the machines differ in CPU or memory.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig.environment.remote import capture_on
from pgrig.hosts.local import LocalExecutor
from pgrig.monitor.hosts import LoadHostSample, LoadHostWatch, client_bound
from pgrig.monitor.verdict import CAUSES
from pgrig.store import Store
from test_cli import pgrig, spawn, wait_for
from test_report_golden import four_targets

CAMPAIGN = """\
[campaign]
name = "machines"
inventory = "{inventory}"
concurrent = true
[[target]]
name = "a"
host = "h1"
profile = "stock"
[target.set]
fsync = "off"
[[target]]
name = "b"
host = "h2"
profile = "stock"
[target.set]
fsync = "off"
[[workload]]
type = "tpcb"
scales = [1]
modes = ["select-only"]
clients = [2]
threads = 1
duration = 3
count = false
[probes]
timing = false
fsync = false
fio = false
"""


@pytest.mark.netns_hosts(2)
@pytest.mark.cluster
@pytest.mark.slow
def test_two_machines_compared_in_one_command(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    path = tmp_path / "machines.toml"
    path.write_text(CAMPAIGN.format(inventory=netns_lab.write_inventory()))
    results = tmp_path / "results"
    planned = pgrig("plan", path)
    assert planned.returncode == 0, planned.stderr
    assert "target a: host h1, load from the same host (" in planned.stdout
    assert "less with concurrent = true: each point runs on the 2 targets at once" in (
        " ".join(planned.stdout.split())
    )
    done = pgrig("run", path, "--results", results, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    with Store.open(results / "results.sqlite") as st:
        study = st.study("machines")
        records = {r.key: r for r in st.runs("machines")}
    assert study is not None
    runs = {t: records[f"{t}/tpcb/s1/select-only/c2/d3/r1"] for t in ("a", "b")}
    for t, run in runs.items():
        assert run.status == "ok" and run.result is not None, (t, run.reason)
        assert run.result["tps"] > 0
        assert records[f"{t}/tpcb/s1/select-only/c2/d3/r1/hosts"].result is not None

    # Each machine's environment was read on it, through its executor.
    h1, h2 = netns_lab.hosts[0], netns_lab.hosts[1]
    envs = study.target_environments
    assert (envs["a"].host, envs["a"].address) == ("h1", h1.address)
    assert (envs["b"].host, envs["b"].address) == ("h2", h2.address)
    for t in ("a", "b"):
        env = envs[t]
        assert env.postgres is not None and env.postgres.version.startswith("15")
        assert env.cpu.logical_cpus >= 1 and env.memory_bytes > 0
        assert env.filesystems and env.filesystems[0].path.startswith("/tmp/pgrig-server-")
        assert "postgres" in env.tools

    # The monitor sampled each server's host over SSH, on pgbench's time axis.
    for t in ("a", "b"):
        mon = records[f"{t}/tpcb/s1/select-only/c2/d3/r1/monitor"]
        assert mon.status == "ok" and mon.result is not None, mon.reason
        host = "h1" if t == "a" else "h2"
        assert any(f"the server's host {host}'s" in n for n in mon.result["notes"])
        inside = [s for s in mon.result["samples"] if s["in_run"]]
        # On pgbench's time axis: samples inside the 3-s run. A sample a second is
        # the aim, not judged here: over SSH at load 20 (ci30, ci31) a read took
        # longer and one came inside, and a host's monitor cannot say who else
        # took its CPU (its /proc is read whole), so it cannot excuse itself.
        assert inside, "samples inside the 3 s run"
        assert all(s["cpu"]["server"] is None for s in inside), "not attributed there"

    # At once: the two measured runs overlapped in time.
    a, b = runs["a"], runs["b"]
    assert a.started_at <= b.finished_at and b.started_at <= a.finished_at

    report = (results / "report-machines.md").read_text()
    head = "| Test Case | a (baseline) | b | b vs a |"
    assert head in report
    table = report[report.index(head) :].split("\n\n")[0]
    assert f"| Machine | h1 ({h1.address}), hostname " in table
    assert f"| h2 ({h2.address}), hostname " in table
    for item in ("| CPU |", "| Memory |", "| Kernel |", "| PostgreSQL |"):
        assert item in table, item
    assert "| Data directory's filesystem |" in table
    assert "TPC-B select-only, scale 1, 2 clients, 3 s: tps" in table
    assert "Targets ran at once (concurrent = true)" in report
    assert f"## a: Machine\n\n<details><summary>h1 ({h1.address}) as read there" in report

    # Nothing of either server is left on its host (other tests' may be there: the
    # namespaces share /tmp).
    for t in ("a", "b"):
        datadir = Path(envs[t].filesystems[0].path)
        assert not datadir.parent.exists(), f"{datadir.parent} left on {envs[t].host}"
    for h in (h1, h2):
        left = subprocess.run(
            ["pgrep", "-f", f"listen_addresses={h.address}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert left.stdout == "", f"a server still runs on {h.name}"


def test_concurrent_targets_on_one_machine_are_refused(tmp_path: Path) -> None:
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    path = tmp_path / "same.toml"
    path.write_text(
        '[campaign]\nname = "same"\nconcurrent = true\n'
        f'[[target]]\nname = "x"\ndirectory = "{tmp_path / "d1"}"\n'
        f'[[target]]\nname = "y"\ndirectory = "{tmp_path / "d2"}"\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nclients = [1]\nduration = 2\n'
    )
    done = pgrig("run", path, "--results", tmp_path / "results")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert (
        f"{path}: [campaign] concurrent = true, but targets x and y both run on this "
        "machine: at once, each would measure the other's load"
    ) in " ".join(done.stderr.split())
    assert "drop concurrent to run them in turn" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "results" / "results.sqlite").exists()

    path.write_text(path.read_text().replace("concurrent = true", 'concurrent = "yes"'))
    done = pgrig("run", path, "--results", tmp_path / "results")
    assert done.returncode == 2
    assert "concurrent" in done.stderr and "expected" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_environment_read_through_an_executor_is_the_local_capture() -> None:
    """The snapshot-and-parse path (used over SSH) through the local executor
    gives what the direct capture gives: the same readers parse the same files."""
    from pgrig import environment

    remote = capture_on(LocalExecutor(), ["/tmp"], bin_dir="/usr/lib/postgresql/15/bin")
    here = environment.capture([Path("/tmp")])
    for field in ("hostname", "os_release", "kernel", "cpu", "memory_bytes", "disks",
                  "sysctls", "transparent_hugepages", "clocksource"):  # fmt: skip
        assert getattr(remote, field) == getattr(here, field), field
    (fs,), (local_fs,) = remote.filesystems, here.filesystems
    assert (fs.device, fs.mountpoint, fs.fstype, fs.block_device) == (
        local_fs.device, local_fs.mountpoint, local_fs.fstype, local_fs.block_device,
    )  # fmt: skip
    assert remote.host == "localhost" and remote.tools.get("postgres", "").startswith("postgres")


def _watch(host: str, busy: float, demand: float | None) -> LoadHostWatch:
    samples = tuple(LoadHostSample(float(i), busy, 0.0, 1.0, 2.0, demand, demand) for i in range(4))
    return LoadHostWatch(host, 2, samples)


def test_pgbench_on_the_servers_host_is_not_called_client_bound_for_busy_cpus() -> None:
    """Seed 000's setup, pgbench beside the server: the host's busy CPUs are both's."""
    found = client_bound([_watch("db1", 97, 40)], shared=("db1",))
    assert found is not None and found.cause == "shared_host"
    assert CAUSES[found.cause] == "CPU-bound: the server and pgbench share the host's CPUs"
    assert found.summary == "host db1: CPUs 97% busy (2 CPUs)"
    assert "load hosts of their own (load_hosts)" in found.evidence[-1]
    # Its own pgbench thread at its limit still says client-bound; a quiet host nothing.
    pinned = client_bound([_watch("db1", 97, 95)], shared=("db1",))
    assert pinned is not None and pinned.cause == "client_host"
    assert client_bound([_watch("db1", 60, 40)], shared=("db1",)) is None
    # The same watch from a load host of its own: client-bound by its CPUs.
    other = client_bound([_watch("c1", 97, 40)], shared=("db1",))
    assert other is not None and other.cause == "client_host"


def test_four_machines_side_by_side_open_the_comparison() -> None:
    """seed000's four columns, each target on a host of its own (test_report_golden's
    four_targets, whose HTML is laid out at 1,400 px there: the machine rows fit)."""
    from pgrig.report import markdown, view

    study, records = four_targets()
    text = markdown.render(view.build(study, records), {})  # no figures drawn
    table = text.split("**Comparison of the targets**")[1]
    lines = table.strip().splitlines()
    assert lines[0].startswith("| Test Case | local (baseline) | essd-pl1 | essd-pl1 vs local |")
    assert lines[2].startswith("| Machine | db1 (10.0.0.1), hostname ")
    assert "| db4 (10.0.0.4), hostname " in lines[2] and lines[2].endswith("| *differs* |")
    assert lines[3].startswith("| CPU | ") and lines[3].endswith("| *same* |")
    assert "Targets ran interleaved" in text


def _both_running(lab: Lab) -> dict[str, list[int]] | None:  # noqa: F811
    found = lab.processes("pgbench", "-T")
    return found if {"h1", "h2"} <= set(found) else None


@pytest.mark.netns_hosts(2)
@pytest.mark.cluster
@pytest.mark.slow
def test_ctrl_c_stops_targets_measured_at_once(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Ctrl-C reaches only pgrig's main thread; with concurrent = true each
    target's run waits in a thread of its own. Both pgbench processes must stop
    at once, not when their 60 s runs end, and nothing is left on the hosts."""
    path = tmp_path / "machines.toml"
    text = CAMPAIGN.format(inventory=netns_lab.write_inventory())
    path.write_text(text.replace("duration = 3", "duration = 60"))
    running = spawn("run", path, "--results", tmp_path / "results")
    try:
        wait_for(lambda: _both_running(netns_lab), timeout=240, what="pgbench on h1 and h2")
        time.sleep(1)
        stopped = time.monotonic()
        running.send_signal(signal.SIGINT)
        out, err = running.communicate(timeout=120)
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate(timeout=30)
    took = time.monotonic() - stopped
    assert running.returncode == 130, out[-3000:] + err[-3000:]
    assert took < 30, f"pgrig took {took:.0f} s to stop: it waited for the runs"
    assert "Traceback" not in err
    assert netns_lab.processes("pgbench") == {}, "a host's pgbench outlived pgrig"
    assert netns_lab.processes("postgres") == {}, "a server outlived pgrig"
    with Store.open(tmp_path / "results" / "results.sqlite") as st:
        runs = {r.key: r for r in st.runs("machines")}
    for t in ("a", "b"):
        run = runs.get(f"{t}/tpcb/s1/select-only/c2/d60/r1")
        assert run is None or run.status != "ok", (t, run)
