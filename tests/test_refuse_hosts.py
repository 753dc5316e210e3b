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
    from pgrig.workloads.tpcb.steps import bench_step

    spec = TpcbSpec(scales=(1,), modes=("select-only",), clients=(4,), threads=1)
    two = bench_step(
        spec, 1, (5, "select-only", 4), RunPolicy(), PlannedTarget("t", load_hosts=2), 1
    )
    one = bench_step(spec, 1, (5, "select-only", 4), RunPolicy(), PlannedTarget("t"), 1)
    assert "-c 4 -j 1 on each of 2 load hosts (8 clients)" in two.label
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
