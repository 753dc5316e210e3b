"""``pgrig run`` (the quick study, or a campaign file) and ``pgrig plan``.

What a command does is imported in its body: ``pgrig run --help`` loads click
and the options alone, not the registry, the plug-ins and their libraries
(0.45 s of CPU before; tests/test_cli_speed.py)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pgrig.commands.options import cluster_options, lab_options, results_options
from pgrig.commands.quick import campaign_of, quick_options
from pgrig.errors import UsageError

if TYPE_CHECKING:
    from pgrig.campaign import Campaign

# Options that say how to run, not what: a campaign file takes them too.
NOT_THE_STUDY = ("quiet", "results", "store", "yes", "keep", "new", "retry_failed")


@click.command()
@click.argument("campaign_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@cluster_options
@quick_options
@lab_options
@results_options
@click.option(
    "--new",
    is_flag=True,
    help="Run the campaign FILE as a new study of its series (id NAME-YYYYMMDD-HHMMSS) "
    "instead of resuming it; `pgrig history NAME` reads the series.",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Resuming the campaign FILE, run its failed steps once more (a plain resume "
    "leaves them); each earlier failure stays recorded as KEY/failed-N.",
)
def run(campaign_file: Path | None, **opts: Any) -> None:
    """Run the quick study, or the campaign FILE, and write a report.

    Running a campaign file again resumes it: only the steps not yet recorded run
    (--retry-failed: the failed ones too, once); with --new it is a new study of
    the same series."""
    from pgrig.resume import new_study_id
    from pgrig.runner import run_campaign
    from pgrig.store import location
    from pgrig.ui import Ui

    ctx = click.get_current_context()
    typed = [name for name in opts if ctx.get_parameter_source(name) == _COMMANDLINE]
    results: Path = opts["results"]
    if campaign_file is not None:
        camp = _file_campaign(campaign_file, typed)
        # stable: running the file again resumes it; --new: the next study of its series
        study_id: str | None = new_study_id(camp.name) if opts["new"] else camp.name
    else:
        camp = campaign_of(opts, set(typed))
        camp = replace(camp, command=("pgrig", "run", *typed_options(ctx, typed)))
        study_id = None
    if opts["retry_failed"] and (campaign_file is None or opts["new"]):
        raise UsageError(
            "--retry-failed resumes a campaign FILE's study: "
            + ("--new begins another" if campaign_file else "the quick study is not resumed"),
            hint="pgrig run FILE --retry-failed",
        )
    again = [f"pgrig run {campaign_file}"]
    if "results" in typed:
        again.append(f"--results {results}")
    if opts["store"] is not None:
        again.append(f"--store {opts['store']}")
    resumable = campaign_file is not None and not opts["new"]
    run_campaign(
        camp,
        Ui(quiet=opts["quiet"]),
        results=results,
        store=location(results, opts["store"]),
        yes=opts["yes"],
        keep=opts["keep"],
        study_id=study_id,
        resume_hint=f"run `{' '.join(again)}` again to resume" if resumable else None,
        retry_failed=opts["retry_failed"],
        retry_hint=" ".join([*again, "--retry-failed"]) if resumable else None,
    )


_COMMANDLINE = click.core.ParameterSource.COMMANDLINE


def typed_options(ctx: click.Context, typed: list[str]) -> list[str]:
    """The quick study's options as they were typed (their values as click read
    them), for the study to record how it runs again; where it keeps its results
    is not the study."""
    out: list[str] = []
    for param in ctx.command.params:
        name = param.name
        if name not in typed or name in NOT_THE_STUDY or not isinstance(param, click.Option):
            continue
        value = ctx.params[name]
        if param.is_flag:
            flags = param.opts if value else param.secondary_opts
            out += flags[:1]
            continue
        for v in value if param.multiple else (value,):
            out += [param.opts[0], str(v)]
    return out


def _file_campaign(campaign_file: Path, typed: list[str]) -> Campaign:
    """The campaign file; the quick study's options beside it are refused."""
    given = [f"--{name.replace('_', '-')}" for name in typed if name not in NOT_THE_STUDY]
    if given:
        raise UsageError(
            f"{', '.join(given)}: these describe the quick study; a campaign file "
            "says everything itself",
            hint=f"put them into {campaign_file}",
        )
    from pgrig import campaign

    return campaign.load(campaign_file)


def _at_most(camp: Campaign) -> float:
    """The plan's seconds with every point repeated ``max_repeat`` times: what
    adaptive repeats never exceed (``RunPolicy.more``)."""
    from pgrig import calibration, plan

    most = replace(camp.policy, repeat=camp.policy.max_repeat)
    with calibration.watching():
        return plan.expand(replace(camp, policy=most)).total_s


@click.command("plan")
@click.argument("campaign_file", type=click.Path(path_type=Path, dir_okay=False))
def plan_cmd(campaign_file: Path) -> None:
    """Print every run CAMPAIGN_FILE expands to, the estimated time and the disk
    each target needs - without running anything."""
    from pgrig import calibration, campaign, plan, registry, validate
    from pgrig.ui import count, estimate

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
    missing = _versions(camp)
    for i, r in enumerate(exp.runs, start=1):
        click.echo(f"{i:4d}  {r.seconds:6.0f} s  {r.key}")
    total = estimate(exp.total_s)
    besides = f" ({exp.overhead_s:.0f} s of it besides the steps)" if exp.overhead_s else ""
    click.echo(
        f"{count(len(exp.runs), 'step')}, about {total}{besides}"
        + (
            f" (up to about {estimate(_at_most(camp))} if repeats extend to "
            f"{camp.policy.max_repeat}, until the wanted precision is met)"
            if camp.policy.adaptive
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


def _versions(camp: Campaign) -> list[str]:
    """Print where each PostgreSQL version the targets name comes from; the
    versions that cannot be installed."""
    from pgrig.pgsource import binaries, catalog

    specs = [t.pg_bin for t in camp.targets if t.pg_bin and binaries.looks_like_version(t.pg_bin)]
    missing = []
    for need_version in catalog.needed(list(dict.fromkeys(specs))):
        click.echo(f"  {need_version.describe()}")
        if need_version.problem is not None:
            missing.append(need_version.spec)
    return missing
