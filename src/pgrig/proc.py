"""Running external tools: argument lists only, a timeout on every wait.

Two entry points:

* ``run``: run to completion, capture stdout and stderr.
* ``stream``: same, but hand every output line to a callback as it arrives,
  so progress bars can follow ``pgbench -P 1`` or ``pgbench -i`` live.

Both start the child in its own process group so that a timeout or Ctrl-C stops
the tool *and* anything it spawned, and both can run the child as another OS
user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import pwd
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

from pgrig.errors import PgrigError, ToolError, ToolTimeout

LineCallback = Callable[[str, str], None]
"""Called as ``callback(stream_name, line)`` with stream_name "stdout" or "stderr"."""

# Set while the main thread stops a study whose targets run in threads of their
# own (``concurrent = true``): only the main thread gets SIGINT and SIGTERM, so
# the other threads' waits ask here and stop as the main thread would.
_CANCEL = threading.Event()


@contextlib.contextmanager
def threads_cancelled() -> Iterator[None]:
    """While inside, every thread but the main one raises ``KeyboardInterrupt``
    at its next wait (``raise_if_cancelled``): its tool is stopped, its cleanup
    runs, its step is recorded as interrupted."""
    _CANCEL.set()
    try:
        yield
    finally:
        _CANCEL.clear()


# A check the waits of this context make (``watched_by``): None, or a callable
# that raises to end the wait - a monitor whose server stopped answering.
_WATCHDOG: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "watchdog", default=None
)


@contextlib.contextmanager
def watched_by(check: Callable[[], None]) -> Iterator[None]:
    """While inside, every wait of this context (``raise_if_cancelled``: a tool's
    output pump, the load hosts' wait) calls ``check``, whose exception ends the
    wait and stops the tool: a hung server's run fails in seconds, not at its end.
    Nested, both are asked: the run's server heartbeat and its client's."""
    outer = _WATCHDOG.get()

    def both() -> None:
        if outer is not None:
            outer()
        check()

    token = _WATCHDOG.set(check if outer is None else both)
    try:
        yield
    finally:
        _WATCHDOG.reset(token)


def raise_if_cancelled() -> None:
    """In a wait loop: stop this (non-main) thread when the study is being stopped,
    and ask the context's watchdog (``watched_by``)."""
    if _CANCEL.is_set() and threading.current_thread() is not threading.main_thread():
        raise KeyboardInterrupt
    if (check := _WATCHDOG.get()) is not None:
        check()


@dataclass(frozen=True)
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    elapsed: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass(frozen=True)
class OsUser:
    """The unprivileged account a server process runs as."""

    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def lookup(cls, name: str) -> OsUser:
        entry = pwd.getpwnam(name)
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


@dataclass(frozen=True)
class _Identity:
    env: dict[str, str]
    uid: int | None = None
    gid: int | None = None


def _identity(user: OsUser | None, env: Mapping[str, str] | None) -> _Identity:
    child_env = dict(os.environ if env is None else env)
    # C locale keeps tool output parseable (decimal points, English messages)
    # whatever the user's locale is.
    child_env["LC_ALL"] = "C"
    if user is not None and os.geteuid() == 0 and user.uid != 0:
        child_env["HOME"] = user.home
        child_env["USER"] = child_env["LOGNAME"] = user.name
        return _Identity(child_env, user.uid, user.gid)
    return _Identity(child_env)


@dataclass(frozen=True)
class _Child:
    """What Popen does in the child: switch user itself, or run our hook first."""

    uid: int | None
    gid: int | None
    extra_groups: list[int] | None
    preexec_fn: Callable[[], None] | None


def _child_setup(who: _Identity, preexec: Callable[[], None] | None) -> _Child:
    """Switch to ``who`` in the child, running ``preexec`` (e.g. joining a cgroup) first.

    ``preexec`` must run *before* the switch to the unprivileged user, while the
    child can still write root's files; Popen's ``user=`` switches before any
    preexec_fn, so with a hook the switch is done here.
    """
    if preexec is None:
        groups: list[int] | None = [] if who.uid is not None else None
        return _Child(who.uid, who.gid, groups, None)
    if who.uid is None:
        return _Child(None, None, None, preexec)
    uid, gid = who.uid, who.gid
    assert gid is not None

    def hook_then_switch() -> None:
        preexec()
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return _Child(None, None, None, hook_then_switch)


def stop_group(
    proc: subprocess.Popen[bytes] | subprocess.Popen[str],
    grace: float = 5.0,
    *,
    interrupt: bool = True,
) -> None:
    """Stop the child's process group: SIGINT (a tool's own clean exit), SIGTERM,
    SIGKILL; then reap it. ``interrupt`` False: from SIGTERM - the clean exit
    would wait on a server that stopped answering (pgbench -i sends it a cancel
    request on SIGINT, and waited out the whole grace)."""
    if proc.poll() is not None:
        return
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
    escalate(proc.pid, signals if interrupt else signals[1:], grace=grace, group=True)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def _start(
    args: list[str], label: str, who: _Identity, child: _Child, cwd: str | os.PathLike[str] | None
) -> subprocess.Popen[bytes]:
    """Start the child with SIGINT, SIGTERM and SIGHUP held: one arriving between
    the fork and the caller's guard left the tool running, unreaped (issue 19's
    SIGTERM during initdb, seen once in four). A held signal is delivered here,
    where the child is stopped before it propagates."""
    proc = None
    try:
        with signals_deferred():
            try:
                proc = subprocess.Popen(  # noqa: S603 - argument list, never a shell
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=who.env,
                    user=child.uid,
                    group=child.gid,
                    extra_groups=child.extra_groups,
                    preexec_fn=child.preexec_fn,
                    start_new_session=True,
                )
            except FileNotFoundError as exc:
                raise ToolError(f"{label}: command not found: {args[0]}", argv=args) from exc
            except PermissionError as exc:
                raise ToolError(
                    f"{label}: cannot execute {args[0]}: {exc.strerror}", argv=args
                ) from exc
            except subprocess.SubprocessError as exc:  # preexec raised in the child
                raise ToolError(f"{label}: could not be started: {exc}", argv=args) from exc
    except BaseException:
        if proc is not None:
            stop_group(proc)
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()
        raise
    return proc


class _Output:
    """A child's output as it comes: kept whole, and cut into lines for ``on_line``
    on both ``\\n`` and ``\\r`` (some tools redraw a progress line in place)."""

    def __init__(self, on_line: LineCallback | None) -> None:
        self.on_line = on_line
        self.chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.partial = {"stdout": "", "stderr": ""}

    def feed(self, name: str, data: str) -> None:
        self.chunks[name].append(data)
        if self.on_line is None:
            return
        buf = self.partial[name] + data
        parts = buf.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.partial[name] = parts.pop()
        for line in parts:
            self.on_line(name, line)

    def flush(self) -> None:
        """The last line of each stream, when it had no line end."""
        if self.on_line is not None:
            for name in ("stdout", "stderr"):
                if self.partial[name]:
                    self.on_line(name, self.partial[name])

    def text(self, name: str) -> str:
        return "".join(self.chunks[name])


def _pump(
    proc: subprocess.Popen[bytes],
    out: _Output,
    *,
    args: list[str],
    deadline: float,
    label: str,
    timeout: float,
) -> None:
    """Read both of the child's pipes into ``out`` until they close; at the
    ``deadline`` (monotonic) the child's group is stopped and ToolTimeout raised."""
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    try:
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe, selectors.EVENT_READ, name)
        open_pipes = 2
        while open_pipes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stop_group(proc)
                raise ToolTimeout(
                    f"{label} did not finish within {timeout:.0f} s and was stopped",
                    argv=args,
                    stderr=out.text("stderr"),
                )
            raise_if_cancelled()
            for key, _ in sel.select(timeout=min(remaining, 0.5)):
                raw = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                if not raw:
                    sel.unregister(key.fileobj)
                    open_pipes -= 1
                    continue
                out.feed(key.data, raw.decode("utf-8", errors="replace"))
    finally:
        sel.close()


