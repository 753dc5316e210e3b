"""Work directories pgrig creates, and only those.

A work directory holds the throwaway cluster (``data/``), its log and scratch
files. pgrig writes its owner record into it the moment it creates it - the
one record a server's directory on any host has (``pgrig.hosts.owner``,
written and read through ``LocalExecutor`` here) - and names it in its state
directory, so that:

* it never deletes a directory it did not create (no record, no delete);
* after ``kill -9`` the next run finds the orphan (a record whose owner process
  is gone), stops the server it recorded and removes it, with the directories
  made for it elsewhere (socket, WAL, tablespaces), as ``pgrig clean
  --inventory`` does on a host.

Only the finding is this machine's own: a host's directories are in its
``/tmp``, this machine's wherever ``--target`` put them, named in
``state_dir()/workdirs``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path

from pgrig import ownership, proc
from pgrig.errors import MissingDirectory, PgrigError, WorkdirError
from pgrig.files import write_atomically
from pgrig.hosts import owner
from pgrig.hosts.local import HERE

# In a directory made beside a work directory (its socket directory, a WAL or
# tablespace directory): the work directory's path. A work directory made by
# an older pgrig holds it as its record (``owner._legacy``).
MARKER = owner.MARKER
# In a scratch directory pgrig makes in /tmp (a socket directory, a lossy mount's
# run directory): "pid host" of the pgrig that made it.
SOCKET_OWNER = ownership.MAKER_FILE
RECORDS = "workdirs"  # the work directories' registry in the state directory
SOCKET_PREFIX = "pgrig-sock-"  # a socket directory's name in /tmp


def record(workdir: Path) -> owner.Owner | None:
    """The work directory's owner record (an older pgrig's marker read as one)."""
    return owner.read(HERE, str(workdir))


def _registry_entry(workdir: Path) -> Path:
    digest = hashlib.sha1(str(workdir.resolve()).encode()).hexdigest()[:16]
    return ownership.state_dir() / RECORDS / digest


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


def create(workdir: Path, *, study: str, kind: str = "server") -> owner.Owner:
    """Create ``workdir`` (it must not exist, or be empty) with its owner record."""
    if workdir.exists():
        if not workdir.is_dir():
            raise WorkdirError(f"work directory {workdir} exists and is not a directory")
        existing = record(workdir)
        if existing is not None and existing.alive():
            raise WorkdirError(
                f"work directory {workdir} is in use by pgrig process {existing.pid}",
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
    made = owner.Owner.mine(kind, study)
    # Atomically (``Executor.replace_file``): an empty record after a power loss
    # would hide the directory from `pgrig clean`.
    owner.write(HERE, str(workdir.resolve()), made)
    entry = _registry_entry(workdir)
    entry.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(entry, str(workdir.resolve()))
    return made


def made_beside(workdir: Path, path: Path, user: proc.OsUser | None) -> None:
    """Mark ``path``, made for the work directory elsewhere, and name it in its
    record (``owner.made_beside``), owned by the server's OS user."""
    owner.made_beside(HERE, str(workdir.resolve()), None, str(path))
    if user is not None and os.geteuid() == 0:
        os.chown(path, user.uid, user.gid)
        os.chown(path / MARKER, user.uid, user.gid)


def make_extra_dir(workdir: Path, path: Path, user: proc.OsUser | None) -> Path:
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
    made_beside(workdir, path, user)
    return path


def remove(workdir: Path) -> None:
    """Delete a work directory - only if it carries pgrig's owner record - and
    what was made for it elsewhere."""
    made = record(workdir)
    if made is None:
        raise WorkdirError(
            f"refusing to delete {workdir}: it has no pgrig owner record, so pgrig did not "
            "create it"
        )
    for other in made.elsewhere:
        remove_beside(Path(other))
    try:
        shutil.rmtree(workdir)
    except OSError as exc:  # a target turned read-only (ext4 errors=remount-ro), failing
        # kept registered: `pgrig clean` removes it once the filesystem is writable,
        # and says why its run left it (no kill to guess at)
        if made.pid == os.getpid():
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
    with contextlib.suppress(OSError, PgrigError):  # as rmtree's ignore_errors did
        owner.remove_beside(HERE, str(path))


