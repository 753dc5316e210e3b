"""The ``pgrig`` command line: the core's commands (``pgrig.commands``) and the
plug-ins' (``pgrig.registry.commands``, filled from the entry points), one
group. Errors are caught here, once, and printed as ``error: ...`` plus a hint
on stderr with a non-zero exit code."""

from __future__ import annotations

import io
import signal
import sys

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
    try:
        cli.main(args=argv, prog_name="pgrig", standalone_mode=False)
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


def _say(text: str) -> None:
    """Every message of the one place errors are printed, secrets masked."""
    click.echo(mask_secrets(text), err=True)
