"""A summary that reruns its study (issue 42.4): the ``pgrig run`` command with
its campaign inline, and each step's command as a person types it, without the
per-run temporary paths a record keeps."""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import click

from pgrig import campaign, plan, registry
from pgrig.commands.quick import campaign_of
from pgrig.commands.run import run as run_command
from pgrig.commands.run import typed_options
from pgrig.report import rerun
from pgrig.results import ResultKind, RunRecord

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# A TPC-C run's argv as pgrig 0.1.0 recorded it (a study on this VM, 2026-11-29).
RECORDED = [
    "/usr/lib/postgresql/15/bin/pgbench", "-n", "-M", "prepared", "-c", "2", "-j", "2", "-T",
    "3", "-P", "1",
    "-f", "/tmp/rep-tpcc/data/pgrig-tpcc3-sync-on/pgrig-tpcc-4p7414vt/tpcc_server_new_order.sql@45",
    "-f", "/tmp/rep-tpcc/data/pgrig-tpcc3-sync-on/pgrig-tpcc-4p7414vt/tpcc_server_payment.sql@43",
    "-D", "active=1", "-l",
    "--log-prefix=/tmp/rep-tpcc/data/pgrig-tpcc3-sync-on/pgrig-tpcc-4p7414vt/txlog_2db0b882",
    "--max-tries=10", "--failures-detailed",
    "host=/tmp/pgrig-sock-ij5kun5d port=5432 user=postgres dbname=pgrig",
]  # fmt: skip


def test_a_recorded_command_line_is_shown_as_typed() -> None:
    assert rerun.typed(RECORDED) == (
        "pgbench -n -M prepared -c 2 -j 2 -T 3 -P 1 -f tpcc_server_new_order.sql@45 "
        "-f tpcc_server_payment.sql@43 -D active=1 -l --max-tries=10 --failures-detailed"
    )


def rerun_of(summary: str) -> tuple[list[str], str | None]:
    """The ``pgrig run`` command a summary prints, and its inline campaign."""
    command = re.search(r"^```\n(pgrig run .*)\n```$", summary, flags=re.M)
    assert command is not None, summary[-3000:]
    toml = re.search(r"^```toml\n(.*?)\n```$", summary, flags=re.M | re.S)
    return shlex.split(command[1]), toml[1] if toml else None


def replanned(summary: str, fresh: Path) -> set[str]:
    """The plan of the command a summary prints, its campaign written into
    ``fresh`` (a clean directory: nothing of the study's own) under its name."""
    argv, text = rerun_of(summary)
    assert argv[:2] == ["pgrig", "run"] and text is not None
    file = fresh / argv[2]
    file.write_text(text, encoding="utf-8")
    return plan.step_ids(campaign.load(file))


def no_temporary_paths(summary: str) -> None:
    steps = summary[summary.index("## How to run it again") :]
    assert "/tmp/pgrig-sock" not in steps and "--log-prefix" not in steps
    assert "pgrig-tpcc-" not in steps and "host=" not in steps


def test_the_quick_studys_command_plans_the_same_study() -> None:
    """The options a quick study records (``typed_options``), typed again, make the
    same campaign: the same steps."""
    args = ["--scale", "2", "--clients", "1,4", "--modes", "read-write", "--repeat", "2",
            "--set", "fsync=off", "--set", "work_mem=8MB", "--no-count", "--skip", "fio",
            "--results", "/somewhere"]  # fmt: skip

    def study_of(argv: list[str]) -> tuple[campaign.Campaign, list[str]]:
        ctx = run_command.make_context("run", list(argv))
        source = click.core.ParameterSource.COMMANDLINE
        typed = [n for n in ctx.params if ctx.get_parameter_source(n) == source]
        return campaign_of(ctx.params, set(typed)), typed_options(ctx, typed)

    first, recorded = study_of(args)
    assert "--results" not in recorded  # where results go is not the study
    again, _ = study_of(recorded)
    assert plan.step_ids(again) == plan.step_ids(first)
    assert again.targets == first.targets and again.workloads == first.workloads


def test_the_golden_studies_summaries_replan_their_steps(tmp_path: Path) -> None:
    """The stored custom-script, pg_basebackup and TPC-C rate-sweep studies
    (recorded with their command and campaign): the printed campaign, written on a
    fresh directory with the example scripts a clone has, plans the steps the
    study recorded."""
    from test_report_answer import stored

    for name in ("custom_login", "backup_two", "tpcc_rates"):
        study, records = stored(name)
        summary = "\n".join(rerun.lines(study, records))
        fresh = tmp_path / name
        shutil.copytree(EXAMPLES / "seed001", fresh / "seed001")
        planned = replanned(summary, fresh)
        recorded = {r.key for r in records}
        assert planned <= recorded and any(k[-3:] in ("/r2", "/r3") for k in planned), name
        no_temporary_paths(summary)
        if name == "backup_two":
            assert "pgbench -i -s 2\n" in summary  # the data the backups copied
            assert 'pg_basebackup -D "$COPY_DIR" -F p -X stream -c fast' in summary
        if name == "tpcc_rates":
            assert "pgrig tpcc load --warehouses 1" in summary and " -R 80 " in summary


@dataclass(frozen=True)
class _Filled:
    rows: int


def test_a_plugin_kind_says_how_its_data_is_made_again() -> None:
    """The summary asks each result kind (``ResultKind.rerun``), naming none: a
    plug-in's load kind adds its own command line, a failed load none."""
    from test_report_answer import stored

    study, records = stored("backup_two")
    target = records[0].target
    fill = ResultKind(
        "toy_fill", _Filled, rerun=lambda p, r: ["toyfill", "--rows", str(r.rows), p["table"]]
    )

    def rec(key: str, status: str) -> RunRecord:
        return RunRecord(
            study=study.id, key=key, kind="toy_fill", target=target, params={"table": "t1"},
            status=status, started_at="", finished_at="", result={"rows": 7},
        )  # fmt: skip

    registry.register_kind(fill)
    try:
        summary = "\n".join(rerun.lines(study, [*records, rec("a", "ok"), rec("b", "failed")]))
    finally:
        registry.unregister_kind(fill)
    assert summary.count("toyfill --rows 7 t1") == 1
    assert "toyfill" not in "\n".join(rerun.lines(study, [*records, rec("a", "ok")]))
