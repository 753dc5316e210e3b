"""This machine as an executor: ``LocalExecutor``, pyinfra's ``@local``.

The same operations as any host's (``pgrig.hosts.executor.Executor``), each done
here the way this machine allows: commands through ``pgrig.proc`` (its
implementation detail: process groups, signals held across fork, a storage
lab's cgroup joined from inside the child), files and signals in this process
where no command is needed, test files registered with ``pgrig.ownership`` so
that ``pgrig clean`` finds them after a kill -9.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from pgrig import ownership, proc
from pgrig.errors import BinaryNotFound, ToolError
from pgrig.files import write_atomically
from pgrig.hosts.executor import SH, STOP_GRACE_S, TMP, Executor, Launch, Ran, Started, Who
from pgrig.hosts.inventory import Host

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SYSTEM_TOOLS = frozenset(
    {"chmod", "chown", "find", "id", "kill", "mkdir", "mktemp", "rm", "setpriv", "sh", "test"}
)

# What to do when PostgreSQL's tools are not where pgrig was told, on this machine.
PG_BIN_HINT = (
    "point --pg-bin (campaign: pg_bin in [[target]]) at a PostgreSQL bin directory "
    "(Debian: apt-get install postgresql-15 puts one in /usr/lib/postgresql/15/bin)"
)


class _LocalStarted(Started):
    def __init__(self, argv: Sequence[str], host: str, popen: subprocess.Popen[str]) -> None:
        super().__init__(argv, host)
        self._popen = popen
        self.pid = popen.pid
        self._readers = [
            threading.Thread(target=self._pump, args=(stream, is_stdout), daemon=True)
            for stream, is_stdout in ((popen.stdout, True), (popen.stderr, False))
            if stream is not None
        ]
        if popen.stdout is None:  # its output goes to a log (``start(log=)``)
            self._lines.put(None)
        for t in self._readers:
            t.start()

    def _pump(self, stream: IO[str], is_stdout: bool) -> None:
        with stream:
            for line in stream:
                if is_stdout:
                    self._lines.put(line)
                else:
                    self._stderr.append(line)
        if is_stdout:
            self._lines.put(None)

    def send(self, text: str) -> None:
        assert self._popen.stdin is not None
        self._popen.stdin.write(text)
        self._popen.stdin.flush()

    def signal(self, signum: int) -> None:
        if self._popen.poll() is None:
            # The child leads its own process group: what it spawned gets the signal too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._popen.pid, signum)

    def poll(self) -> int | None:
        return self._popen.poll()

    def _finish(self, timeout: float) -> int:
        try:
            code = self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError from None
        for t in self._readers:
            t.join(timeout=5)
        if self._popen.stdin is not None and not self._popen.stdin.closed:
            self._popen.stdin.close()
        return code


class LocalExecutor(Executor):
    """This machine: the same operations as any host's, each done here the way
    this machine allows (in this process where a command is not needed)."""

    def __init__(self, host: Host | None = None) -> None:
        super().__init__(host or Host(name="localhost", address="127.0.0.1", local=True))

    @property
    def where(self) -> str:
        return "this machine"

    def install_hint(self, how: str) -> str:
        return how

    def whoami(self) -> Who:
        # This process's own account; sudo asked as on any host.
        user = pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0 or self.host.become is False:
            return Who(user, root=os.geteuid() == 0)
        if shutil.which("sudo") is None:
            return Who(user, root=False, sudo=127)  # as a shell says a missing command
        sudo = self.run(["sudo", "-n", "true"], timeout=30, check=False, what="sudo")
        return Who(user, root=False, sudo=sudo.returncode)

    def as_root(self) -> bool:
        return os.geteuid() == 0  # asked without whoami's sudo check (a command)

    def of(self, path: str) -> str:
        return path  # this machine's paths need no host named

    def stream(
        self,
        argv: Sequence[str | Path],
        *,
        timeout: float,
        what: str,
        on_line: proc.LineCallback | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        launch: Launch | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> proc.Completed:
        # proc's own: both pipes read by one selector (lines in the order printed,
        # a line redrawn with \r cut), and ``preexec`` joins a storage lab's
        # cgroup from inside the child.
        return proc.stream(
            self.launched([str(a) for a in argv], launch),
            timeout=timeout,
            on_line=on_line,
            env=None if env is None else {**os.environ, **env},
            check=check,
            what=what,
            preexec=preexec,
        )

    def on_path(self, name: str, hint: str, search_path: str | None = None) -> str:
        found = shutil.which(name, path=search_path)
        if found is None:
            raise BinaryNotFound(f"{name} not found on PATH", hint=hint)
        return found

    def tool(self, bin_dir: Path | str, name: str) -> str:
        # The words of each way it can be wrong here, and the option that fixes it.
        directory = Path(bin_dir)
        if not directory.is_dir():
            raise BinaryNotFound(f"{name}: {directory} is not a directory", hint=PG_BIN_HINT)
        binary = directory / name
        if not binary.is_file():
            raise BinaryNotFound(f"{name} not found in {directory}", hint=PG_BIN_HINT)
        if not binary.stat().st_mode & 0o111:
            raise BinaryNotFound(
                f"{binary} is not executable", hint=f"chmod +x {binary}, or {PG_BIN_HINT}"
            )
        return str(binary)

    def space(self, directory: Path) -> tuple[int, int]:
        usage = shutil.disk_usage(directory) if directory.is_dir() else None
        return (usage.free, usage.total) if usage is not None else (-1, 0)

    def create_exclusively(self, path: Path) -> None:
        # Registered, so that ``pgrig clean`` finds it after a kill -9.
        ownership.create_exclusively(path)

    def remove_file(self, path: Path) -> None:
        ownership.remove_file(path)

    def _popen(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None,
        *,
        stdin: bool,
        out: IO[bytes] | int,
        preexec: Callable[[], None] | None = None,
    ) -> subprocess.Popen[str]:
        """``argv`` started in a process group of its own (what a stop signals)."""
        full_env = {**os.environ, **(env or {})}
        words = list(argv)
        search = os.pathsep.join([full_env.get("PATH", ""), SYSTEM_PATH])
        if words[0] in SYSTEM_TOOLS:
            # The system's tools the lifecycle runs are found after the user's PATH
            # too: a PATH that hides a tool (fio) must not stop a server's start.
            words[0] = shutil.which(words[0], path=search) or words[0]
        if SH in words:  # a lifecycle script (as the server's user too): its tools alike
            full_env["PATH"] = search
        try:
            return subprocess.Popen(
                words,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                text=True,
                encoding="utf-8",
                errors="replace",  # a tool's odd byte is no reason to lose its output
                env=full_env,
                start_new_session=True,
                preexec_fn=preexec,
            )
        except OSError as exc:
            what = f"cannot start {argv[0]} on {self.name}: {exc}"
            raise ToolError(what, argv=list(argv)) from exc

    def _run(
        self, argv: list[str], *, env: Mapping[str, str] | None, timeout: float, input: str | None
    ) -> Ran:
        # Signals held between fork and return (issue 19: one arriving in between
        # left the child running, unreaped); one held is delivered as the block
        # ends, inside the guard that stops the child.
        popen = None
        try:
            with proc.signals_deferred():
                popen = self._popen(argv, env, stdin=input is not None, out=subprocess.PIPE)
            try:
                stdout, stderr = popen.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.stop_group(popen, STOP_GRACE_S, interrupt=False)
                return Ran(None, *_leftover(popen))
            return Ran(popen.returncode, stdout, stderr)
        except BaseException:
            # Ctrl-C or a signal turned into an exception while it ran: not left behind.
            if popen is not None:
                proc.stop_group(popen, STOP_GRACE_S, interrupt=False)
                _close(popen)
            raise

    def _start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        stdin: bool,
        log: str | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> Started:
        # The log opened here (no shell between), and ``preexec`` run in the child.
        popen = None
        started: _LocalStarted | None = None
        try:
            # Signals held between fork and return, as in ``_run``. The Started is
            # made in the block too: its reader threads take seconds to start on a
            # loaded machine, and a signal then left initdb running after pgrig returned.
            with proc.signals_deferred(), _output(log) as out:
                popen = self._popen(argv, env, stdin=stdin, out=out, preexec=preexec)
                started = _LocalStarted(argv, self.name, popen)
        except BaseException:
            if started is not None:
                started.stop()  # its readers end with the output
            elif popen is not None:
                proc.stop_group(popen)
                _close(popen)
            raise
        return started

    def read_bytes(self, path: str) -> bytes:
        # What a missing file raises on every executor (the SSH one's SFTP error
        # too): a reader of a file that may go meanwhile catches one error.
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise ToolError(f"reading {path} on {self.name}: {exc.strerror}") from None

    def write_bytes(self, path: str, data: bytes, mode: int = 0o644) -> None:
        target = Path(path)
        target.write_bytes(data)
        target.chmod(mode)

    def replace_file(
        self, path: str, data: bytes, *, mode: int = 0o644, user: str | None = None
    ) -> None:
        # In this process, synced to the disk too (a lossy filesystem's power loss).
        owner = proc.OsUser.lookup(user) if user is not None else None
        write_atomically(Path(path), data, mode=mode, owner=owner)

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError as exc:
            raise ToolError(f"listing {path} on {self.name}: {exc.strerror}") from None

    def free_bytes(self, path: str) -> int:
        return shutil.disk_usage(path).free

    def make_tempdir(self, prefix: str) -> str:
        return tempfile.mkdtemp(prefix=prefix, dir=TMP)

    def fetch(self, path: str, into: Path) -> Path:
        # Streamed in this process: a run's log may be larger than it is worth holding.
        return Path(shutil.copyfile(path, into / Path(path).name))

    def signal(self, pid: int, signum: int) -> None:
        # In this process, no command: a crash's moment is the moment it was sent.
        try:
            os.kill(pid, signum)
        except ProcessLookupError as exc:
            raise ToolError(f"no process {pid} on {self.name} to signal", argv=["kill"]) from exc

    def processes_using(self, path: str) -> list[int]:
        # In this process, no command: it is polled while a crashed server restarts.
        target = os.path.realpath(path)
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/cwd") == target:
                        found.append(int(entry))
        return found


def _leftover(popen: subprocess.Popen[str]) -> tuple[str, str]:
    """The output of a child just stopped, as far as it comes within a few seconds:
    a process it started in a session of its own may hold its pipes open."""
    try:
        return popen.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        _close(popen)
        return "", ""


def _close(popen: subprocess.Popen[str]) -> None:
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            stream.close()


@contextlib.contextmanager
def _output(log: str | None) -> Iterator[IO[bytes] | int]:
    """Where a started process's stdout and stderr go: pipes read by its Started,
    or appended to ``log`` (closed here once the child holds it)."""
    if log is None:
        yield subprocess.PIPE
        return
    with open(log, "ab") as out:
        yield out


# This machine: what a tool runs on unless told another (``client=``, ``host=``),
# and ``Context.host`` unless the target kind chose another. Never given an
# ``adopt``: only a remote kind's own executors register their probes.
HERE = LocalExecutor()
