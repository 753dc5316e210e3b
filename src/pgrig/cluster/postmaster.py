"""One PostgreSQL server's lifecycle on any host, through that host's executor.

initdb, ``pg_ctl start`` and the wait for ``pg_isready``, a restart with
settings for one start, a restart after a crash, stop escalating fast ->
immediate -> SIGQUIT/SIGKILL of a verified postmaster, its log's tail: the same
code for the cluster on this machine (``LocalExecutor``) and a server on
another host (``SshExecutor``). Where the server lives and how it is reached
(a private unix socket here, TCP with a password there) is its maker's
(``pgrig.cluster.server.Cluster``, ``pgrig.cluster.hosted.HostedServer``);
every command runs as the server's OS user, in a storage lab's cgroups when
it has them (``Launch``).
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence

from psycopg import sql

from pgrig.conninfo import Conn
from pgrig.errors import ClusterError, ToolError
from pgrig.hosts.executor import Executor, Launch

# Tool output parseable (decimal points, English field names) whatever the locale.
C_LOCALE = {"LC_ALL": "C"}
# What pg_ctl's -o may carry: pg_ctl hands it to a shell, so only words no
# shell changes (names, numbers, addresses, paths pgrig made).
_PLAIN = re.compile(r"[A-Za-z0-9_./:-]+")
_NAME = re.compile(r"[A-Za-z0-9_.]+")


def command_line(settings: Mapping[str, str]) -> str:
    """``-c name=value`` options for pg_ctl's ``-o``, which pg_ctl hands to a shell:
    only plain names and values (``wal_level=minimal``) are let through."""
    for name, value in settings.items():
        if not (_NAME.fullmatch(name) and _PLAIN.fullmatch(value)):
            raise ClusterError(
                f"server setting {name} = {value!r}: only letters, digits, '_' and '.' "
                "can go on the server's command line"
            )
    return " ".join(f"-c {name}={value}" for name, value in settings.items())


def wait_accepting(
    ex: Executor,
    isready: Sequence[str],
    timeout: float,
    *,
    where: str,
    exited: Callable[[], None] | None = None,
    hint: str | None = None,
) -> None:
    """Poll ``pg_isready`` (``isready``: its argument list) on the server's host
    until it answers; ``exited`` raises when the server is known to be gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if exited is not None:
            exited()
        if ex.run(isready, timeout=30, check=False, what="pg_isready").ok:
            return
        time.sleep(0.2)
    raise ClusterError(
        f"the server {where} did not accept connections in {timeout:.0f} s", hint=hint
    )


def create_tablespace(admin: Conn, name: str, location: str) -> str:
    """CREATE TABLESPACE ``name`` in ``location``, a directory made for it."""
    with admin.connect() as db:
        db.execute(
            sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
                sql.Identifier(name), sql.Literal(location)
            )
        )
    return name


_WHY = re.compile(r"\b(FATAL|PANIC|ERROR|DETAIL|HINT):")


