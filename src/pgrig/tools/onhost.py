"""The storage probes' file and process needs, on this machine or through a
host's executor (``pgrig.hosts.executor``): a remote target's probes measure
the disk under its data directory there, not this machine's.

``host`` None is this machine, as the probes always ran: ``proc.stream`` with
its ``preexec`` (a storage-lab target's cgroup) and the test file registered by
``ownership.create_exclusively``, so that ``pgrig clean`` finds it after a
``kill -9``. On another host no registry is needed: the probes run in a
directory pgrig made there, which ``pgrig clean --inventory`` removes with the
server's (``pgrig.hosts.owner``).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pgrig import ownership, proc
from pgrig.errors import BinaryNotFound, DiskSpaceError, ToolTimeout, WorkdirError
from pgrig.pgsource import binaries

if TYPE_CHECKING:
    from pgrig.hosts.executor import Executor

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
_C_LOCALE = {"LC_ALL": "C"}


def where(host: Executor | None) -> str:
    """How an error names the machine."""
    return "this machine" if host is None else host.name


def tool(host: Executor | None, bin_dir: Path | str, name: str) -> str:
    """``<bin_dir>/<name>`` on the host, or BinaryNotFound naming both."""
    if host is None:
        return str(binaries.tool_path(bin_dir, name))
    path = f"{bin_dir}/{name}"
    if not host.exists(path):
        raise BinaryNotFound(
            f"{name} not found in {bin_dir} on {host.name}",
            hint=f"pgrig hosts provision installs PostgreSQL there, or set host_pg_bin "
            f"to PostgreSQL's bin directory on {host.name}",
        )
    return path


def on_path(host: Executor, name: str, hint: str) -> str:
    """A tool on the host's PATH (``which``: Debian's essential debianutils)."""
    done = host.run(["which", name], timeout=60, check=False, what="which")
    found = done.stdout.strip()
    if done.returncode != 0 or not found:
        raise BinaryNotFound(f"{name} not found on {host.name}", hint=hint)
    return found


def check_directory(host: Executor | None, directory: Path, need: int, what: str) -> None:
    """The directory exists and has ``need`` bytes free (WorkdirError, DiskSpaceError)."""
    if host is None:
        usage = shutil.disk_usage(directory) if directory.is_dir() else None
        free, total = (usage.free, usage.total) if usage is not None else (-1, 0)
    else:
        # One command, as root (through sudo where the preflight chose it): SFTP
        # runs as the connecting user, who may not see into pgrig's 0700 directory.
        done = host.run(["python3", "-c", _SPACE, str(directory)], timeout=60, what="python3")
        free, total = (int(word) for word in done.stdout.split())
    if free < 0:
        raise WorkdirError(
            f"{directory} is not a directory on {where(host)}",
            hint="create it or choose another target directory",
        )
    # ramfs and some pseudo filesystems report a size of 0: free space unknown.
    if total and free < need:
        raise DiskSpaceError(
            f"{what} needs {need // 2**20} MiB in {directory} on {where(host)}, "
            f"only {free // 2**20} MiB free",
            hint="free some space or choose another target directory",
        )


def create_exclusively(host: Executor | None, path: Path) -> None:
    """Create ``path``, refusing if anything is there: it may be someone's data."""
    if host is None:
        ownership.create_exclusively(path)
        return
    done = host.run(
        ["python3", "-c", _CREATE_EXCLUSIVELY, str(path)], timeout=60, check=False, what="python3"
    )
    if done.returncode == 0:
        return
    if "FileExistsError" in done.stderr:
        raise WorkdirError(
            f"{path} already exists on {host.name}; pgrig will not overwrite it",
            hint=f"remove it on {host.name} if it is left over from an interrupted pgrig run",
        )
    raise WorkdirError(
        f"cannot create {path} on {host.name}: {done.stderr.strip().splitlines()[-1:]}",
        hint="choose a directory pgrig can write to",
    )


def remove_file(host: Executor | None, path: Path) -> None:
    """Remove a file ``create_exclusively`` made (and nothing else)."""
    if host is None:
        ownership.remove_file(path)
    else:
        host.run(["rm", "-f", "--", str(path)], timeout=60, what="rm")


def stream(
    host: Executor | None,
    argv: Sequence[str | Path],
    *,
    timeout: float,
    what: str,
    on_line: proc.LineCallback | None = None,
    preexec: Callable[[], None] | None = None,
) -> proc.Completed:
    """Run a probe tool to its end, each stdout line to ``on_line`` as it comes.
    ``preexec`` (a cgroup to join) exists only here: a remote target has none."""
    if host is None:
        return proc.stream(argv, timeout=timeout, on_line=on_line, what=what, preexec=preexec)
    started = host.start([str(a) for a in argv], env=_C_LOCALE)
    if host.adopt is not None:
        host.adopt(started.pid)
    deadline = time.monotonic() + timeout
    read: list[str] = []  # what readline took: ``wait`` returns only the rest
    try:
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = started.readline(timeout=min(left, 5.0))
            except ToolTimeout:
                continue  # quiet for a while (pg_test_fsync waits a test out): look again
            if line is None:
                break
            read.append(line + "\n")
            if on_line is not None:
                on_line("stdout", line)
        done = started.wait(max(deadline - time.monotonic(), 1.0), what=what)
    except BaseException:
        started.stop()  # Ctrl-C or a timeout: the tool stops too, on its host
        raise
    return replace(done, stdout="".join(read) + done.stdout)
