"""``type = "copy"``: ``COPY ... FROM STDIN`` of ``rows`` generated rows into a
fresh table, once per target and repeat, recorded as a ``copy_rows``. Its kind
declares ``metric``, ``summary`` and ``unit``, so its rows/s reaches the
report's summary, the comparison of targets and the answer with no section of
its own; a study of it alone has no pgbench section."""

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
class CopySpec:
    name: str = "copy"
    rows: int = 10_000

    kind: ClassVar[str] = "copy"


@dataclass(frozen=True)
class CopyRows:
    rows: int
    copied: int  # COPY's own row count
    elapsed_s: float

    @property
    def rows_per_s(self) -> float:
        return self.copied / self.elapsed_s if self.elapsed_s > 0 else 0.0


COPIED = ResultKind(
    "copy_rows",
    CopyRows,
    headline=lambda r: f": {r.copied:,} rows, {r.rows_per_s:,.0f} rows/s",
    columns=lambda r: {"rows": r.copied, "elapsed_s": r.elapsed_s},
    metric=lambda r: r.rows_per_s,
    summary="COPY",
    unit="rows/s",
)

SCHEMA = Schema(
    'type = "copy"',
    text("name", "copy", "the workload's name"),
    integer("rows", 10_000, "rows to COPY into a fresh table per run", minimum=1),
    also=("type",),
)


def copy_action(rows: int) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        assert ctx.conn is not None
        with ctx.conn.connect() as db:
            db.execute("DROP TABLE IF EXISTS example_copy")
            db.execute("CREATE TABLE example_copy (id int, note text)")
            started = time.perf_counter()
            with db.cursor() as cur:
                with cur.copy("COPY example_copy (id, note) FROM STDIN") as copy:
                    for i in range(rows):
                        copy.write_row((i, f"row {i}"))
                copied = cur.rowcount
            elapsed = time.perf_counter() - started
            db.execute("DROP TABLE example_copy")
        return CopyRows(rows, copied, elapsed), f"COPY {copied}\n"

    return action


def copy_step(spec: CopySpec, target: TargetView, rep: int) -> Step:
    return Step(
        key=StepKey(target.name, spec.name, ("copy",), rep),
        kind=COPIED.name,
        label=f"{target.name}: COPY of {spec.rows} rows",
        params={"workload": spec.name, "rows": spec.rows},
        action=Call("copy.rows", {"rows": spec.rows}),
        estimate_s=1.0,
    )


class CopyWorkload(Workload):
    type = "copy"
    title = "COPY"
    schema = SCHEMA
    kinds = (COPIED,)
    actions = {"copy.rows": copy_action}

    def parse(self, table: TomlTable) -> CopySpec:
        return CopySpec(**SCHEMA.read(table))

    def phases(self, spec: CopySpec, policy: RunPolicy) -> list[Phase]:
        return [Phase(series=[Series(lambda t, rep: copy_step(spec, t, rep))])]


WORKLOAD = CopyWorkload()
