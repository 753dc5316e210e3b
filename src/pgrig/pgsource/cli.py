"""``pgrig pg``: PostgreSQL versions on this machine and the ones that can be installed.

pgrig pg list                 installed (system, cache) and obtainable, newest per major
pgrig pg install 9.6          the newest 9.6 into pgrig's cache, verified
pgrig pg path 9.6             its bin directory (what --pg-bin 9.6 uses)
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from pgrig.errors import BinaryNotFound
from pgrig.pgsource import cache, catalog
from pgrig.pgsource.model import version_key
from pgrig.ui import Ui, format_option

COLUMNS = ("major", "version", "where", "source", "client tools", "size", "path")


def _size(n: int | None) -> str:
    return "-" if n is None else catalog.mib(n)


def rows(listing: catalog.Listing) -> list[dict[str, str]]:
    out = []
    here = {i.version for i in listing.installed if i.server}
    for i in listing.installed:
        out.append(
            {
                "major": i.major,
                "version": i.version,
                "where": i.where,
                "source": i.source,
                "client tools": "yes" if i.complete else "no (borrowed)",
                "size": _size(i.size),
                "path": str(i.bin_dir),
            }
        )
    for a in listing.obtainable:
        if a.version in here:
            continue
        out.append(
            {
                "major": a.major,
                "version": a.version,
                "where": "obtainable",
                "source": a.source,
                "client tools": "yes" if a.complete else "no (borrowed)",
                "size": _size(a.size),
                "path": "-",
            }
        )
    where_order = {"system": 0, "cache": 1, "obtainable": 2}
    return sorted(out, key=lambda r: (version_key(r["version"]), where_order[r["where"]]))


def table(records: Sequence[dict[str, str]]) -> str:
    widths = {c: max([len(c), *(len(r[c]) for r in records)]) for c in COLUMNS}
    lines = ["  ".join(c.ljust(widths[c]) for c in COLUMNS).rstrip()]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in COLUMNS).rstrip() for r in records]
    return "\n".join(lines)


@click.group("pg")
def group() -> None:
    """PostgreSQL versions: list what is installed and obtainable, install into the cache."""


@group.command("list")
@click.option("--installed", is_flag=True, help="Only what is on this machine: asks no registry.")
@click.option(
    "--all", "every", is_flag=True, help="Every release offered, not the newest per major."
)
@format_option(
    ("text", "json"),
    "text: a table to read; json: the versions and any registry problems, for scripts.",
)
def list_cmd(installed: bool, every: bool, fmt: str) -> None:
    """Installed PostgreSQL versions (system, cache) and the ones that can be installed."""
    listing = catalog.list_versions(online=not installed, every_release=every)
    records = rows(listing)
    if fmt == "json":
        click.echo(json.dumps({"versions": records, "problems": list(listing.problems)}, indent=2))
    else:
        click.echo(table(records))
        click.echo(f"\ncache: {cache.root()}", err=True)
    ui = Ui()
    for problem in listing.problems:
        ui.warn(f"not asked: {problem}")


@group.command("install")
@click.argument("version")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def install_cmd(version: str, quiet: bool) -> None:
    """Install the newest VERSION (9.6, 18) or exactly VERSION (9.6.24) into the cache."""
    ui = Ui(quiet=quiet)
    done = catalog.install(version, ui=ui)
    if not done.complete:
        ui.info(
            f"PostgreSQL {done.version} is server only: pgbench, psql and pg_isready come "
            "from the newest PostgreSQL installed"
        )
    click.echo(done.bin_dir)


@group.command("path")
@click.argument("version")
def path_cmd(version: str) -> None:
    """The bin directory of the newest installed VERSION (what --pg-bin VERSION uses)."""
    try:
        bins = catalog.resolve(version)
    except BinaryNotFound as exc:
        raise BinaryNotFound(exc.message, hint=catalog.install_hint(version)) from exc
    click.echo(bins.bin_dir)
    if bins.client_dir is not None:
        click.echo(
            f"client tools from PostgreSQL {bins.client_version}: {bins.client_dir}", err=True
        )