def unregister(workdir: Path) -> None:
    """Forget a work directory the user asked to keep, so no later run removes it."""
    with contextlib.suppress(FileNotFoundError):
        _registry_entry(workdir).unlink()


def make_socket_dir(user: proc.OsUser | None, workdir: Path) -> Path:
    """A private (0700) directory for the server's unix socket.

    It lives under /tmp rather than in the work directory because a unix socket
    path must fit in 107 bytes and the target directory may be deep.
    """
    path = Path(tempfile.mkdtemp(prefix=SOCKET_PREFIX))
    write_atomically(path / MARKER, str(workdir))
    # The pgrig process that made it: while it lives the directory is in use even if
    # the work directory cannot be seen (e.g. on an unmounted lossy mount). A file of
    # its own, as older pgrig versions read MARKER as one path.
    write_owner(path)
    if user is not None and os.geteuid() == 0:
        os.chown(path, user.uid, user.gid)
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


def _found(workdir: Path) -> Path | None:
    """Where a registered work directory is: as made, or under the name a clean
    cut short claimed it with (``owner.claimed``); None: gone."""
    for where in (workdir, Path(owner.claimed(str(workdir)))):
        if os.path.lexists(where):
            return where
    return None


def orphans() -> list[Path]:
    """Work directories registered by pgrig runs whose owner process is gone."""
    found: list[Path] = []
    registry = ownership.state_dir() / RECORDS
    if not registry.is_dir():
        return found
    for entry in registry.iterdir():
        try:
            workdir = Path(entry.read_text().partition("\n")[0].strip())  # then why it was left
        except OSError:
            continue  # unregistered meanwhile
        where = _found(workdir)
        made = record(where) if where is not None else None
        if made is None:
            entry.unlink(missing_ok=True)  # already gone, or never ours
            continue
        if not made.alive():
            found.append(workdir)
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
    for path in Path(tempfile.gettempdir()).glob(f"{SOCKET_PREFIX}*"):
        try:
            made_for = Path((path / MARKER).read_text().strip())
        except OSError:
            continue  # no marker: not provably ours
        if maker_alive(path):
            continue  # its pgrig still runs
        if not made_for.exists():
            stale.append(path)
    return stale


def clean_orphans(
    *,
    study: str | None = None,
    left: list[str] | None = None,
    said: dict[str, str] | None = None,
) -> list[str]:
    """Stop and remove the orphan work directories of ``study`` (None: of every
    study) as a host's are (``owner.clean_one``); returns the paths removed.
    Other studies' orphans, and those that cannot be removed yet, are added to
    ``left`` (pgrig.ownership); why a removed one's pgrig left it, when it said
    (``left_because``), to ``said`` by path."""
    removed = []
    for workdir in orphans():
        where = _found(workdir)
        made = record(where) if where is not None else None
        if where is None or made is None:
            continue  # removed meanwhile by another clean
        why = left_because(workdir)
        described = f"work directory {workdir} (study {made.study or 'unknown'}" + (
            f"; {why})" if why else ")"
        )
        done = owner.clean_one(HERE, str(where), study=study)
        if done is None:
            continue  # claimed by another clean, which removes it
        if done.verdict == "other study" and left is not None:
            left.append(described)
        elif done.verdict == "cannot" and left is not None:  # a read-only mount
            cause = done.action.rsplit(": ", 1)[-1]
            # the cause once, when its run said the same
            said_before = why is not None and why.rsplit(": ", 1)[-1] in cause
            left.append(described if said_before else f"{described}: {cause}")
        elif done.verdict == "removed":
            unregister(workdir)
            removed.append(str(workdir))
            if why and said is not None:
                said[str(workdir)] = f"of study {made.study or 'unknown'} ({why})"
    for sock in stale_socket_dirs():
        shutil.rmtree(sock, ignore_errors=True)
    return removed + ownership.clean_orphan_files()
