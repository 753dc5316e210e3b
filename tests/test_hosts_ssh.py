"""The executors over real SSH: Debian's sshd in network namespaces (tests/hosts_fixture.py).

The namespaces share this machine's filesystem and PIDs, so a file written
over SSH is checked here, and a remote PID is looked up in this /proc.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import os
import signal
import threading
import time
from pathlib import Path

import asyncssh
import pytest

from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig import proc
from pgrig.cluster.hosted import HostedServer, ServerSpec
from pgrig.errors import HostUnusable, ToolError, ToolTimeout
from pgrig.hosts import inventory, preflight, ssh
from pgrig.hosts.executor import Executor, Launch, Who
from pgrig.hosts.local import LocalExecutor
from pgrig.pgsource import binaries

pytestmark = pytest.mark.netns_hosts(2)


@pytest.fixture(scope="module")
def hosts(netns_lab: Lab) -> list[inventory.Host]:  # noqa: F811
    return list(inventory.load(netns_lab.write_inventory()).hosts.values())


@pytest.fixture(scope="module")
def remote(hosts: list[inventory.Host]) -> Executor:
    executors, access = preflight.check_all(hosts[:1])
    assert access[0].user == "root" and not access[0].sudo
    yield executors[0]
    executors[0].close()


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_run_read_write_free(kind: str, remote: Executor, tmp_path: Path) -> None:
    ex = LocalExecutor() if kind == "local" else remote
    done = ex.run(
        [
            "sh",
            "-c",
            'printf "%s|%s" "$1" "$X"',
            "sh",
            "a b'c",
        ],
        timeout=30,
        env={"X": "$HOME;"},
    )
    assert done.stdout == "a b'c|$HOME;"
    with pytest.raises(ToolError, match=r"false failed on .* \(exit code 1\)"):
        ex.run(["false"], timeout=30)
    path = str(tmp_path / "f")
    ex.write_bytes(path, b"\x00bytes\n", mode=0o600)
    assert Path(path).read_bytes() == b"\x00bytes\n" and Path(path).stat().st_mode & 0o777 == 0o600
    assert ex.read_bytes(path) == b"\x00bytes\n" and ex.exists(path)
    assert not ex.exists(path + ".no")
    assert ex.listdir(str(tmp_path)) == ["f"]
    assert "MemTotal" in ex.read_text("/proc/meminfo")
    assert (
        abs(
            ex.free_bytes(str(tmp_path))
            - os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
        )
        < 256 << 20
    )


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_timeout_stops_the_process(kind: str, remote: Executor) -> None:
    ex = LocalExecutor() if kind == "local" else remote
    started = ex.start(["sleep", "300"])
    assert proc.pid_alive(started.pid)  # one PID space: the remote PID is visible here
    with pytest.raises(ToolTimeout, match="did not finish in 0 s and was stopped"):
        started.wait(0.3)
    deadline = time.monotonic() + 10
    while proc.pid_alive(started.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proc.pid_alive(started.pid)


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_run_is_one_call_of_each_connector(kind: str, remote: Executor, tmp_path: Path) -> None:
    """``run`` as each connector does it in one call: the whole stdin given, the
    exit code and both outputs back, and a command past its timeout stopped on
    its host (TERM, then KILL) before the ToolTimeout naming it is raised."""
    ex = LocalExecutor() if kind == "local" else remote
    script = 'cat; echo "err" >&2; exit 3'
    done = ex.run(["sh", "-c", script], timeout=30, check=False, input="a\nb\n")
    assert (done.returncode, done.stdout, done.stderr) == (3, "a\nb\n", "err\n")
    pidfile = tmp_path / "pid"
    forever = ["sh", "-c", 'echo $$ > "$0"; exec sleep 300', str(pidfile)]
    with pytest.raises(ToolTimeout, match=f"sh on {ex.name} did not finish in 1 s and was stopped"):
        ex.run(forever, timeout=1)
    assert not proc.pid_alive(int(pidfile.read_text()))  # one PID space here


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_talk_and_signal(kind: str, remote: Executor) -> None:
    ex = LocalExecutor() if kind == "local" else remote
    script = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\n"
    p = ex.start(["python3", "-c", script], stdin=True)
    p.send("ping\n")
    assert p.readline(10) == "PING"
    p.signal(signal.SIGTERM)
    assert p.wait(10, check=False).returncode in (-15, 143)


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_launch_as_another_user_in_a_cgroup(kind: str, remote: Executor, tmp_path: Path) -> None:
    """What a server's lifecycle asks of either executor: run as the server's OS
    user, its PID written into the cgroups first (a plain file stands for a
    cgroup.procs here), and the PID pgrig holds the command's own."""
    ex = LocalExecutor() if kind == "local" else remote
    procs = tmp_path / "cgroup.procs"
    procs.touch()
    launch = Launch(user="postgres", cgroups=(str(procs),))
    done = ex.run(["id", "-un"], timeout=30, launch=launch, env={"X": "1"})
    assert done.stdout.strip() == "postgres"
    started = ex.start(["sleep", "300"], launch=launch)
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{started.pid}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert procs.read_text().split()[-1] == str(started.pid)
        status = Path(f"/proc/{started.pid}/status").read_text()
        uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
        assert uid == ex.user_ids("postgres")[0]
    finally:
        started.stop()


