"""The ``pgrig`` command line. Errors are caught here, once, and printed as
``error: ...`` plus a hint on stderr with a non-zero exit code."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import click

from pgrig import __version__, calibration, campaign, plan, registry, validate
from pgrig.campaign import Campaign, InitdbSpec
from pgrig.cli_options import (
    cluster_options,
    int_list,
    lab_options,
    lab_spec,
    names,
    results_options,
)
from pgrig.cluster import binaries
from pgrig.cluster.profiles import parse_overrides
from pgrig.conninfo import Conn
from pgrig.durability.cli import durability
from pgrig.errors import (
    Interrupted,
    PgrigError,
    Signalled,
    UsageError,
    mask_secrets,
    signal_number,
)
from pgrig.hosts.cli import group as hosts_group
from pgrig.pgsource import catalog
from pgrig.pgsource.cli import group as pg_group
from pgrig.policy import RunPolicy
from pgrig.probe import FioPlan, ProbeSpec
from pgrig.report import progress as report_progress
from pgrig.report import samples as report_samples
from pgrig.report.monitor import closing_warning
from pgrig.report.writer import write as write_report
from pgrig.results import Study, to_dict
from pgrig.runner import planned_steps, run_campaign, study_live
from pgrig.schema import NAME
from pgrig.storage.cli import audit, storage
from pgrig.store import Store, location
from pgrig.targets.existing import PG_SERVER_VARS
from pgrig.tools import fio
from pgrig.ui import Ui, count, estimate
from pgrig.workloads.tpcb.spec import TpcbSpec
from pgrig.workloads.tpcc.cli import tpcc

DEFAULT_RESULTS = Path("pgrig-results")


def _abs_or_name(value: str | None) -> str | None:
    """A tablespace given as a relative directory becomes absolute; a bare name stays."""
    if value is None or value.startswith("/") or os.sep not in value and not Path(value).is_dir():
        return value
    return str(Path(value).resolve())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgrig")
def cli() -> None:
    """How fast is PostgreSQL on this machine, disk, filesystem, version and
    configuration - and why. Runs storage probes and pgbench on a throwaway
    cluster, records every result, and writes a Markdown + HTML report."""


@cli.command()
@click.argument("campaign_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@cluster_options
@click.option(
    "--dsn",
    default=None,
    help="Use an existing server (URI or key=value) instead of a throwaway cluster.",
)
@click.option(
    "--throwaway", is_flag=True, help="Create a throwaway cluster even when PG* variables are set."
)
@click.option(
    "--yes", is_flag=True, help="Allow destructive steps (pgbench -i) on an existing server."
)
@click.option(
    "--keep", is_flag=True, help="Keep the throwaway cluster (stopped) instead of removing it."
)
@click.option(
    "--os-user",
    default=None,
    help="OS user the server runs as when pgrig is root "
    "(default: postgres, else pgrig; created if missing).",
)
@click.option(
    "--scale",
    type=int,
    default=10,
    show_default=True,
    help="pgbench scale factor (100,000 accounts each, ~16 MB).",
)
@click.option(
    "--clients", default="1,2,4,8", show_default=True, help="Client counts, comma-separated."
)
@click.option(
    "--threads", type=int, default=None, help="pgbench threads (default: min(clients, CPUs))."
)
@click.option(
    "--duration",
    type=int,
    default=10,
    show_default=True,
    help="Seconds per pgbench run (short, and repeated: see --repeat).",
)
@click.option(
    "--modes", default="select-only,read-write", show_default=True, help="TPC-B modes to run."
)
@click.option(
    "--repeat",
    type=int,
    default=3,
    show_default=True,
    help="Runs of every point: the report gives their median, range and, from 3 on, "
    "the 95% confidence interval.",
)
@click.option(
    "--query-mode",
    type=click.Choice(["simple", "extended", "prepared"]),
    default="prepared",
    show_default=True,
    help="pgbench -M: how statements are sent to the server.",
)
@click.option(
    "--generate",
    type=click.Choice(["client", "server", "parallel"]),
    default="client",
    show_default=True,
    help="pgbench -i data generation, or parallel: pgrig's loader (the same rows, "
    "one connection per CPU).",
)
@click.option(
    "--partitions",
    type=int,
    default=0,
    show_default=True,
    help="Partition pgbench_accounts (pgbench --partitions).",
)
@click.option(
    "--unlogged-tables", is_flag=True, help="Create the pgbench tables UNLOGGED (seed 004)."
)
@click.option(
    "--tablespace",
    default=None,
    help="Tables in this tablespace: a directory (pgrig creates the tablespace in its "
    "cluster) or the name of an existing one.",
)
@click.option(
    "--index-tablespace",
    default=None,
    help="Indexes in this tablespace (directory or name), as seed 004 splits two disks.",
)
@click.option("--no-count", is_flag=True, help="Skip timing count(*) by index-only and seq scan.")
@click.option("--skip", default="", help="Steps to skip: timing,fsync,fio,tpcb.")
@click.option(
    "--timing-seconds",
    type=int,
    default=3,
    show_default=True,
    help="pg_test_timing duration (-d) in seconds.",
)
@click.option(
    "--fsync-seconds",
    type=int,
    default=1,
    show_default=True,
    help="pg_test_fsync seconds per test (the seeds use 5).",
)
@click.option(
    "--fsync-repeat",
    type=int,
    default=3,
    show_default=True,
    help="Runs of pg_test_fsync: each method's median and range, and orderings that "
    "contradict physics flagged as noise.",
)
@click.option(
    "--fio-size",
    default="256M",
    show_default=True,
    help="Size of fio's test file in the target directory (K, M, G suffixes).",
)
@click.option(
    "--fio-runtime", type=int, default=10, show_default=True, help="Seconds per fio pattern."
)
@click.option(
    "--fio-numjobs", type=int, default=1, show_default=True, help="fio --numjobs: parallel jobs."
)
@click.option(
    "--fio-iodepth",
    type=int,
    default=8,
    show_default=True,
    help="fio --iodepth: I/Os in flight per job.",
)
@click.option(
    "--fio-direct",
    type=click.IntRange(0, 1),
    default=1,
    show_default=True,
    help="1: O_DIRECT (as the seeds); 0: through the page cache.",
)
@click.option(
    "--wal-segsize", type=int, default=None, help="initdb --wal-segsize in MB (the seeds use 1024)."
)
@click.option(
    "--encoding", default="UTF8", show_default=True, help="initdb --encoding of the cluster."
)
@click.option("--locale", default="C", show_default=True, help="initdb --locale of the cluster.")
@click.option(
    "--no-monitor", is_flag=True, help="Do not sample host and server during measured runs."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
@lab_options
@results_options
def run(campaign_file: Path | None, **opts: Any) -> None:
    """Run the quick study, or the campaign FILE, and write a report.

    Running a campaign file again resumes it: only the steps not yet recorded run."""
    ui = Ui(quiet=opts["quiet"])
    results: Path = opts["results"]
    ctx = click.get_current_context()
    if campaign_file is not None:
        given = [
            f"--{name.replace('_', '-')}"
            for name in opts
            if name not in ("quiet", "results", "store", "yes", "keep")
            and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)}: these describe the quick study; a campaign file "
                "says everything itself",
                hint=f"put them into {campaign_file}",
            )
        camp = campaign.load(campaign_file)
        study_id = camp.name  # stable: running the file again resumes it
    else:
        from_command_line = {
            name
            for name in opts
            if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        }
        camp = _quick_campaign(opts, from_command_line)
        study_id = None
    again = [f"pgrig run {campaign_file}"]
    if ctx.get_parameter_source("results") == click.core.ParameterSource.COMMANDLINE:
        again.append(f"--results {results}")
    if opts["store"] is not None:
        again.append(f"--store {opts['store']}")
    run_campaign(
        camp,
        ui,
        results=results,
        store=location(results, opts["store"]),
        yes=opts["yes"],
        keep=opts["keep"],
        study_id=study_id,
        resume_hint=f"run `{' '.join(again)}` again to resume" if campaign_file else None,
    )


def _quick_campaign(opts: dict[str, Any], given: set[str]) -> Campaign:
    skip = names(opts["skip"], "--skip", ("timing", "fsync", "fio", "tpcb"))
    dsn = opts["dsn"]
    if dsn is not None:
        cluster_only = [
            "--" + name.replace("_", "-").replace("overrides", "set")
            for name in ("profile", "overrides", "wal_segsize", "encoding", "locale", "os_user")
            if name in given
        ]
        if cluster_only:
            raise UsageError(
                f"--dsn with {', '.join(cluster_only)}: pgrig never reconfigures a server it "
                "did not create",
                hint=f"drop {', '.join(cluster_only)}, or drop --dsn to let pgrig create a "
                "throwaway cluster configured that way",
            )
    if dsn is None and not opts["throwaway"] and any(os.environ.get(v) for v in PG_SERVER_VARS):
        dsn = ""  # libpq conventions: the PG* variables name the server to test
    clients = int_list(opts["clients"], "--clients")
    for name, value in (
        ("--scale", opts["scale"]),
        ("--duration", opts["duration"]),
        ("--repeat", opts["repeat"]),
        ("--fsync-repeat", opts["fsync_repeat"]),
        ("--fio-numjobs", opts["fio_numjobs"]),
        ("--fio-iodepth", opts["fio_iodepth"]),
        ("--fio-runtime", opts["fio_runtime"]),
        ("--timing-seconds", opts["timing_seconds"]),
        ("--fsync-seconds", opts["fsync_seconds"]),
    ):
        if value < 1:
            raise UsageError(f"{name} {value}: must be at least 1")
    if opts["partitions"] < 0:
        raise UsageError(
            f"--partitions {opts['partitions']}: 0 (not partitioned) or more",
            hint="e.g. --partitions 8",
        )
    if any(c < 1 for c in clients):
        raise UsageError(f"--clients {opts['clients']}: every client count must be at least 1")
    threads = opts["threads"]
    if threads is not None and (threads < 1 or threads > max(clients)):
        raise UsageError(
            f"--threads {threads} is greater than the largest client count {max(clients)}"
            if threads >= 1
            else f"--threads {threads}: must be at least 1",
            hint="pgbench needs at least one client per thread",
        )
    seg = opts["wal_segsize"]
    if seg is not None and (seg < 1 or seg > 1024 or seg & (seg - 1)):
        raise UsageError(f"--wal-segsize {seg}: must be a power of 2 between 1 and 1024 (MB)")
    try:
        fio.size_bytes(opts["fio_size"])
    except UsageError as exc:
        raise UsageError(f"--fio-size {opts['fio_size']!r}: not a size", hint=exc.hint) from exc
    workload = None
    if "tpcb" not in skip:
        workload = TpcbSpec(
            scales=(opts["scale"],),
            clients=clients,
            threads=threads,
            durations=(opts["duration"],),
            modes=names(opts["modes"], "--modes", ("select-only", "read-write")),
            query_mode=opts["query_mode"],
            generate=opts["generate"],
            partitions=opts["partitions"],
            unlogged=opts["unlogged_tables"],
            count=not opts["no_count"],
        )
    probes = ProbeSpec(
        timing_s=None if "timing" in skip else opts["timing_seconds"],
        fsync_s=None if "fsync" in skip else opts["fsync_seconds"],
        fsync_repeat=opts["fsync_repeat"],
        fio=None
        if "fio" in skip
        else FioPlan(
            numjobs=opts["fio_numjobs"],
            iodepth=opts["fio_iodepth"],
            size=opts["fio_size"],
            runtime_s=opts["fio_runtime"],
            direct=bool(opts["fio_direct"]),
        ),
    )
    lab = lab_spec(opts, opts["target"])
    if lab is not None:
        if opts["dsn"] is not None:
            raise UsageError(
                "--dsn with --fs/--disk/--memory: the storage lab builds a throwaway cluster "
                "on the storage it emulates; an existing server cannot be moved there",
                hint="drop --dsn to study the emulated storage, or the lab options to test "
                "the server",
            )
        dsn = None  # the lab means a throwaway cluster, whatever PG* variables say
    return plan.quick(
        None if lab and lab.fs else opts["target"] if opts["target"] is not None else Path.cwd(),
        lab=lab,
        dsn=dsn,
        profile=opts["profile"],
        settings=parse_overrides(list(opts["overrides"])),
        pg_bin=opts["pg_bin"],
        os_user=opts["os_user"],
        initdb=InitdbSpec(encoding=opts["encoding"], locale=opts["locale"], wal_segsize_mb=seg),
        tablespace=_abs_or_name(opts["tablespace"]),
        index_tablespace=_abs_or_name(opts["index_tablespace"]),
        probes=probes,
        workload=workload,
        policy=RunPolicy(repeat=opts["repeat"], monitor=not opts["no_monitor"]),
    )


@cli.command("plan")
@click.argument("campaign_file", type=click.Path(path_type=Path, dir_okay=False))
def plan_cmd(campaign_file: Path) -> None:
    """Print every run CAMPAIGN_FILE expands to, the estimated time and the disk
    each target needs - without running anything."""
    camp = campaign.load(campaign_file)
    with calibration.watching() as seen:
        exp = plan.expand(camp)
    click.echo(
        f"campaign {camp.name} ({campaign_file}): {len(camp.targets)} target(s), "
        f"baseline {camp.baseline}, repeats {exp.repeats}"
    )
    for t in camp.targets:
        where, room = registry.target_kind(t).where(t)
        need = exp.disk.get(t.name, 0)
        free = ""
        if room is not None and room.exists():
            free = f", {shutil.disk_usage(room).free / 2**30:.1f} GiB free in {room}"
        click.echo(f"  target {t.name}: {where}; needs about {need / 2**30:.1f} GiB{free}")
    specs = [t.pg_bin for t in camp.targets if t.pg_bin and binaries.looks_like_version(t.pg_bin)]
    missing = []
    for need_version in catalog.needed(list(dict.fromkeys(specs))):
        click.echo(f"  {need_version.describe()}")
        if need_version.problem is not None:
            missing.append(need_version.spec)
    for i, r in enumerate(exp.runs, start=1):
        click.echo(f"{i:4d}  {r.seconds:6.0f} s  {r.key}")
    total = estimate(exp.total_s)
    besides = f" ({exp.overhead_s:.0f} s of it besides the steps)" if exp.overhead_s else ""
    click.echo(
        f"{count(len(exp.runs), 'step')}, about {total}{besides}"
        + (
            " (more if repeats extend until the confidence interval is met)"
            if camp.policy.until_ci_pct
            else ""
        )
        + (
            f"; less with concurrent = true: each point runs on the {len(camp.targets)} "
            "targets at once (loads in turn)"
            if camp.policy.concurrent and len(camp.targets) > 1
            else ""
        )
    )
    if missing:
        raise UsageError(
            f"{campaign_file}: PostgreSQL {', '.join(missing)} cannot be installed (see above)",
            hint="`pgrig pg list --all` shows the versions pgrig can install",
        )
    # What `pgrig run` would refuse, refused here too - by the same pass.
    for note in validate.campaign(camp, planning=True).warnings:
        click.echo(f"warning: {note}", err=True)
    if busier := calibration.load_note(seen, calibration.busy()):
        click.echo(f"warning: {busier}", err=True)


def _write_report(store: Store, sid: str, results: Path, ui: Ui) -> tuple[Path, Path]:
    study = store.study(sid)
    records, samples, progress = report_samples.read(store, sid)  # each run's when drawn
    md, html = write_report(study, records, results, samples=samples, progress=progress)
    if closing := closing_warning(records):
        ui.warn(closing)
    click.echo(f"report: {md}")
    click.echo(f"report: {html}")
    return md, html


@cli.command("report")
@click.argument("study_id", required=False)
@results_options
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Directory for the report files (default: RESULTS).",
)
def report_cmd(study_id: str | None, results: Path, store: str | None, out: Path | None) -> None:
    """Write the Markdown and HTML report of a study (default: the latest)."""
    with _open_existing(results, store) as st:
        _write_report(st, study_id or _latest(st).id, out or results, Ui())


@cli.command("list")
@results_options
def list_cmd(results: Path, store: str | None) -> None:
    """List the studies in the results store."""
    with _open_existing(results, store) as st:
        click.echo("study\tstatus\tsteps\ttarget")
        for study in st.studies():
            # what a line needs: no run's samples nor -P points (most of a long run's bytes)
            lean = st.runs(
                study.id,
                without_samples=(registry.MONITOR.name,),
                without_progress=report_progress.kinds(),
            )
            runs = [r for r in lean if r.kind != registry.MONITOR.name]
            planned = planned_steps(study)
            if planned is not None:  # the plan is known: count its steps, not the records
                runs = [r for r in runs if r.key in planned]
            # a check that ran to its end but failed (a durability check that lost
            # commits) is no "ok" step
            failed = sum(getattr(registry.typed_result(r), "ok", True) is False for r in runs)
            ok = sum(r.status == "ok" for r in runs) - failed
            steps = (
                f"{ok}/{len(runs)} ok"
                if planned is None
                else f"{len(runs)} of {len(planned)} steps recorded, {ok} ok"
            ) + (f", {failed} check(s) failed" if failed else "")
            click.echo(f"{study.id}\t{_status(study)}\t{steps}\t{study.target}")


def _status(study: Study) -> str:
    """'running' only while its pgrig lives: one killed without a word (kill -9,
    power loss) left an interrupted study."""
    return "interrupted" if study.status == "running" and not study_live(study) else study.status


@cli.command("export")
@click.argument("study_ids", nargs=-1)
@results_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "csv"]),
    default="json",
    show_default=True,
    help="json: everything (docs/export.md); csv: one row per run, or per second with --series.",
)
@click.option(
    "--series",
    is_flag=True,
    help="CSV: one row per second of every pgbench run instead of one per run.",
)
@click.option("--raw", is_flag=True, help="JSON: include every tool's raw output.")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write to this file instead of stdout.",
)
def export_cmd(
    study_ids: tuple[str, ...],
    results: Path,
    store: str | None,
    fmt: str,
    series: bool,
    raw: bool,
    output: Path | None,
) -> None:
    """Export studies (default: the latest) as JSON (schema in docs/export.md) or CSV."""
    from pgrig import export

    with _open_existing(results, store) as st:
        studies = [st.study(s) for s in study_ids] or [_latest(st)]
        records = [r for s in studies for r in st.runs(s.id)]
    if fmt == "json":
        text = export.to_json(studies, records, raw=raw)
    else:
        text = export.series_csv(records) if series else export.runs_csv(records)
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            output.write_text(text)
        except OSError as exc:
            raise UsageError(
                f"-o {output}: cannot write: {exc.strerror or exc}",
                hint="give a file in an existing, writable directory",
            ) from exc
        click.echo(f"wrote {output}", err=True)


@cli.command("import")
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.argument("study_ids", nargs=-1)
@results_options
@click.option("--as", "as_id", default=None, help="Import a single study under this id.")
def import_cmd(
    source: Path, study_ids: tuple[str, ...], results: Path, store: str | None, as_id: str | None
) -> None:
    """Copy studies from another results file (e.g. from another machine) into the store."""
    if as_id is not None and not NAME.fullmatch(as_id):
        raise UsageError(
            f"--as {as_id!r}: a study id is letters, digits, '.', '_' and '-' only",
            hint="e.g. --as laptop-quick-2",
        )
    with Store.open(source) as other:
        ids = list(study_ids) or [s.id for s in other.studies()]
        if as_id is not None and len(ids) != 1:
            raise UsageError("--as names one study; give exactly one STUDY_ID")
        for sid in ids:
            other.study(sid)  # an unknown id is refused before the store is created
        with Store.open(location(results, store)) as st:
            for sid in ids:
                click.echo(f"imported {st.import_study(other, sid, as_id=as_id)}")


@cli.command("compare")
@click.argument("study_ids", nargs=-1, required=True)
@results_options
@click.option("--baseline", default=None, help="The study (or STUDY/TARGET) to compare against.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Directory for the comparison report (default: RESULTS).",
)
def compare_cmd(
    study_ids: tuple[str, ...],
    results: Path,
    store: str | None,
    baseline: str | None,
    out: Path | None,
) -> None:
    """Compare studies from different campaigns or machines (import theirs first)."""
    from pgrig import export

    if len(study_ids) < 2:
        raise UsageError("compare needs at least two studies", hint="see `pgrig list`")
    with _open_existing(results, store) as st:
        studies = [st.study(s) for s in study_ids]
        # each run's samples and -P points read when it is drawn, as `pgrig report` does
        lean = [report_samples.read(st, s.id) for s in studies]
        per_study = [records for records, _, _ in lean]
        empty = [s.id for s, recs in zip(studies, per_study, strict=True) if not recs]
        if empty:
            raise UsageError(
                f"study {empty[0]} has no recorded runs: nothing to compare",
                hint="see `pgrig list`; run it again to resume it",
            )
        study, records = export.combined(studies, per_study)
        names = [t["name"] for t in study.params["targets"]]
        if baseline is not None:
            if baseline not in names:
                raise UsageError(f"--baseline {baseline!r} is not one of {', '.join(names)}")
            study.params["baseline"] = baseline
        _, samples, progress = lean[0]  # one store: its readers serve every study's runs
        md, html = write_report(study, records, out or results, samples=samples, progress=progress)
    click.echo(f"report: {md}")
    click.echo(f"report: {html}")


def _open_existing(results: Path, store: str | None) -> Store:
    path = location(results, store)
    if isinstance(path, Path) and not path.exists():
        raise UsageError(
            f"no results store at {path}", hint="run `pgrig run` first, or pass --results/--store"
        )
    return Store.open(path)


def _latest(st: Store) -> Study:
    latest = st.latest_study()
    if latest is None:
        raise UsageError(f"{st.path} holds no study yet", hint="run `pgrig run` first")
    return latest


@cli.command()
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
    lines = lifecycle.clean_orphans(None, [])
    for line in lines + remote:
        click.echo(line)
    if not lines:
        click.echo("nothing to clean: no orphan work directories, no storage-lab leftovers")
    if inventory_path is not None and not remote:
        click.echo(f"nothing to clean on the hosts of {inventory_path}")


@cli.command()
@click.option(
    "--target",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="Also describe the filesystem of this directory.",
)
@click.option("--dsn", default=None, help="Also record this server's version and settings.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json"]),
    default="json",
    show_default=True,
    help="Output format (JSON, the schema of docs/export.md's environment).",
)
def env(target: Path | None, dsn: str | None, fmt: str) -> None:
    """Print the captured environment (machine, filesystem, server) as JSON."""
    from pgrig import environment

    # asked for by name: a server that does not answer is bad input, not a null
    conninfo = Conn.from_user(dsn).answers().conninfo() if dsn is not None else None
    captured = environment.capture([target or Path.cwd()], pg_conninfo=conninfo)
    click.echo(json.dumps(to_dict(captured), indent=2))


# Subcommands that live next to their code: one import and one line each.
cli.add_command(tpcc)
cli.add_command(durability)
cli.add_command(pg_group)
cli.add_command(audit)
cli.add_command(storage)
cli.add_command(hosts_group)


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
