"""Where the process meter reads /proc: one look at a host's processes
(``ProcView``), on this machine (``Here``: read as the meter asks) or on
another host through its executor (``Snapshot``: what one reader there printed
for one sample). The meter (``pgrig.monitor.meter.ProcessMeter``) and the
interference ledger are the same code over either: the local machine is one
connector among others (issue 43).

On another host a small Python reader (``READER``) runs for the whole watch,
started once through the host's executor and fed one line per sample over its
stdin, as the load hosts' waiter is (``pgrig.load.WAITER``): a look costs one
round trip and one JSON line, not a command per process (each costs 5-20 ms
over SSH). It prints the host's counter files and, per process, what the meter
reads here: the stat fields, storage bytes where the CPU moved (an idle
process's bytes do not move either), the schedstat of the server's processes
and of a load generator's threads.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pgrig.errors import PgrigError, ToolError
from pgrig.hosts.executor import Executor, Started
from pgrig.monitor import procfs

# Client programs a measured run drives the server with: their CPU is "client", and
# while one lives the run is on (a run without a duration of its own: a base backup).
LOAD_GENERATORS = ("pgbench", "pg_basebackup")
LOOK_TIMEOUT_S = 10.0  # one look: a reader that does not answer in that is lost
START_TIMEOUT_S = 30.0


class ProcView(Protocol):
    """One look at a host's processes."""

    @property
    def postmaster(self) -> int | None:
        """The server's postmaster there; None: not known (or not running)."""
        ...

    @property
    def me(self) -> int:
        """pgrig's own root process there: it and all below it are pgrig's."""
        ...

    @property
    def now_ticks(self) -> float:
        """The look's moment in clock ticks after the host's boot."""
        ...

    def processes(self) -> dict[int, procfs.ProcStat]: ...

    def pid_io(self, pid: int) -> tuple[int, int] | None: ...

    def schedstat(self, pid: int) -> tuple[int, int] | None: ...

    def threads(self, pid: int) -> dict[int, tuple[int, int]]: ...

    def wall_of(self, starttime: int) -> float:
        """A process's start (ticks after boot) on the host's wall clock."""
        ...


@dataclass(frozen=True)
class Here:
    """This machine's /proc, read as the meter asks (only what it needs)."""

    postmaster: int | None
    me: int

    @property
    def now_ticks(self) -> float:
        return time.clock_gettime(time.CLOCK_BOOTTIME) * procfs.CLK_TCK

    def processes(self) -> dict[int, procfs.ProcStat]:
        return procfs.all_processes()

    def pid_io(self, pid: int) -> tuple[int, int] | None:
        return procfs.read_pid_io(pid)

    def schedstat(self, pid: int) -> tuple[int, int] | None:
        return procfs.read_schedstat(f"/proc/{pid}/schedstat")

    def threads(self, pid: int) -> dict[int, tuple[int, int]]:
        return procfs.thread_schedstats(pid)

    def wall_of(self, starttime: int) -> float:
        return wall_of(starttime)


def here(server_pid: Callable[[], int | None]) -> Callable[[], ProcView]:
    """Looks at this machine, the postmaster asked at each (a restart changes it)."""
    return lambda: Here(server_pid(), os.getpid())


def wall_of(starttime_ticks: int) -> float:
    return time.time() - (
        time.clock_gettime(time.CLOCK_BOOTTIME) - starttime_ticks / procfs.CLK_TCK
    )


# --------------------------------------------------------------------------
# Another host: one reader there, one line per look

