"""Files that must survive a power loss whole: written to a temporary file,
fsynced, renamed over the old one, and the directory fsynced - so a reader
sees the old content or the new, never an empty or torn file."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from pgrig.errors import DiskSpaceError, UsageError
from pgrig.proc import OsUser, pid_alive
from pgrig.units import GB


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# What to do about a file that could not be written, by the reason: "free some
# space" was said of a read-only directory and of a 250-character name too.
UNWRITABLE = {
    errno.ENOSPC: "free some space there, or choose another directory",
    errno.EDQUOT: "free some space there (a quota), or choose another directory",
    errno.EROFS: "that filesystem is read-only: choose a writable directory",
    errno.EACCES: "this user cannot write there: choose a writable directory",
    errno.ENAMETOOLONG: "a name too long for the filesystem: a shorter campaign name",
}


def not_a_file(path: Path) -> str | None:
    """Why ``path`` is no regular file pgrig can read whole, said as the end of
    a sentence ("profile file X is a named pipe, ..."); None when it is one. A
    FIFO hung `pgrig plan` and /dev/zero filled the memory; a symbolic link to
    itself read "does not exist"."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOENT and path.is_symlink()):
            return (
                f"is a symbolic link that leads to no file ({os.readlink(path)}:"
                " a loop or a missing target)"
            )
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "does not exist"
        return f"cannot be read: {exc.strerror}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "is a named pipe (FIFO), not a file: pgrig reads the file whole, before anything"
    return "is a device or a socket, not a file"


