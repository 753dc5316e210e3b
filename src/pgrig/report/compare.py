"""Comparison across targets, in the seeds' layout: test cases as rows, targets as
columns, and the difference to the baseline target as the one decision
procedure gives it (``stats.Comparison``): better, worse, the same within a
margin, or not yet - never a made-up winner.

Also: TPS-vs-clients curves with one line per target (seed 004's charts) and
per-second TPS overlaid per target (seed 002's chart).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pgrig import registry, stats
from pgrig.document import fmt
from pgrig.document.model import FAILED, HEADLINE, Figure, Row, Section, Table
from pgrig.meaning import Meaning
from pgrig.monitor import noise
from pgrig.monitor.model import Noise
from pgrig.probe import FIO, FSYNC, TIMING
from pgrig.registry.shared import BUILTIN, PGBENCH_INIT, SQL_SETUP
from pgrig.report import index
from pgrig.report.cost import latency_cell, latency_vs, ok_runs
from pgrig.report.evidence import Evidence
from pgrig.report.figures import tps_over_time as tps_over_time  # named here for its tests
from pgrig.report.figures import tps_vs_clients
from pgrig.report.index import PointRuns, StudyIndex
from pgrig.report.pointkey import Curve, PointKey, point_order
from pgrig.report.points import load_text, statement_medians
from pgrig.report.probes import FsyncRuns, fio_summary, fsync_headline, fsync_summary
from pgrig.report.progress import Progress
from pgrig.report.storage import barriers_off, flag, unsafe_note
from pgrig.report.versus import TPS, VS_NOTE, Cell, Draft, Family, Key, Ledger, Quiet, single_delta
from pgrig.results import (
    FioResult,
    PgbenchInit,
    PgbenchRun,
    ResultKind,
    RunRecord,
    SetupResult,
)
from pgrig.storage.kinds import LAB

FIO_ROWS = (
    ("randwrite", "8k random write"),
    ("randread", "8k random read"),
    ("write", "8k sequential write"),
    ("read", "8k sequential read"),
)


def targets_of(params: dict[str, object], records: Sequence[RunRecord]) -> list[str]:
    """Target names in the campaign's order (then any others the records name)."""
    names: list[str] = []
    declared = params.get("targets")
    for t in declared if isinstance(declared, list) else []:
        if isinstance(t, dict) and isinstance(t.get("name"), str):
            names.append(t["name"])
    names += [t for t in index.read(records).of_target if t not in names]
    return names


def _headline_cell(
    values: list[float], unit: str, failed: int, seconds: Noise | None = None
) -> str:
    """'4,059 tps (n=3, 75% CI 3,990–4,120), per s CV 6%': the median
    (``stats.headline``) and its interval (``fmt.Spread.describe``)."""
    if not values:
        return "failed" if failed else ""
    text = fmt.with_spread(fmt.spread(values), unit=unit)
    if seconds is not None:
        text += f", per s CV {100 * seconds.cv:.0f}%" + (" ⚠" if noise.is_noisy(seconds) else "")
    return text + (f", {failed} failed" if failed else "")


def _lag_cell(runs: list[PgbenchRun]) -> str:
    """Open loop (pgbench -R): how far behind schedule, and what was late or skipped."""
    if not runs:
        return ""
    lag = stats.headline([r.lag_avg_ms or 0.0 for r in runs])
    worst = max(r.lag_max_ms or 0.0 for r in runs)
    text = f"avg {fmt.ms(lag)} ms (median of the runs; max {fmt.ms(worst)})"
    late = sum(r.late or 0 for r in runs)
    limit = runs[0].latency_limit_ms
    if limit is not None:
        text += f", {late:,} late > {limit:g} ms"
    skipped = sum(r.skipped or 0 for r in runs)
    if skipped or limit is not None:
        text += f", {skipped:,} skipped"
    return text