def test_unreachable_host_is_refused(hosts: list[inventory.Host]) -> None:
    # An address of the lab's subnet that no namespace holds: no ARP answer.
    nobody = hosts[0].address.rsplit(".", 1)[0] + ".250"
    gone = dataclasses.replace(hosts[0], name="db9", address=nobody, port=22)
    start = time.monotonic()
    with pytest.raises(HostUnusable) as err:
        preflight.check_all([gone])
    assert f"host db9 (root@{nobody}:22) cannot be reached" in str(err.value)
    assert "ansible_host, ansible_port at" in (err.value.hint or "")
    assert err.value.exit_code == 7
    assert time.monotonic() - start < 20


def test_wrong_key_is_refused(hosts: list[inventory.Host], tmp_path: Path) -> None:
    other = tmp_path / "other"
    proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], timeout=30)
    wrong = dataclasses.replace(hosts[1], key_file=other)
    with pytest.raises(HostUnusable) as err:
        preflight.check_all([hosts[0], wrong])
    assert f"host {hosts[1].name} (root@{hosts[1].address}:22) refused the key" in str(err.value)
    assert f"add the public half of {other}" in (err.value.hint or "")
    missing = dataclasses.replace(hosts[1], key_file=tmp_path / "nope")
    with pytest.raises(HostUnusable, match="the key .*nope does not exist"):
        preflight.connect(missing)


def test_no_root_no_sudo_is_refused(hosts: list[inventory.Host], netns_lab: Lab) -> None:  # noqa: F811
    # The lab's plain account: no root, and no sudo rule (nor, here, any sudo).
    user = netns_lab.plain_user
    plain = dataclasses.replace(hosts[0], user=user)
    with pytest.raises(HostUnusable) as err:
        preflight.check_all([plain])
    assert f"host {plain.name} ({user}@" in str(err.value)
    assert f"user {user} is not root and cannot use sudo" in str(err.value)
    assert "ansible_user=root" in (err.value.hint or "")


def test_a_server_needs_root_on_its_host(
    hosts: list[inventory.Host],
    netns_lab: Lab,  # noqa: F811
    bins: binaries.PgBinaries,
) -> None:
    plain = dataclasses.replace(hosts[0], user=netns_lab.plain_user)
    ex = preflight.connect(plain)  # reachable; the root check is HostedServer's own here
    try:
        with (
            pytest.raises(HostUnusable, match="a server is made there as root") as err,
            HostedServer(ex, ServerSpec(bin_dir=str(bins.bin_dir), address="x", bins=bins)),
        ):
            pass
        assert err.value.exit_code == 7 and "ansible_user=root" in (err.value.hint or "")
    finally:
        ex.close()


def test_a_lost_connection_ends_the_wait(hosts: list[inventory.Host], netns_lab: Lab) -> None:  # noqa: F811
    ex = preflight.connect(hosts[1])
    started = ex.start(["sleep", "300"])
    try:
        # The listening sshd's children serve the connections: kill them, as a
        # host that goes away would.
        sshd = netns_lab.hosts[1].sshd_pid
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                if ppid == sshd:
                    os.kill(int(entry.name), signal.SIGKILL)
        done = started.wait(20, check=False)
        assert done.returncode == 255
        assert f"lost the SSH connection to {hosts[1].name}" in done.stderr
    finally:
        if proc.pid_alive(started.pid):  # orphaned on its host (one PID space here)
            os.kill(started.pid, signal.SIGKILL)
        ex.close()


def test_a_reconnect_keeps_to_its_bound_and_reaches_the_host_once_back(
    hosts: list[inventory.Host],
    netns_lab: Lab,  # noqa: F811
) -> None:
    """The server host's SSH lost with its sshd stopped (SIGSTOP: the kernel takes
    the TCP connect, no SSH answers): a 2-s reconnect gives up in about 2 s, not
    at the 10-s connect timeout of an attempt begun inside it (two such waits
    were 40 s of the stays-away test); once sshd runs again, the executor is
    reached in place and runs commands."""
    ex = preflight.connect(hosts[1])
    sshd = netns_lab.hosts[1].sshd_pid
    try:
        os.kill(sshd, signal.SIGSTOP)
        for pid in proc.run(["pgrep", "-P", str(sshd)], timeout=30, check=False).stdout.split():
            os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not ex.connection_lost() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ex.connection_lost()
        t0 = time.monotonic()
        assert not ex.reconnect(2.0)
        assert time.monotonic() - t0 < 6, "the bound, not an attempt's connect timeout"
    finally:
        os.kill(sshd, signal.SIGCONT)
    try:
        assert ex.reconnect(20.0)
        assert not ex.connection_lost()
        assert ex.run(["echo", "back"], timeout=30).stdout == "back\n"
    finally:
        ex.close()


