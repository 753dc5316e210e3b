"""Records -> report view: the sections, tables and figures of one study.

Pure functions: a ``Study`` and its ``RunRecord`` s in, a ``ReportView`` out.
Failed and skipped runs stay in every table as rows that say so with their
reason; nothing is dropped silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pgrig import registry, stats
from pgrig.document import fmt
from pgrig.document.model import (
    NORMAL,
    Details,
    Figure,
    ReportView,
    Row,
    Section,
    Table,
)
from pgrig.meaning import Meaning
from pgrig.monitor.model import MONITOR
from pgrig.probe import FIO, FSYNC, TIMING
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report import compare, conclusions, sizes, variants
from pgrig.report import storage as storage_report
from pgrig.report.fold import fold_runs
from pgrig.report.monitor import busy_before, disturbed_summary
from pgrig.report.monitor import section as monitor_section
from pgrig.report.probes import (
    HEADLINE_FSYNC,
    fio_order,
    fio_section,
    fio_summary,
    fsync_section,
    fsync_summary,
    timing_section,
)
from pgrig.report.progress import Progress, ProgressReader, own_progress
from pgrig.report.samples import SampleReader, own_samples
from pgrig.report.status import status_kind
from pgrig.report.tpcb import headline_rows as tpcb_headline_rows
from pgrig.report.tpcb import tpcb_section
from pgrig.report.versus import Family
from pgrig.results import (
    SERVER,
    Environment,
    RunRecord,
    Study,
)


def build(
    study: Study,
    records: Sequence[RunRecord],
    samples: SampleReader = own_samples,
    progress: ProgressReader = own_progress,
) -> ReportView:
    """``samples`` gives a watched run's per-second samples when its section
    draws it, ``progress`` a pgbench run's -P points (the records may come
    without them: ``pgrig.report.samples``, ``pgrig.report.progress``)."""
    records = sorted(records, key=_record_order)
    targets = compare.targets_of(study.params, records)
    per_second = Progress(progress)  # one for every section: each run read once for its noise
    if len(targets) > 1:
        return _build_comparison(study, records, targets, samples, per_second)
    by_kind: dict[str, list[RunRecord]] = {}
    for rec in records:
        by_kind.setdefault(rec.kind, []).append(rec)
    timing = by_kind.get("pg_test_timing", [])
    fsync = by_kind.get("pg_test_fsync", [])
    fio = sorted(by_kind.get("fio", []), key=fio_order)
    sections = [
        _with_labs(summary_section(study, fsync, fio, records, per_second), records),
        environment_section(study, records),
        timing_section(timing, study.environment),
        fsync_section(fsync, study.target),
        fio_section(fio, study.target),
        *workload_sections(
            records,
            study.target,
            meaning_of(study, targets[0] if targets else ""),
            per_second,
        ),
        *extra_sections(study, records, samples),
        runs_section(records),
    ]
    baseline = targets[0] if targets else ""
    return ReportView(
        title=f"pgrig report: {study_label(study)}",
        meta=header(study, records),
        sections=_concluded(study, records, targets, baseline, sections, samples, per_second),
    )


def _concluded(
    study: Study,
    records: Sequence[RunRecord],
    targets: Sequence[str],
    baseline: str,
    sections: Sequence[Section],
    samples: SampleReader,
    progress: Progress,
) -> tuple[Section, ...]:
    """The conclusions (and one summary chart) first: the answer before its evidence."""
    meanings = {t: m for t in targets if (m := meaning_of(study, t)) is not None}
    ev = conclusions.evidence_of(
        records, targets, baseline, study.environment, meanings, samples=samples, progress=progress
    )
    first, rest = conclusions.section(ev, sections)
    return (first, *rest)


def workload_sections(
    records: Sequence[RunRecord],
    target: str,
    meaning: Meaning | None = None,
    progress: Progress | None = None,
) -> list[Section]:
    """One TPC-B-style section per workload, scale and duration (a campaign can
    sweep scales, as seed 004 does from 1 to 10,000)."""
    groups: dict[tuple[str, object, object], list[RunRecord]] = {}
    kinds = ("pgbench_init", "count", "pgbench_run", "sql_setup")
    for rec in records:
        if rec.kind in kinds:
            p = rec.params
            groups.setdefault((str(p.get("workload", "tpcb")), p.get("scale"), None), []).append(
                rec
            )
    # The monitor's records go along: they say which runs other work disturbed.
    watched = [r for r in records if MONITOR.holds(r)]
    durations_all = {r.params.get("duration_s") for r in records if PGBENCH_RUN.holds(r)}
    distinct = {k for k in groups if k[1] is not None or k[0] != "tpcb"}
    if len(distinct) <= 1 and len(durations_all) <= 1:
        # One workload at one scale: one section, as the quick study shows it.
        only = next(iter(distinct), ("tpcb", None, None))
        mine = [r for r in records if r.kind in kinds] + watched
        section = tpcb_section(mine, target, meaning, progress)
        if only[0] != "tpcb":
            section = _retitle(section, f"{only[0]} (pgbench)", _slug(only[0]))
        return [section]
    out = []
    for (workload, scale, _), recs in groups.items():
        durations = sorted(
            {r.params.get("duration_s") for r in recs if PGBENCH_RUN.holds(r)},
            key=lambda d: d or 0,
        )
        for duration in durations or [None]:
            subset = [
                r
                for r in recs
                if not PGBENCH_RUN.holds(r) or r.params.get("duration_s") == duration
            ]
            section = tpcb_section(subset + watched, target, meaning, progress)
            label = "TPC-B" if workload == "tpcb" else workload
            parts = [
                f"scale {scale}" if scale is not None else "",
                f"{duration} s runs" if len(durations) > 1 else "",
            ]
            suffix = ", ".join(p for p in parts if p)
            if len(groups) > 1 or len(durations) > 1 or workload != "tpcb":
                section = _retitle(
                    section,
                    f"{label} (pgbench)" + (f", {suffix}" if suffix else ""),
                    _slug(f"{workload}-{scale}-{duration}"),
                )
            out.append(section)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def _retitle(section: Section, title: str, suffix: str) -> Section:
    """The same section under another title; figure names made unique (they name files)."""
    tag = suffix.replace("-", "_")

    def renamed(b: Table | Figure) -> Table | Figure:
        return replace(b, name=f"{b.name}_{tag}") if isinstance(b, Figure) else b

    blocks = tuple(
        replace(b, blocks=tuple(map(renamed, b.blocks))) if isinstance(b, Details) else renamed(b)
        for b in section.blocks
    )
    return replace(section, title=title, anchor=f"{section.anchor}-{suffix}", blocks=blocks)


def _build_comparison(
    study: Study,
    records: Sequence[RunRecord],
    targets: list[str],
    samples: SampleReader,
    progress: Progress,
) -> ReportView:
    baseline = str(study.params.get("baseline") or targets[0])
    if baseline not in targets:
        baseline = targets[0]
    meanings = {t: m for t in targets if (m := meaning_of(study, t)) is not None}
    machines = machines_of(study, targets)
    policy = study.params.get("policy")
    concurrent = isinstance(policy, dict) and bool(policy.get("concurrent"))
    compared = study.params.get("compared")
    first = compare.comparison_section(
        records,
        targets,
        baseline,
        meanings,
        machines,
        concurrent=concurrent,
        progress=progress,
        studies=tuple(map(str, compared)) if isinstance(compared, list) else (),
    )
    first = replace(first, paragraphs=interference_lines(records) + first.paragraphs)
    sections = [_with_labs(first, records)]
    # The campaign's axes next to the summary: versions in seed 004's layout,
    # settings beside pg_stat_io.
    for found in (
        variants.versions_section(study, records),
        variants.axes_section(study, records, samples),
    ):
        if found is not None:
            sections.append(found)
    environment = environment_section(study, records)
    if machines:
        environment = replace(
            environment,
            paragraphs=(
                "The controlling machine (where pgrig ran); each target's own machine "
                "opens the comparison table above.",
                *environment.paragraphs,
            ),
        )
    sections.append(environment)
    for t in targets:
        mine = [r for r in records if r.target == t]
        env = study.target_environments.get(t)
        per_target = [
            timing_section([r for r in mine if TIMING.holds(r)], study.environment),
            fsync_section([r for r in mine if FSYNC.holds(r)], t),
            fio_section(sorted((r for r in mine if FIO.holds(r)), key=fio_order), t),
            *workload_sections(mine, t, meaning_of(study, t), progress),
        ]
        if env is not None and env.postgres is not None:
            per_target.insert(
                0,
                Section(
                    "PostgreSQL",
                    "postgres",
                    paragraphs=(env.postgres.provenance(),),
                    blocks=(
                        Table(
                            ("Setting", "Value"),
                            tuple(Row((k, v)) for k, v in sorted(env.postgres.settings.items())),
                            caption=f"Non-default settings ({len(env.postgres.settings)})",
                            collapsed=True,
                        ),
                    ),
                ),
            )
        if env is not None and env.host:
            per_target.insert(0, machine_section(env))
        for section in per_target:
            if section.blocks:
                out = _retitle(section, f"{t}: {section.title}", _slug(t))
                sections.append(out)
    sections += [*extra_sections(study, records, samples), runs_section(records)]
    return ReportView(
        title=f"pgrig report: {study_label(study)}",
        meta=header(study, records),
        sections=_concluded(study, records, targets, baseline, sections, samples, progress),
    )


def extra_sections(
    study: Study, records: Sequence[RunRecord], samples: SampleReader = own_samples
) -> list[Section]:
    """The plug-ins' own sections (the target kinds', the workloads', the others'
    registered), then memory against data, then what the monitor saw."""
    out = [section(study, records) for section in registry.sections()]
    out.append(sizes.section(records))
    out.append(storage_report.memory_section(records, study.environment, samples))
    out.append(monitor_section(study, records, samples))
    return [fold_runs(s) for s in out if s is not None]


def _record_order(rec: RunRecord) -> tuple[int, str]:
    # Store ids follow execution order; records not yet stored keep their timestamps.
    return (rec.id if rec.id is not None else 1 << 62, rec.started_at)


def _is_monitor(rec: RunRecord) -> bool:
    """The monitor's record of a run: evidence about that run, not a run of its own."""
    return MONITOR.holds(rec)