def stream(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    on_line: LineCallback | None = None,
    user: OsUser | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    what: str | None = None,
    preexec: Callable[[], None] | None = None,
) -> Completed:
    """Run ``argv``; call ``on_line`` for each line of output; stop it after ``timeout`` s.

    Lines are split on both ``\\n`` and ``\\r`` because some tools redraw a
    progress line in place. On Ctrl-C the child's process group is stopped
    before the ``KeyboardInterrupt`` propagates. ``preexec`` runs in the child
    before ``exec`` and before the switch to ``user`` (see ``_child_setup``).
    """
    args = [os.fspath(a) for a in argv]
    label = what or Path(args[0]).name
    started = time.monotonic()
    who = _identity(user, env)
    child = _child_setup(who, preexec)
    out = _Output(on_line)
    proc = _start(args, label, who, child, cwd)
    try:
        _pump(proc, out, args=args, deadline=started + timeout, label=label, timeout=timeout)
        remaining = max(1.0, timeout - (time.monotonic() - started))
        try:
            proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            raise ToolTimeout(
                f"{label} did not exit within {timeout:.0f} s and was stopped", argv=args
            ) from None
    except BaseException as exc:
        # a watchdog's error (pgrig.monitor.heartbeat's ServerHung) is a PgrigError
        stop_group(proc, interrupt=not isinstance(exc, PgrigError))
        raise
    finally:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()

    out.flush()
    done = Completed(
        argv=args,
        returncode=proc.returncode,
        stdout=out.text("stdout"),
        stderr=out.text("stderr"),
        elapsed=time.monotonic() - started,
    )
    if check and not done.ok:
        raise ToolError(
            f"{label} failed",
            argv=args,
            returncode=done.returncode,
            stderr=done.stderr or done.stdout,
        )
    return done


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    user: OsUser | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    what: str | None = None,
    preexec: Callable[[], None] | None = None,
) -> Completed:
    """Run ``argv`` to completion and capture its output."""
    return stream(
        argv,
        timeout=timeout,
        user=user,
        cwd=cwd,
        env=env,
        check=check,
        what=what,
        preexec=preexec,
    )


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Cleanup that must finish (removing a cluster's work directory): SIGINT,
    SIGTERM and SIGHUP arriving meanwhile are held, then delivered when it is
    done - a signal right after the last run used to leave half a work
    directory. Only the main thread owns signal handlers; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        held.append(signum)

    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, hold) for signum in watched}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    # Not reached on an exception: already on its way out, a held signal changes nothing.
    if held:
        signal.raise_signal(held[0])  # now, to the handler it was meant for


