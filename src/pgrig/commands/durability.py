"""The ``pgrig durability`` command line; the work is in ``durability_study.py``,
imported in the command's body: ``--help`` loads neither it nor psycopg
(tests/test_cli_speed.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pgrig.cluster.profiles import parse_overrides
from pgrig.commands.options import cluster_options, finite, study_options
from pgrig.durability.model import IMMEDIATE, METHOD_TEXT, METHODS, POWER_LOSS_MODES
from pgrig.errors import Interrupted, UsageError, signal_number
from pgrig.ui import Ui


@click.command("durability")
@click.option(
    "--crash",
    "method",
    type=click.Choice(METHODS),
    default=IMMEDIATE,
    show_default=True,
    help="How to crash the server: "
    + "; ".join(f"{name}: {text}" for name, text in METHOD_TEXT.items())
    + ".",
)
@click.option(
    "--crashes",
    "--cycles",
    type=int,
    default=3,
    show_default=True,
    help="How many crashes (with --power-loss: crash + power-loss cycles).",
)
@click.option(
    "--power-loss",
    is_flag=True,
    help="After each crash the power goes too: the cluster (data and WAL) runs on pgrig's "
    "lossy filesystem, and what it wrote but did not fsync is thrown away before the "
    "restart (docs/lossyfs.md). Tests fsync=off, full_page_writes=off, wal_sync_method.",
)
@click.option(
    "--power-loss-mode",
    type=click.Choice(POWER_LOSS_MODES),
    default=None,
    help="What the power loss keeps of the unsynced writes: drop (nothing; the default), "
    "random-subset (a random half of the pages), torn (half of one page). Implies --power-loss.",
)
@click.option("--clients", type=int, default=4, show_default=True, help="Client connections.")
@click.option(
    "--interval",
    type=float,
    callback=finite,
    default=5.0,
    show_default=True,
    help="Mean seconds of load before each crash (each one random in 0.5x-1.5x); "
    "the run ends with one more interval of load.",
)
@click.option("--seed", type=int, default=None, help="Seed of the crash moments (recorded).")
@click.option(
    "--recovery-timeout",
    type=float,
    callback=finite,
    default=120.0,
    show_default=True,
    help="Seconds the server has to accept connections again after a crash.",
)
@cluster_options
@click.option(
    "--dsn",
    default=None,
    help="Crash an existing server on this machine instead (needs --yes; --crash "
    "kill-backend only, since pgrig cannot restart a server it did not start).",
)
@click.option("--yes", is_flag=True, help="Allow crashing an existing server (--dsn).")
@click.option(
    "--allow-untested",
    is_flag=True,
    help="Exit 0 on a PASS although the crash model cannot test some settings "
    "(fsync=off, full_page_writes=off, ...); they are reported as NOT TESTED all the same.",
)
@click.option(
    "--keep", is_flag=True, help="Keep the throwaway cluster (stopped) instead of removing it."
)
@study_options
def durability(**opts: Any) -> None:
    """Crash the server under a write load and prove that no acknowledged commit was
    lost: every acknowledged row present, no duplicates, invariants, pg_amcheck,
    server log. Exits non-zero when the check fails."""
    # the work, and the store it records into, are durability_study's (where a
    # test replaces them)
    from pgrig.commands import durability_study as study
    from pgrig.durability.driver import DurabilityPlan

    options = study.Options(
        plan=DurabilityPlan(
            method=opts["method"],
            crashes=opts["crashes"],
            clients=opts["clients"],
            interval_s=opts["interval"],
            seed=opts["seed"],
            recovery_timeout_s=opts["recovery_timeout"],
            power_loss=opts["power_loss_mode"] or ("drop" if opts["power_loss"] else None),
        ),
        target=opts["target"] if opts["target"] is not None else Path.cwd(),
        profile=opts["profile"],
        overrides=parse_overrides(list(opts["overrides"])),
        pg_bin=opts["pg_bin"],
        dsn=opts["dsn"],
        yes=opts["yes"],
        keep=opts["keep"],
        os_user=opts["os_user"],
        allow_untested=opts["allow_untested"],
    )
    given = click.get_current_context().get_parameter_source("profile")
    if opts["dsn"] is not None and given == click.core.ParameterSource.COMMANDLINE:
        raise UsageError(
            "--dsn with --profile: the profile applies to a cluster pgrig creates, not to an "
            "existing server",
            hint="drop --profile, or drop --dsn to let pgrig create a throwaway cluster",
        )
    results: Path = opts["results"]
    ui = Ui(quiet=opts["quiet"])
    runner = study.prepare(options, ui)  # bad input fails here, before the store is created
    with study.open_store(results, opts["store"]) as store:
        try:
            outcome = study.execute(options, ui, store, results, runner=runner)
        except KeyboardInterrupt as exc:
            raise Interrupted(
                "interrupted: the clients and the cluster were stopped",
                signum=signal_number(exc),
            ) from None
    res = outcome.result
    assert res is not None
    ui.ok(f"durability check passed: {study.summary(res)}, none lost")
    for setting in res.untested:
        ui.warn(f"NOT TESTED by a {res.crash_model} crash: {setting}")
