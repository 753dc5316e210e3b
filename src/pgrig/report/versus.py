"""The study's comparisons ("vs baseline") in one place, and the cells of each
table that shows them.

``Ledger.of`` decides every comparison a study holds once - each pgbench point's
tps, each result kind's summary metric (``ResultKind.summary``), each target
against the baseline - with the one procedure (``stats.decide``), and decides
them together over the whole study (``stats.adjust``). Every table and every conclusion reads
its comparison from the ledger, so one comparison shows one q-value everywhere
(a per-table correction once showed q=0.96 in the summary and 0.92 / 0.87 for
the same test in the versions table). The ledger is a pure function of the
records and the baseline: built twice from the same records, it holds the same
numbers.

Tables are drafted with ``Family.vs`` placeholders where the difference goes and
finished with ``Family.rows``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from pgrig import stats
from pgrig.document.model import BETTER, NORMAL, QUIET, WORSE, Row
from pgrig.report import index
from pgrig.report.index import StudyIndex
from pgrig.results import RunRecord

# What every "vs baseline" cell means, said once per table.
VS_NOTE = (
    "vs baseline: the change in % of the baseline (rates), or as a ratio (latencies, "
    "durations: '2.1x slower'), from the runs' geometric means, with its interval "
    f"(from {stats.MIN_RUNS} runs a side): ▲ better / ▼ worse when the interval excludes "
    f"no change; = the same when it lies within ±{stats.MARGIN_PCT:g}%; ? not yet otherwise, "
    "with the runs a side that would decide it (docs/report.md#verdicts). One run per side "
    "allows no verdict."
)
TPS = "tps"  # the ledger's name for a pgbench point's throughput

_MARK = {stats.BETTER: BETTER, stats.WORSE: WORSE, stats.SAME: QUIET, stats.NOT_YET: QUIET}


@dataclass(frozen=True)
class Key:
    """One comparison of a study: a measure at a point, one target against the baseline."""

    measure: str  # TPS, or a result kind's name
    point: Hashable  # a PointKey, or (workload, point) of a result kind
    other: str


class Ledger:
    """Every comparison of one study, tested once and corrected together."""

    def __init__(self, baseline: str) -> None:
        self.baseline = baseline
        self._tests: dict[Key, stats.Comparison] = {}
        self._adjusted: dict[Key, stats.Comparison] | None = None

    @classmethod
    def of(cls, records: Sequence[RunRecord], baseline: str) -> Ledger:
        """The study's comparisons: each pgbench point's tps and each result kind's
        summary metric, every other target against ``baseline``."""
        return cls.of_index(index.read(records), baseline)

    @classmethod
    def of_index(cls, study: StudyIndex, baseline: str) -> Ledger:
        """``of`` the records the study's index holds, already grouped."""
        ledger = cls(baseline)
        for point, per_target in study.runs.items():
            ledger._add_all(
                TPS, point, {t: [run.tps for run in runs] for t, runs in per_target.items()}
            )
        for kind, by_point in study.metrics:
            for row, values in by_point.items():
                ledger._add_all(kind.name, row, values)
        return ledger

    def _add_all(self, measure: str, point: Hashable, values: Mapping[str, list[float]]) -> None:
        base = values.get(self.baseline, [])
        for other, mine in values.items():
            if other != self.baseline and base and mine:
                self.add(Key(measure, point, other), base, mine)

    def add(
        self,
        key: Key,
        base: Sequence[float],
        other: Sequence[float],
        *,
        higher_is_better: bool = True,
    ) -> Key:
        """Test ``other`` against ``base`` under ``key`` (once: a key already tested
        keeps its test)."""
        if key not in self._tests:
            self._tests[key] = stats.decide(base, other, higher_is_better=higher_is_better)
            self._adjusted = None
        return key

    def get(self, key: Key) -> stats.Comparison | None:
        """The comparison under ``key`` with its q-value over the whole study."""
        if self._adjusted is None:
            keys = list(self._tests)
            adjusted = stats.adjust([self._tests[k] for k in keys])
            self._adjusted = dict(zip(keys, adjusted, strict=True))
        return self._adjusted.get(key)

    def __len__(self) -> int:
        return sum(c.log_interval() is not None for c in self._tests.values())


@dataclass(frozen=True)
class Pending:
    """Where a comparison's text goes once the study is corrected."""

    key: Key


@dataclass(frozen=True)
class Quiet:
    """A difference that says nothing (one run a side): shown, visibly quiet."""

    text: str


Cell = str | Pending | Quiet


@dataclass(frozen=True)
class Draft:
    cells: tuple[Cell, ...]
    kind: str = NORMAL


class Family:
    """Every "vs" cell of one table, read from the study's ``Ledger``."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger if ledger is not None else Ledger("")
        self.keys: list[Key] = []

    def vs(
        self,
        base: Sequence[float],
        other: Sequence[float],
        *,
        key: Key | None = None,
        higher_is_better: bool = True,
    ) -> Cell:
        """The comparison of ``other`` against ``base`` under ``key`` (tested
        here when the ledger does not hold it yet); '' when a side has no run."""
        if not base or not other:
            return ""
        if key is None:  # a comparison of this table alone
            key = Key(f"table {id(self)}", len(self.keys), "")
        self.keys.append(self.ledger.add(key, base, other, higher_is_better=higher_is_better))
        return Pending(key)

    def _tests(self) -> list[stats.Comparison]:
        return [c for k in self.keys if (c := self.ledger.get(k)) is not None]

    def rows(self, drafts: Sequence[Draft]) -> tuple[Row, ...]:
        out = []
        for d in drafts:
            texts, marks = [], []
            for cell in d.cells:
                if isinstance(cell, Pending):
                    c = self.ledger.get(cell.key)
                    assert c is not None  # ``vs`` tested it
                    texts.append(c.describe())
                    marks.append(_MARK[c.verdict])
                elif isinstance(cell, Quiet):
                    texts.append(cell.text)
                    marks.append(QUIET if cell.text else "")
                else:
                    texts.append(cell)
                    marks.append("")
            out.append(Row(tuple(texts), d.kind, tuple(marks) if any(marks) else ()))
        return tuple(out)

    def note(self) -> tuple[str, ...]:
        """The table's note on its marks (none when nothing was tested)."""
        text = stats.family_note(self._tests(), len(self.ledger))
        return (text,) if text else ()


def single_delta(
    base: float | None, other: float | None, *, higher_is_better: bool = True
) -> Quiet:
    """One run a side: the difference (a ratio for a latency or a duration), and
    that nothing can be said about it."""
    if base is None or other is None or base == 0:
        return Quiet("")
    size = (
        f"{(other - base) / base * 100:+.1f}%"
        if higher_is_better
        else stats.ratio_text(other / base)
    )
    return Quiet(f"{size} (one run each: no test)")
