"""``pgrig hosts``: check and provision the hosts of an Ansible-format inventory.

pgrig hosts check --inventory hosts.ini [HOST|GROUP ...]
pgrig hosts provision --inventory hosts.ini [--major 15] [--dry-run] [HOST|GROUP ...]
pgrig hosts clean --inventory hosts.ini [--dry-run] [HOST|GROUP ...]
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import click

from pgrig import proc
from pgrig.errors import HostUnusable, PgrigError
from pgrig.hosts import facts, inventory, owner, preflight, provision
from pgrig.hosts.inventory import Host
from pgrig.ui import Ui, format_option

COLUMNS = (
    "host",
    "user",
    "PostgreSQL",
    "pgbench",
    "fio",
    "python",
    "CPUs",
    "memory",
    "/var/tmp free",
)

inventory_option = click.option(
    "--inventory",
    "-i",
    "inventory_path",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="An Ansible inventory, INI or YAML (docs/hosts.md).",
)


def _selected(inv: inventory.Inventory, names: Sequence[str]) -> list[Host]:
    return inv.resolve(names or [inventory.ALL], what="host or group")


def _short(version: str | None) -> str:
    if version is None:
        return "missing"
    words = version.split()
    return next((w for w in words if w[:1].isdigit() or w.startswith("fio-")), version)


def row(f: facts.HostFacts) -> dict[str, str]:
    return {
        "host": f.host,
        "user": f.user + (" (sudo)" if f.sudo else ""),
        "PostgreSQL": ", ".join(f.postgres_majors) or "missing",
        "pgbench": _short(f.pgbench),
        "fio": _short(f.fio),
        "python": _short(f.python),
        "CPUs": str(f.cpus),
        "memory": f"{f.memory_gib:.1f} GiB",
        "/var/tmp free": f"{f.scratch_free_gib:.1f} GiB",
    }


def table(records: Sequence[dict[str, str]]) -> str:
    widths = {c: max([len(c), *(len(r[c]) for r in records)]) for c in COLUMNS}
    lines = ["  ".join(c.ljust(widths[c]) for c in COLUMNS).rstrip()]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in COLUMNS).rstrip() for r in records]
    return "\n".join(lines)


@click.group("hosts")
def group() -> None:
    """Hosts of an Ansible inventory: check them, provision them."""


@group.command("check")
@inventory_option
@click.argument("names", nargs=-1)
@format_option(("text", "json"))
def check_cmd(inventory_path: Path, names: tuple[str, ...], fmt: str) -> None:
    """Reach every host (or the HOSTs/GROUPs named), check root, and list what is installed.

    Exits 7, naming each host and the fix, when one cannot be reached, refuses
    the key, or gives neither root nor passwordless sudo; 1 when a tool is missing.
    """
    hosts = _selected(inventory.load(inventory_path), names)
    outcomes = preflight.reach_all(hosts)
    reached = [o for o in outcomes if not isinstance(o, HostUnusable)]
    try:
        with proc.ContextPool(max_workers=max(1, min(preflight.AT_ONCE, len(reached)))) as pool:
            found = list(pool.map(lambda r: facts.gather(*r), reached))
    finally:
        for ex, _ in reached:
            ex.close()
    # Every host is listed, the unusable ones with their error, before the
    # failure's exit code: a script reading the JSON learns what each host has.
    gathered = iter(found)
    listed: list[dict[str, object]] = [
        {"host": h.name, "error": o.message, "hint": o.hint}
        if isinstance(o, HostUnusable)
        else dataclasses.asdict(next(gathered))
        for h, o in zip(hosts, outcomes, strict=True)
    ]
    if fmt == "json":
        click.echo(json.dumps(listed, indent=2))
    elif found:
        click.echo(table([row(f) for f in found]))
    failed = [o for o in outcomes if isinstance(o, HostUnusable)]
    if failed:
        raise preflight.refusal(failed)
    missing = {f.host: f.missing() for f in found if f.missing()}
    if missing:
        raise PgrigError(
            "missing: " + "; ".join(f"{h}: {', '.join(m)}" for h, m in missing.items()),
            hint=f"pgrig hosts provision --inventory {inventory_path} installs them",
        )


@group.command("provision")
@inventory_option
@click.argument("names", nargs=-1)
@click.option("--major", type=int, default=15, show_default=True, help="PostgreSQL major.")
@click.option(
    "--workdir",
    default=provision.WORKDIR,
    show_default=True,
    help="The directory pgrig works in on each host.",
)
@click.option("--dry-run", is_flag=True, help="Connect and plan; change nothing.")
@click.option(
    "--no-apt-update", is_flag=True, help="Do not refresh apt's lists (they are < 1 day old)."
)
def provision_cmd(
    inventory_path: Path,
    names: tuple[str, ...],
    major: int,
    workdir: str,
    dry_run: bool,
    no_apt_update: bool,
) -> None:
    """Make every host (or the HOSTs/GROUPs named) ready: PostgreSQL MAJOR with
    pgbench, fio, python3, and pgrig's work directory - through pyinfra, idempotent."""
    hosts = _selected(inventory.load(inventory_path), names)
    executors, access = preflight.check_all(hosts)
    for ex in executors:
        ex.close()
    done = provision.provision(
        hosts, access, major=major, workdir=workdir, dry_run=dry_run, apt_update=not no_apt_update
    )
    ui = Ui()
    if dry_run:
        click.echo(done.output)
        ui.ok(f"dry run on {len(hosts)} hosts: nothing changed")
        return
    for op in done.operations:
        click.echo(
            f"{op.name}: {op.hosts} hosts, {op.changed} changed, {op.unchanged} already so, "
            f"{op.errors} errors"
        )
    ui.ok(f"{len(hosts)} hosts provisioned in {done.elapsed_s:.1f} s ({done.changed} changes)")


@group.command("clean")
@inventory_option
@click.argument("names", nargs=-1)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def clean_cmd(inventory_path: Path, names: tuple[str, ...], dry_run: bool) -> None:
    """Stop and remove what a killed pgrig left on every host (servers, load runs),
    never what a live pgrig owns nor a directory without pgrig's owner record.
    (``pgrig clean --inventory`` does the same, and this machine's leftovers too.)"""
    lines = clean_lines(inventory_path, names, dry_run=dry_run)
    for line in lines:
        click.echo(line)
    if not lines:  # silence read as "did it even look?"
        click.echo(f"nothing to clean on the hosts of {inventory_path}")


def clean_lines(inventory_path: Path, names: Sequence[str] = (), *, dry_run: bool) -> list[str]:
    """What dead pgrig runs of any study left on the hosts (all, or those named),
    stopped and removed: one line per directory found, what was done with it.
    Every host is reached first: an unusable one is refused before anything is
    removed (exit 7)."""
    hosts = _selected(inventory.load(inventory_path), names)
    lines = []
    with preflight.opened(hosts) as executors:
        for ex in executors:
            for left in owner.clean(ex, dry_run=dry_run):
                lines.append(f"{left.host}: {left.directory}: {left.action}")
    return lines