@dataclass
class _Rows:
    """The comparison's rows as they are drafted: baseline first, then each other
    target with its difference from the baseline."""

    baseline: str
    others: list[str]
    rows: list[Draft]
    # Target -> why its numbers are not durable ones: the storage's (barriers off:
    # every flush) and the server's (synchronous_commit, fsync, full_page_writes off).
    disk: dict[str, str] = field(default_factory=dict)
    server: dict[str, list[str]] = field(default_factory=dict)

    def unsafe(self, target: str, *, server: bool = True) -> str:
        """'barriers off (nobarrier); synchronous_commit=off', or ''."""
        why = [self.disk.get(target, ""), ", ".join(self.server.get(target, [])) if server else ""]
        return "; ".join(w for w in why if w)

    def reasons(self) -> dict[str, list[str]]:
        """Each target's own reasons, as its numbers are flagged: the table's note."""
        return {
            t: [self.disk.get(t, ""), *self.server.get(t, [])]
            for t in (self.baseline, *self.others)
        }

    def storage_unsafe(self, target: str) -> str:
        return self.unsafe(target, server=False)

    def flagged(self, text: dict[str, str], *, server: bool = True) -> dict[str, str]:
        """Each target's cell with its unsafe durability said at the number."""
        return {t: flag(v, self.unsafe(t, server=server)) for t, v in text.items()}

    def single(
        self,
        label: str,
        values: dict[str, float | None],
        text: dict[str, str],
        higher_is_better: bool = True,
        same: Collection[str] = (),
    ) -> None:
        """One row of a single value per target (a probe, a load); ``values``: a
        rate (``higher_is_better``, the difference in %) or a latency or a
        duration (the ratio); ``same``: targets whose probe measured the
        baseline's own storage again (no difference to report)."""
        cells: list[Cell] = [label, text.get(self.baseline, "")]
        for t in self.others:
            delta: Cell = single_delta(
                values.get(self.baseline), values.get(t), higher_is_better=higher_is_better
            )
            if t in same:
                delta = Quiet(
                    f"the same storage as {self.baseline} (same directory, no layer): "
                    "one disk measured twice, its noise and not a difference"
                )
            cells += [text.get(t, ""), delta]
        self.rows.append(Draft(tuple(cells)))


ByKind = Mapping[str, Mapping[str, Sequence[RunRecord]]]  # kind -> target -> its records


def comparison_table(
    records: Sequence[RunRecord],
    targets: list[str],
    baseline: str,
    meanings: Mapping[str, Meaning] | None = None,
    machines: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
    study_index: StudyIndex | None = None,
) -> Table:
    """``machines``: each target's machine as (item, value) rows, when the
    targets ran on different machines (seed 000's table opens with them);
    ``progress``: where the runs' -P points are (default: in the records);
    ``ledger``: the study's comparisons (default: ``Ledger.of`` the records);
    ``study_index``: the records' index, when the report built it."""
    progress = progress or Progress()
    study_index = study_index if study_index is not None else index.read(records)
    ledger = ledger if ledger is not None else Ledger.of_index(study_index, baseline)
    others = [t for t in targets if t != baseline]
    columns = ["Test Case", f"{baseline} (baseline)"]
    for t in others:
        columns += [t, f"{t} vs {baseline}"]
    out = _Rows(baseline, others, machine_rows(machines or {}, baseline, others))
    out.disk = barriers_off(study_index)
    out.server = {t: m.unsafe() for t, m in (meanings or {}).items()}
    family = Family(ledger)
    by_kind = study_index.kind_target
    _fsync_row(study_index, out, same_storage(by_kind, baseline, others, bool(machines)))
    _fio_rows(study_index, out)
    if meanings and set(study_index.of_kind) - {TIMING.name, FSYNC.name, FIO.name}:
        out.rows.append(Draft(_settings_row(meanings, baseline, others).cells))
    _load_rows(study_index, out)
    for key, per_target in sorted(study_index.points.items(), key=point_order):
        _point_rows(key, per_target, progress, family, out)
    # Barriers only: a server setting (synchronous_commit) does not change a backup's rate.
    rows = out.rows + summary_rows(study_index, baseline, others, family, out.unsafe)
    return Table(
        columns=tuple(columns),
        rows=family.rows(rows),
        caption="Comparison of the targets",
        notes=_notes(family) + unsafe_note(out.reasons(), UNSAFE_WHAT),
        numeric=(False, *([True] * (len(columns) - 1))),
    )


def same_storage(by_kind: ByKind, baseline: str, others: list[str], machines: bool) -> set[str]:
    """The targets whose pg_test_fsync ran in the baseline's directory on the same
    machine with no storage layer (lab) on either side: a server setting
    (synchronous_commit, wal_compression) changes nothing a probe of the disk
    measures, so two such probes differ by the disk's noise alone."""
    if machines:
        return set()
    labs = set(by_kind.get(LAB.name, {}))

    def directories(t: str) -> set[object]:
        return {r.params.get("directory") for r in by_kind.get(FSYNC.name, {}).get(t, [])}

    base = directories(baseline)
    if not base or baseline in labs:
        return set()
    return {t for t in others if t not in labs and directories(t) == base}


