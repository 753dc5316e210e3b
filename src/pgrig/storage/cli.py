"""Command line of the storage lab: ``pgrig audit`` and ``pgrig storage ...``.

To plug in (pgrig/cli.py)::

    from pgrig.storage.cli import audit, storage
    cli.add_command(audit)
    cli.add_command(storage)

and in ``pgrig clean``: ``for line in clean_lines(): click.echo(line)``.

Exit codes of ``pgrig audit``: 0 every setting as recommended (or every change
made); 10 some settings differ (nothing changed); 11 apply or restore could
not change some settings; other codes are pgrig's usual errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from pgrig.environment import audit as audit_mod
from pgrig.environment.knob import Finding
from pgrig.errors import PgrigError
from pgrig.storage import throttle

EXIT_DIFFERS = 10
EXIT_CHANGE_FAILED = 11


class SettingsDiffer(PgrigError):
    """Not a failure of pgrig: the machine differs from the seeds' recommendations."""

    exit_code = EXIT_DIFFERS


class ChangeFailed(PgrigError):
    exit_code = EXIT_CHANGE_FAILED


def _show(findings: list[Finding], verbose: bool) -> None:
    width = max((len(f.name) for f in findings), default=10)
    for f in findings:
        current = "unreadable" if f.current is None and f.ok is not None else f.current or "-"
        click.echo(f"{f.status:8} {f.name:{width}}  {current}  (recommended: {f.recommended})")
        if f.ok is False or verbose:
            click.echo(f"{'':8} {'':{width}}  why: {f.why}")
            click.echo(f"{'':8} {'':{width}}  how: {f.how}")


def _changes(changes: list[audit_mod.Change], verb: str) -> None:
    failed = [c for c in changes if not c.ok]
    for c in changes:
        state = "ok" if c.ok else f"FAILED{': ' + c.error if c.error else ''}"
        click.echo(f"{verb} {c.name}: {c.before} -> {c.after} [{state}]")
    if failed:
        raise ChangeFailed(
            f"{len(failed)} setting(s) could not be changed: {', '.join(c.name for c in failed)}",
            hint="see the messages above; some knobs are read-only in a container",
        )


@click.command()
@click.option(
    "--target",
    "targets",
    multiple=True,
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Also check the mount options of this directory's filesystem (repeatable).",
)
@click.option("--apply", "do_apply", is_flag=True, help="Set the differing run-time settings.")
@click.option(
    "--only",
    multiple=True,
    metavar="NAME",
    help="With --apply: only these settings (names as listed; repeatable).",
)
@click.option("--restore", is_flag=True, help="Put back the values saved by --apply.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--verbose", "-v", is_flag=True, help="Explain every setting, not only differing.")
def audit(
    targets: tuple[Path, ...],
    do_apply: bool,
    only: tuple[str, ...],
    restore: bool,
    fmt: str,
    verbose: bool,
) -> None:
    """Compare this machine's kernel settings with those seeds 000 and 002 tune.

    Reads only, unless --apply (sysctls and sysfs files only; old values are
    saved first) or --restore. Exit code 10 when settings differ.
    """
    if do_apply and restore:
        raise click.UsageError("--apply and --restore exclude each other")
    if only and not do_apply:
        raise click.UsageError("--only goes with --apply")
    if restore:
        changes = audit_mod.restore()
        if not changes:
            click.echo(f"nothing to restore ({audit_mod.saved_path()} holds no saved values)")
        _changes(changes, "restored")
        return
    if do_apply:
        changes = audit_mod.apply(only, targets)
        if not changes:
            click.echo("nothing to change")
        else:
            click.echo(f"old values saved in {audit_mod.saved_path()}; undo with --restore")
        _changes(changes, "set")
        return
    found = audit_mod.findings(targets)
    if fmt == "json":
        click.echo(json.dumps(audit_mod.to_dicts(found), indent=2))
    else:
        _show(found, verbose)
    differing = [f for f in found if f.ok is False]
    if differing:
        appliable = [f.name for f in differing if f.appliable]
        listed = ", ".join(appliable[:4]) + (", ..." if len(appliable) > 4 else "")
        raise SettingsDiffer(
            f"{len(differing)} of {len(found)} settings differ from the seeds' recommendations",
            hint=(
                "pgrig audit --apply sets the run-time ones "
                f"({len(appliable)}: {listed}); "
                "limits and mount options need the 'how' above"
                if appliable
                else "see the 'how' lines above"
            ),
        )


@click.group()
def storage() -> None:
    """The storage lab: cloud-disk presets and cleanup of loop devices and cgroups."""


@storage.command()
@click.argument("level")
@click.argument("size_gib", type=int)
@click.option("--strict/--no-strict", default=True, help="Refuse sizes the class is not sold in.")
def essd(level: str, size_gib: int, strict: bool) -> None:
    """Print the I/O caps of an ESSD LEVEL (PL0..PL3) of SIZE_GIB."""
    click.echo(throttle.essd(level, size_gib, strict=strict).describe())


@storage.command("clean")
def clean_cmd() -> None:
    """Remove filesystem targets and cgroups left by killed pgrig runs."""
    lines = clean_lines()
    for line in lines:
        click.echo(line)
    if not lines:
        click.echo("no storage-lab leftovers")


def clean_lines() -> list[str]:
    """What ``pgrig clean`` should also do: undo orphan filesystem targets and cgroups."""
    from pgrig import storage as lab

    return lab.clean()
