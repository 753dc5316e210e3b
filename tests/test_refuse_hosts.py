"""Remote targets refused before anything exists (issue 32, item 4): two servers
on one host and port, the clients of several load hosts against
max_connections, a port out of range, a campaign-level inventory named at its
own key, a missing host_pg_bin as a missing program. The hosts are this machine
(``ansible_connection=local``): every check runs as over SSH, through the same
executor interface, in seconds; ``pgrig plan`` creates nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig import cli

INVENTORY = (
    "[db]\ndb1 ansible_connection=local ansible_host=127.0.0.1\n"
    "[load]\nc1 ansible_connection=local ansible_host=127.0.0.1\n"
    # never contacted: every case refuses (or plans) without it
    "[far]\nfar ansible_host=10.255.255.9\n"
)
HEAD = '[campaign]\nname = "x"\ninventory = "hosts.ini"\n'
PROBES = "[probes]\ntiming = false\nfsync = false\nfio = false\n"
TPCB = '[[workload]]\ntype = "tpcb"\nscales = [1]\nclients = [{clients}]\nduration = 1\n'


def target(name: str = "a", extra: str = "") -> str:
    return f'[[target]]\nname = "{name}"\nhost = "db1"\n{extra}'


CASES = [
    (
        "same-host-and-port",
        HEAD + PROBES + target("a") + target("b") + TPCB.format(clients=1),
        2,
        ("targets a and b both put their server on db1 port 5432", "port = 5433"),
    ),
    (
        "clients-times-load-hosts",
        HEAD + PROBES
        + target(extra='load_hosts = ["db1", "c1"]\nset = { max_connections = 100 }\n')
        + TPCB.format(clients=60),
        2,
        ("from 2 load hosts opens 120 client connections", "max_connections is 100"),
    ),
    (
        "port-70000",
        HEAD + PROBES + target(extra="port = 70000\n") + TPCB.format(clients=1),
        2,
        ("c.toml:11: target[0].port: 70000: a TCP port is at most 65535",),
    ),
    (
        "campaign-inventory-missing",
        HEAD.replace("hosts.ini", "nosuch.ini") + PROBES + target() + TPCB.format(clients=1),
        2,
        ("c.toml:3: campaign.inventory: the inventory", "nosuch.ini does not exist"),
    ),
    (
        "host-pg-bin-missing",
        HEAD + PROBES + target(extra='host_pg_bin = "/nonexistent/bin"\n') + TPCB.format(clients=1),
        3,
        ("db1 has no /nonexistent/bin/postgres", "host_pg_bin"),
    ),
    (
        "a-storage-lab-key",
        HEAD + PROBES + target(extra='memory = "512MiB"\n') + TPCB.format(clients=1),
        2,
        ("target[0].memory: memory is not applied to a server on a remote host (db1)",
         "drop memory"),
    ),
    (
        "os-user",
        HEAD + PROBES + target(extra='os_user = "nobody"\n') + TPCB.format(clients=1),
        2,
        ("target[0].os_user: os_user is not applied to a server on a remote host",),
    ),
    (
        "directory-in-proc",
        HEAD + PROBES + target(extra='directory = "/proc/pgrig-logs"\n') + TPCB.format(clients=1),
        4,
        ("target a: directory /proc/pgrig-logs (where the load hosts' logs are kept",
         "not writable"),
    ),
    (
        "loopback-server-far-load-host",
        HEAD + PROBES + target(extra='load_hosts = ["far"]\n') + TPCB.format(clients=1),
        2,
        ("the server's host db1 is 127.0.0.1 (loopback): load host far could not reach it",),
    ),
    (
        "load-host-is-the-servers-host",
        HEAD + PROBES + target(extra='load_hosts = ["db1", "c1"]\n') + TPCB.format(clients=1),
        0,
        ("load host db1 is the server's own host",),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("text", "code", "says"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_remote_targets_refused_before_anything_exists(
    text: str,
    code: int,
    says: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.ini").write_text(INVENTORY)
    (tmp_path / "c.toml").write_text(text)
    try:
        cli.main(["plan", "c.toml"])
        got = 0
    except SystemExit as exc:
        got = int(exc.code or 0)
    err = capsys.readouterr().err
    assert got == code, err
    for text_ in says:
        assert text_ in err, err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "hosts.ini"]


def test_a_step_says_each_load_host_runs_the_clients() -> None:
    """Every load host runs the workload's clients: the console said "-c 4" where
    the report counted 8 (issue 32); the label now says both."""
    from pgrig.plan import PlannedTarget
    from pgrig.policy import RunPolicy
    from pgrig.workloads.tpcb.spec import TpcbSpec
    from pgrig.workloads.tpcb.steps import Point, bench_step

    spec = TpcbSpec(scales=(1,), modes=("select-only",), clients=(4,), threads=1)
    two = bench_step(
        spec, 1, Point(5, "select-only", 4, None), RunPolicy(), PlannedTarget("t", load_hosts=2), 1
    )
    one = bench_step(spec, 1, Point(5, "select-only", 4, None), RunPolicy(), PlannedTarget("t"), 1)
    assert "-c 4 -j 1 on each of 2 load hosts (8 clients)" in two.label
    assert "load hosts" not in one.label


def test_a_tpcc_step_says_each_load_host_opens_the_connections() -> None:
    """Issue 40.16: the TPC-C progress line said "2 connections" where the
    report counted 4 (2 on each of 2 load hosts)."""
    from pgrig.plan import PlannedTarget
    from pgrig.policy import RunPolicy
    from pgrig.workloads.tpcc.steps import Point, TpccPlan, run_step

    plan = TpccPlan(warehouses=1, connections=2, duration_s=3)
    two = run_step(plan, Point("server"), 1, "tpcc", PlannedTarget("t", load_hosts=2), RunPolicy())
    one = run_step(plan, Point("server"), 1, "tpcc", PlannedTarget("t"), RunPolicy())
    assert "2 connections on each of 2 load hosts (4 connections)" in two.label, two.label
    assert "load hosts" not in one.label


def test_an_inventory_that_is_a_named_pipe_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO given as a file hung `pgrig plan` (issue 33's trial): the inventory
    reader asks what the path is before it reads."""
    import os

    os.mkfifo(tmp_path / "hosts.ini")
    with pytest.raises(SystemExit) as exc:
        cli.main(["hosts", "check", "-i", str(tmp_path / "hosts.ini")])
    assert exc.value.code == 2
    assert "hosts.ini is a named pipe (FIFO), not a file" in capsys.readouterr().err


