"""Where a storage probe runs: the server's host, through its executor
(``pgrig.hosts.executor``): ``Context.host``, this machine's ``HERE`` unless
the target kind chose another. The probes ask the executor alone (start a tool,
create and remove their test file, read the free space), so one path runs them
on either; what differs by machine is the executor's: this machine registers
the test file with ``pgrig.ownership`` so that ``pgrig clean`` finds it after a
``kill -9`` and joins a storage lab's cgroup from inside the child (``preexec``);
another host needs no registry, its probes run in a directory pgrig made there,
which ``pgrig clean --inventory`` removes with the server's (``pgrig.hosts.owner``).
"""

from __future__ import annotations

from pathlib import Path

from pgrig.errors import DiskSpaceError, WorkdirError
from pgrig.hosts.executor import Executor


def check_directory(host: Executor, directory: Path, need: int, what: str) -> None:
    """The directory exists and has ``need`` bytes free (WorkdirError, DiskSpaceError)."""
    free, total = host.space(directory)
    if free < 0:
        raise WorkdirError(
            f"{directory} is not a directory on {host.where}",
            hint="create it or choose another target directory",
        )
    # ramfs and some pseudo filesystems report a size of 0: free space unknown.
    if total and free < need:
        raise DiskSpaceError(
            f"{what} needs {need // 2**20} MiB in {directory} on {host.where}, "
            f"only {free // 2**20} MiB free",
            hint="free some space or choose another target directory",
        )
