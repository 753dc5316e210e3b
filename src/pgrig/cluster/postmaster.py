"""One PostgreSQL server's lifecycle on any host, through that host's executor.

initdb, ``pg_ctl start`` and the wait for ``pg_isready``, a restart with
settings for one start, a restart after a crash, stop escalating fast ->
immediate -> SIGQUIT/SIGKILL of a verified postmaster, its log's tail: the same
code for the cluster on this machine (``LocalExecutor``) and a server on
another host (``SshExecutor``). Its creation too: initdb with the superuser's
password and pg_hba's methods, the clients' lines, pgrig.conf with where it
listens - written once, told by an ``Access`` (data) how the server is reached:
a private unix socket with trust here, TCP with a password and scram there.
Where its directory is made and who is told of it (a marked work directory
here, an owner record on a host) is its maker's
(``pgrig.cluster.server.Cluster``, ``pgrig.cluster.hosted.HostedServer``);
every command runs as the server's OS user, in a storage lab's cgroups when
it has them (``Launch``).
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from psycopg import sql

from pgrig.cluster import profiles
from pgrig.conninfo import Conn
from pgrig.errors import ClusterError, ToolError, UsageError
from pgrig.hosts.executor import SH, Executor, Launch
from pgrig.pgsource.binaries import PgBinaries

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


def create_tablespace(admin: Conn, name: str, location: str) -> str:
    """CREATE TABLESPACE ``name`` in ``location``, a directory made for it."""
    with admin.connect() as db:
        db.execute(
            sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
                sql.Identifier(name), sql.Literal(location)
            )
        )
    return name


@dataclass(frozen=True)
class InitdbOptions:
    """initdb options as the seeds use them."""

    encoding: str = "UTF8"
    locale: str = "C"
    wal_segsize_mb: int | None = None  # --wal-segsize; the seeds use 1024
    data_checksums: bool = False
    waldir: Path | None = None  # --waldir: WAL on another disk


def initdb_version_args(opts: InitdbOptions, bins: PgBinaries) -> list[str]:
    """The initdb options that depend on the major; refuses what it cannot do. Call it
    in preflight to refuse before anything is created."""
    args: list[str] = []
    if opts.wal_segsize_mb:
        if bins.version_num < 110000:
            raise UsageError(
                f"PostgreSQL {bins.version}'s initdb has no --wal-segsize (added in 11): its "
                "WAL segments are 16MB, fixed when it was built",
                hint="leave out --wal-segsize for this version",
            )
        args.append(f"--wal-segsize={opts.wal_segsize_mb}")
    if opts.data_checksums:
        args.append("--data-checksums")
    elif bins.version_num >= 180000:
        # 18's initdb turns checksums on unless told not to; pgrig keeps them off unless
        # asked, so that majors are compared with the same work per page.
        args.append("--no-data-checksums")
    if opts.waldir is not None:
        # 10 renamed xlog to wal everywhere, --xlogdir included.
        flag = "--waldir" if bins.version_num >= 100000 else "--xlogdir"
        args.append(f"{flag}={opts.waldir}")
    return args


def initdb_options(opts: InitdbOptions, bins: PgBinaries) -> list[str]:
    """What initdb is told on every host, after ``-D``: the superuser, the encoding and
    locale, and the options of this major (``initdb_version_args``). One list for the
    cluster here and a server on another host (``Postmaster.initdb``), so that
    ``[target.initdb]`` means the same on both."""
    return [
        "-U",
        SUPERUSER,
        "-E",
        opts.encoding,
        f"--locale={opts.locale}",
        *initdb_version_args(opts, bins),
    ]


_WHY = re.compile(r"\b(FATAL|PANIC|ERROR|DETAIL|HINT):")

SUPERUSER = "postgres"
# What pgrig.conf includes itself with, in postgresql.conf.
_INCLUDE = "include = 'pgrig.conf'"
# The first line of what pgrig adds to pg_hba.conf: there, it is not added again.
_ADDED = "# added by pgrig"
# One command on the host writes the configuration (``Postmaster.configure``), as
# the server's user in its data directory ($1): pgrig.conf from stdin; then
# postgresql.conf and pg_hba.conf ($2, $5) with a text ($4, $7) added unless they
# hold its first line ($3, $6) - a configure again is no second include. Each
# file written beside and renamed over: after a kill or a power loss the old
# file or the new, never half of one.
_CONFIGURE = (
    'add() { if ! grep -qxF -- "$2" "$1"; then '
    '{ cat -- "$1" && printf %s "$3"; } > "$1.pgrig-new" && mv -f -- "$1.pgrig-new" "$1"; fi; } '
    '&& cd -- "$1" && umask 077 '
    "&& cat > pgrig.conf.pgrig-new && mv -f pgrig.conf.pgrig-new pgrig.conf "
    '&& add "$2" "$3" "$4" && { [ -z "$7" ] || add "$5" "$6" "$7"; }'
)


@dataclass(frozen=True)
class Access:
    """How a server pgrig makes is reached and who may connect: the one thing
    that tells this machine's throwaway cluster (its private socket, trust; or
    127.0.0.1 with a password) from a server on a host (its address, a password,
    scram, the load hosts' networks). Data: the lifecycle reading it is one."""

    socket_dir: str  # the unix socket's directory
    port: int
    address: str | None = None  # TCP on this address too (None: the socket alone)
    password: str | None = None  # the superuser's, given to initdb (None: none set)
    local_auth: str = "trust"  # pg_hba on the socket: trust (a 0700 directory) or peer
    # Over TCP: md5 takes a SCRAM-stored password too (9.5 to 18 alike)
    host_auth: str = "md5"
    clients: tuple[str, ...] = ()  # CIDRs given host lines of their own (all, replication)
    private_socket: bool = True  # unix_socket_permissions 0700: the server's user only
    # pgrig's own settings on the postmaster's command line (a host's server: over
    # anything its files say, and ``ps`` names where it listens) rather than in
    # pgrig.conf (this machine's: a kept cluster started by hand listens as it did).
    pinned: bool = False

    def own(self) -> dict[str, str]:
        """pgrig's own settings: where it listens (``profiles.render`` quotes them)."""
        own = {"listen_addresses": self.address or "", "unix_socket_directories": self.socket_dir}
        if self.private_socket:
            own["unix_socket_permissions"] = "0700"
        own["port"] = str(self.port)
        if self.host_auth == "scram-sha-256":
            own["password_encryption"] = self.host_auth
        return own

    def options(self) -> dict[str, str]:
        """What goes on every start's command line."""
        return self.own() if self.pinned else {}

    def conf(self) -> dict[str, str]:
        """What goes into pgrig.conf, over the profile's."""
        return {} if self.pinned else self.own()

    def isready(self, tool: str) -> list[str]:
        """pg_isready (``tool``: its path) asking the address where it listens on one."""
        where = self.address or self.socket_dir
        return [tool, "-h", where, "-p", str(self.port), "-U", SUPERUSER, "-q"]

    def initdb(self) -> list[str]:
        """initdb's authentication options; the password, when there is one, read
        from initdb's stdin (``Postmaster.initdb`` gives it there)."""
        if self.password is None:
            return [f"--auth={self.local_auth}"]
        return [f"--auth-local={self.local_auth}", f"--auth-host={self.host_auth}",
                "--pwfile=/dev/stdin"]  # fmt: skip

    def conn(self, dbname: str) -> Conn:
        """How clients connect: over TCP with the password, else the socket."""
        if self.address is not None and self.password is not None:
            return Conn.tcp(self.address, self.port, SUPERUSER, dbname, self.password)
        return Conn.socket(self.socket_dir, self.port, SUPERUSER, dbname)

    def hba(self, version_num: int) -> str:
        """What pgrig adds to the pg_hba.conf initdb of ``version_num`` wrote: the
        clients' lines ("all" does not match replication connections: pg_basebackup
        needs its own), and a replication line on the socket before 10 (whose
        initdb left its replication lines commented out); "" when nothing is."""
        lines = [
            f"host {db} all {cidr} {self.host_auth}\n"
            for cidr in self.clients
            for db in ("all", "replication")
        ]
        if version_num < 100000:
            lines.append(f"local   replication     all{' ' * 37}{self.local_auth}\n")
        return f"\n{_ADDED}\n{''.join(lines)}" if lines else ""


class Postmaster:
    """The lifecycle of the data directory ``datadir`` on ``ex``'s host: ``bin_dir``
    holds its binaries there, ``logfile`` gets the server's output, ``user`` is
    the OS account it runs as (None: the executor's own), ``access`` says how
    it is reached (where pg_isready asks whether it accepts connections, what
    goes on every start's command line, how initdb authenticates); None: a
    server only read (its log)."""

    def __init__(
        self,
        ex: Executor,
        *,
        bin_dir: str,
        datadir: str,
        logfile: str,
        user: str | None,
        access: Access | None = None,
        pg_isready: str | None = None,
    ) -> None:
        self.ex = ex
        self.bin_dir = bin_dir
        self.datadir = datadir
        self.logfile = logfile
        self.user = user
        self.access = access
        # pg_isready where the server's binaries are, unless said (a build without
        # client tools takes them from another directory: ``PgBinaries.path``)
        tool = pg_isready or f"{bin_dir}/pg_isready"
        self.isready = access.isready(tool) if access is not None else []
        self.options = access.options() if access is not None else {}
        # Every start (a restart after a crash included) puts pg_ctl - and so the
        # postmaster - in these cgroups (their cgroup.procs): a storage lab's.
        self.cgroups: tuple[str, ...] = ()
        # Told the postmaster's PID after every start (a restart after a crash
        # included): a host's owner record names it for `pgrig clean`.
        self.on_start: Callable[[int], None] | None = None

    @property
    def where(self) -> str:
        return f"in {self.ex.of(self.datadir)}"

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
        input: str | None = None,
    ) -> None:
        launch = Launch(self.user, cgroups)
        self.ex.run(
            argv, timeout=timeout, env=C_LOCALE, check=check, what=what, launch=launch,
            input=input,
        )  # fmt: skip

    def initdb(self, opts: InitdbOptions, bins: PgBinaries, *, sync: bool = True) -> None:
        """initdb ``-D datadir`` as ``opts`` say for the major of ``bins``
        (``initdb_options``), with the access's authentication (the password on
        initdb's stdin: never in a file on the host); ``configure`` writes the
        rest (pg_hba.conf's lines, pgrig.conf). ``sync``: False, the files are not
        flushed (a throwaway server on a host)."""
        access = self.access
        assert access is not None, "a server pgrig makes says how it is reached"
        options = [*initdb_options(opts, bins), *(() if sync else ("--no-sync",))]
        argv = [self._tool("initdb"), "-D", self.datadir, *options, *access.initdb()]
        password = None
        if access.password is not None:
            # initdb opens /dev/stdin anew: the pipe pgrig writes is root's, refused to
            # the server's user; a pipe its own shell makes is the user's.
            argv = [SH, "-c", 'cat | "$@"', "sh", *argv]
            password = f"{access.password}\n"
        self._run(argv, "initdb", 300, input=password)

    def configure(
        self, settings: Mapping[str, str], version_num: int, header: str = ""
    ) -> dict[str, str]:
        """The configuration of the data directory initdb of ``version_num`` made, in
        one command on its host (``_CONFIGURE``): ``settings`` and pgrig's own (where
        it listens, over them) into pgrig.conf after ``header``'s comments, included
        from postgresql.conf; pg_hba.conf admitting the access's clients
        (``Access.hba``). What pgrig.conf holds is returned. Replaced whole: after a
        power loss the server must not come back with stock settings, listening on
        TCP 5432 (seen with plain writes on the lossy FS)."""
        assert self.access is not None
        written = {**settings, **self.access.conf()}
        text = header + profiles.render(written)
        argv = [SH, "-c", _CONFIGURE, "sh", self.datadir,
                "postgresql.conf", _INCLUDE, f"\n{_INCLUDE}\n",
                "pg_hba.conf", _ADDED, self.access.hba(version_num)]  # fmt: skip
        self._run(argv, "writing the configuration", 30, input=text)
        return written

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
        # The lock file's PID: pg_ctl -w saw the postmaster it started write it (a
        # PID `pgrig clean` checks again before it signals it).
        if self.on_start is not None and (pid := self.pid_in_lockfile()) is not None:
            self.on_start(pid)

    def wait_ready(self, timeout: float = 60) -> None:
        """Poll ``pg_isready`` on the server's host until it answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.accepting():
                return
            time.sleep(0.2)
        raise ClusterError(f"the server {self.where} did not accept connections in {timeout:.0f} s")

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


class Made:
    """A server pgrig made, on whichever host: its lifecycle is its ``Postmaster``'s
    (``pm``, made with the server). ``Cluster`` (a marked work directory on this
    machine) and ``HostedServer`` (a directory with an owner record on a host)
    differ in where they make it and who they tell; what a study asks of either
    (``pgrig.cluster.server.Server``) is answered here, once."""

    _pm: Postmaster | None = None

    @property
    def pm(self) -> Postmaster:
        assert self._pm is not None, "the server is not made yet"
        return self._pm

    def running(self) -> bool:
        return self._pm is not None and self._pm.running()

    def accepting(self) -> bool:
        return self._pm is not None and self._pm.accepting()

    def wait_ready(self, timeout: float = 60) -> None:
        self.pm.wait_ready(timeout)

    def postmaster_pid(self) -> int | None:
        """Its PID on its host."""
        return self._pm.postmaster_pid() if self._pm is not None else None

    def log_tail(self, lines: int = 5) -> str:
        return self._pm.log_tail(lines) if self._pm is not None else ""

    def restart_after_crash(self, timeout: float = 60) -> None:
        """Start again after the postmaster died (``Postmaster.restart_after_crash``)."""
        self.pm.restart_after_crash(timeout)

    def restart(self, settings: Mapping[str, str] | None = None, timeout: float = 120) -> None:
        """Stop and start again, with ``settings`` on the postmaster's command line
        for this start only (a load at ``wal_level = minimal``)."""
        self.pm.restart(settings, timeout)

    def stop(self, timeout: float = 60, said: Callable[[str], None] | None = None) -> None:
        """``Postmaster.stop``; nothing to stop before it is made."""
        if self._pm is not None:
            self._pm.stop(timeout, said)