def plan(tmp_path: Path, inventory: str, text: str) -> tuple[int, str]:
    """`pgrig plan` in ``tmp_path``: its exit code and stderr."""
    import contextlib

    (tmp_path / "hosts.ini").write_text(inventory)
    (tmp_path / "c.toml").write_text(text)
    with contextlib.chdir(tmp_path):
        try:
            cli.main(["plan", "c.toml"])
            return 0, ""
        except SystemExit as exc:
            return int(exc.code or 0), ""


@pytest.mark.parametrize("hosts", ["one-address", "distinct-addresses"])
def test_999_load_hosts_are_refused_without_contacting_one(
    hosts: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40.14: a 999-host range made `pgrig plan` open 1,000 SSH sessions for
    464 s, then refuse on max_connections, a check that needs no host. Their
    addresses here route nowhere (10.255.x): a contacted host would take the
    connect timeout, so the time says none was."""
    import time

    server = "[db]\ndb1 ansible_host=10.255.254.1\n[load]\n"
    if hosts == "one-address":
        inventory = server + "c[001:999] ansible_host=10.255.255.9\n"
        says = "load hosts c001, c002, c003, c004, ... (999 hosts) are one machine"
    else:
        inventory = server + "".join(
            f"c{i:03d} ansible_host=10.255.{i // 250}.{i % 250 + 1}\n" for i in range(1, 1000)
        )
        says = "from 999 load hosts opens 999 client connections"
    text = HEAD + PROBES + target(extra='load_hosts = "load"\n') + TPCB.format(clients=1)
    started = time.monotonic()
    code, _ = plan(tmp_path, inventory, text)
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2, err
    assert says in " ".join(err.split()), err
    assert took < 30, f"{took:.1f} s"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "hosts.ini"]


def test_a_port_something_listens_on_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40.13: `port = 22` (sshd's) failed after the study was created. A
    listener of this test's own on the server host's address stands for sshd."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        text = HEAD + PROBES + target(extra=f"port = {port}\n") + TPCB.format(clients=1)
        code, _ = plan(tmp_path, INVENTORY, text)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"something already listens on db1 127.0.0.1:{port}" in " ".join(err.split()), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "hosts.ini"]


def test_a_read_only_wal_directory_on_the_host_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40.13: a read-only wal_directory or tablespace path on the host failed
    at initdb, exit 1, after the store, the study and the report existed. A
    read-only tmpfs mounted here (the host is this machine: the same check runs
    over SSH through the executor)."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "pgrig-test-ro", str(ro)],
                   check=True, timeout=30)  # fmt: skip
    try:
        for key in ("wal_directory", "tablespace"):
            text = HEAD + PROBES + target(extra=f'{key} = "{ro}"\n') + TPCB.format(clients=1)
            code, _ = plan(tmp_path, INVENTORY, text)
            err = " ".join(capsys.readouterr().err.split())
            assert code == 4, err
            assert f"target a: {key} {ro} on db1 is not writable (" in err, err
            assert "Read-only file system" in err, err
    finally:
        subprocess.run(["umount", str(ro)], check=True, timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "hosts.ini", "ro"]


def test_ipv6_ansible_host_is_refused_by_hosts_check_and_plan_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40.13: an IPv6 ansible_host passed `hosts check` and failed `run`
    with exit 7 ("Address family for hostname not supported")."""
    inventory = "[db]\ndb1 ansible_host=::1\n"
    (tmp_path / "hosts.ini").write_text(inventory)
    with pytest.raises(SystemExit) as exc:
        cli.main(["hosts", "check", "-i", str(tmp_path / "hosts.ini")])
    assert exc.value.code == 2
    said = capsys.readouterr().err
    code, _ = plan(tmp_path, inventory, HEAD + PROBES + target() + TPCB.format(clients=1))
    assert code == 2
    for err in (said, capsys.readouterr().err):
        assert "hosts.ini:2: host 'db1' has ansible_host=::1, an IPv6 address" in err, err


def test_this_machine_without_an_address_and_notes_on_shared_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40.13: `ansible_connection=local` without ansible_host (a documented
    key) failed "cannot resolve db1"; a load host that is another target's server
    host was accepted silently: said now, with why."""
    inventory = "[db]\ndb1 ansible_connection=local\n[load]\nc1 ansible_connection=local\n"
    b = target("b", "port = 5433\n").replace('"db1"', '"c1"')
    text = HEAD + PROBES + target("a", 'load_hosts = ["c1"]\n') + b + TPCB.format(clients=1)
    code, _ = plan(tmp_path, inventory, text)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0, err
    assert "target a: load host c1 is target b's server host (c1)" in err, err


def test_many_hosts_are_reached_16_at_a_time_with_progress(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 40.14: a 999-host inventory said nothing for 464 s. 40 names of this
    machine (no SSH: the same reach, root check and bound)."""
    from pgrig.hosts import preflight
    from pgrig.hosts.inventory import Host

    hosts = [Host(f"l{i}", "127.0.0.1", local=True) for i in range(40)]
    reached = preflight.reach_all(hosts)
    try:
        assert [ex.name for ex, _ in reached] == [h.name for h in hosts]  # type: ignore[misc]
    finally:
        for ex, _ in reached:  # type: ignore[misc]
            ex.close()
    assert "reached 40 of 40 hosts (16 at a time)" in capsys.readouterr().err
