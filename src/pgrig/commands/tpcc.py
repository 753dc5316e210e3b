"""``pgrig tpcc``: load, run and check TPC-C on a server you name (``--dsn`` or the
libpq ``PG*`` variables), or ``study``: all three on a throwaway cluster, recorded
in the results store, with a report.

What a command does is imported in its body: ``--help`` loads neither psycopg
nor the registry (tests/test_cli_speed.py)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click

from pgrig.cluster.profiles import parse_overrides
from pgrig.commands.options import (
    QUIET,
    cluster_options,
    int_list,
    names,
    study_options,
    together,
)
from pgrig.document import fmt
from pgrig.errors import PgrigError
from pgrig.results import to_dict
from pgrig.ui import Ui, format_option
from pgrig.workloads.tpcc.model import ISOLATIONS, LABELS, MODES, TpccCheck, TpccLoad, TpccRun

_DSN = click.option(
    "--dsn",
    default=None,
    help="Server to use (URI or key=value; default: the PG* environment variables).",
)
_FORMAT = format_option(("text", "json"), "text for people, json for scripts (on stdout).")
_PG_BIN = click.option("--pg-bin", default=None, help="PostgreSQL bin directory (for pgbench).")
# pgbench's -c, -j and -T, as `tpcc run` and `tpcc study` give them.
_CLIENTS = together(
    click.option(
        "--connections", "-c", type=int, default=4, show_default=True, help="pgbench clients (-c)."
    ),
    click.option("--threads", "-j", type=int, default=None, help="pgbench threads (-j)."),
    click.option(
        "--duration", "-T", type=int, default=60, show_default=True, help="Seconds per run."
    ),
)
_ISOLATION = click.option(
    "--isolation",
    type=click.Choice(ISOLATIONS),
    default="read committed",
    show_default=True,
    help="Transaction isolation level of every transaction.",
)
_MAX_TRIES = click.option(
    "--max-tries",
    type=int,
    default=10,
    show_default=True,
    help="Tries of a transaction hit by a serialization failure or deadlock.",
)


@click.group("tpcc")
def tpcc() -> None:
    """TPC-C: load the nine tables, run the five transactions, check consistency."""


@tpcc.command("load")
@click.option("--warehouses", "-w", type=int, required=True, help="Warehouses to load (>= 1).")
@click.option("--jobs", type=int, default=0, help="Parallel connections (default: CPUs).")
@click.option("--yes", is_flag=True, help="Drop an existing tpcc schema and load again.")
@_DSN
@_FORMAT
@QUIET
def load_cmd(warehouses: int, jobs: int, yes: bool, dsn: str | None, fmt: str, quiet: bool) -> None:
    """Create the tpcc schema and populate it inside the server."""
    from pgrig.conninfo import Conn
    from pgrig.workloads.tpcc import loader

    ui = Ui(quiet=quiet)
    conn = Conn.from_user(dsn).answers()
    result = loader.load(
        conn, warehouses, jobs=jobs or os.cpu_count() or 1, replace=yes, on_progress=ui.info
    )
    _emit(result, fmt, format_load)


@tpcc.command("run")
@click.option("--warehouses", "-w", type=int, default=None, help="Expected loaded warehouses.")
@_CLIENTS
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="server",
    show_default=True,
    help="server: one PL/pgSQL call per transaction; client: one round trip per statement.",
)
@click.option("--active", type=int, default=None, help="Use only the first K warehouses.")
@_ISOLATION
@_MAX_TRIES
@_DSN
@_PG_BIN
@_FORMAT
def run_cmd(**o: Any) -> None:
    """Run the five transactions for --duration seconds with pgbench."""
    from pgrig.conninfo import Conn
    from pgrig.pgsource import binaries
    from pgrig.workloads.tpcc import driver

    bins = binaries.find(o["pg_bin"], tools=binaries.CLIENT_TOOLS)
    opts = driver.RunOptions(
        mode=o["mode"],
        connections=o["connections"],
        threads=o["threads"],
        duration_s=o["duration"],
        warehouses=o["warehouses"],
        active=o["active"],
        isolation=o["isolation"],
        max_tries=o["max_tries"],
    )
    with tempfile.TemporaryDirectory(prefix="pgrig-tpcc-") as scratch:
        result, _raw = driver.run(
            bins.client_bin_dir, Conn.from_user(o["dsn"]).answers(), opts, Path(scratch)
        )
    _emit(result, o["fmt"], format_run)


@tpcc.command("check")
@_DSN
@_FORMAT
def check_cmd(dsn: str | None, fmt: str) -> None:
    """Run the consistency conditions of clause 3.3.2; exit 1 if one fails."""
    from pgrig.conninfo import Conn
    from pgrig.workloads.tpcc import checks

    result = checks.check(Conn.from_user(dsn).answers())
    _emit(result, fmt, format_check)
    if not result.passed:
        raise PgrigError(
            f"{len(result.failures)} TPC-C consistency condition(s) fail",
            hint="the conditions and their offending rows are listed above",
        )


@tpcc.command("study")
@cluster_options
@click.option(
    "--warehouses", "-w", type=int, default=4, show_default=True, help="Warehouses to load."
)
@click.option("--jobs", type=int, default=0, help="Loader connections (default: CPUs).")
@_CLIENTS
@click.option(
    "--modes",
    default="server,client",
    show_default=True,
    help="server: one PL/pgSQL call per transaction; client: one round trip per statement.",
)
@click.option("--repeat", type=int, default=1, show_default=True, help="Runs of every mode.")
@click.option(
    "--active",
    default=None,
    help="Use only the first K warehouses; comma-separated, each K runs every mode on the "
    "same load (e.g. 1,4).",
)
@_ISOLATION
@_MAX_TRIES
@click.option("--dsn", default=None, help="Use an existing server instead of a throwaway one.")
@click.option("--yes", is_flag=True, help="With --dsn: drop an existing tpcc schema.")
@click.option("--keep", is_flag=True, help="Keep the throwaway cluster (stopped).")
@study_options
def study_cmd(**o: Any) -> None:
    """Load, check, run each mode and check again on a throwaway cluster; record
    every step in the results store and write the report."""
    from pgrig.campaign import Campaign, TargetSpec
    from pgrig.policy import RunPolicy
    from pgrig.runner import run_campaign
    from pgrig.store import location
    from pgrig.workloads.tpcc.spec import TpccSpec
    from pgrig.workloads.tpcc.steps import TpccPlan

    spec = TpccSpec(
        warehouses=o["warehouses"],
        jobs=o["jobs"],
        connections=o["connections"],
        threads=o["threads"],
        duration_s=o["duration"],
        modes=names(o["modes"], "--modes", MODES),
        active=None if o["active"] is None else int_list(o["active"], "--active"),
        isolation=o["isolation"],
        max_tries=o["max_tries"],
    )
    TpccPlan.of(spec, repeat=o["repeat"]).validate()
    target = TargetSpec(
        name="local",
        directory=None if o["dsn"] else (o["target"] or Path.cwd()),
        dsn=o["dsn"],
        pg_bin=o["pg_bin"],
        profile=o["profile"],
        settings=parse_overrides(list(o["overrides"])),
        os_user=o["os_user"],
    )
    campaign = Campaign(
        name="tpcc",
        source="pgrig tpcc study",
        targets=(target,),
        probes=None,
        workloads=(spec,),
        policy=RunPolicy(repeat=o["repeat"]),
        baseline="local",
    )
    run_campaign(
        campaign,
        Ui(quiet=o["quiet"]),
        results=o["results"],
        store=location(o["results"], o["store"]),
        yes=o["yes"],
        keep=o["keep"],
    )


# --------------------------------------------------------------------------
# Text output: data on stdout


def _emit(result: Any, fmt: str, text: Any) -> None:
    if fmt == "json":
        click.echo(json.dumps(to_dict(result), indent=2))
    else:
        click.echo(text(result))


def format_load(r: TpccLoad) -> str:
    phases = ", ".join(f"{k} {v:.2f} s" for k, v in r.phases.items())
    return (
        f"loaded {r.warehouses} warehouses: {r.rows:,} rows, {r.database_bytes / 1e6:,.0f} MB "
        f"in {r.elapsed_s:.2f} s ({r.rows_per_s:,.0f} rows/s, {r.mb_per_s:,.1f} MB/s; "
        f"{r.jobs} connections)\n{phases}"
    )


def format_run(r: TpccRun) -> str:
    lines = [
        f"{r.mode}-side, {r.connections} connections, {r.duration_s:.0f} s, "
        f"{r.active} of {r.warehouses} warehouses, {r.isolation}",
        f"tpmC {r.tpmc:,.0f}  tpmTotal {r.tpm_total:,.0f}  "
        f"(rollbacks {r.rollbacks}, failed {r.failed}, retried {r.retried}, "
        f"serialization {r.serialization_failures}, deadlocks {r.deadlock_failures})",
        f"{'transaction':<13} {'count':>8} {'p50 ms':>8} {'p90 ms':>8} {'p95 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8}",
    ]
    for t in r.types:
        cells = [t.p50_ms, t.p90_ms, t.p95_ms, t.p99_ms, t.max_ms]
        lines.append(
            f"{LABELS[t.name]:<13} {t.transactions:>8,} "
            + " ".join(f"{v:>8.2f}" if v is not None else f"{'n/a':>8}" for v in cells)
        )
    lines.append(
        fmt.percentile_method([(t.samples, r.latency_digits) for t in r.types if t.samples], "type")
    )
    return "\n".join(lines)


def format_check(r: TpccCheck) -> str:
    lines = []
    for c in r.conditions:
        verdict = "skipped" if c.skipped else "pass" if c.passed else "FAIL"
        detail = c.skipped or f"{c.offending:,} of {c.checked:,} offending"
        lines.append(f"{c.number:>2} {verdict:<7} {c.title} ({detail})")
    lines.append("all conditions hold" if r.passed else f"{len(r.failures)} condition(s) fail")
    return "\n".join(lines)