def runs_text(records: Sequence[RunRecord]) -> str:
    """'17 (16 ok, 1 failed); host and server monitored during 8 of them'."""
    steps = [r for r in records if not _is_monitor(r)]
    if not steps:
        return "none recorded"
    counts: dict[str, int] = {}
    for rec in steps:
        counts[rec.status] = counts.get(rec.status, 0) + 1
    text = f"{len(steps)} ({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))})"
    watched = sum(_is_monitor(r) for r in records)
    return text + (f"; host and server monitored during {watched} of them" if watched else "")


def study_label(study: Study) -> str:
    """'quick (quick-20261122-041500)'; a campaign's study bears its name: once
    ("seed002-filesystems (seed002-filesystems)" headed its report)."""
    return study.name if study.id == study.name else f"{study.name} ({study.id})"


def header(study: Study, records: Sequence[RunRecord]) -> tuple[tuple[str, str], ...]:
    return (
        ("Study", study_label(study)),
        ("Target", _targets_text(study, records)),
        ("Started", study.started_at),
        ("Finished", study.finished_at or "not finished"),
        ("Status", study.status),
        ("pgrig version", study.pgrig_version or "unknown"),
        ("Runs", runs_text(records)),
        ("Statistic", STATISTIC),
        ("How it was obtained", obtained_line(study, records)),
    )


