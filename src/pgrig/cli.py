"""The ``pgrig`` command line: the core's commands (``pgrig.commands``) and the
plug-ins' (``pgrig.registry.commands``, filled from the entry points), one
group. Errors are caught here, once, and printed as ``error: ...`` plus a hint
on stderr with a non-zero exit code.

A command's module, the plug-ins and their libraries (NumPy, psycopg, rich,
SciPy, hdrhistogram) load when the command line names the command: ``pgrig
--help`` lists the commands from their names (the core's table below, pgrig's
own ``NAME-command`` entry points) and their docstrings read from the source,
without importing them (0.9 s of CPU before, tests/test_cli_speed.py)."""

from __future__ import annotations

import ast
import errno
import importlib
import importlib.metadata
import io
import os
import signal
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pgrig import __version__
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

# The core's commands, "module:attribute" as an entry point names one.
CORE: dict[str, str] = {
    "run": "pgrig.commands.run:run",
    "plan": "pgrig.commands.run:plan_cmd",
    "report": "pgrig.commands.results:report_cmd",
    "list": "pgrig.commands.results:list_cmd",
    "export": "pgrig.commands.results:export_cmd",
    "import": "pgrig.commands.results:import_cmd",
    "compare": "pgrig.commands.results:compare_cmd",
    "clean": "pgrig.commands.machine:clean",
    "env": "pgrig.commands.machine:env",
    "history": "pgrig.commands.history:history_cmd",
    "check": "pgrig.commands.history:check_cmd",
    "plugins": "pgrig.commands.plugins:plugins_cmd",
    "keys": "pgrig.commands.plugins:keys_cmd",
}
GROUP = "pgrig.plugins"  # pgrig.registry.GROUP, not imported: it imports every part
OWN = "pgrig"
COMMAND_SUFFIX = "-command"  # pgrig's own entry point NAME-command is the command NAME


@cache
def _plugin_commands() -> tuple[dict[str, str], bool]:
    """pgrig's own plug-in commands by name (from the entry points' names, none
    imported), and whether another package declares plug-ins: a third party's
    command can be known only by loading it (``registry.commands``)."""
    own, others = {}, False
    names: dict[int, str] = {}  # each Distribution.name parses its METADATA again
    for ep in importlib.metadata.entry_points(group=GROUP):
        if ep.dist is not None and id(ep.dist) not in names:
            names[id(ep.dist)] = ep.dist.name
        if ep.dist is None or names[id(ep.dist)] != OWN:
            others = True
        elif ep.name.endswith(COMMAND_SUFFIX):
            own[ep.name.removesuffix(COMMAND_SUFFIX)] = ep.value
    return own, others


def _load(where: str) -> click.Command:
    module, _, attr = where.partition(":")
    command = getattr(importlib.import_module(module), attr)
    if not isinstance(command, click.Command):
        raise PgrigError(f"{where} is not a click command", hint="reinstall pgrig: make venv")
    return command


def _registered() -> dict[str, click.Command]:
    from pgrig import registry

    return registry.commands()


def _docstring(where: str) -> str | None:
    """The help a command of pgrig's would show, read from its module's source
    (the decorator's ``help=``, else the function's docstring) without
    importing it; None when it cannot be read so."""
    module, _, attr = where.partition(":")
    if not module.startswith(f"{OWN}."):
        return None
    base = Path(__file__).parent.joinpath(*module.split(".")[1:])
    source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attr:
            for deco in node.decorator_list:
                # click.command(..., help=...) or click.group(...); not an option's help=
                if not isinstance(deco, ast.Call) or not isinstance(deco.func, ast.Attribute):
                    continue
                if deco.func.attr not in ("command", "group"):
                    continue
                for kw in deco.keywords:
                    if kw.arg == "help" and isinstance(kw.value, ast.Constant):
                        return str(kw.value.value)
            return ast.get_docstring(node)
    return None


class _Lazy(click.Group):
    """The core's commands and the plug-ins' (tpcc, durability, pg, hosts, audit,
    storage and a third party's), each imported when the command line names it."""

    def _table(self) -> dict[str, str]:
        own, _ = _plugin_commands()
        return {**own, **CORE}

    def _whole_registry(self) -> bool:
        # A third party's plug-ins, or a registry already loaded (a test's toy
        # command): the names are the registry's too.
        _, others = _plugin_commands()
        return others or "pgrig.registry" in sys.modules

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(self._table())
        if self._whole_registry():
            names.update(_registered())
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = self._table().get(cmd_name)
        if where is not None:
            return _load(where)
        return _registered().get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing of ``pgrig --help``: a stand-in with each command's help read
        from its source; a command whose help cannot be read so is loaded."""
        table = self._table()
        shown: list[click.Command] = []
        for name in self.list_commands(ctx):
            doc = _docstring(table[name]) if name in table else None
            command = click.Command(name, help=doc) if doc is not None else None
            command = command or self.get_command(ctx, name)
            if command is not None and not command.hidden:
                shown.append(command)
        limit = formatter.width - 6 - max((len(c.name or "") for c in shown), default=0)
        rows = [(c.name or "", c.get_short_help_str(limit)) for c in shown]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _disable(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> None:
    """``-p no:NAME``: leave a plug-in out of this run (read before the registry
    loads: click reads the group's options before it looks the command up)."""
    if not values:
        return
    from pgrig import registry

    for value in values:
        if not value.startswith("no:") or not value[3:]:
            raise click.BadParameter(f"{value!r}: only no:NAME (leave a plug-in out) is known")
        registry.disable(value[3:], f"-p {value}")


@click.group(cls=_Lazy, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgrig")
@click.option(
    "-p",
    "disabled",
    multiple=True,
    metavar="no:NAME",
    callback=_disable,
    expose_value=False,
    help="Leave the plug-in NAME out of this run (pgrig plugins lists them; "
    "also PGRIG_DISABLE_PLUGINS=NAME,...).",
)
def cli() -> None:
    """How fast is PostgreSQL on this machine, disk, filesystem, version and
    configuration - and why. Runs storage probes and pgbench on a throwaway
    cluster, records every result, and writes a Markdown + HTML report."""


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
