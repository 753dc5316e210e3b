"""What a probe and a crash ask of a host, the same on either executor
(pyinfra's @local and @ssh): one test per operation, run on this machine's
LocalExecutor and on an SSH host in a network namespace (tests/hosts_fixture.py).
The local one keeps its own ways (the ownership registry, os.kill), the
answers are the same."""

from __future__ import annotations

import pwd
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig import proc
from pgrig.errors import BinaryNotFound, ToolError, WorkdirError
from pgrig.hosts import inventory, preflight
from pgrig.hosts.executor import Executor
from pgrig.hosts.local import LocalExecutor
from pgrig.tools import onhost

pytestmark = pytest.mark.netns_hosts(1)


@pytest.fixture(scope="module")
def remote(netns_lab: Lab) -> Iterator[Executor]:  # noqa: F811
    hosts = list(inventory.load(netns_lab.write_inventory()).hosts.values())
    executors, _access = preflight.check_all(hosts[:1])
    yield executors[0]
    executors[0].close()


def executor(kind: str, remote: Executor) -> Executor:
    return LocalExecutor() if kind == "local" else remote


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_a_test_file_is_made_exclusively_and_removed(
    kind: str, remote: Executor, tmp_path: Path
) -> None:
    ex = executor(kind, remote)
    path = tmp_path / "probe.file"
    ex.create_exclusively(path)
    assert path.is_file()  # one file system: the namespace host shares this machine's
    with pytest.raises(WorkdirError, match="already exists"):
        ex.create_exclusively(path)
    ex.remove_file(path)
    assert not path.exists()


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_a_file_is_replaced_whole_for_its_user(kind: str, remote: Executor, tmp_path: Path) -> None:
    """What a server's pg_hba.conf and pgrig.conf are written with: the whole file
    renamed over the old one, owned by the server's user, nothing left beside."""
    ex = executor(kind, remote)
    path = tmp_path / "pgrig.conf"
    path.write_text("old\n")
    data = b"shared_buffers = '1GB'\n\x00\xff"  # any bytes, as written
    ex.replace_file(str(path), data, mode=0o600, user="postgres")
    st = path.stat()
    assert path.read_bytes() == data
    assert (st.st_mode & 0o777, st.st_uid) == (0o600, pwd.getpwnam("postgres").pw_uid)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pgrig.conf"]


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_space_tools_and_a_streamed_run(kind: str, remote: Executor, tmp_path: Path) -> None:
    ex = executor(kind, remote)
    free, total = ex.space(tmp_path)
    assert 0 < free <= total
    assert ex.space(tmp_path / "none")[0] == -1
    with pytest.raises(WorkdirError, match=f"is not a directory on {ex.where}"):
        onhost.check_directory(ex, tmp_path / "none", 1, "a probe")
    with pytest.raises(BinaryNotFound, match="pg_test_nothing"):
        ex.tool(tmp_path, "pg_test_nothing")
    assert ex.on_path("sh", hint="").endswith("/sh")
    lines: list[str] = []
    done = ex.stream(
        ["sh", "-c", "echo one; echo two"],
        timeout=30,
        what="sh",
        on_line=lambda _stream, line: lines.append(line),
    )
    assert lines == ["one", "two"] and done.stdout == "one\ntwo\n"


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_a_streamed_client_hears_stderr_and_its_environment(kind: str, remote: Executor) -> None:
    """pgbench's path on any host: its ``-P`` lines come on stderr as they are
    printed, the password comes in the environment, a failure is the caller's
    to word (``check=False``), and the run's watchdog ends the wait."""
    ex = executor(kind, remote)
    heard: list[tuple[str, str]] = []
    script = 'echo "progress $PGRIG_T" >&2; sleep 0.3; echo report; echo late >&2; exit 3'
    done = ex.stream(
        ["sh", "-c", script],
        timeout=30,
        what="sh",
        on_line=lambda stream, line: heard.append((stream, line)),
        env={"PGRIG_T": "7"},
        check=False,
    )
    assert done.returncode == 3 and done.stdout == "report\n"
    assert heard[0] == ("stderr", "progress 7")  # before the process ended
    assert sorted(heard) == [("stderr", "late"), ("stderr", "progress 7"), ("stdout", "report")]
    with pytest.raises(ToolError, match="sh failed"):
        ex.stream(["sh", "-c", "exit 4"], timeout=30, what="sh")

    class Hung(Exception):
        pass

    def watchdog() -> None:
        raise Hung

    began = time.monotonic()
    with proc.watched_by(watchdog), pytest.raises(Hung):
        ex.stream(["sleep", "60"], timeout=120, what="sleep")
    assert time.monotonic() - began < 20  # stopped at the first look, not at its end


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_a_process_is_signalled_by_pid(kind: str, remote: Executor) -> None:
    """The durability crasher's SIGKILL of a postmaster, by its PID on its host."""
    ex = executor(kind, remote)
    started = ex.start(["sleep", "300"])
    try:
        ex.signal(started.pid, signal.SIGKILL)
        assert started.wait(10, check=False).returncode in (-9, 137)
    finally:
        if started.poll() is None:
            started.stop()
    deadline = time.monotonic() + 10
    while proc.pid_alive(started.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(ToolError):
        ex.signal(started.pid, signal.SIGKILL)  # gone: an error, not a silent success


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_a_daemon_writes_to_its_log_and_is_stopped_by_pid(
    kind: str, remote: Executor, tmp_path: Path
) -> None:
    """A FUSE layer's start (``start(log=)``): its output appended to a file on
    the host, nothing read back; the PID is the program's own (no shell left
    between), and ``stop`` ends it."""
    ex = executor(kind, remote)
    log = tmp_path / "daemon.log"
    log.write_text("before\n")
    started = ex.start(["sh", "-c", "echo out; echo err >&2; exec sleep 300"], log=str(log))
    try:
        deadline = time.monotonic() + 20
        while log.read_text().count("\n") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(log.read_text().splitlines()) == ["before", "err", "out"]
        assert started.poll() is None
    finally:
        code = started.stop(grace=5)
    assert code is not None
    assert started.wait(5, check=False).stdout == ""  # nothing came back on a pipe
    if kind == "local":
        assert not proc.pid_alive(started.pid)


def test_a_preexec_hook_is_this_machines_alone(remote: Executor) -> None:
    with pytest.raises(AssertionError, match="preexec"):
        remote.start(["true"], preexec=lambda: None)