def _fsync_row(study_index: StudyIndex, out: _Rows, same: Collection[str] = ()) -> None:
    """fsync 8K: the single-I/O latency that bounds synchronous commits, compared
    as a latency (us per op: '7.3x slower')."""
    values: dict[str, float | None] = {}
    text: dict[str, str] = {}
    for t in study_index.by_target(FSYNC):
        mine = study_index.target(t)
        summary = fsync_summary(mine)  # the median over the runs, with their range
        median = FsyncRuns.of(mine).median()
        row = fsync_headline(median) if median is not None else None
        if summary is not None:
            text[t] = summary.cells[1]
        if row is not None and row.usecs_per_op is not None:
            values[t] = row.usecs_per_op
    if text:
        flagged = out.flagged(text, server=False)
        out.single("fdatasync 8K", values, flagged, higher_is_better=False, same=same)


def _fio_rows(study_index: StudyIndex, out: _Rows) -> None:
    for pattern, label in FIO_ROWS:
        values: dict[str, float | None] = {}
        text: dict[str, str] = {}
        for t, recs in study_index.by_target(FIO).items():
            for rec in recs:
                if rec.params.get("pattern") != pattern:
                    continue
                fio = study_index.result(rec, FioResult)
                if fio is None:
                    text[t] = f"{rec.status}: {rec.reason or ''}".strip(": ")
                else:
                    values[t] = fio.iops
                    text[t] = fio_summary(rec, fio).cells[1]  # with fio's own spread
        if text:
            # A write waits for the device's flush only when barriers are on.
            writes = "write" in pattern
            out.single(label, values, out.flagged(text, server=False) if writes else text)


def _load_rows(study_index: StudyIndex, out: _Rows) -> None:
    """The data loads (pgbench -i, a custom workload's setup), per workload and scale."""
    loads: dict[tuple[str, object], dict[str, RunRecord]] = {}
    for load_kind in (PGBENCH_INIT, SQL_SETUP):
        for t, recs in study_index.by_target(load_kind).items():
            for rec in recs:
                if load_kind is SQL_SETUP and not rec.params.get("files", True):
                    continue  # scripts only, nothing loaded: no "setup 0.00 s" row
                loads.setdefault(
                    (str(rec.params.get("workload", "")), rec.params.get("scale")), {}
                )[t] = rec
    for (workload, scale), load_by_target in loads.items():
        values: dict[str, float | None] = {}
        text: dict[str, str] = {}
        for t, rec in load_by_target.items():
            res = study_index.result(rec, object)
            if isinstance(res, PgbenchInit):
                values[t] = res.elapsed_s
                text[t] = load_text(res)
            elif isinstance(res, SetupResult):
                values[t] = res.elapsed_s
                text[t] = fmt.seconds(res.elapsed_s)
                if res.database_bytes is not None:
                    text[t] += f" (database {fmt.size(res.database_bytes)})"
            else:
                text[t] = f"{rec.status}: {rec.reason or ''}"
        # pgbench -i's load is its workload's (pgbench's built-in one, before records named it)
        titled = registry.title(workload or BUILTIN)
        label = f"{titled} load, scale {scale}" if scale is not None else f"{workload} setup"
        out.single(label, values, out.flagged(text), higher_is_better=False)  # seconds


