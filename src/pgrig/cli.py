"""The ``pgrig`` command line: the core's commands (``pgrig.commands``) and the
plug-ins' (``pgrig.registry.commands``, filled from the entry points), one
group. Errors are caught here, once, and printed as ``error: ...`` plus a hint
on stderr with a non-zero exit code."""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
from typing import TYPE_CHECKING

import click

from pgrig import __version__, registry
from pgrig.commands import history, machine, results, run
from pgrig.errors import (
    Interrupted,
    PgrigError,
    Signalled,
    mask_secrets,
    signal_number,
)
from pgrig.files import UNWRITABLE

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


class _WithPlugins(click.Group):
    """The core's commands and the plug-ins' (``registry.commands``: tpcc,
    durability, pg, hosts, audit, storage and a third party's), these looked up
    when the command line is read - not when pgrig is imported."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *registry.commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or registry.commands().get(cmd_name)


@click.group(cls=_WithPlugins, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgrig")
def cli() -> None:
    """How fast is PostgreSQL on this machine, disk, filesystem, version and
    configuration - and why. Runs storage probes and pgbench on a throwaway
    cluster, records every result, and writes a Markdown + HTML report."""


# The core's commands; `pgrig --help` lists every command by name.
COMMANDS: tuple[click.Command, ...] = (
    run.run,
    run.plan_cmd,
    results.report_cmd,
    results.list_cmd,
    results.export_cmd,
    results.import_cmd,
    results.compare_cmd,
    machine.clean,
    machine.env,
    history.history_cmd,
    history.check_cmd,
)
for command in COMMANDS:
    cli.add_command(command)


def _raise_signalled(signum: int, _frame: object) -> None:
    raise Signalled(signum)


def main(argv: list[str] | None = None) -> None:
    # timeout(1), systemd and CI cancel with SIGTERM, a closed terminal sends
    # SIGHUP: stop the tools and clusters and record the study as interrupted,
    # exactly as after Ctrl-C.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_signalled)
    _guard_stdout()
    # umask 777 made every file pgrig writes unreadable to its owner too (the
    # settings' scratch file, blamed on "profile oltp"): the owner's bits are kept,
    # what the umask denies the group and others stays denied.
    os.umask(os.umask(0) & 0o077)
    try:
        os.getcwd()
    except FileNotFoundError:  # blamed on "profile oltp: LOCATION: getInstallationPaths"
        _say("error: the current directory no longer exists (removed while a shell was in it)")
        _say("hint: cd to an existing directory and run the command again")
        sys.exit(2)
    if sys.stdout is None:  # started with >&-: a traceback at the first line printed
        _say("error: standard output is closed (>&-): pgrig prints its results there")
        _say("hint: send it somewhere, e.g. > /dev/null, or leave it open")
        sys.exit(1)
    try:
        cli.main(args=argv, prog_name="pgrig", standalone_mode=False)
        sys.stdout.flush()
    except _ReaderGone:  # `pgrig export | head`: the reader had what it wanted
        sys.exit(128 + signal.SIGPIPE)
    except Interrupted as exc:
        _say(str(exc))
        sys.exit(exc.exit_code)
    except PgrigError as exc:
        _say(f"error: {exc}")
        if exc.hint:
            _say(f"hint: {exc.hint}")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort as exc:
        # click turns a KeyboardInterrupt (ours for SIGTERM and SIGHUP too) into
        # Abort: the signal behind it decides the exit code.
        cause = exc.__cause__ or exc.__context__
        _say("interrupted")
        sys.exit(128 + (signal_number(cause) if isinstance(cause, KeyboardInterrupt) else 2))
    except click.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)
        _say(shown.getvalue().rstrip("\n"))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:
        _say("interrupted")
        sys.exit(128 + signal_number(exc))


class _ReaderGone(Exception):
    """The reader of standard output closed the pipe."""


class _Stdout(io.RawIOBase):
    """Standard output whose failure is said as pgrig's error, once, instead of
    an OSError traceback (`pgrig list > file` on a full disk); afterwards it
    takes what is written and drops it, so the exit's flush says nothing more."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._failed = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: ReadableBuffer) -> int:
        size = memoryview(data).nbytes
        if self._failed:
            return size
        try:
            return os.write(self._fd, data)
        except OSError as exc:
            self._failed = True
            if exc.errno == errno.EPIPE:
                raise _ReaderGone from exc
            raise PgrigError(
                f"cannot write to standard output: {exc.strerror or exc}",
                hint=UNWRITABLE.get(exc.errno or 0, "check where standard output goes")
                + " (pgrig export: -o FILE)",
            ) from exc


def _guard_stdout() -> None:
    """The process's own standard output (not a test's capture) through _Stdout."""
    out = sys.stdout
    if out is None or out is not sys.__stdout__ or not isinstance(out, io.TextIOWrapper):
        return
    try:
        fd = out.fileno()
        out.flush()
    except (OSError, ValueError):
        return
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_Stdout(fd)),
        encoding=out.encoding,
        errors=out.errors,
        line_buffering=out.line_buffering,
    )


def _say(text: str) -> None:
    """Every message of the one place errors are printed, secrets masked."""
    click.echo(mask_secrets(text), err=True)
