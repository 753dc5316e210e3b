"""One interface for acting on a host: this machine, or another over SSH.

What the cluster, probes, workloads and monitor need of a host: run a command
to completion (argument list, timeout, environment), start a long-running one
and talk to it, signal it or stop it, read and write files (``/proc`` files
included), check a path and its free space. ``pgrig.hosts.local.LocalExecutor``
does it here, ``pgrig.hosts.ssh.SshExecutor`` over SSH: what a caller writes
against this interface runs on either (pyinfra's connectors). Every wait has a
timeout; a process that outlives its timeout is stopped (TERM, then KILL)
before the error is raised.
"""

from __future__ import annotations

import base64
import os
import queue
import re
import shlex
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pgrig import proc
from pgrig.errors import BinaryNotFound, ToolError, ToolTimeout, UsageError, WorkdirError
from pgrig.hosts.inventory import Host

STOP_GRACE_S = 5.0
TMP = "/tmp"  # where pgrig makes its directories on a host (pgrig hosts clean looks there)

# O_EXCL from a process on the host: the one atomic "create, or fail if anything
# is there" without a shell (coreutils has none for files). python3 is on every
# server host: the environment is read with it (pgrig.environment.remote).
_CREATE_EXCLUSIVELY = (
    "import os, sys; os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))"
)
# The free bytes and the size of a directory's filesystem; -1 if it is no directory.
_SPACE = (
    "import os, sys; p = sys.argv[1]; s = os.statvfs(p) if os.path.isdir(p) else None; "
    "print(s.f_bavail * s.f_frsize if s else -1, s.f_blocks * s.f_frsize if s else 0)"
)
# Tools' output parsed by pgrig: decimal points and English, whatever the host's locale.
C_LOCALE = {"LC_ALL": "C"}


# util-linux's setpriv, coreutils' id and the POSIX shell, where Debian and its
# kind put them on every host
SETPRIV, ID, SH = "/usr/bin/setpriv", "/usr/bin/id", "/bin/sh"


@dataclass(frozen=True)
class Launch:
    """Who and where a command runs on its host, beyond the executor's own account:
    as the OS account ``user`` (PostgreSQL refuses root), moved first into the
    cgroups whose ``cgroup.procs`` files are ``cgroups`` (a storage lab's I/O and
    memory caps), so that every process it forks - a postmaster's backends - is
    in them from the start. The same words on every host (``Executor.launched``):
    a shell that writes its PID into the cgroups, then ``setpriv``, which execs,
    so the PID pgrig holds stays the command's own."""

    user: str | None = None
    cgroups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Who:
    """Whom an executor acts as on its host: the OS account, whether it is root,
    and, asked only of an account that is not root and may become root (not
    ``ansible_become=false``), the exit code of ``sudo -n true`` (0: passwordless
    sudo; 127: no sudo) - what the preflight judges its root access by."""

    user: str
    root: bool
    sudo: int | None = None


@dataclass(frozen=True)
class Ran:
    """One command's end as its connector saw it: the exit code (None: it outlived
    its timeout and was stopped on its host), its whole stdout and stderr."""

    returncode: int | None
    stdout: str
    stderr: str

    def completed(
        self,
        argv: list[str],
        host: str,
        *,
        what: str | None,
        timeout: float,
        check: bool,
        since: float,
    ) -> proc.Completed:
        """The one judgement of every command's end on every host, run to its end
        or started and waited for: ToolTimeout, ToolError (``check``), or its
        Completed (``since``: when it started, monotonic)."""
        what = what or Path(argv[0]).name
        if self.returncode is None:
            raise ToolTimeout(
                f"{what} on {host} did not finish in {timeout:.0f} s and was stopped",
                argv=argv,
                stderr=self.stderr,
            )
        if check and self.returncode != 0:
            raise ToolError(
                f"{what} failed on {host}",
                argv=argv,
                returncode=self.returncode,
                stderr=self.stderr,
            )
        return proc.Completed(
            argv=argv,
            returncode=self.returncode,
            stdout=self.stdout,
            stderr=self.stderr,
            elapsed=time.monotonic() - since,
        )