class Postmaster:
    """The lifecycle of the data directory ``datadir`` on ``ex``'s host: ``bin_dir``
    holds its binaries there, ``logfile`` gets the server's output, ``user`` is
    the OS account it runs as (None: the executor's own), ``isready`` asks
    whether it accepts connections, ``options`` go on every start's command
    line (pgrig's own: where it listens)."""

    def __init__(
        self,
        ex: Executor,
        *,
        bin_dir: str,
        datadir: str,
        logfile: str,
        user: str | None,
        isready: Sequence[str],
        options: Mapping[str, str] | None = None,
    ) -> None:
        self.ex = ex
        self.bin_dir = bin_dir
        self.datadir = datadir
        self.logfile = logfile
        self.user = user
        self.isready = list(isready)
        self.options = dict(options or {})
        # Every start (a restart after a crash included) puts pg_ctl - and so the
        # postmaster - in these cgroups (their cgroup.procs): a storage lab's.
        self.cgroups: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"in {self.datadir}" + ("" if self.ex.host.local else f" on {self.ex.name}")

    def _tool(self, name: str) -> str:
        return f"{self.bin_dir}/{name}"

    def _run(
        self,
        argv: Sequence[str],
        what: str,
        timeout: float,
        *,
        check: bool = True,
        cgroups: tuple[str, ...] = (),
    ) -> str:
        launch = Launch(self.user, cgroups)
        done = self.ex.run(
            argv, timeout=timeout, env=C_LOCALE, check=check, what=what, launch=launch
        )
        return done.stdout if done.ok else ""

    def initdb(self, options: Sequence[str]) -> str:
        """initdb ``-D datadir`` with ``options``; its output."""
        return self._run([self._tool("initdb"), "-D", self.datadir, *options], "initdb", 300)

    def start(
        self,
        timeout: float = 120,
        *,
        cgroups: tuple[str, ...] = (),
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """pg_ctl start, then wait for pg_isready. ``cgroups`` (else ``self.cgroups``):
        pg_ctl - and so the postmaster and every process it forks - goes into a
        storage lab's cgroups from the start. ``settings`` go on the postmaster's
        command line, over the configuration files, for this start only: nothing
        is written, so the next start (a crash restart included) has the
        profile's settings again."""
        options = command_line({**self.options, **(settings or {})})
        argv = [self._tool("pg_ctl"), "start", "-D", self.datadir, "-l", self.logfile]
        argv += ["-w", "-t", str(int(timeout)), "-s", *(("-o", options) if options else ())]
        try:
            self._run(argv, "pg_ctl start", timeout + 10, cgroups=cgroups or self.cgroups)
        except ToolError as exc:
            raise ClusterError(
                f"the server {self.where} did not start: {self.log_tail(why=True) or exc}",
                hint=f"that is the end of its log {self.logfile} (a throwaway cluster's goes "
                "with it; --keep keeps it); a setting may not fit this machine",
            ) from exc
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60) -> None:
        wait_accepting(self.ex, self.isready, timeout, where=self.where)

    def accepting(self) -> bool:
        """Whether it accepts connections now (pg_isready, once): not while it
        recovers from a backend's crash, the postmaster alive."""
        return self.ex.run(self.isready, timeout=30, check=False, what="pg_isready").ok

    def rejecting(self) -> bool:
        """Whether it answers but refuses connections (pg_isready's exit 1): it is
        starting, stopping or recovering from a crash - not hung (no answer: 2)."""
        done = self.ex.run(self.isready, timeout=30, check=False, what="pg_isready")
        return done.returncode == 1

    def restart(self, settings: Mapping[str, str] | None = None, timeout: float = 120) -> None:
        """Stop (fast: a shutdown checkpoint) and start again, with ``settings`` for
        this start only (``start``); without them, as the profile says."""
        self.stop(timeout=timeout)
        self.start(timeout=timeout, settings=settings)

    def restart_after_crash(self, timeout: float = 60) -> None:
        """Start again after the postmaster died.

        A new postmaster refuses to start while the old PID in postmaster.pid still
        exists - and a killed postmaster lingers as a zombie until init reaps it -
        or while its backends still hold the data directory. Wait for both; if the
        zombie outlives its backends by a few seconds, the lock file is provably
        stale (no process uses the data directory) and is removed.
        """
        stale = self.pid_in_lockfile()
        started = time.monotonic()
        deadline = started + timeout
        while time.monotonic() < deadline:
            holders = self.ex.processes_using(self.datadir)
            state = self._state(stale) if stale is not None else None
            if state is None:
                if not holders:
                    break
            elif not holders and state in "ZX" and time.monotonic() - started > 5:
                self.ex.run(["rm", "-f", "--", f"{self.datadir}/postmaster.pid"], timeout=30)
                break
            time.sleep(0.2)
        self.start(timeout=max(10.0, deadline - time.monotonic()))

    def _state(self, pid: int) -> str | None:
        """The process state letter of ``pid`` on its host (Z: a zombie); None: no such PID."""
        try:
            stat = self.ex.read_text(f"/proc/{pid}/stat")
        except (OSError, ToolError):
            return None
        fields = stat.rsplit(")", 1)[-1].split()
        return fields[0] if fields else None

    def pid_in_lockfile(self) -> int | None:
        """The PID written in postmaster.pid - not yet proof that it is a live postmaster."""
        try:
            first = self.ex.read_text(f"{self.datadir}/postmaster.pid").splitlines()[0]
            return int(first.strip())
        except (OSError, ToolError, ValueError, IndexError):
            return None

    def postmaster_pid(self) -> int | None:
        """The PID in postmaster.pid, trusted only if it is a live postgres process
        serving this data directory (its PID on its host)."""
        pid = self.pid_in_lockfile()
        if pid is None:
            return None
        try:
            cmdline = self.ex.read_bytes(f"/proc/{pid}/cmdline").split(b"\0")
        except (OSError, ToolError):
            return None
        if not cmdline or b"postgres" not in cmdline[0].rsplit(b"/", 1)[-1]:
            return None
        if self.datadir.encode() not in b" ".join(cmdline):
            return None
        return pid

    def running(self) -> bool:
        return self.postmaster_pid() is not None

    def stop(self, timeout: float = 60, said: Callable[[str], None] | None = None) -> None:
        """fast, then immediate, then SIGQUIT and SIGKILL of the verified postmaster.
        ``said`` hears why, when a fast shutdown did not end it (a hung server)."""
        if not self.ex.exists(self.datadir) or not self.running():
            return
        modes: tuple[str, ...] = ("fast", "immediate")
        if self.rejecting():
            # Restarting after a backend's crash (an OOM kill): a fast shutdown asked
            # then was seen to wait out its whole timeout - the postmaster of
            # PostgreSQL 15.18 left with its checkpointer, the crash recovery never
            # ending nor the shutdown (2 of 22 resumes of a 64 MiB target, issue
            # 40.5). Stopped at once, it is left as the crash left it: its next start
            # recovers again.
            modes = ("immediate",)
            if said is not None:
                said(
                    f"the server {self.where} refuses connections (recovering from a crash, "
                    "or starting or stopping): stopping it with -m immediate"
                )
        for mode in modes:
            argv = [self._tool("pg_ctl"), "stop", "-D", self.datadir, "-m", mode]
            argv += ["-w", "-t", str(int(timeout / 2)), "-s"]
            self._run(argv, "pg_ctl stop", timeout / 2 + 10, check=False)
            if not self.running():
                return
            if mode == "fast" and said is not None:
                said(self._hung(timeout / 2))
        self.kill(timeout / 2)

    def _hung(self, waited: float) -> str:
        pid = self.postmaster_pid()
        state = self._state(pid) if pid is not None else None
        why = {"T": "its postmaster is stopped (SIGSTOP)", "D": "its postmaster waits on I/O"}
        return (
            f"the server {self.where} did not shut down in {waited:.0f} s "
            f"({why.get(state or '', 'it hangs')}): stopping it with -m immediate, then SIGKILL"
        )

    def kill(self, timeout: float = 30.0) -> bool:
        """SIGQUIT (immediate shutdown) the postmaster; SIGKILL if it lingers. Each
        signal only while the PID is still this directory's postmaster."""
        pid = self.postmaster_pid()
        if pid is None:
            return False
        for signum in (signal.SIGQUIT, signal.SIGKILL):
            if self.postmaster_pid() != pid:
                return True
            self.ex.run(["kill", f"-{signum.value}", str(pid)], timeout=30, check=False)
            deadline = time.monotonic() + timeout / 2
            while time.monotonic() < deadline:
                if self._state(pid) in (None, "Z", "X"):
                    return True
                time.sleep(0.1)
        return self._state(pid) in (None, "Z", "X")

    def log_tail(self, lines: int = 5, *, why: bool = False) -> str:
        """The log's last ``lines``; ``why``: of its last lines, those that say why
        (FATAL, PANIC, ERROR and their DETAIL and HINT) where there are any - a
        missing hba_file's FATAL came after three lines of "starting"."""
        try:
            text = self.ex.read_text(self.logfile)
        except (OSError, ToolError):
            return ""
        tail = [line for line in text.splitlines()[-20 if why else -lines :] if line.strip()]
        said = [line for line in tail if _WHY.search(line)] if why else []
        return " | ".join(said[-lines:] if said else tail[-lines:])
