"""PostgreSQL 18's asynchronous I/O: can ``io_method = io_uring`` work here?

It needs two things, and either can be missing without anything saying so until
the server refuses to start: a build linked with liburing (``configure
--with-liburing``; the builds pgrig installs from PyPI and Maven Central are
not), and a kernel that lets the server's user create an io_uring (Linux 5.1+,
``kernel.io_uring_disabled`` 0, no seccomp filter forbidding the system call,
which container runtimes often install). Both are checked before anything is
created, and the message says which one failed.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

from pgrig import proc
from pgrig.cluster import profiles
from pgrig.errors import UsageError
from pgrig.pgsource.binaries import PgBinaries

# io_uring_setup(2): the same number on every architecture (the unified syscall
# table since Linux 5.1).
SYS_IO_URING_SETUP = 425
DISABLED_SYSCTL = Path("/proc/sys/kernel/io_uring_disabled")


def kernel_problem(sysctl: Path = DISABLED_SYSCTL) -> str | None:
    """Why this kernel (or a seccomp filter) will not give the server an io_uring;
    None when it will. Asks the kernel for a real one-entry ring and closes it."""
    try:
        disabled = int(sysctl.read_text().strip())
    except (OSError, ValueError):
        disabled = 0  # older kernels have no such switch
    if disabled == 2:
        return f"the kernel has io_uring switched off ({sysctl} = 2)"
    if disabled == 1:
        return (
            f"the kernel allows io_uring only to the group kernel.io_uring_group ({sysctl} = 1), "
            "which the server's user is not known to be in"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = libc.syscall(SYS_IO_URING_SETUP, 1, params)
    if fd >= 0:
        os.close(fd)
        return None
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        return "this kernel has no io_uring (io_uring_setup: function not implemented)"
    if err == errno.EPERM:
        return (
            "io_uring_setup is forbidden here (Operation not permitted): a seccomp filter "
            "of the container runtime, or a security module"
        )
    return f"io_uring_setup fails here: {os.strerror(err)}"


def build_problem(bins: PgBinaries, os_user: proc.OsUser | None) -> str | None:
    """Why this PostgreSQL build cannot use io_uring; None when it can. The server's
    own parser decides: a build without liburing does not offer the value."""
    if bins.version_num < 180000:
        return f"PostgreSQL {bins.version} has no asynchronous I/O (io_method is new in 18)"
    # As root with no server user the parser cannot be asked (postgres refuses
    # root): then the server's start is where a missing liburing shows.
    probe = profiles.Profile("io_uring probe", str(bins.bin_dir), {"io_method": "io_uring"})
    try:
        profiles.check_values(probe, bins, os_user)
    except UsageError as exc:
        return (
            f"PostgreSQL {bins.version} in {bins.bin_dir} was built without liburing "
            f"(the server says: {str(exc).split(': ', 1)[-1].rsplit(' (PostgreSQL', 1)[0]})"
        )
    return None


def io_uring_problems(bins: PgBinaries, os_user: proc.OsUser | None) -> list[str]:
    return [p for p in (build_problem(bins, os_user), kernel_problem()) if p]


def check_io_method(
    target: str, settings: dict[str, str], bins: PgBinaries, os_user: proc.OsUser | None
) -> None:
    """Refuse ``io_method = io_uring`` where it cannot run, saying why."""
    if settings.get("io_method", "").strip("'\"") != "io_uring":
        return
    problems = io_uring_problems(bins, os_user)
    if problems:
        raise UsageError(
            f"target {target}: io_method = io_uring cannot work here: " + "; and ".join(problems),
            hint="drop io_uring from the io_method axis (sync and worker need nothing), or "
            "point the target at a PostgreSQL 18 built with --with-liburing (pg_bin)",
        )
