"""``pgrig plugins`` (what is loaded, from where, what each registered; pytest's
``--trace-config``) and ``pgrig keys NAME`` (a campaign table's keys from its
schema: pgrig's own tables, any workload's, any target kind's)."""

from __future__ import annotations

import json

import click

from pgrig.errors import UsageError
from pgrig.ui import format_option


@click.command("plugins")
@format_option(("text", "json"), "text: one paragraph per plug-in; json: a list of objects.")
def plugins_cmd(fmt: str) -> None:
    """List the installed plug-ins (pgrig.plugins entry points): package, where
    each comes from and what it registered, or why it was left out
    (PGRIG_DISABLE_PLUGINS=NAME or pgrig -p no:NAME)."""
    from pgrig import registry  # every plug-in: not for --help

    found = registry.plugins()
    if fmt == "json":
        rows = [
            {
                "name": p.name,
                "package": p.dist,
                "value": p.value,
                "disabled": p.disabled,
                "registered": [{"what": what, "name": name} for what, name in p.parts],
            }
            for p in found
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    for p in found:
        click.echo(f"{p.name}  ({p.dist}: {p.value})")
        if p.disabled is not None:
            click.echo(f"    disabled by {p.disabled}")
            continue
        by_what: dict[str, list[str]] = {}
        for what, name in p.parts:
            by_what.setdefault(what, []).append(name)
        for what, names in by_what.items():
            click.echo(f"    {what}: {', '.join(names)}")


@click.command("keys")
@click.argument("name")
@format_option(("markdown", "json"), "markdown: the docs' table; json: a list of objects.")
def keys_cmd(name: str, fmt: str) -> None:
    """Print a campaign table's keys from its schema: NAME is a workload's type
    (tpcb, tpcc, ...), a target kind's name (remote, ...) or one of pgrig's own
    tables (campaign, target, lab, initdb, probes, fio)."""
    from pgrig.campaign import key_tables

    tables = key_tables()
    schema = tables.get(name)
    if schema is None:
        raise UsageError(
            f"no campaign table, workload type or target kind named {name!r} has keys",
            hint=f"one of: {', '.join(tables)} (pgrig plugins lists where they come from)",
        )
    if fmt == "json":
        rows = [{"key": k.name, "default": k.default_text(), "meaning": k.doc} for k in schema.keys]
        click.echo(json.dumps({"table": schema.title, "keys": rows}, indent=2))
        return
    click.echo(f"{schema.title}\n")
    click.echo(schema.markdown())
