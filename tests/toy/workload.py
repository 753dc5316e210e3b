"""``type = "toy"``: time ``SELECT sum(i) FROM generate_series(1, N)`` on each
target, ``rows`` as a list of points, repeated by the campaign's policy."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pgrig.document.model import Row, Section, Table
from pgrig.policy import RunPolicy
from pgrig.registry.workload import Phase, Series, TargetView, Workload
from pgrig.results import ResultKind, RunRecord, Study, typed
from pgrig.schema import Schema, integers, text
from pgrig.schema import Table as TomlTable
from pgrig.step import Action, Call, Context, Step, StepKey
from pgrig.ui import Step as ProgressLine


@dataclass(frozen=True)
class ToySpec:
    name: str = "toy"
    rows: tuple[int, ...] = (1000,)

    kind: ClassVar[str] = "toy"


@dataclass(frozen=True)
class ToyResult:
    rows: int
    total: int
    elapsed_ms: float


SCHEMA = Schema(
    'type = "toy"',
    text("name", "toy", "the workload's name"),
    integers("rows", (1000,), "rows to sum, one point each"),
    also=("type",),
)


def sum_action(rows: int) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        assert ctx.conn is not None
        started = time.perf_counter()
        with ctx.conn.connect() as db:
            row = db.execute("SELECT sum(i) FROM generate_series(1, %s) AS i", (rows,)).fetchone()
        assert row is not None
        elapsed = (time.perf_counter() - started) * 1000
        return ToyResult(rows, int(row[0]), elapsed), f"sum = {row[0]}\n"

    return action


def sum_step(spec: ToySpec, rows: int, target: TargetView, rep: int) -> Step:
    return Step(
        key=StepKey(target.name, spec.name, (f"n{rows}",), rep),
        kind="toy_sum",
        label=f"{target.name}: sum of {rows} rows",
        params={"workload": spec.name, "rows": rows, "repeat": rep},
        action=Call("toy.sum", {"rows": rows}),
        estimate_s=1,
    )


class ToyWorkload(Workload):
    type = "toy"
    schema = SCHEMA
    actions = {"toy.sum": sum_action}
    kinds = (
        ResultKind(
            "toy_sum",
            ToyResult,
            headline=lambda r: f": {r.elapsed_ms:.1f} ms",
            metric=lambda r: r.elapsed_ms,
        ),
    )

    def parse(self, table: TomlTable) -> ToySpec:
        return ToySpec(**SCHEMA.read(table))

    def phases(self, spec: ToySpec, policy: RunPolicy) -> list[Phase]:
        def series(rows: int) -> Series:
            return Series(lambda t, rep: sum_step(spec, rows, t, rep))

        return [Phase(series=[series(n) for n in spec.rows])]

    def section(self, study: Study, records: Sequence[RunRecord]) -> Section | None:
        rows = []
        for rec in records:
            res = typed(rec, ToyResult) if rec.kind == "toy_sum" else None
            if res is not None:
                rows.append(Row((rec.target, f"{res.rows:,}", f"{res.total:,}")))
        if not rows:
            return None
        table = Table(columns=("target", "rows", "sum"), rows=tuple(rows), caption="Toy sums")
        return Section(title="Toy workload", anchor="toy", blocks=(table,))


WORKLOAD = ToyWorkload()