def write_atomically(
    path: Path, data: str | bytes, *, mode: int = 0o644, owner: OsUser | None = None
) -> None:
    """Replace ``path`` with ``data``; a missing parent directory (pgrig's state
    directory on a first run) is made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The PID in the name: two pgrig processes writing one state file never share it.
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    remove_stale_temp(path.parent, path.name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # the umask may have narrowed it
        if owner is not None:
            os.chown(tmp, owner.uid, owner.gid)
        os.replace(tmp, path)
    except BaseException:  # a full disk or a signal: no half-written file left behind
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


TMP_SUFFIX = ".pgrig-tmp"
_TMP_NAME = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)" + re.escape(TMP_SUFFIX))


def remove_stale_temp(directory: Path, name: str | None = None) -> list[Path]:
    """Remove the temporary files (``.NAME.PID.pgrig-tmp``) in ``directory`` whose
    pgrig is gone - kill -9 during `pgrig report` left them, and neither a rerun
    nor `pgrig clean` removed them (issue 40.7); ``name``: only those of that file."""
    removed: list[Path] = []
    pattern = f".{glob.escape(name)}.*{TMP_SUFFIX}" if name else f".*{TMP_SUFFIX}"
    with contextlib.suppress(OSError):
        for tmp in directory.glob(pattern):
            m = _TMP_NAME.fullmatch(tmp.name)
            if m is None or int(m["pid"]) == os.getpid() or pid_alive(int(m["pid"])):
                continue
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
    return removed


def check_space(directory: Path, need: int, what: str, hint: str | None = None) -> None:
    """Refuse up front what cannot finish for lack of disk. A filesystem that
    reports no size at all (some FUSE filesystems) cannot be checked: let it be."""
    usage = shutil.disk_usage(directory)
    free = usage.free
    if usage.total > 0 and free < need:
        raise DiskSpaceError(
            f"not enough free disk in {directory} for {what}: needs about "
            f"{need / GB:.1f} GiB, {free / GB:.1f} GiB free",
            hint=hint
            or "lower the scale (about 16 MB per scale unit plus WAL), free some space, "
            "or pick another directory",
        )


def permits(path: Path, user: OsUser | None, bits: int) -> bool:
    """Whether ``user`` has the permissions ``bits`` (``os.R_OK | os.W_OK``...)
    on ``path``, from its permission bits as ``blocked_for`` reads them; ``user``
    None: whoever runs pgrig (asked of the kernel), or as root an account that
    owns nothing here yet."""
    if user is None and os.geteuid() != 0:
        return os.access(path, bits)
    if user is not None and user.uid == 0:
        return True
    st = path.stat()
    if user is None:
        shift = 0
    elif st.st_uid == user.uid:
        shift = 6
    elif st.st_gid in set(os.getgrouplist(user.name, user.gid)):
        shift = 3
    else:
        shift = 0
    return (st.st_mode >> shift) & bits == bits


def blocked_for(path: Path, user: OsUser | None) -> Path | None:
    """The first directory on the way to ``path`` (itself included, where it
    exists) that ``user`` cannot pass for lack of search permission; None: it can
    reach what pgrig makes there (as root, then hands to ``user``). ``user`` None:
    an account that owns nothing here yet (one pgrig will create). From the
    permission bits alone: an ACL that grants more is not read (the server's own
    start says so then)."""
    if user is not None and user.uid == 0:
        return None
    uid = user.uid if user is not None else None
    gids = set(os.getgrouplist(user.name, user.gid)) if user is not None else set()

    def allowed(st: os.stat_result, bit: int) -> bool:  # bit: the "other" permission
        if st.st_uid == uid:
            return bool(st.st_mode & (bit << 6))
        if st.st_gid in gids:
            return bool(st.st_mode & (bit << 3))
        return bool(st.st_mode & bit)

    absolute = Path(os.path.abspath(path))
    existing = [p for p in (absolute, *absolute.parents) if p.is_dir()]
    for directory in reversed(existing):  # from / down
        if not allowed(directory.stat(), stat.S_IXOTH):
            return directory
    return None


def temp_dir_for(user: OsUser | None) -> Path:
    """The temporary directory (TMPDIR, else /tmp) where pgrig makes what the
    server's OS user must reach - its socket directory, the scratch directory the
    settings are checked in; refused, naming TMPDIR, when that user cannot pass
    it (a 0700 TMPDIR was blamed on "profile oltp")."""
    tmp = Path(tempfile.gettempdir())
    blocked = blocked_for(tmp, user)
    if blocked is not None:
        where = f"TMPDIR={os.environ['TMPDIR']}" if os.environ.get("TMPDIR") else str(tmp)
        who = user.name if user is not None else "the server's OS user"
        raise UsageError(
            f"{where}: {who} cannot pass {blocked}, and the server's socket and scratch "
            "directories are made there",
            hint="point TMPDIR at a directory every user may pass (chmod o+x), or unset it (/tmp)",
        )
    return tmp


def probe_dir(directory: Path) -> OSError | None:
    """Whether a file can be made in ``directory`` (made and removed at once):
    permission bits say nothing of /proc, a read-only mount or a full disk."""
    probe = directory / f".pgrig-probe.{os.getpid()}.pgrig-tmp"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return exc
    os.close(fd)
    with contextlib.suppress(OSError):
        probe.unlink()
    if shutil.disk_usage(directory).free == 0 and shutil.disk_usage(directory).total > 0:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return None


_STREAMS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/")


def output_path(path: Path, option: str, *, directory: bool = False) -> Path:
    """Refuse up front (exit 2, naming ``option``) an output of report, history,
    check, compare or export that cannot be written: a missing directory, a
    device (/dev/full), /proc, a read-only or full filesystem, a directory where
    a file is wanted or the reverse. They ended in tracebacks with exit 1 - a
    regression's code for `pgrig check` - after the work was done (issue 40.6).
    ``directory``: the option names a directory pgrig makes (with its parents)."""

    def refuse(why: str, hint: str) -> UsageError:
        return UsageError(f"{option} {path}: {why}", hint=hint)

    if not directory and str(path).startswith(_STREAMS):
        return path  # the process's own streams: written as such
    real = Path(os.path.realpath(path))
    if directory:
        if real.exists() and not real.is_dir():
            raise refuse("is not a directory", "give a directory (pgrig makes it if missing)")
        existing = next(p for p in (real, *real.parents) if p.exists())
        if not existing.is_dir():
            raise refuse(f"{existing} is not a directory", "give a directory")
        place = existing
    else:
        if real.is_dir():
            raise refuse("is a directory", "give a file's path")
        if real.exists() and not real.is_file():
            mode = real.stat().st_mode
            terminal = str(real).startswith("/dev/pts/") or real.name.startswith("tty")
            if stat.S_ISFIFO(mode) or real == Path("/dev/null") or terminal:
                return path  # a pipe, /dev/null, a terminal: written as a stream
            raise refuse("is a device, not a file", "give a file in a writable directory")
        place = real.parent
        if not place.is_dir():
            raise refuse(
                f"the directory {place} does not exist", f"mkdir -p {place}, or another path"
            )
    failed = probe_dir(place)
    if failed is not None and failed.errno in (errno.ENOSPC, errno.EDQUOT):
        # no typo: the disk is full (exit 5, as any disk refused up front)
        raise DiskSpaceError(
            f"{option} {path}: cannot write in {place}: {failed.strerror}",
            hint=UNWRITABLE[failed.errno or errno.ENOSPC],
        )
    if failed is not None:
        raise refuse(
            f"cannot write in {place}: {failed.strerror or failed}",
            UNWRITABLE.get(failed.errno or 0, "give a path in an existing, writable directory"),
        )
    if not directory and real.is_file() and not os.access(real, os.W_OK):
        raise refuse("cannot be written (permission)", "give a file this user may write")
    return path
