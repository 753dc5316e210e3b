"""The "vs baseline" cells of one table, tested together.

A table's comparisons form one family: their p-values are corrected together
(Benjamini-Hochberg, ``stats.adjust``) before any cell is marked, so a table of
36 differences does not show the 2 that chance alone calls as winners. Tables
are drafted with ``Family.vs`` placeholders where the difference goes and
finished with ``Family.rows`` once every comparison is known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgrig import stats
from pgrig.document.model import BETTER, NORMAL, QUIET, WORSE, Row

# What every "vs baseline" cell means, said once per table.
VS_NOTE = (
    "vs baseline: difference of the medians in % of the baseline's; Welch's t-test over "
    f"the repeats. ▲ better / ▼ worse only when the difference survives the correction "
    f"below and rests on ≥ {stats.MIN_RUNS} runs a side; ≈ within noise otherwise. "
    "One run per side allows no test."
)

_MARK = {stats.BETTER: BETTER, stats.WORSE: WORSE, stats.NOISE: QUIET, stats.UNTESTED: QUIET}


@dataclass(frozen=True)
class Pending:
    """Where a comparison's text goes once the family is corrected."""

    index: int


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
    """Every "vs" cell of one table."""

    def __init__(self) -> None:
        self.tests: list[stats.Comparison] = []

    def vs(
        self, base: Sequence[float], other: Sequence[float], *, higher_is_better: bool = True
    ) -> Cell:
        """Welch's test of ``other`` against ``base`` ('' when a side has no run)."""
        if not base or not other:
            return ""
        self.tests.append(stats.welch(base, other, higher_is_better=higher_is_better))
        return Pending(len(self.tests) - 1)

    def rows(self, drafts: Sequence[Draft]) -> tuple[Row, ...]:
        tests = stats.adjust(self.tests)
        out = []
        for d in drafts:
            texts, marks = [], []
            for cell in d.cells:
                if isinstance(cell, Pending):
                    c = tests[cell.index]
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
        text = stats.family_note(stats.adjust(self.tests))
        return (text,) if text else ()


def single_delta(base: float | None, other: float | None) -> Quiet:
    """One run a side: the difference, and that nothing can be said about it."""
    if base is None or other is None or base == 0:
        return Quiet("")
    return Quiet(f"{(other - base) / base * 100:+.1f}% (one run each: no test)")
