"""Files that must survive a power loss whole: written to a temporary file,
fsynced, renamed over the old one, and the directory fsynced - so a reader
sees the old content or the new, never an empty or torn file."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pgrig.proc import OsUser


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(
    path: Path, text: str, *, mode: int = 0o644, owner: OsUser | None = None
) -> None:
    tmp = path.with_name(f".{path.name}.pgrig-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # the umask may have narrowed it
        if owner is not None:
            os.chown(tmp, owner.uid, owner.gid)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)
