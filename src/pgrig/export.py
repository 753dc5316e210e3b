"""Export stored results: JSON (everything, schema in docs/export.md) or CSV (one
row per run with its headline numbers, or one row per second of every run),
and a synthetic study that compares studies from different campaigns or
machines."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pgrig import registry
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.results import PgbenchRun, RunRecord, Study, to_dict, typed

SCHEMA = "pgrig-export/1"

# Every row's own columns: the record's, then the run's parameters. Each kind's
# headline figures follow, named KIND.FIGURE (``pgbench_run.tps``, ``tpcc_run.tps``):
# two kinds' figures of one name are two columns, never one column whose meaning
# changes from row to row; then ``params``.
RECORD_COLUMNS = ("study", "key", "kind", "target", "status", "reason", "started_at", "finished_at")
PARAM_COLUMNS = ("workload", "mode", "scale", "clients", "threads", "duration_s", "repeat")
RUN_COLUMNS = (*RECORD_COLUMNS, *PARAM_COLUMNS, "params")
SERIES_COLUMNS = (
    "study",
    "key",
    "target",
    "t_s",
    "tps",
    "latency_ms",
    "stddev_ms",
    "failed",
    "lag_ms",
)


# Figures derived by division keep fewer decimals than the tools print.
DECIMALS = {"rows_per_s": 1}


def number(value: Any, decimals: int = 6) -> Any:
    """A float as the tools print it - at most ``decimals`` decimals, trailing
    zeros dropped - not as the binary float it became (37742.044525000005);
    anything else unchanged."""
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def runs_csv(records: Sequence[RunRecord]) -> str:
    """One row per run: its own columns, each kind's headline figures under
    KIND.FIGURE (the kinds in the registry's order, each kind's figures in the
    order it declares them), then ``params``; a cell a row's kind does not fill
    is empty."""
    rows = []
    figures: dict[str, dict[str, None]] = {}  # kind -> its figures' columns, in order
    for rec in registry.decoded(records):
        mine = registry.columns(rec.kind, registry.typed_result(rec))
        named = {f"{rec.kind}.{k}": number(v, DECIMALS.get(k, 6)) for k, v in mine.items()}
        figures.setdefault(rec.kind, {}).update(dict.fromkeys(named))
        p = rec.params
        rows.append(
            {
                **{c: getattr(rec, c) for c in RECORD_COLUMNS},
                "reason": rec.reason or "",
                **{c: number(p.get(c, "")) for c in PARAM_COLUMNS},
                **named,
                "params": json.dumps(p, sort_keys=True),
            }
        )
    order = {name: i for i, name in enumerate(registry.kinds())}
    kinds = sorted(figures, key=lambda k: order.get(k, len(order)))  # unknown kinds last
    columns = [c for k in kinds for c in figures[k]]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=(*RUN_COLUMNS[:-1], *columns, RUN_COLUMNS[-1]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def series_csv(records: Sequence[RunRecord]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(SERIES_COLUMNS)
    for rec in records:
        res = typed(rec, PgbenchRun) if PGBENCH_RUN.holds(rec) else None
        for point in res.progress if res is not None else ():
            writer.writerow(
                (
                    rec.study,
                    rec.key,
                    rec.target,
                    *map(
                        number,
                        (
                            point.t_s,
                            point.tps,
                            point.latency_ms,
                            point.stddev_ms,
                            point.failed,
                            point.lag_ms,
                        ),
                    ),
                )
            )
    return out.getvalue()


def to_json(studies: Sequence[Study], records: Sequence[RunRecord], *, raw: bool = False) -> str:
    runs = []
    for rec in records:
        data = to_dict(rec)
        if not raw:
            data.pop("raw", None)
        runs.append(data)
    return json.dumps(
        {"schema": SCHEMA, "studies": [to_dict(s) for s in studies], "runs": runs},
        indent=2,
        sort_keys=True,
        default=str,
    )


def combined(
    studies: Sequence[Study], per_study: Sequence[Sequence[RunRecord]]
) -> tuple[Study, list[RunRecord]]:
    """One study whose targets are the targets of several studies, named
    ``STUDY/TARGET`` (or just STUDY for single-target studies), so the comparison
    report can set results from different campaigns or machines side by side."""
    records: list[RunRecord] = []
    targets: list[str] = []
    declared: dict[str, dict[str, Any]] = {}
    environments = {}
    for study, recs in zip(studies, per_study, strict=True):
        names = sorted({r.target for r in recs})
        own = {t.get("name"): t for t in study.params.get("targets") or [] if isinstance(t, dict)}
        for rec in recs:
            name = study.id if len(names) == 1 else f"{study.id}/{rec.target}"
            if name not in targets:
                targets.append(name)
                # What the report says of each target, as its own study described it
                # (where it ran, its version, profile and settings): with the profile
                # alone, every target read "storage lab, PostgreSQL None".
                spec = own.get(rec.target) or {"profile": study.params.get("profile")}
                declared[name] = {**spec, "name": name}
                env = study.target_environments.get(rec.target) or study.environment
                if env is not None:
                    environments[name] = env
            records.append(replace(rec, target=name, key=f"{study.id}/{rec.key}"))
    first = studies[0]
    ids = " vs ".join(s.id for s in studies)
    study = Study(
        id="compare-" + "-".join(s.id for s in studies),
        name=f"comparison of {ids}",
        target=", ".join(targets),
        started_at=min(s.started_at for s in studies),
        finished_at=max((s.finished_at or "" for s in studies), default=None) or None,
        status="finished" if all(s.status == "finished" for s in studies) else "partial",
        params={
            "targets": [declared[t] for t in targets],
            "baseline": targets[0],
            "compared": [s.id for s in studies],
        },
        pgrig_version=first.pgrig_version,
        environment=first.environment,
        target_environments=environments,
    )
    return study, records
