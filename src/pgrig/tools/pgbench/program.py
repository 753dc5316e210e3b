"""The pgbench program: where it is, its version, how its exit codes are read, and
what a connection must give it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from pgrig import proc
from pgrig.errors import ParseError, ToolError
from pgrig.hosts.executor import C_LOCALE, Executor
from pgrig.hosts.local import HERE
from pgrig.pgsource import binaries

TOOL = "pgbench"

PARSE_HINT = (
    "this pgbench output is not understood; "
    "please report it together with the raw output kept in the results store"
)


class ConnArgs(Protocol):
    """Anything that can say where to connect as pgbench arguments, i.e.
    ``pgrig.conninfo.Conn`` (a libpq string passed as pgbench's dbname)."""

    def args(self) -> list[str]: ...


class ClientConn(ConnArgs, Protocol):
    """A connection pgbench can run against: its arguments and its environment."""

    # added to the client host's environment: the password, kept off the command
    # line; ``own``: a tool of pgrig's own (a load)
    def env(self, *, own: bool = False) -> dict[str, str]: ...


def binary(bin_dir: Path | str) -> Path:
    """pgbench in ``bin_dir`` on this machine, looked for (BinaryNotFound naming
    the option that fixes it): what a check before the study runs. The command
    lines (``init_argv``, ``run_argv``) do not look again: a target's pgbench was
    found when its binaries were resolved (``pgsource.binaries``: pgbench is among
    the tools they must have), a load host's by the survey on that host
    (``targets.remote``), not on this machine, where a load host's may not be."""
    return binaries.tool_path(bin_dir, TOOL)


_VERSION = re.compile(r"^pgbench \(PostgreSQL\) (\S.*)$")


def parse_version(text: str) -> str:
    """``pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)`` -> ``15.18 (Debian ...)``."""
    for line in text.splitlines():
        if m := _VERSION.match(line.strip()):
            return m.group(1).strip()
    raise ParseError(
        f"{TOOL} --version printed no version: {text.strip()[:200]!r}", hint=PARSE_HINT
    )


def pgbench_version(bin_dir: Path | str, timeout: float = 30.0, *, client: Executor = HERE) -> str:
    """The version of ``<bin_dir>/pgbench`` on the ``client`` host, e.g.
    ``15.18 (Debian 15.18-0+deb12u1)``."""
    argv = [str(binary(bin_dir)), "--version"]
    done = client.run(argv, timeout=timeout, env=C_LOCALE, what=TOOL)
    return parse_version(done.stdout)


def check_ok(done: proc.Completed, what: str) -> None:
    """Raise ToolError with a hint that fits pgbench's exit code."""
    if done.ok:
        return
    # pgbench exits 1 for bad options and setup failures (no connection), and 2
    # when the run started but clients aborted: the report it printed is then
    # explicitly "incomplete", so it is not used.
    if done.returncode == 2:
        hint = (
            "the run was aborted part-way, usually because the server crashed, "
            "restarted or ran out of resources: check the server log"
        )
    else:
        hint = "check that the server is running and accepts connections with these settings"
    raise ToolError(
        f"{what} failed",
        argv=done.argv,
        returncode=done.returncode,
        stderr=done.stderr or done.stdout,
        hint=hint,
    )


ENV = "/usr/bin/env"  # coreutils' env, on every host: a variable unset for one command
# A socket directory that cannot exist: pgbench fails to connect there at once.
_NOWHERE = "/nonexistent/pgrig-parse-only"
# How pgbench says it got past its scripts to the connection.
_CONNECTING = ("connection to server", "could not connect", "could not create connection")


def script_errors(
    bin_dir: Path | str,
    scripts: Sequence[tuple[Path, int]],
    *,
    defines: Mapping[str, str] | None = None,
    query_mode: str = "simple",
    client: Executor = HERE,
) -> str | None:
    """What pgbench says of ``scripts`` (path, weight) before it needs a server,
    or None when it got as far as connecting. pgbench has no parse-only mode but
    reads its scripts before it connects: run against a socket directory that
    does not exist, a syntax error, a meta-command without its argument or a
    weight out of range is told apart from the connection that then fails.
    About 50 ms (pgbench 15 here, 2026-11-27)."""
    argv = [str(binary(bin_dir)), "-n", "-T", "1", "-M", query_mode, "-h", _NOWHERE, "-p", "1"]
    for name, value in (defines or {}).items():
        argv += ["-D", f"{name}={value}"]
    for path, weight in scripts:
        argv += ["-f", f"{path}@{weight}"]
    # Without this machine's PG* variables (PGHOSTADDR would win over -h).
    unset = [f"--unset={k}" for k in sorted(os.environ) if k.startswith("PG")]
    # In the C locale: its messages are read (``_CONNECTING``).
    done = client.run([ENV, *unset, *argv], timeout=30.0, env=C_LOCALE, check=False, what=TOOL)
    said = (done.stderr + done.stdout).strip()
    if done.ok or any(words in said for words in _CONNECTING):
        return None
    return said or f"pgbench exited {done.returncode}"
