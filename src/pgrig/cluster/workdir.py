"""Work directories pgrig creates, and only those.

A work directory holds the throwaway cluster (``data/``), its log and scratch
files. pgrig writes a marker file into it the moment it creates it, and a
registry entry in its state directory, so that:

* it never deletes a directory it did not create (no marker, no delete);
* after ``kill -9`` the next run finds the orphan (marker whose owner process
  is gone), stops its postmaster and removes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pgrig import __version__, ownership, proc
from pgrig.errors import MissingDirectory, WorkdirError
from pgrig.files import write_atomically

MARKER = ".pgrig-workdir"
# In a scratch directory pgrig makes in /tmp (a socket directory, a lossy mount's
# run directory): "pid host" of the pgrig that made it.
SOCKET_OWNER = ".pgrig-owner"


@dataclass(frozen=True)
class Marker:
    path: str
    owner_pid: int
    host: str
    created_at: float
    study: str
    socket_dir: str | None
    pgrig_version: str = __version__
    # Directories outside the work directory that pgrig made for this cluster
    # (tablespaces on other disks); each carries its own marker file too.
    extra_dirs: tuple[str, ...] = ()
    owner_start: int | None = None  # the owner PID's start time (a recycled PID is not it)

    def owner_alive(self) -> bool:
        return ownership.owner_alive(self.owner_pid, self.host, self.owner_start)


def read_marker(workdir: Path) -> Marker | None:
    try:
        data = json.loads((workdir / MARKER).read_text())
        data["extra_dirs"] = tuple(data.get("extra_dirs", ()))
        return Marker(**data)
    except (OSError, ValueError, TypeError):
        return None


def _registry_entry(workdir: Path) -> Path:
    digest = hashlib.sha1(str(workdir.resolve()).encode()).hexdigest()[:16]
    return ownership.state_dir() / "workdirs" / digest


def check_target(target: Path, *, what: str = "target directory", option: str = "--target") -> Path:
    """The directory under test (or a tablespace's) must exist and be writable;
    resolve it."""
    if not target.exists():
        if target.is_symlink():  # a loop, or a link to nothing: "does not exist" misled
            raise MissingDirectory(
                f"{what} {target} is a symbolic link that leads to no directory"
                f" ({os.readlink(target)}: a loop or a missing target)",
                hint=f"point the link at a directory, or pass another {option}",
            )
        raise MissingDirectory(
            f"{what} {target} does not exist",
            hint=f"create it on the storage you want to test, or pass another {option}",
        )
    if not target.is_dir():
        raise MissingDirectory(f"{what} {target} is not a directory", hint=f"pass another {option}")
    # A real write, not os.access: root passes access checks on a read-only
    # mount or an immutable directory, and the first write would fail later.
    try:
        fd, probe = tempfile.mkstemp(prefix=".pgrig-write-test-", dir=target)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise WorkdirError(
            f"{what} {target} is not writable: {exc.strerror}",
            hint=f"pass a {option} you can write to",
        ) from exc
    return target.resolve()


def create(workdir: Path, *, study: str, socket_dir: Path | None = None) -> Marker:
    """Create ``workdir`` (it must not exist, or be empty) and mark it as pgrig's."""
    if workdir.exists():
        if not workdir.is_dir():
            raise WorkdirError(f"work directory {workdir} exists and is not a directory")
        existing = read_marker(workdir)
        if existing is not None and existing.owner_alive():
            raise WorkdirError(
                f"work directory {workdir} is in use by pgrig process {existing.owner_pid}",
                hint="wait for it to finish, or pass another --target",
            )
        if any(workdir.iterdir()):
            raise WorkdirError(
                f"work directory {workdir} already holds files pgrig did not create for this "
                "study; pgrig never deletes what it did not create",
                hint="pass another --target, or run `pgrig clean` if it is a "
                "leftover of a killed pgrig",
            )
    else:
        try:
            workdir.mkdir(mode=0o755)
        except OSError as exc:
            raise WorkdirError(f"cannot create work directory {workdir}: {exc.strerror}") from exc
    marker = Marker(
        path=str(workdir.resolve()),
        owner_pid=os.getpid(),
        host=socket.gethostname(),
        created_at=time.time(),
        study=study,
        owner_start=ownership.process_start_time(os.getpid()),
        socket_dir=str(socket_dir) if socket_dir else None,
    )
    # Atomically: an empty marker after a power loss would hide the directory
    # from `pgrig clean`.
    write_atomically(workdir / MARKER, json.dumps(asdict(marker)))
    entry = _registry_entry(workdir)
    entry.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(entry, marker.path)
    return marker


def update_socket_dir(workdir: Path, socket_dir: Path) -> None:
    _update(workdir, socket_dir=str(socket_dir))


def _update(workdir: Path, **changes: object) -> None:
    marker = read_marker(workdir)
    if marker is None:
        return
    write_atomically(workdir / MARKER, json.dumps(asdict(marker) | changes))


def make_extra_dir(workdir: Path, path: Path, owner: proc.OsUser | None) -> Path:
    """A directory elsewhere (e.g. a tablespace on another disk) owned by this cluster:
    it must not exist yet; it gets a marker and is removed with the work directory."""
    if path.exists():
        raise WorkdirError(
            f"{path} already exists; pgrig only uses directories it creates",
            hint="choose another parent directory",
        )
    try:
        path.mkdir(mode=0o700)
    except OSError as exc:
        raise WorkdirError(f"cannot create {path}: {exc.strerror}") from exc
    write_atomically(path / MARKER, str(workdir))
    if owner is not None and os.geteuid() == 0:
        os.chown(path, owner.uid, owner.gid)
        os.chown(path / MARKER, owner.uid, owner.gid)
    marker = read_marker(workdir)
    if marker is not None:
        _update(workdir, extra_dirs=[*marker.extra_dirs, str(path)])
    return path


def remove(workdir: Path) -> None:
    """Delete a work directory - only if it carries pgrig's marker."""
    marker = read_marker(workdir)
    if marker is None:
        raise WorkdirError(
            f"refusing to delete {workdir}: it has no pgrig marker, so pgrig did not create it"
        )
    for other in (marker.socket_dir, *marker.extra_dirs):
        if other:
            remove_beside(Path(other))
    try:
        shutil.rmtree(workdir)
    except OSError as exc:  # a target turned read-only (ext4 errors=remount-ro), failing
        # kept registered: `pgrig clean` removes it once the filesystem is writable,
        # and says why its run left it (no kill to guess at)
        if marker.owner_pid == os.getpid():
            _note_left(workdir, f"its run could not remove it: {exc.strerror or exc}")
        raise WorkdirError(
            f"cannot remove the work directory {workdir}: {exc.strerror or exc}"
            + (f" ({exc.filename})" if exc.filename else ""),
            hint="the target's filesystem is read-only or failing (see `dmesg`); it was left "
            "there: `pgrig clean` removes it once the filesystem is writable again",
        ) from None
    with contextlib.suppress(FileNotFoundError):
        _registry_entry(workdir).unlink()


def _note_left(workdir: Path, why: str) -> None:
    """Why a live pgrig left ``workdir``, on its registry entry's second line (the
    marker inside may be on a read-only filesystem)."""
    entry = _registry_entry(workdir)
    with contextlib.suppress(OSError):  # unsaid then: `pgrig clean` still finds it
        write_atomically(entry, f"{entry.read_text().splitlines()[0]}\n{why}")


def left_because(workdir: Path) -> str | None:
    """Why the pgrig that made ``workdir`` left it (``_note_left``); None: it
    said nothing - killed, or it crashed."""
    try:
        lines = _registry_entry(workdir).read_text().splitlines()
    except OSError:
        return None
    return lines[1] if len(lines) > 1 else None


def remove_beside(path: Path) -> None:
    """Delete a directory pgrig made beside a work directory (its socket directory,
    a tablespace's) - only if it carries pgrig's marker."""
    if (path / MARKER).is_file():
        shutil.rmtree(path, ignore_errors=True)


def unregister(workdir: Path) -> None:
    """Forget a work directory the user asked to keep, so no later run removes it."""
    with contextlib.suppress(FileNotFoundError):
        _registry_entry(workdir).unlink()


def make_socket_dir(owner: proc.OsUser | None, workdir: Path) -> Path:
    """A private (0700) directory for the server's unix socket.

    It lives under /tmp rather than in the work directory because a unix socket
    path must fit in 107 bytes and the target directory may be deep.
    """
    path = Path(tempfile.mkdtemp(prefix="pgrig-sock-"))
    write_atomically(path / MARKER, str(workdir))
    # The pgrig process that made it: while it lives the directory is in use even if
    # the work directory cannot be seen (e.g. on an unmounted lossy mount). A file of
    # its own, as older pgrig versions read MARKER as one path.
    write_owner(path)
    if owner is not None and os.geteuid() == 0:
        os.chown(path, owner.uid, owner.gid)
    path.chmod(0o700)
    return path


def anchor_socket_dir(sock_dir: Path, path: Path) -> None:
    """Judge ``sock_dir`` by ``path`` instead of its work directory, which may vanish
    for a moment (on a lossy mount between a power loss and the remount): older
    pgrig versions sweep a socket directory whose work directory is gone."""
    write_atomically(sock_dir / MARKER, str(path))


def pid_in_lockfile(datadir: Path) -> int | None:
    """The PID written in postmaster.pid - not yet proof that it is a live postmaster."""
    try:
        first = (datadir / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, ValueError, IndexError):
        return None


def processes_using(datadir: Path) -> list[int]:
    """PIDs of postgres processes whose working directory is ``datadir``
    (every backend of a cluster chdirs there)."""
    target = str(datadir.resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") == target:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def postmaster_pid(datadir: Path) -> int | None:
    pid = pid_in_lockfile(datadir)
    if pid is None:
        return None
    # Trust the PID only if it is really a postgres process serving this data directory.
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if not cmdline or b"postgres" not in Path(cmdline[0].decode(errors="replace")).name.encode():
        return None
    environ_dir = str(datadir.resolve()).encode()
    if environ_dir not in b" ".join(cmdline):
        return None
    return pid


def stop_orphan_server(datadir: Path, timeout: float = 30.0) -> bool:
    """SIGQUIT (immediate shutdown) a postmaster left behind; SIGKILL if it lingers."""
    pid = postmaster_pid(datadir)
    if pid is None:
        return False
    return proc.escalate(
        pid,
        (signal.SIGQUIT, signal.SIGKILL),
        grace=timeout / 2,
        ours=lambda: postmaster_pid(datadir) == pid,
    )


def orphans() -> list[Marker]:
    """Work directories registered by pgrig runs whose owner process is gone."""
    found: list[Marker] = []
    registry = ownership.state_dir() / "workdirs"
    if not registry.is_dir():
        return found
    for entry in registry.iterdir():
        workdir = Path(entry.read_text().partition("\n")[0].strip())  # then why it was left
        marker = read_marker(workdir)
        if marker is None:
            entry.unlink(missing_ok=True)  # already gone, or never ours
            continue
        if not marker.owner_alive():
            found.append(marker)
    return found


def write_owner(scratch: Path) -> None:
    """Name this pgrig process in a scratch directory it made (``maker_alive``)."""
    write_atomically(scratch / SOCKET_OWNER, f"{os.getpid()} {socket.gethostname()}")


def maker_alive(scratch: Path) -> bool:
    """Does the pgrig process that made this scratch directory still run here?"""
    try:
        pid, host = (scratch / SOCKET_OWNER).read_text().split()
    except (OSError, ValueError):
        return False  # made by an older pgrig: judged by its work directory alone
    return pid.isdigit() and ownership.owner_alive(int(pid), host)


def stale_socket_dirs() -> list[Path]:
    """Socket directories pgrig made whose work directory is gone (e.g. deleted by
    hand after a kill -9): marked as ours, so safe to remove."""
    stale = []
    for path in Path(tempfile.gettempdir()).glob("pgrig-sock-*"):
        try:
            owner = Path((path / MARKER).read_text().strip())
        except OSError:
            continue  # no marker: not provably ours
        if maker_alive(path):
            continue  # its pgrig still runs
        if not owner.exists():
            stale.append(path)
    return stale


def clean_orphans(
    log: Callable[[str], None] | None = None,
    *,
    study: str | None = None,
    left: list[str] | None = None,
    said: dict[str, str] | None = None,
) -> list[str]:
    """Stop and remove the orphan work directories of ``study`` (None: of every
    study); returns the paths removed. Other studies' orphans, and those that
    cannot be removed yet, are added to ``left`` (pgrig.ownership); why a
    removed one's pgrig left it, when it said (``left_because``), to ``said``
    by path."""
    removed = []
    for marker in orphans():
        workdir = Path(marker.path)
        why = left_because(workdir)
        described = f"work directory {workdir} (study {marker.study or 'unknown'}" + (
            f"; {why})" if why else ")"
        )
        if not ownership.removable(marker.study, study):
            if left is not None:
                left.append(described)
            continue
        stopped = stop_orphan_server(workdir / "data")
        if log:
            log(
                f"found orphan work directory {workdir} of pgrig pid {marker.owner_pid}"
                + (" - stopped its server" if stopped else "")
                + "; removing it"
            )
        try:
            remove(workdir)
        except WorkdirError as exc:  # it read a traceback on a read-only mount
            if log:
                log(f"{exc}; {exc.hint}")
            cause = exc.message.rsplit(": ", 1)[-1]
            if left is not None:  # the cause once, when its run said the same
                said_before = why is not None and why.rsplit(": ", 1)[-1] in cause
                left.append(described if said_before else f"{described}: {cause}")
            continue
        removed.append(str(workdir))
        if why and said is not None:
            said[str(workdir)] = f"of study {marker.study or 'unknown'} ({why})"
    for sock in stale_socket_dirs():
        shutil.rmtree(sock, ignore_errors=True)
    return removed + ownership.clean_orphan_files()
