"""The SSH executor, through asyncssh.

asyncssh rather than the system ``ssh`` with ControlMaster: one connection
carries every command and the SFTP file access of a host, a new command
costs a channel, not a process, and starting several hosts' processes at once
is one event loop's work (docs/hosts.md has the numbers measured here). The
loop runs in one background thread; the executor's methods are synchronous,
like the rest of pgrig, and every one of them has a timeout.

A command line over SSH is a string the remote shell splits: every argument
is quoted with ``shlex.quote``, so an argument list stays an argument list.
A started process reports its PID first (``echo $$; exec ...``), so that it
can be signalled by PID on its host: SSH channels do not carry signals
through OpenSSH reliably, and a closed connection does not stop a process
started without a terminal.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shlex
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pgrig import proc
from pgrig.errors import ToolError, ToolTimeout
from pgrig.hosts.executor import SH, STOP_GRACE_S, Executor, Ran, Started, Who
from pgrig.hosts.inventory import Host

if TYPE_CHECKING:
    import asyncssh

# asyncssh (and cryptography under it) is imported where a connection is made
# or used, not with this module: the registry imports this one in every pgrig
# process (the ssh executor), 0.2 s of CPU a start that a study on this machine
# never needs (docs/bench.md, "Starting a pgrig process").

CONNECT_TIMEOUT_S = 10.0
FILE_TIMEOUT_S = 120.0
START_S = 30.0  # for a command to print its PID (``command_line``)
# How much longer than its own timeout ``call`` waits for the loop's answer
ANSWER_SLACK_S = 5.0
LOST = 255  # the exit code ssh(1) gives when the connection fails

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _event_loop() -> asyncio.AbstractEventLoop:
    """The one loop all SSH executors share, in a daemon thread started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(_unretrieved)
            threading.Thread(target=loop.run_forever, name="pgrig-ssh", daemon=True).start()
            _loop = loop
        return _loop