# Said once, at the top: what every headline figure and every "vs" is.
STATISTIC = (
    f"every headline figure is the {stats.HEADLINE} of the repeats, and every 'vs' the "
    f"difference of the {stats.HEADLINE}s (one outlying run moves a mean of 3, not their "
    f"median); ▲ better / ▼ worse only when Welch's test survives the Benjamini-Hochberg "
    f"correction of its table and rests on ≥ {stats.MIN_RUNS} runs a side, ≈ within noise "
    "otherwise"
)


def _targets_text(study: Study, records: Sequence[RunRecord]) -> str:
    """A campaign's target names (seed001's "disk", not its directory "/var/tmp")."""
    if not study.params.get("targets"):
        return study.target
    return ", ".join(compare.targets_of(study.params, records)) or study.target


def tool_versions(study: Study, records: Sequence[RunRecord]) -> dict[str, str]:
    """Each tool's version as the records say they ran it; a tool that ran in
    several versions (a server-only build's pgbench is a newer installation's)
    lists each with the targets it drove. The study's environment fills in tools
    no record names."""
    seen: dict[str, dict[str, list[str]]] = {}
    for rec in records:
        for name, version in rec.tool_versions.items():
            if name == SERVER:
                continue
            targets = seen.setdefault(name, {}).setdefault(version, [])
            if rec.target not in targets:
                targets.append(rec.target)
    tools: dict[str, str] = {}
    for name, versions in seen.items():
        if len(versions) == 1:
            tools[name] = next(iter(versions))
        else:
            tools[name] = "; ".join(
                f"{_strip_name(name, v)} ({', '.join(ts)})" for v, ts in versions.items()
            )
    if study.environment is not None:
        for name, version in study.environment.tools.items():
            tools.setdefault(name, version)
    return tools