# Run on the host: argv[1] the server's data directory ("": unknown), argv[2] the
# load generators' names, argv[3] the PID of the pgrig that asks (on its own
# machine). Reads only; for each line on stdin prints one JSON line.
READER = r"""
import json, os, sys, time
DATA, LOADGEN = sys.argv[1], set(sys.argv[2].split(","))
FILES = ("/proc/stat", "/proc/diskstats", "/proc/meminfo", "/proc/net/dev")
TCK = os.sysconf("SC_CLK_TCK")
def text(path):  # procfs.read_text's reads: pgrig is not importable on the host
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks).decode(errors="replace")
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
def pair(path, a, b):
    t = text(path)
    try:
        return None if not t else [int(t.split()[a]), int(t.split()[b])]
    except (ValueError, IndexError):
        return None
def io(pid):
    t = text("/proc/%d/io" % pid)
    if not t:
        return None
    f = dict((k.strip(), v) for k, _, v in (l.partition(":") for l in t.splitlines()))
    try:
        w = int(f.get("write_bytes", 0)) - int(f.get("cancelled_write_bytes", 0))
        return [int(f.get("read_bytes", 0)), max(0, w)]
    except ValueError:
        return None
def procs():
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        t = text("/proc/%s/stat" % name)
        if not t:
            continue
        head, _, tail = t.rpartition(")")
        pid, _, comm = head.partition(" (")
        f = tail.split()
        try:
            out[int(pid)] = [int(pid), comm, f[0], int(f[1]), int(f[11]), int(f[12]),
                             int(f[13]), int(f[14]), int(f[17]), int(f[19]), int(f[6])]
        except (ValueError, IndexError):
            continue
    return out
def below(ps, roots):
    kids = {}
    for p in ps.values():
        kids.setdefault(p[3], []).append(p[0])
    out, todo = set(), list(roots)
    while todo:
        for k in kids.get(todo.pop(), ()):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out
def postmaster():
    t = text(os.path.join(DATA, "postmaster.pid")) if DATA else None
    try:
        pid = int(t.split("\n", 1)[0]) if t else None
    except ValueError:
        return None
    args = (text("/proc/%d/cmdline" % pid) or "").split("\0") if pid else []
    if not args or "postgres" not in args[0].rsplit("/", 1)[-1] or DATA not in " ".join(args):
        return None
    return pid
def sshd(ps, pid):
    return pid in ps and ps[pid][1].startswith("sshd")
def root(ps):
    # pgrig itself when it started the reader here (argv[3]); else the sshd of
    # the SSH connection that did, the one just below the listening sshd (its
    # privileged monitor): every command pgrig runs over it is below.
    pid = os.getppid()
    while pid in ps and pid > 1:
        if pid == CALLER:
            return pid
        if sshd(ps, pid):
            while sshd(ps, ps[pid][3]) and sshd(ps, ps[ps[pid][3]][3]):
                pid = ps[pid][3]
            return pid
        pid = ps[pid][3]
    return os.getppid()
CALLER = int(sys.argv[3])
ME, seen = root(procs()), {}
for line in sys.stdin:
    ps, pm = procs(), postmaster()
    server = ({pm} | below(ps, [pm])) if pm in ps else set()
    mine = {ME} | below(ps, [ME])
    ticks, ios = {}, {}
    for p in ps.values():
        if p[10] & 0x00200000 or p[0] == 2 or p[3] == 2:
            continue
        key = (p[0], p[9])
        ticks[key] = p[4] + p[5]
        if seen.get(key) != ticks[key] or p[0] in server or p[0] in mine:
            ios[p[0]] = io(p[0])
    seen = ticks
    threads = {}
    for pid in mine:
        if pid in ps and ps[pid][1] in LOADGEN:
            try:
                tids = os.listdir("/proc/%d/task" % pid)
            except OSError:
                continue
            threads[pid] = dict((t, pair("/proc/%d/task/%s/schedstat" % (pid, t), 0, 1))
                                for t in tids)
    print(json.dumps({
        "t": time.time(), "boot": time.clock_gettime(time.CLOCK_BOOTTIME), "tck": TCK,
        "me": ME, "pm": pm, "files": [text(f) or "" for f in FILES],
        "p": list(ps.values()), "io": ios,
        "ss": dict((p, pair("/proc/%d/schedstat" % p, 0, 1)) for p in server),
        "th": threads,
    }, separators=(",", ":")), flush=True)
"""


