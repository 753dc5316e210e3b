"""The ``pgrig`` command line: the commands of ``pgrig.commands`` and of the
plug-ins, assembled into one group. Errors are caught here, once, and printed as
``error: ...`` plus a hint on stderr with a non-zero exit code."""

from __future__ import annotations

import io
import signal
import sys

import click

from pgrig import __version__
from pgrig.commands import durability, machine, results, run, tpcc
from pgrig.errors import (
    Interrupted,
    PgrigError,
    Signalled,
    mask_secrets,
    signal_number,
)
from pgrig.hosts.cli import group as hosts_group
from pgrig.pgsource.cli import group as pg_group
from pgrig.storage.cli import audit, storage


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgrig")
def cli() -> None:
    """How fast is PostgreSQL on this machine, disk, filesystem, version and
    configuration - and why. Runs storage probes and pgbench on a throwaway
    cluster, records every result, and writes a Markdown + HTML report."""


# Every command, in the order `pgrig --help` lists them (click sorts by name).
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
    tpcc.tpcc,
    durability.durability,
    pg_group,
    audit,
    storage,
    hosts_group,
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