def _unretrieved(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's report of a future whose exception nobody asked for: a lost
    connection fails every future asyncssh had pending on it, and ``call`` has
    already raised that loss to its caller as a ToolError naming the host; its
    traceback on stderr at garbage collection said nothing more (ci30:
    test_remote_faults' SSH cut). Anything else goes to asyncio's own handler."""
    import asyncssh

    if isinstance(context.get("exception"), (asyncssh.Error, ConnectionError)):
        return
    loop.default_exception_handler(context)


@dataclass(frozen=True)
class _Failed:
    exc: Exception


async def _outcome(coro: Coroutine[object, None, T], timeout: float) -> T | _Failed:
    """``coro``'s result, or its exception as a value: the loop's task never
    ends in an exception. One that did after ``call`` had given up waiting (the
    loop thread starved past call's own bound, the connection lost meanwhile)
    was never retrieved, and asyncio printed its traceback on stderr when the
    task was collected (docs/bench.md: test_remote_faults at load 18-21)."""
    try:
        return await asyncio.wait_for(coro, timeout)
    except Exception as exc:  # noqa: BLE001 - raised again in the calling thread
        return _Failed(exc)


def call(coro: Coroutine[object, None, T], timeout: float, what: str) -> T:
    """Run ``coro`` on the SSH loop and wait at most ``timeout`` seconds."""
    import asyncssh

    future = asyncio.run_coroutine_threadsafe(_outcome(coro, timeout), _event_loop())
    try:
        value = future.result(timeout + ANSWER_SLACK_S)
        if isinstance(value, _Failed):
            raise value.exc
        return value
    except TimeoutError:
        future.cancel()
        raise ToolTimeout(f"{what}: no answer in {timeout:.0f} s") from None
    except asyncssh.SFTPError:
        raise  # the file's own error: the caller words it
    except (asyncssh.Error, ConnectionError) as exc:
        # The connection closed under the call (sshd killed, host gone): a
        # PgrigError naming the host, never asyncssh's bare "SSH connection closed".
        raise ToolError(
            f"{what}: lost the SSH connection ({exc or type(exc).__name__})",
            hint="the host or its sshd went away; pgrig hosts check -i FILE tells when it is back",
        ) from None


class SshConnectError(Exception):
    """Why a connection failed, in asyncssh's terms; the preflight words it for the user."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind  # "unreachable", "key", "hostkey", "other"
        self.detail = detail


async def _connect(host: Host, timeout: float = CONNECT_TIMEOUT_S) -> asyncssh.SSHClientConnection:
    import asyncssh

    options: dict[str, Any] = {
        "port": host.port,
        "connect_timeout": timeout,
        # The inventory is the trust anchor, as in Ansible with host key checking
        # off: pgrig does not edit known_hosts. A host whose key changed is the
        # operator's to notice; docs/hosts.md says so.
        "known_hosts": None,
        "keepalive_interval": 15,
    }
    if host.user:
        options["username"] = host.user
    if host.key_file is not None:
        options["client_keys"] = [str(host.key_file)]
        options["agent_path"] = None
    try:
        return await asyncssh.connect(host.address, **options)
    except asyncssh.PermissionDenied as exc:
        raise SshConnectError("key", str(exc)) from None
    except (OSError, TimeoutError, asyncssh.ConnectionLost) as exc:
        # ConnectionLost before authentication: something took the TCP
        # connection but no sshd spoke on it.
        raise SshConnectError("unreachable", str(exc) or type(exc).__name__) from None
    except asyncssh.KeyImportError as exc:
        raise SshConnectError("keyfile", str(exc)) from None
    except asyncssh.Error as exc:
        raise SshConnectError("other", str(exc)) from None


# Whom a connection acts as: the account, its uid and, for an account that is
# not root and may become root ($1 = yes), sudo's exit code.
_WHO = (
    'id -un && id -u && if [ "$(id -u)" != 0 ] && [ "$1" = yes ]; then '
    'sudo -n true </dev/null >/dev/null 2>&1; echo "$?"; fi'
)


async def _reach(
    host: Host, timeout: float = CONNECT_TIMEOUT_S
) -> tuple[asyncssh.SSHClientConnection, Who]:
    """A connection to ``host`` and whom it acts as there (``_WHO``): one round trip."""
    conn = await _connect(host, timeout)
    argv = [SH, "-c", _WHO, "sh", "no" if host.become is False else "yes"]
    try:
        ran = await _ToEnd(argv, host.name).run(conn, command_line(argv, None), None, START_S)
    except BaseException:
        conn.close()
        raise
    words = ran.stdout.split()
    if ran.returncode != 0 or len(words) < 2 or not words[1].isdigit():
        conn.close()
        said = (ran.stderr or ran.stdout).strip() or f"exit code {ran.returncode}"
        raise SshConnectError("other", f"id did not say whom it connects as: {said}")
    sudo = int(words[2]) if len(words) > 2 and words[2].isdigit() else None
    return conn, Who(words[0], root=words[1] == "0", sudo=sudo)


def command_line(argv: Sequence[str], env: Mapping[str, str] | None, sudo: bool = False) -> str:
    """``echo $$; exec env K=V argv...``, every word quoted. Through sudo, the
    PID is echoed by a shell sudo starts, so that it is the command's own PID
    (sudo forks), which root can signal."""
    words = ["env", *(f"{k}={v}" for k, v in (env or {}).items()), *argv] if env else list(argv)
    if sudo:
        return "exec " + shlex.join(
            ["sudo", "-n", "--", "sh", "-c", 'echo $$; exec "$@"', "sh", *words]
        )
    return "echo $$; exec " + shlex.join(words)


def _exit_code(done: asyncssh.SSHCompletedProcess) -> int:
    """As subprocess says it: minus the signal that ended it; LOST: no word came."""
    if done.exit_signal is not None:
        return -signal.Signals[f"SIG{done.exit_signal[0]}"].value
    return done.exit_status if done.exit_status is not None else LOST


async def _begin(
    conn: asyncssh.SSHClientConnection, line: str, stdin: str | None, argv: list[str], host: str
) -> tuple[asyncssh.SSHClientProcess[str], int]:
    """``line`` (``command_line``) begun over a channel of its own, and the PID it
    printed first; ``stdin``: its whole input (None: kept open for ``send``)."""
    process = await conn.create_process(line)
    if stdin is not None:
        if stdin:
            process.stdin.write(stdin)
        process.stdin.write_eof()
    first = await process.stdout.readline()
    if not first.strip().isdigit():
        err = await process.stderr.read()
        raise ToolError(f"cannot start {argv[0]} on {host}", argv=argv, stderr=first + err)
    return process, int(first)


class _ToEnd:
    """One command run to its end over a channel of its own (``SshExecutor._run``);
    its PID on the host once it printed it: what stops it there."""

    def __init__(self, argv: list[str], host: str) -> None:
        self.argv = argv
        self.host = host
        self.pid = 0
        self.process: asyncssh.SSHClientProcess[str] | None = None

    async def run(
        self, conn: asyncssh.SSHClientConnection, line: str, input: str | None, timeout: float
    ) -> Ran:
        import asyncssh

        process, self.pid = await _begin(conn, line, input or "", self.argv, self.host)
        self.process = process
        try:
            done = await process.wait(timeout=timeout)
        except asyncssh.TimeoutError as exc:
            return Ran(None, str(exc.stdout or ""), str(exc.stderr or ""))
        code = _exit_code(done)
        stderr = str(done.stderr or "")
        if done.exit_status is None and done.exit_signal is None:
            # The host or its sshd went away: the command's fate is unknown, the
            # run is not; said where its stderr would be, as a started one's.
            stderr += f"pgrig: lost the SSH connection to {self.host}: no exit status came\n"
        return Ran(code, str(done.stdout or ""), stderr)

    def ended(self, seconds: float) -> bool:
        """Whether the command ended, waiting up to ``seconds`` for it."""
        process = self.process
        if process is None or process.exit_status is not None or process.exit_signal is not None:
            return True
        if not seconds:
            return False

        async def closed() -> None:
            await process.wait_closed()

        try:
            call(closed(), seconds, "wait")
        except ToolTimeout:
            return False
        return True


class _SshStarted(Started):
    """A command begun on its host (``_begin``), its output pumped by the loop."""

    def __init__(
        self,
        argv: Sequence[str],
        executor: SshExecutor,
        begun: tuple[asyncssh.SSHClientProcess[str], int],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        super().__init__(argv, executor.name)
        self._executor = executor
        self._process, self.pid = begun
        self._code: int | None = None
        # Held: the loop keeps only a weak reference to a task.
        self._pumping = asyncio.run_coroutine_threadsafe(self._pump(), loop)

    async def _pump(self) -> None:
        import asyncssh

        async def out() -> None:
            async for line in self._process.stdout:
                # asyncssh may hand over '' at the end of output: no line (an
                # empty line is "\n"); passed on, a probe's reader saw one more
                if line:
                    self._lines.put(line)
            self._lines.put(None)

        async def err() -> None:
            async for line in self._process.stderr:
                if line:  # as on stdout: no line; a streamed client's on_line saw one more
                    self._stderr.append(line)

        try:
            # Both read to their end: with the first failure alone raised, the
            # other reader's task failed unretrieved (a lost connection fails
            # both with one exception), and asyncio printed it with a traceback
            # on stderr when it was collected (ci18, test_remote_faults).
            ended = await asyncio.gather(out(), err(), return_exceptions=True)
            for outcome in ended:
                if isinstance(outcome, BaseException):
                    raise outcome
            done = await self._process.wait(check=False)
        except (OSError, asyncssh.Error) as exc:
            # The host or its sshd went away: the process's fate is unknown, the
            # run is not; say so where its stderr would be.
            self.lost = str(exc) or type(exc).__name__
            self._stderr.append(f"pgrig: lost the SSH connection to {self.host}: {exc}\n")
            self._lines.put(None)
            self._code = LOST
            return
        self._code = _exit_code(done)

    def send(self, text: str) -> None:
        process = self._process

        async def write() -> None:
            process.stdin.write(text)
            await process.stdin.drain()

        call(write(), 30, f"writing to {self.argv[0]} on {self.host}")

    def signal(self, signum: int) -> None:
        if self.poll() is None and self.pid:
            self._executor.run(
                ["kill", f"-{signum}", str(self.pid)], timeout=30, check=False, what="kill"
            )

    def poll(self) -> int | None:
        return self._code

    def _finish(self, timeout: float) -> int:
        async def ended() -> int:
            while self._code is None:
                await asyncio.sleep(0.01)
            return self._code

        try:
            return call(ended(), timeout, "wait")
        except ToolTimeout:
            raise TimeoutError from None


class SshExecutor(Executor):
    """A host reached over SSH; connect with ``SshExecutor.connect`` (the preflight does)."""

    def __init__(self, host: Host, conn: asyncssh.SSHClientConnection, who: Who) -> None:
        super().__init__(host)
        self._conn = conn
        self._sftp: asyncssh.SFTPClient | None = None
        self._who = who
        # An account that is not root but has passwordless sudo (and may use it:
        # not ansible_become=false): every command, and every file access, goes
        # through ``sudo -n``.
        self.sudo = not who.root and who.sudo == 0

    @classmethod
    def connect(cls, host: Host) -> SshExecutor:
        """Connected, and told whom it acts as there in the same round trip (the
        preflight's question). Raises SshConnectError with the reason's kind."""
        # Named, not described: the preflight's message describes the host already.
        conn, who = call(
            _reach(host), CONNECT_TIMEOUT_S + START_S + 5, f"connecting to {host.name}"
        )
        return cls(host, conn, who)

    def whoami(self) -> Who:
        return self._who

    def as_root(self) -> bool:
        return self._who.root or self.sudo  # known since it connected: no command

    def reconnected(self) -> SshExecutor:
        """A new connection to the same host (raises SshConnectError while it is away)."""
        return SshExecutor.connect(self.host)

    def connection_lost(self) -> bool:
        return bool(self._conn.is_closed())

    def reconnect(self, within_s: float) -> bool:
        """A new connection in place of a closed one (sshd's session process
        killed, its listener alive: issue 40.10), tried every 2 s."""
        deadline = time.monotonic() + within_s
        while True:
            # An attempt within the bound: a stopped sshd takes the TCP connect
            # and never answers, and each attempt waited CONNECT_TIMEOUT_S past it.
            left = min(CONNECT_TIMEOUT_S, max(deadline - time.monotonic(), 1.0))
            try:
                conn = call(_connect(self.host, left), left + 5, f"reaching {self.name}")
            except (SshConnectError, ToolError, ToolTimeout):
                if time.monotonic() + 2 >= deadline:
                    return False
                time.sleep(2)
                continue
            old, self._conn, self._sftp = self._conn, conn, None
            old.close()
            return True

    def connection(self) -> asyncssh.SSHClientConnection:
        return self._conn

    def _run(
        self, argv: list[str], *, env: Mapping[str, str] | None, timeout: float, input: str | None
    ) -> Ran:
        command = _ToEnd(argv, self.name)
        try:
            ran = call(
                command.run(self._conn, command_line(argv, env, self.sudo), input, timeout),
                timeout + START_S,
                f"running {argv[0]} on {self.name}",
            )
        except BaseException:
            # Ctrl-C in this thread, or the loop's answer late: not left running there.
            self._stop(command)
            raise
        if ran.returncode is None:
            self._stop(command)
        return ran

    def _stop(self, command: _ToEnd) -> None:
        """TERM, then KILL, to a command run to its end that has not ended: by its
        PID, with the host's ``kill`` (SSH channels carry no signals through OpenSSH)."""
        if not command.pid or command.ended(0):
            return

        def send(signum: signal.Signals) -> None:
            argv = ["kill", f"-{int(signum)}", "--", str(command.pid)]
            self.run(argv, timeout=30, check=False, what="kill")

        steps = ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S))
        proc.escalate_by(send, command.ended, steps)

    def _start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        stdin: bool,
        log: str | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> Started:
        if preexec is not None:
            raise AssertionError(f"a preexec hook cannot run on {self.name}")
        words = list(argv)
        if log is not None:  # the shell execs: the PID stays the program's own
            words = [SH, "-c", 'exec "$@" >> "$0" 2>&1', log, *words]
        line = command_line(words, env, self.sudo)
        begin = _begin(self._conn, line, None if stdin else "", words, self.name)
        begun = call(begin, START_S, f"starting {words[0]} on {self.name}")
        return _SshStarted(words, self, begun, _event_loop())

    def _files(self, coro: Awaitable[T], what: str) -> T:
        import asyncssh

        async def with_sftp() -> T:
            return await coro

        try:
            return call(with_sftp(), FILE_TIMEOUT_S, f"{what} on {self.name}")
        except asyncssh.SFTPError as exc:
            raise ToolError(f"{what} on {self.name}: {exc.reason}") from None

    async def _client(self) -> asyncssh.SFTPClient:
        if self._sftp is None:
            self._sftp = await self._conn.start_sftp_client()
        return self._sftp

    def _sudo_file(self, argv: list[str], what: str, data: bytes | None = None) -> str:
        """A file operation as root: SFTP runs as the connecting user."""
        data64 = None if data is None else base64.b64encode(data).decode() + "\n"
        return self.run(argv, timeout=FILE_TIMEOUT_S, what=what, input=data64).stdout

    def read_bytes(self, path: str) -> bytes:
        if self.sudo:
            return base64.b64decode(self._sudo_file(["base64", "--", path], f"reading {path}"))

        async def read() -> bytes:
            # In chunks to the end: /proc files report a size of 0.
            chunks: list[bytes] = []
            async with (await self._client()).open(path, "rb") as fh:
                while chunk := await fh.read(1 << 20):
                    assert isinstance(chunk, bytes)  # opened "rb"
                    chunks.append(chunk)
            return b"".join(chunks)

        return self._files(read(), f"reading {path}")

    def write_bytes(self, path: str, data: bytes, mode: int = 0o644) -> None:
        if self.sudo:
            script = 'base64 -d > "$1" && chmod "$2" "$1"'
            argv = ["sh", "-c", script, "sh", path, f"{mode:o}"]
            self._sudo_file(argv, f"writing {path}", data)
            return

        async def write() -> None:
            sftp = await self._client()
            async with sftp.open(path, "wb") as fh:
                await fh.write(data)
            await sftp.chmod(path, mode)

        self._files(write(), f"writing {path}")

    def exists(self, path: str) -> bool:
        if self.sudo:
            done = self.run(["test", "-e", path], timeout=30, check=False, what="test")
            return done.returncode == 0

        async def exists() -> bool:
            return bool(await (await self._client()).exists(path))

        return self._files(exists(), f"looking for {path}")

    def listdir(self, path: str) -> list[str]:
        if self.sudo:
            return sorted(
                self._sudo_file(["ls", "-A", "--", path], f"listing {path}").split("\n")[:-1]
            )

        async def listdir() -> list[str]:
            names = await (await self._client()).listdir(path)
            return sorted(str(n) for n in names if str(n) not in (".", ".."))

        return self._files(listdir(), f"listing {path}")

    def free_bytes(self, path: str) -> int:
        async def free() -> int:
            st = await (await self._client()).statvfs(path)
            return int(st.bavail * st.frsize)

        return self._files(free(), f"free space of {path}")

    def close(self) -> None:
        async def close() -> None:
            if self._sftp is not None:
                self._sftp.exit()
            self._conn.close()
            await self._conn.wait_closed()

        with contextlib.suppress(ToolError):  # a connection already lost is closed
            call(close(), 10, f"closing {self.name}")