def _strip_name(name: str, version: str) -> str:
    if version.lower().startswith(name.lower()):
        return version[len(name) :].lstrip(" -") or version
    return version


def tools_text(tools: dict[str, str]) -> str:
    """'fio 3.33, pg_test_fsync/pgbench/psql (PostgreSQL) 15.18': each version
    once, and the tool's name once - ``--version`` prints it too."""
    by_version: dict[str, list[str]] = {}
    for name, version in sorted(tools.items()):
        by_version.setdefault(_strip_name(name, version), []).append(name)
    return ", ".join(f"{'/'.join(names)} {version}" for version, names in by_version.items())


def obtained_line(study: Study, records: Sequence[RunRecord]) -> str:
    tools = tool_versions(study, records)
    parts = []
    if tools:
        parts.append("tools: " + tools_text(tools))
    params = dict(study.params)
    profile = params.pop("profile", None)
    if profile is not None:
        parts.append(f"profile: {profile}")
    for t in params.pop("targets", None) or []:
        if not isinstance(t, dict):
            continue
        where = t.get("where") or t.get("dsn") or t.get("directory") or "storage lab"
        if t.get("storage"):
            where = f"{where} ({t.get('storage')})"
        if t.get("where") and (datadir := _data_directory(study, str(t.get("name")))):
            where = f"{where}, data directory {datadir}"  # a kind's own words: on its host
        settings = t.get("settings") or {}
        extra = f", set {_param(settings)}" if settings else ""
        server = "existing server" if t.get("dsn") else f"profile {t.get('profile')}"
        parts.append(
            f"target {t.get('name')}: {where}, PostgreSQL {t.get('pg_version')}, {server}{extra}"
        )
    policy = params.pop("policy", None)
    if isinstance(policy, dict):
        parts.append(
            "runs: "
            + ", ".join(f"{k}={_param(v)}" for k, v in policy.items() if v not in (None, False))
        )
    for w in params.pop("workloads", None) or []:
        if isinstance(w, dict):
            shown = {k: v for k, v in w.items() if v not in (None, False, 0, "", [], {})}
            name = shown.pop("name", "")
            kind = shown.pop("type", "")
            parts.append(
                f"workload {name} ({kind}): "
                + ", ".join(f"{k}={_param(v)}" for k, v in shown.items())
            )
    for key in ("pid", "pg_version", "campaign", "baseline", "source", "campaign_file"):
        params.pop(key, None)
    if params:
        parts.append("parameters: " + ", ".join(f"{k}={_param(v)}" for k, v in params.items()))
    return "; ".join(parts) if parts else "no tool versions or parameters recorded"


