"""The base backup's part of the report: seed 002's table - MB/s per target side
by side, median with its range over the repeats, each target against the
baseline (the one decision procedure: better, worse, the same or not yet,
never a made-up winner) - then
what each copy was made of."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pgrig.document import fmt
from pgrig.document.model import FAILED, NOISY, Row, Section, Table
from pgrig.report import index
from pgrig.report.versus import VS_NOTE, Cell, Draft, Family, Key, Ledger
from pgrig.results import RunRecord, Study
from pgrig.workloads.basebackup.model import MB, BasebackupData, BasebackupResult

KIND = "basebackup"  # the result kind the ledger keys its MB/s by (``ResultKind.name``)
DATA_KIND = "basebackup_data"  # the data each target's copies were taken of
Runs = dict[tuple[str, str], list[BasebackupResult]]  # (workload, target) -> ok runs


def _collect(records: Sequence[RunRecord]) -> tuple[Runs, dict[tuple[str, str], list[str]]]:
    ok: Runs = {}
    bad: dict[tuple[str, str], list[str]] = {}
    study = index.read(records)
    for rec in study.of_kind.get(KIND, ()):
        key = (str(rec.params.get("workload", "basebackup")), rec.target)
        res = study.result(rec, BasebackupResult)
        if res is None:
            bad.setdefault(key, []).append(f"{rec.status}: {rec.reason or 'no reason recorded'}")
        else:
            ok.setdefault(key, []).append(res)
    return ok, bad


def _mb(value: float) -> str:
    return f"{value:,.1f}"


def summary_table(study: Study, records: Sequence[RunRecord]) -> Table | None:
    records = index.read(records)
    ok, bad = _collect(records)
    if not ok and not bad:
        return None
    targets = list(dict.fromkeys(t for _, t in (*ok, *bad)))
    baseline = str(study.params.get("baseline") or targets[0])
    if baseline not in targets:
        baseline = targets[0]
    workloads = list(dict.fromkeys(w for w, _ in (*ok, *bad)))
    rows: list[Draft] = []
    family = Family(Ledger.of_index(records, baseline))  # the study's q-values, as everywhere
    for name in workloads:
        cells, noisy = [], False
        for t in targets:
            runs = ok.get((name, t))
            if runs:
                spread = fmt.spread([r.mb_per_s for r in runs])
                noisy = noisy or spread.noisy
                cells.append(fmt.with_spread(spread, _mb))
            else:
                cells.append(bad.get((name, t), ["not run"])[0])
        rows.append(Draft((f"{name}: MB/s", *cells), NOISY if noisy else ""))
        rows.append(
            Draft((f"{name}: wall time", *(_median(ok.get((name, t)), "wall") for t in targets)))
        )
        rows.append(
            Draft((f"{name}: data copied", *(_median(ok.get((name, t)), "data") for t in targets)))
        )
        if len(targets) > 1 and ok.get((name, baseline)):
            base = [r.mb_per_s for r in ok[(name, baseline)]]
            vs: list[Cell] = [
                "baseline"
                if t == baseline
                else family.vs(base, _rates(ok.get((name, t))), key=Key(KIND, (name, ""), t))
                for t in targets
            ]
            rows.append(Draft((f"{name}: vs {baseline}", *vs)))
    return Table(
        columns=("pg_basebackup", *targets),
        rows=family.rows(rows),
        caption="MB/s = data copied (pg_basebackup's own total, WAL excluded) / wall time of "
        "the command, MB = 10^6 bytes as in seed 002; the median over the runs. " + fmt.SPREAD_NOTE,
        notes=(VS_NOTE, *family.note()) if family.keys else (),
        numeric=(False, *(True for _ in targets)),
    )


def _rates(runs: list[BasebackupResult] | None) -> list[float]:
    return [r.mb_per_s for r in runs or ()]


def _median(runs: list[BasebackupResult] | None, what: str) -> str:
    if not runs:
        return ""
    if what == "wall":
        return fmt.seconds(statistics.median(r.wall_s for r in runs))
    return _megabytes(statistics.median(r.data_bytes for r in runs))


def _megabytes(n_bytes: float) -> str:
    return f"{n_bytes / MB:,.1f} MB"


def _phase(runs: list[BasebackupResult], name: str) -> str:
    values = [v for r in runs if (v := getattr(r.phases, name)) is not None]
    return fmt.seconds(statistics.median(values)) if values else "n/a"


def detail_table(records: Sequence[RunRecord]) -> Table | None:
    ok, bad = _collect(records)
    rows: list[Row] = []
    for (name, target), runs in ok.items():
        first = runs[0]
        written = statistics.median(r.write_mb_per_s for r in runs)
        transfer = [v for r in runs if (v := r.transfer_mb_per_s) is not None]
        rows.append(
            Row(
                (
                    f"{name} on {target}",
                    f"-F {first.format[0]} -X {first.wal_method} -c {first.checkpoint}"
                    + (f" --compress={first.compress}" if first.compress != "none" else "")
                    + (f" -r {first.max_rate}" if first.max_rate else ""),
                    f"{first.destination} ({first.filesystem})",
                    str(len(runs)),
                    _megabytes(statistics.median(r.copy_bytes for r in runs)),
                    _phase(runs, "checkpoint_s"),
                    _phase(runs, "transfer_s"),
                    _phase(runs, "sync_s"),
                    _mb(statistics.median(transfer)) if transfer else "n/a",
                    _mb(written),
                )
            )
        )
    for (name, target), reasons in bad.items():
        if (name, target) not in ok:
            rows.append(Row((f"{name} on {target}", reasons[0], *("",) * 8), FAILED))
    if not rows:
        return None
    return Table(
        columns=(
            "run",
            "options",
            "copied to",
            "runs",
            "copy on disk",
            "checkpoint",
            "transfer",
            "fsync",
            "transfer MB/s",
            "written MB/s",
        ),  # fmt: skip
        rows=tuple(rows),
        caption="Medians over the runs. checkpoint: until the server's checkpoint completed; "
        "transfer: until the last data arrived; fsync: pg_basebackup syncing the copy. "
        "written MB/s counts the copy's own bytes (WAL and manifest included, compressed "
        "if compressed).",
        numeric=(False, False, False, True, True, True, True, True, True, True),
    )


def data_rows(records: Sequence[RunRecord]) -> list[str]:
    """Each target's data once (a second workload at the same scale reuses it)."""
    seen: dict[tuple[str, int], str] = {}
    study = index.read(records)
    for rec in study.of_kind.get(DATA_KIND, ()):
        data = study.result(rec, BasebackupData)
        if data is None or (rec.target, data.scale) in seen:
            continue
        how = f"loaded in {data.load_s:.1f} s" if data.loaded and data.load_s else "reused"
        seen[(rec.target, data.scale)] = (
            f"{rec.target}: TPC-B scale {data.scale} ({how}), database "
            f"{_megabytes(data.database_bytes)}, cluster {_megabytes(data.cluster_bytes)}"
        )
    return list(seen.values())


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    summary = summary_table(study, records)
    if summary is None:
        return None
    detail = detail_table(records)
    data = data_rows(records)
    paragraphs = (
        "pg_basebackup of each target's cluster, timed from start to exit, as seed 002 "
        "times it with date around the command. The source is read through the page "
        "cache, so at sizes below the RAM the figure is the copy's write and fsync speed "
        "on its destination." + (" Data: " + "; ".join(data) + "." if data else ""),
    )
    blocks = tuple(b for b in (summary, detail) if b is not None)
    return Section(title="pg_basebackup throughput", anchor="basebackup",
                   paragraphs=paragraphs, blocks=blocks)  # fmt: skip
