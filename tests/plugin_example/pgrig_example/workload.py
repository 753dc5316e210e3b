"""``type = "example"``: ``SELECT count(*) FROM generate_series(1, rows)`` once
per target and repeat, recorded as an ``example_count``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

from pgrig.policy import RunPolicy
from pgrig.registry.workload import Phase, Series, TargetView, Workload
from pgrig.results import ResultKind
from pgrig.schema import Schema, integer, text
from pgrig.schema import Table as TomlTable
from pgrig.step import Action, Call, Context, Step, StepKey
from pgrig.ui import Step as ProgressLine


@dataclass(frozen=True)
class ExampleSpec:
    name: str = "example"
    rows: int = 1000

    kind: ClassVar[str] = "example"


@dataclass(frozen=True)
class ExampleCount:
    rows: int
    counted: int
    elapsed_ms: float


COUNTED = ResultKind("example_count", ExampleCount, headline=lambda r: f": {r.counted:,} rows")

SCHEMA = Schema(
    'type = "example"',
    text("name", "example", "the workload's name"),
    integer("rows", 1000, "rows to count", minimum=1),
    also=("type",),
)


def count_action(rows: int) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        assert ctx.conn is not None
        started = time.perf_counter()
        with ctx.conn.connect() as db:
            row = db.execute("SELECT count(*) FROM generate_series(1, %s)", (rows,)).fetchone()
        assert row is not None
        elapsed = (time.perf_counter() - started) * 1000
        return ExampleCount(rows, int(row[0]), elapsed), f"count = {row[0]}\n"

    return action


def count_step(spec: ExampleSpec, target: TargetView, rep: int) -> Step:
    return Step(
        key=StepKey(target.name, spec.name, ("count",), rep),
        kind=COUNTED.name,
        label=f"{target.name}: example count of {spec.rows} rows",
        params={"workload": spec.name, "rows": spec.rows},
        action=Call("example.count", {"rows": spec.rows}),
        estimate_s=1.0,
    )


class ExampleWorkload(Workload):
    type = "example"
    schema = SCHEMA
    kinds = (COUNTED,)
    actions = {"example.count": count_action}

    def parse(self, table: TomlTable) -> ExampleSpec:
        return ExampleSpec(**SCHEMA.read(table))

    def phases(self, spec: ExampleSpec, policy: RunPolicy) -> list[Phase]:
        return [Phase(series=[Series(lambda t, rep: count_step(spec, t, rep))])]


WORKLOAD = ExampleWorkload()
