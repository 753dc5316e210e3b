"""Options every command that creates a throwaway cluster shares: where (the
storage under test), which configuration, which PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

F = Callable[..., Any]


def cluster_options(fn: F) -> F:
    """--target, --profile, --set and --pg-bin, as `pgrig run` documents them."""
    for option in reversed(
        (
            click.option(
                "--target",
                type=click.Path(path_type=Path),
                default=None,
                help="Directory on the storage under test (default: current directory).",
            ),
            click.option(
                "--profile",
                default="oltp",
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
                help="PostgreSQL bin directory "
                "(default: pg_config --bindir, else the newest /usr/lib/postgresql/*/bin).",
            ),
        )
    ):
        fn = option(fn)
    return fn