def _point_rows(
    key: PointKey,
    per_target: PointRuns,
    progress: Progress,
    family: Family,
    out: _Rows,
) -> None:
    """A measured point's rows: tps (every mode: one unit name for one measure)
    and, where statements outnumber transactions, qps; and the schedule lag of
    open-loop runs."""
    tps: dict[str, list[float]] = {}
    qps: dict[str, list[float]] = {}
    failed: dict[str, int] = {}
    seconds: dict[str, Noise | None] = {}
    for t, pairs in per_target.items():
        ok = [run for _, run in pairs if run is not None]
        tps[t] = [run.tps for run in ok]
        qps[t] = [run.qps for run in ok]
        failed[t] = len(pairs) - len(ok)
        seconds[t] = noise.worst([progress.noise(rec) for rec, run in pairs if run is not None])
    metrics = [("tps", tps), ("qps", qps)]
    if key.mode == "select-only":
        metrics = [("tps", tps)]  # qps = tps: one statement per transaction
    baseline = out.baseline
    writes = key.mode != "select-only"  # what waits for a flush, and is flagged when none
    for metric, data in metrics:
        unit = metric
        label = f"{key.label}: {metric}"
        first = metric == metrics[0][0]
        # The per-second noise goes with the point's first (headline) row.
        per_s = seconds if first else {}
        base_text = _headline_cell(
            data.get(baseline, []), unit, failed.get(baseline, 0), per_s.get(baseline)
        )
        if writes and data.get(baseline):
            base_text = flag(base_text, out.unsafe(baseline))
        cells: list[Cell] = [label, base_text]
        for t in out.others:
            mine = _headline_cell(data.get(t, []), unit, failed.get(t, 0), per_s.get(t))
            cells += [
                flag(mine, out.unsafe(t)) if writes and data.get(t) else mine,
                # qps = 5 x tps: one test per point, or the family counts it twice.
                family.vs(data.get(baseline, []), data.get(t, []), key=Key(TPS, key, t))
                if first
                else "as tps",
            ]
        kind = FAILED if any(failed.values()) and not any(data.values()) else ""
        out.rows.append(Draft(tuple(cells), kind or (HEADLINE if first else "")))
    _latency_row(key, per_target, out)
    open_loop = {
        t: [run for _, run in pairs if run is not None and run.lag_avg_ms is not None]
        for t, pairs in per_target.items()
    }
    if any(open_loop.values()):
        lag: list[Cell] = [f"{key.label}: schedule lag", _lag_cell(open_loop.get(baseline, []))]
        for t in out.others:
            lag += [_lag_cell(open_loop.get(t, [])), ""]
        out.rows.append(Draft(tuple(lag)))


def _latency_row(key: PointKey, per_target: PointRuns, out: _Rows) -> None:
    """The point's p95 and p99 beside its tps (pgbench's per-transaction log),
    the p99 against the baseline's as a ratio; no row when no run logged."""
    runs = {t: ok_runs(pairs) for t, pairs in per_target.items()}
    if not any(r.latency is not None for rs in runs.values() for r in rs):
        return
    base = runs.get(out.baseline, [])
    cells: list[Cell] = [f"{key.label}: latency", latency_cell(base)]
    for t in out.others:
        cells += [latency_cell(runs.get(t, [])), latency_vs(base, runs.get(t, []))]
    out.rows.append(Draft(tuple(cells)))


def _notes(family: Family) -> tuple[str, ...]:
    return (
        "Each cell: the median over the repeats. " + fmt.SPREAD_NOTE + " per s CV: "
        "the coefficient of variation of pgbench -P 1's per-second tps (the least steady run), "
        f"⚠ from {100 * noise.HIGH_CV:.0f}%. Probes and loads ran once: their 'vs' is the "
        "difference of two single values, in % for rates, as a ratio for latencies "
        "(fdatasync: us per op) and durations.",
        VS_NOTE,
        *family.note(),
        "select-only: qps = tps (one statement per transaction), shown as tps; read-write qps "
        "= 5 x tps (BEGIN and END not counted), as the seeds derive it.",
        "latency: pgbench's per-transaction log (-l), p95 and p99 in ms, the median over the "
        "repeats; against the baseline, the ratio of the p99s (no test).",
    )


UNSAFE_WHAT = "numbers that do not wait for data to reach stable storage"


def machine_rows(
    machines: Mapping[str, Sequence[tuple[str, str]]], baseline: str, others: list[str]
) -> list[Draft]:
    """One row per item of the machines' environments, in the baseline's order
    (then items only others have); the "vs" cell says whether it differs."""
    items: dict[str, None] = {}
    for t in (baseline, *others):
        items.update((item, None) for item, _ in machines.get(t, ()))
    values = {t: dict(machines.get(t, ())) for t in (baseline, *others)}
    rows = []
    for item in items:
        base = values[baseline].get(item)
        cells: list[Cell] = [item, base or "not captured"]
        for t in others:
            mine = values[t].get(item)
            same = "same" if mine == base else "differs"
            cells += [mine or "not captured", Quiet(same if mine and base else "")]
        rows.append(Draft(tuple(cells)))
    return rows


def _settings_row(meanings: Mapping[str, Meaning], baseline: str, others: list[str]) -> Row:
    """Each target's settings that change the meaning, and every setting (of all
    the server reported) that differs from the baseline's: 'differs:
    wal_compression=pglz' (a target whose server reported no settings: '')."""
    base = meanings.get(baseline)
    cells = ["PostgreSQL settings", base.line() if base else "not captured"]
    for t in others:
        mine = meanings.get(t)
        differ = mine.differences(base) if mine and base else []
        cells += [
            mine.line() if mine else "not captured",
            f"differs: {', '.join(differ)}" if differ else ("same" if mine and base else ""),
        ]
    return Row(tuple(cells))