@dataclass(frozen=True)
class Snapshot:
    """What the reader on a host printed for one look (a ``ProcView``): the
    host's counter files too, so a sample costs that one round trip."""

    files: tuple[str, str, str, str]  # /proc/stat, diskstats, meminfo, net/dev
    procs: Mapping[int, procfs.ProcStat]
    io: Mapping[int, tuple[int, int] | None]  # read where the CPU moved, or ours
    sched: Mapping[int, tuple[int, int] | None]  # the server's processes
    thread_sched: Mapping[int, Mapping[int, tuple[int, int]]]  # load generators'
    postmaster: int | None
    me: int
    at: float  # the host's wall clock at the look
    boot: float  # seconds after its boot then
    tck: int
    size: int  # bytes of the line

    @classmethod
    def parse(cls, line: str) -> Snapshot:
        got = json.loads(line)

        def pairs(d: Mapping[str, list[int] | None]) -> dict[int, tuple[int, int] | None]:
            return {int(k): (v[0], v[1]) if v else None for k, v in d.items()}

        procs = {
            p[0]: procfs.ProcStat(
                pid=p[0],
                comm=p[1],
                state=p[2],
                ppid=p[3],
                utime=p[4],
                stime=p[5],
                cutime=p[6],
                cstime=p[7],
                num_threads=p[8],
                starttime=p[9],
                flags=p[10],
            )  # fmt: skip
            for p in got["p"]
        }
        threads = {
            int(pid): {int(t): v for t, v in pairs(tids).items() if v is not None}
            for pid, tids in got["th"].items()
        }
        stat, disks, memory, net = got["files"]
        return cls(
            files=(stat, disks, memory, net),
            procs=procs,
            io=pairs(got["io"]),
            sched=pairs(got["ss"]),
            thread_sched=threads,
            postmaster=got["pm"],
            me=got["me"],
            at=got["t"],
            boot=got["boot"],
            tck=got["tck"],
            size=len(line),
        )

    @property
    def now_ticks(self) -> float:
        return self.boot * self.tck

    def processes(self) -> dict[int, procfs.ProcStat]:
        return dict(self.procs)

    def pid_io(self, pid: int) -> tuple[int, int] | None:
        return self.io.get(pid)

    def schedstat(self, pid: int) -> tuple[int, int] | None:
        return self.sched.get(pid)

    def threads(self, pid: int) -> dict[int, tuple[int, int]]:
        return dict(self.thread_sched.get(pid, {}))

    def wall_of(self, starttime: int) -> float:
        return self.at - (self.boot - starttime / self.tck)


class HostReader:
    """The reader on a host, for one watch: ``look()`` once a sample, ``close()``
    at the end. Raises ``PgrigError`` (a ``ToolError``) when it cannot start or
    stops answering: the sampling says so and goes on without it."""

    def __init__(self, ex: Executor, datadir: str | None) -> None:
        self.ex = ex
        argv = [
            "python3", "-c", READER, datadir or "", ",".join(LOAD_GENERATORS), str(os.getpid())
        ]  # fmt: skip
        self._proc: Started | None = ex.start(argv, stdin=True)

    def look(self, timeout: float = LOOK_TIMEOUT_S) -> Snapshot:
        proc = self._proc
        if proc is None:
            raise ToolError(f"the process reader on {self.ex.name} was stopped")
        try:
            proc.send("s\n")
        except OSError as exc:  # this machine's pipe to a reader that died
            raise ToolError(f"the process reader on {self.ex.name} ended: {exc}") from None
        line = proc.readline(timeout)
        if line is None:
            tail = " ".join(proc.stderr_tail(3)).strip()
            raise ToolError(
                f"the process reader on {self.ex.name} ended" + (f": {tail}" if tail else ""),
                argv=proc.argv,
            )
        try:
            return Snapshot.parse(line)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ToolError(
                f"the process reader on {self.ex.name} printed what it should not: "
                f"{line[:120]!r} ({exc})"
            ) from None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # a host gone: its reader ends with its stdin's connection; a pipe to a
        # reader that died may fail once more as it closes
        with contextlib.suppress(PgrigError, OSError):
            proc.stop(grace=2)
            proc.wait(5, check=False)
