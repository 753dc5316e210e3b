"""Options every command that creates a throwaway cluster shares: where (the
storage under test), which configuration, which PostgreSQL."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pgrig.errors import UsageError

if TYPE_CHECKING:
    from pgrig.store import Store

F = Callable[..., Any]
# A command's options as click passes them (``**opts``): by parameter name.
Opts = dict[str, Any]


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A float option's callback: click's float takes "nan" and "inf", and a
    durability run at ``--interval nan`` acknowledged nothing and passed."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value}: give a finite number", ctx, param)
    return value


def given(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A text option's callback: an empty value is refused. `--target "$DIR"` with
    DIR unset ran on the current directory, and `--profile ""` read "profile file .
    is a directory"."""
    if value is not None and not value.strip():
        raise click.BadParameter("is empty (an unset shell variable?): give a value", ctx, param)
    return value


class GivenPath(click.Path):
    """click.Path that refuses an empty value (click made it the current directory)."""

    def convert(
        self,
        value: str | os.PathLike[str],
        param: click.Parameter | None,
        ctx: click.Context | None,
    ) -> str | bytes | os.PathLike[str]:
        if isinstance(value, str) and not value.strip():
            self.fail("is empty (an unset shell variable?): give a path", param, ctx)
        path = super().convert(value, param, ctx)
        # click lets a device through a directory option: --results /dev/null read
        # "[Errno 17] File exists", exit 1
        if not self.file_okay and os.path.exists(path) and not os.path.isdir(path):
            self.fail(f"{os.fsdecode(path)} exists and is not a directory", param, ctx)
        return path


def int_list(value: str, option: str) -> tuple[int, ...]:
    try:
        items = tuple(int(v) for v in value.replace(" ", "").split(",") if v)
    except ValueError as exc:
        raise UsageError(
            f"{option} {value!r}: expected integers separated by commas",
            hint=f"e.g. {option} 1,2,4,8",
        ) from exc
    if not items:
        raise UsageError(f"{option} is empty", hint=f"e.g. {option} 1,2,4,8")
    return items


def names(value: str, option: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    for item in items:
        if item not in allowed:
            raise UsageError(f"{option} {item!r}: must be one of {', '.join(allowed)}")
    return items


def together(*options: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator of several click options, which ``--help`` lists in this order."""

    def add(fn: F) -> F:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return add


def cluster_options(fn: F) -> F:
    """--target, --profile, --set and --pg-bin, as `pgrig run` documents them."""
    return together(
        click.option(
            "--target",
            type=GivenPath(path_type=Path),
            default=None,
            help="Directory on the storage under test (default: current directory).",
        ),
        click.option(
            "--profile",
            default="oltp",
            callback=given,
            show_default=True,
            help="Configuration profile: stock, oltp, or a path to a .conf file.",
        ),
        click.option(
            "--set",
            "overrides",
            multiple=True,
            metavar="NAME=VALUE",
            help="Override one server setting (repeatable), e.g. --set synchronous_commit=off.",
        ),
        click.option(
            "--pg-bin",
            default=None,
            callback=given,
            help="PostgreSQL bin directory "
            "(default: pg_config --bindir, else the newest /usr/lib/postgresql/*/bin).",
        ),
    )(fn)


def lab_options(fn: F) -> F:
    """--fs, --fs-size, --mkfs, --mount, --disk and --memory: the storage lab
    (the campaign keys of the same names, docs/storage-lab.md)."""
    return together(
        click.option(
            "--fs",
            type=click.Choice(["xfs", "ext4"]),
            default=None,
            help="Build this filesystem on a loop device (backing file in --target, "
            "default /var/tmp), run there, remove it after.",
        ),
        click.option("--fs-size", default=None, help="Size of --fs (default: 4GiB)."),
        click.option("--mkfs", default=None, help="Extra mkfs arguments for --fs, quoted."),
        click.option("--mount", default=None, help="Mount options for --fs, e.g. noatime."),
        click.option(
            "--disk",
            default=None,
            metavar="essd-plN:SIZE",
            help="Cap the server's and probes' I/O like a cloud disk, e.g. essd-pl1:100GiB.",
        ),
        click.option(
            "--memory",
            default=None,
            help="Run the server and its page cache in a memory cgroup of this size.",
        ),
    )(fn)


DEFAULT_RESULTS = Path("pgrig-results")


def results_options(fn: F) -> F:
    """--results and --store, for every command that reads or writes results."""
    fn = click.option(
        "--results",
        type=GivenPath(path_type=Path, file_okay=False),
        default=DEFAULT_RESULTS,
        show_default=True,
        help="Directory for the results store and the reports.",
    )(fn)
    fn = click.option(
        "--store",
        default=None,
        callback=given,
        help="Results store: a SQLite file (default: RESULTS/results.sqlite) or a PostgreSQL "
        "URI (postgresql://...) shared by a team.",
    )(fn)
    return fn


def open_results(results: Path, store: str | None) -> Store:
    """The results store --results and --store name, which must exist: a command
    that reads results never makes an empty one."""
    from pgrig.store import Store, location

    path = location(results, store)
    if isinstance(path, Path) and not path.exists() and not path.is_symlink():
        raise UsageError(
            f"no results store at {path}", hint="run `pgrig run` first, or pass --results/--store"
        )
    return Store.open(path)


OS_USER = click.option(
    "--os-user", default=None, help="OS user the server runs as when pgrig is root."
)
QUIET = click.option("-q", "--quiet", is_flag=True, help="No progress output.")


def study_options(fn: F) -> F:
    """--os-user, --results, --store and --quiet: how a study command that
    records into the results store ends its options (tpcc study, durability)."""
    return OS_USER(results_options(QUIET(fn)))