def summary_rows(
    study_index: StudyIndex,
    baseline: str,
    others: list[str],
    family: Family,
    unsafe: Unsafe | None = None,
) -> list[Draft]:
    """A row per workload (and per point, for a kind that names its points) for
    every result kind that asks for one (``ResultKind.summary``): its metric per
    target, and Welch's test against the baseline, then its p95/p99 when the kind
    has them; ``unsafe``: what to say at a target's figure when its storage (or,
    for a kind whose metric counts commits, its server) does not make it durable."""
    rows: list[Draft] = []
    for kind in study_index.kinds.values():
        if kind.summary is None or kind.metric is None:
            continue

        def unsafe_of(t: str, kind: ResultKind = kind) -> str:
            return unsafe(t, server=kind.commits) if unsafe is not None else ""

        # (workload, point) -> target -> metrics; a point in the order first run
        values: dict[tuple[str, str], dict[str, list[float]]] = {}
        failed: dict[tuple[str, str], dict[str, int]] = {}
        results: dict[tuple[str, str], list[Any]] = {}
        for rec in study_index.kind(kind):
            point = kind.point(rec.params) if kind.point is not None else ""
            row = (str(rec.params.get("workload", kind.name)), point)
            res = study_index.result(rec, object)
            if res is None:
                count = failed.setdefault(row, {})
                count[rec.target] = count.get(rec.target, 0) + 1
                values.setdefault(row, {})
            else:
                values.setdefault(row, {}).setdefault(rec.target, []).append(kind.metric(res))
                results.setdefault(row, []).append(res)
        for row, data in values.items():
            workload, point = row
            bad = failed.get(row, {})
            note = kind.point_note(results.get(row, []))
            cells: list[Cell] = [
                f"{kind.summary} ({', '.join(filter(None, (workload, point)))}{note})"
            ]
            base_cell = _headline_cell(data.get(baseline, []), kind.unit, bad.get(baseline, 0))
            cells.append(flag(base_cell, unsafe_of(baseline)))
            for t in others:
                mine = _headline_cell(data.get(t, []), kind.unit, bad.get(t, 0))
                cells += [
                    flag(mine, unsafe_of(t)),
                    family.vs(data.get(baseline, []), data.get(t, []), key=Key(kind.name, row, t)),
                ]
            kind_ = FAILED if bad and not any(data.values()) else HEADLINE
            rows.append(Draft(tuple(cells), kind_))
            if kind.latency is not None and (
                lat := _kind_latency(kind, row, study_index, baseline, others)
            ):
                rows.append(lat)
    return rows


class Unsafe(Protocol):
    def __call__(self, target: str, *, server: bool = True) -> str: ...


def _kind_latency(
    kind: ResultKind,
    row: tuple[str, str],
    study_index: StudyIndex,
    baseline: str,
    others: list[str],
) -> Draft | None:
    """The p95/p99 row under a summary row (the medians over the repeats), with
    the p99 against the baseline's as a ratio, as pgbench's latency row."""
    assert kind.latency is not None
    per: dict[str, list[tuple[float, float]]] = {}
    for rec, res in study_index.ok(kind, object):
        point = kind.point(rec.params) if kind.point is not None else ""
        if (str(rec.params.get("workload", kind.name)), point) != row:
            continue
        lat = kind.latency(res)
        p95, p99 = lat.get(95), lat.get(99)
        if p95 is not None and p99 is not None:
            per.setdefault(rec.target, []).append((p95, p99))
    if not per:
        return None

    def cell(t: str) -> str:
        got = per.get(t)
        if not got:
            return ""
        p95, p99 = (statistics.median(v[i] for v in got) for i in (0, 1))
        return f"p95 {fmt.ms(p95)} / p99 {fmt.ms(p99)} ms"

    base = [v[1] for v in per.get(baseline, [])]
    cells: list[Cell] = [f"{kind.summary} ({', '.join(filter(None, row))}): {kind.latency_label}"]
    cells.append(cell(baseline))
    for t in others:
        mine = [v[1] for v in per.get(t, [])]
        ratio = ""
        if base and mine and statistics.median(base) > 0:
            r = statistics.median(mine) / statistics.median(base)
            ratio = f"p99 {r:.2f}x higher" if r >= 1.005 else (
                f"p99 {1 / r:.2f}x lower" if r <= 0.995 else "p99 the same")  # fmt: skip
        cells += [cell(t), Quiet(ratio)]
    return Draft(tuple(cells))