class Started(ABC):
    """A process started on a host; stdout arrives line by line, stderr is kept."""

    def __init__(self, argv: Sequence[str], host: str) -> None:
        self.argv = list(argv)
        self.host = host
        self.pid = 0  # on its host
        self.started = time.monotonic()
        # stdout lines as printed (newline kept); None: stdout closed
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._rest: list[str] = []
        self._stderr: list[str] = []
        # Why the connection that carried it went away (its host's sshd killed,
        # the host gone); None while it holds. The process's fate is then unknown.
        self.lost: str | None = None

    def readline(self, timeout: float) -> str | None:
        """The next stdout line (without its newline); None at the end of output.
        Raises ToolTimeout when nothing came in ``timeout`` seconds."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise ToolTimeout(
                f"{self.argv[0]} on {self.host} printed nothing for {timeout:.0f} s",
                argv=self.argv,
            ) from None
        if line is None:
            self._lines.put(None)  # the end stays the end
            return None
        return line.rstrip("\n")

    def stderr_tail(self, lines: int) -> list[str]:
        """The last ``lines`` stderr lines printed until now (the process may still
        run): a look at its progress that costs the same at any point of a long run."""
        return self._stderr[-lines:]

    def stderr_from(self, first: int) -> list[str]:
        """The stderr lines from the ``first`` on (0: all), as printed until now."""
        return self._stderr[first:]

    def stderr_lines(self) -> int:
        """How many stderr lines it printed until now: a progress heartbeat counts them."""
        return len(self._stderr)

    @abstractmethod
    def send(self, text: str) -> None:
        """Write to the process's stdin."""

    @abstractmethod
    def signal(self, signum: int) -> None:
        """Send a signal; a process that already ended is not an error."""

    @abstractmethod
    def poll(self) -> int | None:
        """The exit code once the process ended, else None."""

    @abstractmethod
    def _finish(self, timeout: float) -> int:
        """Wait for the exit code; raise TimeoutError past ``timeout``."""

    def wait(
        self, timeout: float, *, check: bool = True, what: str | None = None
    ) -> proc.Completed:
        """Wait for the end; stop it (TERM, then KILL) if it outlives ``timeout``."""
        try:
            code = self._finish(timeout)
        except TimeoutError:
            self.stop()
            ran = Ran(None, "", "".join(self._stderr))
        else:
            ran = Ran(code, self._rest_of_stdout(), "".join(self._stderr))
        return ran.completed(
            self.argv, self.host, what=what, timeout=timeout, check=check, since=self.started
        )

    def _rest_of_stdout(self) -> str:
        """What ``readline`` did not take: its readers have ended, or end within 5 s."""
        while True:
            try:
                line = self._lines.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                self._lines.put(None)
                break
            self._rest.append(line)
        return "".join(self._rest)

    def stop(self, grace: float = STOP_GRACE_S) -> int | None:
        """TERM, then KILL after ``grace`` seconds; the exit code if it ended."""

        def gone(seconds: float) -> bool:
            if not seconds:
                return self.poll() is not None
            try:
                self._finish(seconds)  # also collects the output readers
            except TimeoutError:
                return False
            return True

        proc.escalate_by(self.signal, gone, ((signal.SIGTERM, grace), (signal.SIGKILL, grace)))
        return self.poll()


# How long a server's host may take to answer SSH again before pgrig gives up on
# it (the study stops, exit 7): sshd restarted by systemd takes a second or two.
# ``PGRIG_RECONNECT_S`` sets another bound (a host that reboots needs minutes; a
# test that proves the giving up needs a few seconds).
RECONNECT_S = 20.0
RECONNECT_VAR = "PGRIG_RECONNECT_S"
_RECONNECT_MAX_S = 3600.0


def reconnect_s() -> float:
    """The reconnect bound: ``PGRIG_RECONNECT_S`` when set, else ``RECONNECT_S``.
    A bad value is refused naming the variable (the remote target asks before a
    study exists, so a lost host never meets it mid-study)."""
    raw = os.environ.get(RECONNECT_VAR)
    if raw is None or not raw.strip():
        return RECONNECT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= _RECONNECT_MAX_S:  # nan fails too
        raise UsageError(
            f"{RECONNECT_VAR}={raw!r}: not a number of seconds above 0 and at most "
            f"{_RECONNECT_MAX_S:.0f}",
            hint=f"give the seconds a server's host may take to answer SSH again, e.g. "
            f"{RECONNECT_VAR}=60, or unset it for {RECONNECT_S:.0f} s",
        )
    return value