def processes_in(path: Path) -> list[int]:
    """PIDs of the processes that use the directory ``path``: working in it or
    under it, holding a file there open, or naming it on their command line (a
    server told where its socket goes). Before a directory is removed as unused."""
    where = str(path.resolve())
    inside = where.rstrip("/") + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            files = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue  # gone meanwhile, or not ours to look at
        if where in argv or any(p == where or p.startswith(inside) for p in (cwd, *files)):
            found.append(int(entry.name))
    return found


def pid_exists(pid: int) -> bool:
    """True while the PID is taken, zombies included (what ``kill(pid, 0)`` sees)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_alive(pid: int) -> bool:
    """True while ``pid`` is a running process. A zombie - dead, waiting for its
    parent (often init, which reaps when it gets to it) - counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc here: trust kill(0)
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X")


def escalate_by(
    send: Callable[[signal.Signals], None],
    gone: Callable[[float], bool],
    steps: Sequence[tuple[signal.Signals, float]],
) -> bool:
    """The one signal policy, for a process anywhere (here, or on a host): each
    signal of ``steps`` in turn, then up to its grace seconds for the process to
    go; True once it is gone. ``gone(seconds)`` waits up to that long and says
    whether it went (0: look once); ``send`` sends one signal."""
    for sig, grace in steps:
        if gone(0.0):
            return True
        send(sig)
        if gone(grace):
            return True
    return gone(0.0)


def escalate(
    pid: int,
    signals: Sequence[signal.Signals],
    *,
    grace: float,
    group: bool = False,
    ours: Callable[[], bool] = lambda: True,
) -> bool:
    """Send ``signals`` in turn to ``pid`` (its process group with ``group``),
    each followed by up to ``grace`` seconds for it to go; True once it is gone.
    ``ours`` is asked before every signal: a PID that no longer is the process
    we mean (it exited and the number was reused) is never signalled."""

    def send(sig: signal.Signals) -> None:
        # A stopped process (SIGSTOP: a client that stopped progressing) acts on
        # SIGINT or SIGTERM only once continued: otherwise the grace is waited out.
        for one in (sig, signal.SIGCONT) if sig != signal.SIGKILL else (sig,):
            with contextlib.suppress(ProcessLookupError):  # gone: the next look says so
                if group:
                    os.killpg(pid, one)
                else:
                    os.kill(pid, one)

    def gone(seconds: float) -> bool:
        if not seconds:  # before a signal: is it still the process we mean?
            return not pid_alive(pid) or not ours()
        deadline = time.monotonic() + seconds
        while pid_alive(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    return escalate_by(send, gone, [(sig, grace) for sig in signals])


_P = ParamSpec("_P")
_T = TypeVar("_T")


class ContextPool(ThreadPoolExecutor):
    """A thread pool whose tasks see the submitter's context variables: a plain
    pool's threads start with an empty context, and the load directories a pool
    made on load hosts were recorded with no study ("study": "")."""

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        context = contextvars.copy_context()

        def task() -> _T:
            return context.run(fn, *args, **kwargs)

        return super().submit(task)
