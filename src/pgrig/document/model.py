"""The report as data: what both renderers (Markdown, HTML) draw.

``view.build`` turns a study and its records into a ``ReportView``; the
renderers only lay it out. Cells are plain text, already formatted with their
units; each renderer escapes them for its own syntax.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from pgrig.document.fmt import spread

# Row kinds the renderers style differently.
NORMAL = ""
HEADLINE = "headline"
FAILED = "failed"
SKIPPED = "skipped"
NOISY = "noisy"


# Cell marks: a "vs" cell that won, lost, or was the same or not yet decided. Bold in
# Markdown (the ▲/▼ in the text survives any renderer), coloured in HTML.
BETTER = "better"
WORSE = "worse"
QUIET = "quiet"


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]
    kind: str = NORMAL
    marks: tuple[str, ...] = ()  # per cell: BETTER, WORSE, QUIET or ""

    def mark(self, i: int) -> str:
        return self.marks[i] if i < len(self.marks) else ""


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    caption: str = ""
    notes: tuple[str, ...] = ()
    # Columns holding numbers are right-aligned; the first column never is.
    numeric: tuple[bool, ...] = ()
    # Long reference tables (sysctls, settings) fold away: <details> in HTML.
    collapsed: bool = False


@dataclass(frozen=True)
class Series:
    label: str
    # Tuples, or ``array("d")`` for a long run's reduced lines (8 bytes a point
    # against 32 for a float object in a tuple: the figures wait for the page).
    x: Sequence[float]
    y: Sequence[float]
    # Error bar ends (absolute values, not offsets), e.g. min and max of repeats.
    y_low: tuple[float, ...] | None = None
    y_high: tuple[float, ...] | None = None
    group: str = ""  # same group, same colour (e.g. the pgbench mode)
    dash: int = 0  # index into the plot's line styles, e.g. one per percentile


def median_line(label: str, points: dict[int, list[float]]) -> Series:
    """One line over an axis (clients, scale, active warehouses) from each x's
    repeats: the median, bars from min to max."""
    xs = sorted(points)
    spreads = [spread(points[x]) for x in xs]
    return Series(
        label=label,
        x=tuple(float(x) for x in xs),
        y=tuple(sp.median for sp in spreads),
        y_low=tuple(sp.low for sp in spreads),
        y_high=tuple(sp.high for sp in spreads),
        group=label,
    )


@dataclass(frozen=True)
class Figure:
    name: str  # file stem of the SVG next to the Markdown, unique within a report
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    caption: str = ""
    log_x: bool = False
    log_y: bool = False
    # Each series is the running total of those before it (shares of 100%):
    # drawn as filled bands on an axis from 0 to 100.
    stacked: bool = False

    @property
    def drawable(self) -> bool:
        """Some series has a finite point: else there is nothing to plot."""
        return any(
            math.isfinite(x) and math.isfinite(y)
            for s in self.series
            for x, y in zip(s.x, s.y, strict=True)
        )

    @property
    def x_points(self) -> int:
        """Distinct x values over all series: a curve needs two, one point is a table's job."""
        return len({x for s in self.series for x in s.x})


@dataclass(frozen=True)
class Details:
    """Blocks folded away under one line (<details>): evidence a reader opens on
    demand, e.g. one run's monitor table and plots, so a study of 48 runs does
    not make a page 25,000 px tall."""

    summary: str
    blocks: tuple[Table | Figure, ...]


Block = Table | Figure | Details


@dataclass(frozen=True)
class Section:
    title: str
    anchor: str
    paragraphs: tuple[str, ...] = ()
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class ReportView:
    title: str
    meta: tuple[tuple[str, str], ...]  # header: label -> value
    sections: tuple[Section, ...] = field(default_factory=tuple)

    def figures(self, *, folded: bool = True) -> list[Figure]:
        """Every figure; ``folded=False``: only those not inside a ``Details``."""
        out: list[Figure] = []
        for section in self.sections:
            for block in section.blocks:
                if isinstance(block, Details):
                    out += [b for b in block.blocks if folded and isinstance(b, Figure)]
                elif isinstance(block, Figure):
                    out.append(block)
        return out