class Executor(ABC):
    """Commands, processes and files on one host. A connector runs a command to
    its end in one call of its own (``_run``) and starts one to talk to
    (``_start``); how every end is judged - timeout, failure, ``Completed`` - is
    ``Ran.completed``, the same for both and for every connector."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.name = host.name  # what messages and records call the host
        self._ids: dict[str, tuple[str, str]] = {}  # user_ids, per OS account
        # Told the PID of each tool a step starts here for a while (the storage
        # probes), so that the owner record of pgrig's directory it works in
        # names it and `pgrig clean` stops it after a kill -9; None: nobody.
        self.adopt: Callable[[int], None] | None = None

    @property
    def where(self) -> str:
        """How a message names the host ("on db1", "on this machine")."""
        return self.name

    def of(self, path: str) -> str:
        """A path of this host as a message names it ("/tmp/x on db1")."""
        return f"{path} on {self.name}"

    def install_hint(self, how: str) -> str:
        """How to get a missing tool onto this host (``how``: the command)."""
        return f"pgrig hosts provision installs it, or {how} on {self.name}"

    @abstractmethod
    def whoami(self) -> Who:
        """Whom this executor acts as on its host."""

    def as_root(self) -> bool:
        """Whether its commands run as root on its host (what a server made
        there as its OS user needs)."""
        return self.whoami().root

    def reconnected(self) -> Executor:
        """The host reached anew, for an executor whose connection can be lost
        (SSH): what stops a lost host's processes once it answers again."""
        return self

    def connection_lost(self) -> bool:
        """Whether the way to the host is gone (an SSH connection closed): then
        nothing read through it says anything about the host."""
        return False

    def reconnect(self, within_s: float) -> bool:
        """Reach the host again in place (every holder of this executor goes on
        with it), trying for up to ``within_s`` seconds; False: still away."""
        return True

    @abstractmethod
    def _start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        stdin: bool,
        log: str | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> Started:
        """Start ``argv`` as it is; ``env`` is added to the host's environment;
        ``log`` and ``preexec`` as ``start`` says."""

    def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: bool = False,
        launch: Launch | None = None,
        log: str | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> Started:
        """Start ``argv``; ``env`` is added to the host's environment; ``launch``:
        as another OS user, in cgroups. ``log``: a long-lived process's (a FUSE
        daemon's) stdout and stderr appended to that file on the host, none read
        back, so that nothing grows in pgrig while it runs; the PID stays the
        process's own. ``preexec`` exists only on this machine (as ``stream``'s)."""
        words = self.launched(argv, launch)
        return self._start(words, env=env, stdin=stdin, log=log, preexec=preexec)

    @abstractmethod
    def _run(
        self, argv: list[str], *, env: Mapping[str, str] | None, timeout: float, input: str | None
    ) -> Ran:
        """Run ``argv`` as it is to its end, the connector's own way, in one call:
        ``input`` its whole stdin (None: none), stopped on its host (TERM, then
        KILL) if it outlives ``timeout`` or this thread is interrupted meanwhile."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        what: str | None = None,
        launch: Launch | None = None,
        input: str | None = None,
    ) -> proc.Completed:
        """Run ``argv`` to its end; ``input``: its whole stdin (a secret it reads
        there never lands in a file on the host)."""
        what = what or Path(argv[0]).name
        words = self.launched(argv, launch)
        since = time.monotonic()
        ran = self._run(words, env=env, timeout=timeout, input=input)
        return ran.completed(words, self.name, what=what, timeout=timeout, check=check, since=since)

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
        """Run a tool to its end in the C locale, each output line to ``on_line``
        as it comes (a probe's progress on stdout, pgbench's ``-P`` on stderr);
        ``env`` is added to the host's environment. The wait asks the study's
        stop and the run's watchdog (``proc.raise_if_cancelled``) as it goes, on
        any host. ``preexec`` (a storage lab's cgroup to join before exec) exists
        only on this machine; ``launch`` says it on any host."""
        if preexec is not None:
            raise AssertionError(f"a preexec hook cannot run on {self.name}")
        started = self.start([str(a) for a in argv], env={**C_LOCALE, **(env or {})}, launch=launch)
        if self.adopt is not None:
            self.adopt(started.pid)
        deadline = time.monotonic() + timeout
        read: list[str] = []  # what readline took: ``wait`` returns only the rest
        told = 0  # stderr lines handed to ``on_line``

        def tell_stderr() -> None:
            nonlocal told
            if on_line is None:
                return
            lines = started.stderr_from(told)
            told += len(lines)
            for line in lines:
                on_line("stderr", line.rstrip("\n"))

        try:
            while (left := deadline - time.monotonic()) > 0:
                proc.raise_if_cancelled()
                try:
                    # Short reads: stderr's lines and the watchdog are looked at between them.
                    line = started.readline(timeout=min(left, 0.5))
                except ToolTimeout:
                    tell_stderr()
                    continue  # quiet for a while (pg_test_fsync waits a test out): look again
                tell_stderr()
                if line is None:
                    break
                read.append(line + "\n")
                if on_line is not None:
                    on_line("stdout", line)
            done = started.wait(max(deadline - time.monotonic(), 1.0), check=check, what=what)
            tell_stderr()
        except BaseException:
            started.stop()  # Ctrl-C, a timeout or the watchdog: the tool stops too, on its host
            raise
        return replace(done, stdout="".join(read) + done.stdout)

    def on_path(self, name: str, hint: str, search_path: str | None = None) -> str:
        """A tool on the host's PATH (``which``: Debian's essential debianutils)."""
        done = self.run(["which", name], timeout=60, check=False, what="which")
        found = done.stdout.strip()
        if done.returncode != 0 or not found:
            raise BinaryNotFound(f"{name} not found on {self.name}", hint=hint)
        return found

    def tool(self, bin_dir: Path | str, name: str) -> str:
        """``<bin_dir>/<name>`` on the host, or BinaryNotFound naming both."""
        path = f"{bin_dir}/{name}"
        if not self.exists(path):
            raise BinaryNotFound(
                f"{name} not found in {bin_dir} on {self.name}",
                hint=f"pgrig hosts provision installs PostgreSQL there, or set host_pg_bin "
                f"to PostgreSQL's bin directory on {self.name}",
            )
        return path

    def space(self, directory: Path) -> tuple[int, int]:
        """The free bytes and the size of the filesystem of ``directory``; free
        -1: it is no directory."""
        # One command, as root (through sudo where the preflight chose it): SFTP
        # runs as the connecting user, who may not see into pgrig's 0700 directory.
        done = self.run(["python3", "-c", _SPACE, str(directory)], timeout=60, what="python3")
        free, total = (int(word) for word in done.stdout.split())
        return free, total

    def create_exclusively(self, path: Path) -> None:
        """Create ``path``, refusing if anything is there: it may be someone's data.
        (Another host needs no record of it for ``pgrig clean``: the probes run in
        a directory pgrig made there, removed with the server's.)"""
        argv = ["python3", "-c", _CREATE_EXCLUSIVELY, str(path)]
        done = self.run(argv, timeout=60, check=False, what="python3")
        if done.returncode == 0:
            return
        if "FileExistsError" in done.stderr:
            raise WorkdirError(
                f"{path} already exists on {self.name}; pgrig will not overwrite it",
                hint=f"remove it on {self.name} if it is left over from an interrupted pgrig run",
            )
        raise WorkdirError(
            f"cannot create {path} on {self.name}: {done.stderr.strip().splitlines()[-1:]}",
            hint="choose a directory pgrig can write to",
        )

    def remove_file(self, path: Path) -> None:
        """Remove a file ``create_exclusively`` made (and nothing else)."""
        self.run(["rm", "-f", "--", str(path)], timeout=60, what="rm")

    def user_ids(self, user: str) -> tuple[str, str]:
        """The uid and gid of the OS account ``user`` on this host (``id``), asked once."""
        known = self._ids.get(user)
        if known is None:
            both = [SH, "-c", f'{ID} -u "$1" && {ID} -g "$1"', "sh", user]  # one round trip
            uid, gid = self.run(both, timeout=30, what="id").stdout.split()
            known = self._ids[user] = (uid, gid)
        return known

    def launched(self, argv: Sequence[str], launch: Launch | None) -> list[str]:
        """``argv`` wrapped so that it runs as ``launch`` says, on any host."""
        words = [str(word) for word in argv]
        if launch is None:
            return words
        if launch.user is not None:
            uid, gid = self.user_ids(launch.user)
            # setpriv execs (runuser forks): a started server's PID is the postmaster's.
            # Absolute paths, as the tools pgrig runs itself: a PATH of the user's (a
            # test's PATH=/nonexistent hiding fio) must not decide whether a server starts.
            words = [SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--", *words]
        if launch.cgroups:
            # Root moves the shell into the cgroups before it becomes the user.
            enter = "".join(f"echo $$ > {shlex.quote(path)} && " for path in launch.cgroups)
            words = [SH, "-c", enter + 'exec "$@"', "sh", *words]
        return words

    @abstractmethod
    def read_bytes(self, path: str) -> bytes: ...

    @abstractmethod
    def write_bytes(self, path: str, data: bytes, mode: int = 0o644) -> None: ...

    def replace_file(
        self, path: str, data: bytes, *, mode: int = 0o644, user: str | None = None
    ) -> None:
        """Replace ``path`` with ``data``, owned by the OS account ``user`` (None:
        the executor's own): written beside and renamed over, so that a kill or a
        power loss leaves the old file or the new, never half of one (a server's
        pgrig.conf, its pg_hba.conf, an owner record). One command on the host,
        the data on its stdin: not a write, a chown and a rename, each a round trip."""
        ids = "{}:{}".format(*self.user_ids(user)) if user is not None else ""
        script = (
            'new="$1.pgrig-new" && umask 077 && base64 -d > "$new" && chmod "$2" "$new" && '
            '{ [ -z "$3" ] || chown "$3" "$new"; } && exec mv -f "$new" "$1"'
        )
        data64 = base64.b64encode(data).decode() + "\n"
        argv = [SH, "-c", script, "sh", path, f"{mode:o}", ids]
        self.run(argv, timeout=30, what=f"replacing {path}", input=data64)

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def listdir(self, path: str) -> list[str]: ...

    @abstractmethod
    def free_bytes(self, path: str) -> int:
        """Bytes an unprivileged writer may still use on the filesystem of ``path``."""

    def writable_by(self, path: Path | str, user: str) -> bool:
        """Whether the OS account ``user`` can write to ``path`` here, every parent
        searched as that user (coreutils' ``test -w`` run as it): what a server's
        or a client's directory must be before its process is started there."""
        argv = ["/usr/bin/test", "-w", str(path)]
        return self.run(argv, timeout=10, check=False, what="test", launch=Launch(user)).ok

    def fetch(self, path: str, into: Path) -> Path:
        """A copy here, in the directory ``into``, of the host's file ``path``
        (a client's per-transaction log, read after its run)."""
        copy = into / Path(path).name
        copy.write_bytes(self.read_bytes(path))
        return copy

    def processes_using(self, path: str) -> list[int]:
        """PIDs of the processes working in the directory ``path`` (every backend of
        a PostgreSQL cluster chdirs to its data directory)."""
        pattern = re.sub(r"([][*?\\])", r"\\\1", path)  # find's -lname is a glob
        argv = ["find", "/proc", "-mindepth", "2", "-maxdepth", "2", "-name", "cwd"]
        # Processes come and go while find looks: its complaints are no failure.
        done = self.run([*argv, "-lname", pattern], timeout=30, check=False, what="find")
        return [int(line.split("/")[2]) for line in done.stdout.splitlines() if line.strip()]

    def signal(self, pid: int, signum: int) -> None:
        """Send ``signum`` to the process ``pid`` of this host (a crash test's
        SIGKILL of a postmaster): its ``kill``; a PID that is gone is an error."""
        self.run(["kill", f"-{int(signum)}", "--", str(pid)], timeout=30, what="kill")

    def read_text(self, path: str) -> str:
        """A text file; ``/proc`` files included (they report size 0, so are read to the end)."""
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def make_tempdir(self, prefix: str) -> str:
        argv = ["mktemp", "-d", f"--tmpdir={TMP}", f"{prefix}XXXXXX"]
        return self.run(argv, timeout=30, what="mktemp").stdout.strip()

    def remove_tree(self, path: str) -> None:
        """Remove a directory pgrig made (``make_tempdir``); never called on anything else."""
        self.run(["rm", "-rf", "--one-file-system", "--", path], timeout=120, what="rm")

    def close(self) -> None:  # noqa: B027 - nothing to release locally
        """Release connections; processes still running are the caller's to stop first."""
