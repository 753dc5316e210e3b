"""The commands about this machine and its hosts: ``clean`` and ``env``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pgrig import ownership
from pgrig.commands.options import GivenPath
from pgrig.results import to_dict
from pgrig.ui import format_option


@click.command()
@click.option(
    "--inventory",
    "-i",
    "inventory_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also clean every host of this Ansible inventory (docs/hosts.md).",
)
def clean(inventory_path: Path | None) -> None:
    """Remove what killed pgrig runs left behind, of every study and every kind of
    target (work directories and their servers, lossy mounts and their run
    directories in /tmp, the storage lab's filesystems and cgroups) - only what
    carries pgrig's marker and whose owner is gone; never what a pgrig on another
    host owns. With --inventory, on every
    host of the inventory too: servers and load runs in its /tmp."""
    from pgrig import lifecycle

    remote: list[str] = []
    if inventory_path is not None:
        from pgrig.hosts.cli import clean_lines

        # The hosts first: one that cannot be reached refuses the whole command
        # before anything is removed here.
        remote = clean_lines(inventory_path, dry_run=False)
    left: list[str] = []  # what could not be removed (a read-only target), said
    lines = lifecycle.clean_orphans(None, left) + ownership.clean_temp_files()
    for line in lines + remote:
        click.echo(line)
    for line in left:
        click.echo(f"left {line}: run `pgrig clean` again once it can be removed", err=True)
    if not lines and not left:
        click.echo("nothing to clean: no orphan work directories, no storage-lab leftovers")
    if inventory_path is not None and not remote:
        click.echo(f"nothing to clean on the hosts of {inventory_path}")
    if inventory_path is None:  # silence would read as "the hosts are clean too"
        click.echo(
            "other hosts were not reached (no inventory given): "
            "`pgrig clean --inventory FILE` cleans an inventory's hosts too"
        )


@click.command()
@click.option(
    "--target",
    type=GivenPath(path_type=Path, exists=True),
    default=None,
    help="Also describe the filesystem of this directory.",
)
@click.option("--dsn", default=None, help="Also record this server's version and settings.")
@format_option(("json",), "Output format (JSON, the schema of docs/export.md's environment).")
def env(target: Path | None, dsn: str | None, fmt: str) -> None:
    """Print the captured environment (machine, filesystem, server) as JSON."""
    from pgrig import environment
    from pgrig.conninfo import Conn  # psycopg: not for the module's other commands' --help

    # asked for by name: a server that does not answer is bad input, not a null
    conninfo = Conn.from_user(dsn).answers().conninfo() if dsn is not None else None
    captured = environment.capture([target or Path.cwd()], pg_conninfo=conninfo)
    click.echo(json.dumps(to_dict(captured), indent=2))