def _data_directory(study: Study, target: str) -> str | None:
    """Where the target's server kept its data, as the server said."""
    env = study.target_environments.get(target) or (
        study.environment if not study.target_environments else None
    )
    return env.postgres.data_directory if env is not None and env.postgres is not None else None


def _param(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def meaning_of(study: Study, target: str) -> Meaning | None:
    """The settings that change what the target's numbers mean, as its server
    reported them (None when the server's settings were not captured)."""
    declared = [t for t in study.params.get("targets") or [] if isinstance(t, dict)]
    env = study.target_environments.get(target)
    if env is None and len(declared) <= 1:  # one target: the study's own environment
        env = study.environment
    if env is None or env.postgres is None:
        return None
    spec = next((t for t in declared if t.get("name") == target), None)
    if spec is None and len(declared) == 1:
        spec = declared[0]
    profile = study.params.get("profile")
    if spec is not None:
        profile = None if spec.get("dsn") else spec.get("profile", profile)
    return Meaning.of(env.postgres.settings, str(profile) if profile else None)


# --------------------------------------------------------------------------
# Summary in the seeds' layout: test cases as rows, the storage target as column


def summary_section(
    study: Study,
    fsync: Sequence[RunRecord],
    fio: Sequence[RunRecord],
    records: Sequence[RunRecord],
    progress: Progress | None = None,
) -> Section:
    rows: list[Row] = []
    fsync_row = fsync_summary(fsync)
    if fsync_row is not None:
        rows.append(fsync_row)
    rows += [fio_summary(rec) for rec in fio]
    groups = {
        (r.params.get("workload"), r.params.get("scale"), r.params.get("duration_s"))
        for r in records
        if PGBENCH_RUN.holds(r)
    }
    target = compare.targets_of(study.params, records)[0] if records else study.target
    meaning = meaning_of(study, target)
    notes: list[str] = []
    if meaning is not None and any(r.kind not in PROBE_KINDS for r in records):
        # Before the server's numbers: the probes do not depend on its settings.
        rows.append(Row(("PostgreSQL settings", meaning.line())))
        notes += [f"{c}." for c in meaning.caveats()]
    if len(groups) > 1:
        # Several workloads, scales or durations: every point, as in a campaign.
        table = compare.comparison_table(records, [target], target, progress=progress)
        rows.extend(r for r in table.rows if not _is_probe_row(r))
    else:
        rows.extend(tpcb_headline_rows(records, meaning, progress))
        # The other workloads' headline figure, a row per point (TPC-C's tpmC).
        family = Family()
        rows.extend(family.rows(compare.summary_rows(records, target, [], family)))
    sweep = compare.tps_vs_clients_by_scale(records)
    table = Table(
        columns=("Test Case", target),  # the target's name, not its directory
        rows=tuple(rows),
        caption="Headline numbers; details in the sections below.",
        notes=tuple(notes),
        numeric=(False, True),
    )
    blocks: tuple[Table | Figure, ...] = ((table,) if rows else ()) + tuple(sweep)
    return Section("Performance Summary", "summary", interference_lines(records), blocks)


def interference_lines(records: Sequence[RunRecord]) -> tuple[str, ...]:
    """Above the headline numbers: the machine was busy before the study, and
    other work disturbed measured runs (who, how much) - before anyone quotes them."""
    out = []
    if before := busy_before(records):
        out.append(f"⚠ {before}")
    if disturbed := disturbed_summary(records):
        out.append(
            f"⚠ {disturbed}. The figures below are not the server's alone: each point "
            "measured while other work ran says so in its row, and Bottlenecks names who "
            "took what, run by run. Rerun on a quiet machine to quote them."
        )
    return tuple(out)


PROBE_KINDS = ("pg_test_timing", "pg_test_fsync", "fio")


def _is_probe_row(row: Row) -> bool:
    return row.cells[0] == HEADLINE_FSYNC or row.cells[0] in dict(compare.FIO_ROWS).values()


# --------------------------------------------------------------------------
# Environment


def _with_labs(section: Section, records: Sequence[RunRecord]) -> Section:
    """The storage-lab targets (filesystem, I/O cap, memory) beside the results."""
    table = storage_report.targets_table(records)
    if table is None:
        return section
    return replace(section, blocks=(*section.blocks, table))


def environment_section(study: Study, records: Sequence[RunRecord] = ()) -> Section:
    env = study.environment
    if env is None:
        return Section("Environment", "environment", ("The environment was not captured.",))
    blocks: list[Table] = [
        Table(("Item", "Value"), tuple(Row(r) for r in environment_rows(env))),
        *storage_report.environment_blocks(records),
    ]
    audit = storage_report.audit_table(env)
    if audit is not None:
        blocks.append(audit)
    if env.sysctls or env.limits:
        rows = [Row((k, v)) for k, v in env.sysctls.items()]
        rows += [Row((f"limit {k} (soft/hard)", v)) for k, v in env.limits.items()]
        blocks.append(
            Table(
                ("Setting", "Value"),
                tuple(rows),
                caption=f"Kernel settings and limits ({len(rows)})",
                collapsed=True,
            )
        )
    if env.postgres is not None and env.postgres.settings:
        settings = env.postgres.settings
        blocks.append(
            Table(
                ("Setting", "Value"),
                tuple(Row((k, v)) for k, v in sorted(settings.items())),
                caption=f"Non-default PostgreSQL settings ({len(settings)})",
                collapsed=True,
            )
        )
    return Section("Environment", "environment", blocks=tuple(blocks))


def environment_rows(env: Environment) -> list[tuple[str, str]]:
    cpu = env.cpu
    layout = (
        f"{_n(cpu.sockets, 'socket')} x {_n(cpu.cores_per_socket, 'core')} x "
        f"{_n(cpu.threads_per_core, 'thread')} = {_n(cpu.logical_cpus, 'logical CPU')}"
    )
    cpu_extra = [f"{cpu.mhz:.0f} MHz" if cpu.mhz else "", cpu.hypervisor or ""]
    cpu_extra = [x for x in cpu_extra if x]
    host = env.hostname
    if env.host:  # read on another host through its executor
        host = f"{env.host} ({env.address}), hostname {env.hostname}"
    rows = [
        ("Host", host),
        ("CPU", cpu.model + (f" ({', '.join(cpu_extra)})" if cpu_extra else "")),
        ("CPU layout", layout),
        ("Memory", fmt.size(env.memory_bytes)),
        ("Kernel", env.kernel),
        ("OS", env.os_release),
    ]
    for disk in env.disks:
        # What the kernel reports: virtual disks often claim to be rotational.
        kind = "rotational" if disk.rotational else "non-rotational"
        extra = ", ".join(x for x in (kind, disk.model, f"scheduler {disk.scheduler}") if x)
        if disk.scheduler is None:
            extra = ", ".join(x for x in (kind, disk.model) if x)
        rows.append((f"Disk {disk.name}", f"{fmt.size(disk.size_bytes)} ({extra})"))
    for fs in env.filesystems:
        device = fs.device + (f" ({fs.block_device})" if fs.block_device else "")
        rows.append(
            (
                f"Filesystem of {fs.path}",
                f"{fs.fstype} on {device}, mounted at {fs.mountpoint} ({fs.options}); "
                f"{fmt.size(fs.size_bytes)}, {fmt.size(fs.free_bytes)} free",
            )
        )
    rows.append(("Transparent huge pages", env.transparent_hugepages or "unknown"))
    clock = env.clocksource or "unknown"
    if env.available_clocksources:
        clock += f" (available: {env.available_clocksources})"
    rows.append(("Clocksource", clock))
    if env.postgres is not None:
        pg = env.postgres
        rows.append(("PostgreSQL", f"{pg.version} (server_version_num {pg.version_num})"))
        if pg.build:
            rows.append(("PostgreSQL build", pg.build))
        if pg.source:
            rows.append(("PostgreSQL source", pg.source))
        if pg.bin_dir:
            rows.append(("PostgreSQL binaries", pg.bin_dir))
        if pg.data_directory:
            rows.append(("Data directory", pg.data_directory))
    for tool, version in sorted(env.tools.items()):
        rows.append((f"Tool {tool}", version))
    rows.append(("Captured at", env.captured_at))
    return rows


# What tells two machines apart, for seed 000's side-by-side table.
MACHINE_ITEMS = ("CPU", "CPU layout", "Memory", "Kernel", "OS")


def machines_of(study: Study, targets: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """Each target's machine as (item, value) rows, when the targets ran on more
    than one machine (another host's environment is read there: pgrig.environment.remote);
    empty when they all ran on one."""
    envs = {t: e for t in targets if (e := study.target_environments.get(t)) is not None}
    if len(envs) < 2 or len({(e.host, e.address, e.hostname) for e in envs.values()}) < 2:
        return {}
    return {t: machine_items(env) for t, env in envs.items()}


def machine_section(env: Environment) -> Section:
    """Another host's environment in full, as read there (the comparison table
    holds what tells machines apart)."""
    rows = [Row(r) for r in environment_rows(env)]
    rows += [Row((k, v)) for k, v in env.sysctls.items()]
    return Section(
        "Machine",
        "machine",
        blocks=(
            Table(
                ("Item", "Value"),
                tuple(rows),
                caption=f"{env.host} ({env.address}) as read there: {len(rows)} items",
                collapsed=True,
            ),
        ),
    )


def machine_items(env: Environment) -> list[tuple[str, str]]:
    where = f"{env.host} ({env.address})" if env.host else "this machine"
    rows = [("Machine", f"{where}, hostname {env.hostname}")]
    rows += [(k, v) for k, v in environment_rows(env) if k in MACHINE_ITEMS]
    disks = [d for d in env.disks if not d.name.startswith(("loop", "ram", "zram"))]
    if disks:
        rows.append(("Disks", ", ".join(f"{d.name} {fmt.size(d.size_bytes)}" for d in disks)))
    for fs in env.filesystems[:1]:
        device = fs.device + (f" ({fs.block_device})" if fs.block_device else "")
        rows.append((
            "Data directory's filesystem",
            f"{fs.fstype} on {device} at {fs.mountpoint}, {fmt.size(fs.size_bytes)}",
        ))  # fmt: skip
    if env.postgres is not None:
        rows.append(("PostgreSQL", env.postgres.version))
    return rows


def runs_section(records: Sequence[RunRecord]) -> Section:
    rows = []
    for rec in records:
        detail = rec.reason or ""
        kind = NORMAL if rec.status == "ok" else status_kind(rec)
        params = ", ".join(f"{k}={_param(v)}" for k, v in rec.params.items())
        rows.append(Row((rec.key, rec.kind, rec.status, rec.started_at, params, detail), kind))
    watched = sum(_is_monitor(r) for r in records)
    also = f" and the monitor's records of {watched} of them" if watched else ""
    table = Table(
        ("Key", "Kind", "Status", "Started", "Parameters", "Reason"),
        tuple(rows),
        caption=f"All {len(rows) - watched} runs of this study{also}, in the order they ran",
        collapsed=True,  # a reference: failures also show in their own sections
    )
    return Section("All runs", "runs", blocks=(table,) if rows else ())


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