def test_a_sudo_user_acts_as_root(
    hosts: list[inventory.Host],
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    if not netns_lab.sudo_user:
        pytest.skip("sudo is not installed (scripts/install-deps.sh test installs it)")
    user = dataclasses.replace(hosts[1], user=netns_lab.sudo_user)
    (ex,), (access,) = preflight.check_all([user])
    started = None
    try:
        assert (access.user, access.sudo) == (netns_lab.sudo_user, True)
        # Asked in the round trip that connected: the preflight ran no command.
        assert ex.whoami() == Who(netns_lab.sudo_user, root=False, sudo=0)
        assert ex.run(["id", "-u"], timeout=30).stdout == "0\n"
        # tmp_path is under root's 0700 pytest directory: out of the user's reach.
        path = str(tmp_path / "f")
        ex.write_bytes(path, b"\x00root's\n", mode=0o600)
        assert Path(path).read_bytes() == b"\x00root's\n" and Path(path).stat().st_uid == 0
        assert ex.read_bytes(path) == b"\x00root's\n"
        assert ex.exists(path) and not ex.exists(path + ".no")
        assert ex.listdir(str(tmp_path)) == ["f"]
        started = ex.start(["sleep", "300"])
        comm = Path(f"/proc/{started.pid}/comm")
        deadline = time.monotonic() + 10
        while comm.read_text().strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.05)  # the shell sudo started echoed its PID, then execs
        assert comm.read_text().strip() == "sleep"  # the PID is the command's, not sudo's
        assert started.stop() is not None and not proc.pid_alive(started.pid)
    finally:
        if started is not None and proc.pid_alive(started.pid):
            os.kill(started.pid, signal.SIGKILL)
        ex.close()


def test_a_sudo_user_with_become_false_is_refused(
    hosts: list[inventory.Host],
    netns_lab: Lab,  # noqa: F811
) -> None:
    """Issue 40.15: ansible_become=false was ignored (sudo used anyway): the
    inventory says the user may not become root, and pgrig needs root."""
    if not netns_lab.sudo_user:
        pytest.skip("sudo is not installed (scripts/install-deps.sh test installs it)")
    user = dataclasses.replace(hosts[1], user=netns_lab.sudo_user, become=False)
    with pytest.raises(HostUnusable, match="is not root and ansible_become is false") as exc:
        preflight.check_all([user])
    assert exc.value.exit_code == 7 and "ansible_become=true" in (exc.value.hint or "")
    # Nor does a connection made for it ask sudo, or act through it.
    ex = preflight.connect(user)
    try:
        assert ex.whoami() == Who(netns_lab.sudo_user, root=False, sudo=None)
        assert ex.run(["id", "-u"], timeout=30).stdout != "0\n"
    finally:
        ex.close()


def test_a_call_given_up_on_prints_no_traceback_when_its_connection_is_lost_after(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/bench.md: at load 18-21 the SSH loop answered after ``call`` had
    given up on it, the connection was lost meanwhile, and asyncio printed the
    task's never-retrieved exception with its traceback on stderr. The loop's
    thread held past call's bound by the coroutine itself (a loaded machine
    cannot be ordered to starve it at the right moment), then the connection
    lost: call says it had no answer, and asyncio has nothing to print."""
    monkeypatch.setattr(ssh, "ANSWER_SLACK_S", 0.3)
    finished = threading.Event()

    async def starved_then_lost() -> None:
        time.sleep(0.8)  # the loop's thread, past call's 0.1 + 0.3 s
        finished.set()
        raise asyncssh.ConnectionLost("SSH connection lost")

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(ToolTimeout, match="reading /proc/stat on h1: no answer"):
            ssh.call(starved_then_lost(), 0.1, "reading /proc/stat on h1")
        assert finished.wait(5)
        # The loop is free again: everything it had queued has run once this does.
        assert ssh.call(asyncio.sleep(0.05, "idle"), 5, "a later call") == "idle"
        gc.collect()
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
    # A connection lost under a call that waited is still said as such.
    with pytest.raises(ToolError, match="lost the SSH connection"):
        ssh.call(starved_then_lost(), 5, "reading /proc/stat on h1")


def test_a_lost_connections_unretrieved_futures_print_nothing_and_a_bug_still_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ci30: an SSH cut fails every future asyncssh had pending on the connection;
    call had raised the loss to its caller (a ToolError naming the host), and
    asyncio printed the same exception again, with a traceback, when one of
    those futures was collected unread. A loss is said once; any other
    exception left unread is still asyncio's to report."""

    async def left_unread(exc: Exception) -> None:
        future = asyncio.get_running_loop().create_future()
        future.set_exception(exc)
        del future  # collected here, its exception never asked for

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        ssh.call(left_unread(asyncssh.ConnectionLost("SSH connection lost")), 5, "a cut")
        ssh.call(left_unread(ConnectionResetError("reset by peer")), 5, "a reset")
        gc.collect()
        assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
        ssh.call(left_unread(ValueError("a bug of pgrig's")), 5, "a bug")
        gc.collect()
    assert "a bug of pgrig's" in caplog.text
