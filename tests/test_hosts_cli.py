"""``pgrig hosts check`` and ``pgrig hosts provision`` end to end, against SSH
hosts in network namespaces (tests/hosts_fixture.py).

The namespaces share this machine's filesystem: PostgreSQL 15, fio and python3
are "installed" on them because they are installed here. What the provision
test proves is that pyinfra reaches the hosts over SSH, changes what is not as
wanted (pgrig's work directory, made in the lab's own directory) and, run
again, changes nothing; not that it can install a package on a bare host.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig import cli

pytestmark = pytest.mark.netns_hosts(2)


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def pgrig(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """The real CLI's main() in this process: what a subprocess would print and
    exit with, without importing pgrig anew each time (10 s on a loaded machine)."""

    def run(*args: str | Path) -> Done:
        capsys.readouterr()
        try:
            cli.main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return Done(code, out.out, out.err)

    return run


def test_check_lists_what_each_host_has(netns_lab: Lab, pgrig) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    inv = netns_lab.write_inventory(extra="[here]\nthis ansible_connection=local\n")
    done = pgrig("hosts", "check", "-i", inv, "--format", "json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert [f["host"] for f in found] == ["h1", "h2", "this"]  # the last one without SSH
    for f in found:
        assert f["user"] == "root" and not f["sudo"]
        assert "15" in f["postgres_majors"]
        assert f["pgbench"].startswith("pgbench (PostgreSQL) 15")
        assert f["fio"].startswith("fio-") and f["python"].startswith("Python 3")
        assert f["cpus"] >= 1 and f["memory_gib"] > 0
    text = pgrig("hosts", "check", "-i", inv, "h2")
    assert text.returncode == 0 and text.stdout.splitlines()[1].split()[:3] == ["h2", "root", "15"]


def test_check_refuses_unknown_names_and_bad_files(netns_lab: Lab, tmp_path: Path, pgrig) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    inv = netns_lab.write_inventory()
    done = pgrig("hosts", "check", "-i", inv, "h11")
    assert done.returncode == 2
    assert f"error: host or group 'h11' is neither a host nor a group in the inventory {inv}" in (
        done.stderr
    )
    assert "hint: did you mean 'h1'?" in done.stderr
    bad = tmp_path / "bad.ini"
    bad.write_text("[db\n")
    done = pgrig("hosts", "check", "-i", bad)
    assert done.returncode == 2 and f"error: {bad}:1: '[db' is not a section header" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_names_each_unusable_host(netns_lab: Lab, pgrig) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    nobody = netns_lab.hosts[0].address.rsplit(".", 1)[0] + ".251"
    inv = netns_lab.write_inventory(
        extra=f"[more]\ngone ansible_host={nobody}\n"
        f"plain ansible_host={netns_lab.hosts[1].address} ansible_user={netns_lab.plain_user} "
        f"ansible_ssh_private_key_file={netns_lab.client_key}\n"
    )
    done = pgrig("hosts", "check", "-i", inv)
    assert done.returncode == 7, done.stderr
    assert "error: 2 hosts cannot be used" in done.stderr
    assert f"host gone ({nobody}:22) cannot be reached" in done.stderr
    assert f"user {netns_lab.plain_user} is not root and cannot use sudo" in done.stderr
    assert "Traceback" not in done.stderr
    # JSON lists every host, the unusable ones with their error, and still exits 7
    done = pgrig("hosts", "check", "-i", inv, "--format", "json")
    assert done.returncode == 7, done.stderr
    by_host = {f["host"]: f for f in json.loads(done.stdout)}
    assert list(by_host) == ["h1", "h2", "gone", "plain"]
    assert by_host["h1"]["user"] == "root" and "error" not in by_host["h1"]
    assert "cannot be reached" in by_host["gone"]["error"]
    assert "not root and cannot use sudo" in by_host["plain"]["error"]
    assert by_host["plain"]["hint"]
    assert "error: 2 hosts cannot be used" in done.stderr


def test_provision_is_idempotent(netns_lab: Lab, pgrig) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    inv = netns_lab.write_inventory()
    workdir = netns_lab.root / "pgrig-work"
    args = ("hosts", "provision", "-i", inv, "--workdir", workdir, "--no-apt-update")
    dry = pgrig(*args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert not workdir.exists()
    first = pgrig(*args)
    assert first.returncode == 0, first.stderr + first.stdout
    # The test hosts are namespaces sharing this machine's filesystem, so one
    # work directory serves both: whether the second host finds it made depends
    # on pyinfra's order (real hosts make one each). Made at least once, no errors.
    made = re.search(
        r"pgrig work directory: 2 hosts, (\d) changed, (\d) already so, 0 errors", first.stdout
    )
    assert made, first.stdout
    assert int(made[1]) >= 1 and int(made[1]) + int(made[2]) == 2, first.stdout
    assert "PostgreSQL 15, pgbench, fio, python3: 2 hosts, 0 changed, 2 already so" in first.stdout
    assert workdir.is_dir()
    again = pgrig(*args)
    assert again.returncode == 0, again.stderr
    assert "pgrig work directory: 2 hosts, 0 changed, 2 already so, 0 errors" in again.stdout
    assert "(0 changes)" in again.stderr


def test_clean_with_nothing_left_says_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pgrig,  # type: ignore[no-untyped-def]
) -> None:
    """`pgrig hosts clean` printed nothing at all when the hosts held nothing of a
    dead pgrig. Mocked: what the hosts hold - the namespace hosts share this
    machine's /tmp with every other test's live servers, so "nothing" cannot be
    arranged on them."""
    from pgrig.hosts import cli as hosts_cli

    inv = tmp_path / "hosts.ini"
    inv.write_text("db1 ansible_host=10.0.0.5\n")
    monkeypatch.setattr(hosts_cli, "clean_lines", lambda *a, **k: [])
    done = pgrig("hosts", "clean", "-i", inv, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"nothing to clean on the hosts of {inv}" in done.stdout