def statements_table(
    records: Sequence[RunRecord], targets: list[str], baseline: str
) -> Table | None:
    """Per-statement latencies (pgbench -r) with the targets side by side (seed 000:
    UPDATE pgbench_accounts 3.46 vs 7.15 ms), for each workload and mode at the
    most clients every target ran; custom scripts too."""
    curves: dict[Curve, dict[int, dict[str, list[PgbenchRun]]]] = {}
    study_index = index.read(records)
    for key, ok in study_index.runs.items():
        curves.setdefault(key.curve, {})[key.clients] = {t: runs for t, runs in ok.items() if runs}
    present = [t for t in targets if t in study_index.of_target]
    rows: list[Row] = []
    for curve, by_clients in sorted(
        curves.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2], kv[0][3])
    ):
        common = [c for c, per in by_clients.items() if all(t in per for t in present)]
        if not common:
            continue
        clients = max(common)
        key = PointKey(*curve, clients=clients)
        medians = {t: statement_medians(by_clients[clients][t]) for t in present}
        base = medians.get(baseline) or []
        if not base:
            continue
        rows.append(Row((key.label, *[""] * len(present)), HEADLINE))
        for i, (command, latency, _) in enumerate(base):
            cells = [command]
            for t in present:
                mine = medians[t]
                if i >= len(mine) or mine[i][0] != command:
                    cells.append("n/a")
                    continue
                text = fmt.ms(mine[i][1])
                if t != baseline and latency > 0:
                    text += f" ({_statement_ratio(latency, mine[i][1])})"
                cells.append(text)
            rows.append(Row(tuple(cells)))
    if not rows:
        return None
    columns = ("Statement", *(f"{t} (baseline)" if t == baseline else t for t in present))
    return Table(
        columns,
        tuple(rows),
        caption="Per-statement latency (ms), targets side by side",
        notes=(
            "pgbench -r: each statement's average latency in a run, the median over the "
            "repeats; (2.1x slower): the ratio to the baseline's, no test (pgbench prints no "
            "spread per statement); none below 0.010 ms, where pgbench's 0.001 ms rounding is "
            "most of the figure. Meta-commands (\\set) cost the client, not the server.",
        ),
        numeric=(False, *([True] * len(present))),
    )


STATEMENT_RESOLUTION_MS = 0.010  # 10x pgbench -r's printed 0.001 ms


def _statement_ratio(base_ms: float, mine_ms: float) -> str:
    """'2.1x slower'; 'at pgbench's resolution' when both are a few thousandths of a
    ms (0.001 -> 0.002 ms was '+100%')."""
    if max(base_ms, mine_ms) < STATEMENT_RESOLUTION_MS:
        return "at pgbench's 0.001 ms resolution"
    return stats.ratio_text(mine_ms / base_ms)


def comparison_section(
    ev: Evidence,
    machines: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    *,
    concurrent: bool = False,
    studies: Sequence[str] = (),
) -> Section:
    """The comparison of ``ev``'s targets; ``machines`` as ``comparison_table``'s,
    ``concurrent``: the targets ran at once, ``studies``: from several (``pgrig compare``)."""
    study_index, targets, baseline, progress = ev.index, list(ev.targets), ev.baseline, ev.progress
    table = comparison_table(
        study_index, targets, baseline, ev.meanings, machines, progress, study_index=study_index
    )
    blocks: list[Table | Figure] = [table]
    if (statements := statements_table(study_index, targets, baseline)) is not None:
        blocks.append(statements)
    # A curve needs two client counts; one count is the table's row.
    blocks += [f for f in tps_vs_clients(study_index.points, targets) if f.x_points >= 2]
    blocks += [f for f in tps_over_time(study_index, targets, progress) if f.series]
    if studies:  # `pgrig compare`: each study's runs in their own hours, maybe machines
        how = (
            f"The targets come from {len(studies)} studies ({', '.join(studies)}), run at "
            "different times: a difference between studies includes whatever changed on the "
            "machine between them."
        )
    elif concurrent:
        how = (
            "Targets ran at once (concurrent = true), each on machines of its own; the first "
            "rows say which."
        )
    else:
        how = (
            "Targets ran interleaved (the order rotating every repeat) so that slow drift "
            "of the machine favours none."
        )
    return Section(
        "Performance Summary",
        "summary",
        paragraphs=(f"{len(targets)} targets; baseline {baseline}. {how}",),
        blocks=tuple(blocks),
    )
