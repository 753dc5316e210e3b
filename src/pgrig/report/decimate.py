"""Long time series drawn with a bounded number of points: the min and max of each bucket.

A plot is 1,300 px wide (``svgplot.WIDTH``, in the HTML and in the SVG files), its
axes about 1,000 px of it beside the legend: a 30-minute run's 1,800 seconds
put two points in each pixel column, and a figure's points, its SVG text and
the page grew with the run (issue 18.6). Beyond two points per bucket of about two pixel
column, each series keeps only the lowest and the highest point of each
bucket, in their order - what time-series tools (M4, Grafana, uPlot) draw - so
a checkpoint's one-second dip stays on the plot, and the caption says how the
line was made. Shorter series are drawn point for point, unchanged.

Numbers in tables never come from here: they are computed from every sample.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pgrig.document.model import Figure, Series

COLUMNS = 600  # buckets across the axes: about one per pixel column
LIMIT = 2 * COLUMNS  # points a series may have before it is reduced


def width(n: int, low: float, high: float) -> float | None:
    """The bucket width (x units: seconds) for a series of ``n`` points from
    ``low`` to ``high``; None when they are few enough to draw each one."""
    raw = (high - low) / COLUMNS
    if n <= LIMIT or not raw > 0:
        return None
    # Whole seconds read better in a caption ("each 3-second bucket").
    return float(math.ceil(raw)) if raw >= 1 else raw


def minmax(
    x: Sequence[float], y: Sequence[float], step: float, origin: float
) -> tuple[array[float], array[float]]:
    """The lowest and the highest point of each bucket ``[origin + k*step,
    origin + (k+1)*step)``, in their order along x; a non-finite point (a
    NaN breaking the line) stays, and ends the bucket before it."""
    out_x, out_y = array("d"), array("d")
    bucket: int | None = None
    low = high = -1

    def flush() -> None:
        if low < 0:
            return
        for i in sorted({low, high}):
            out_x.append(x[i])
            out_y.append(y[i])

    for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
        if not (math.isfinite(xi) and math.isfinite(yi)):
            flush()
            low = high = -1
            bucket = None
            out_x.append(xi)
            out_y.append(yi)
            continue
        k = math.floor((xi - origin) / step)
        if k != bucket:
            flush()
            bucket, low, high = k, i, i
            continue
        if yi < y[low]:
            low = i
        if yi > y[high]:
            high = i
    flush()
    return out_x, out_y


def span(xs: Iterable[float]) -> tuple[float, float]:
    """The lowest and highest finite x (0, 0 when none), without a copy of them."""
    low, high = math.inf, -math.inf
    for x in xs:
        if math.isfinite(x):
            low, high = min(low, x), max(high, x)
    return (low, high) if low <= high else (0.0, 0.0)


def caption(n: int, step: float) -> str:
    """'1,800 samples, drawn as the min and max of each 3-second bucket.'"""
    size = f"{step:g}-second" if step >= 1 else f"{step:.2g}-second"
    return f"{n:,} samples, drawn as the min and max of each {size} bucket."


@dataclass(frozen=True)
class Buckets:
    """One figure's buckets, the same for each of its lines; ``step`` None:
    every point drawn."""

    step: float | None
    origin: float = 0.0
    samples: int = 0  # the longest line's points, for the caption

    @classmethod
    def over(cls, x: Sequence[float]) -> Buckets:
        """The buckets for lines along ``x`` (a run's seconds)."""
        low, high = span(x)
        return cls(width(len(x), low, high), low, len(x))

    @classmethod
    def across(cls, spans: Iterable[tuple[int, float, float]]) -> Buckets:
        """The buckets for lines of (points, first x, last x), each line read
        only when it is drawn (``line``): a figure's lines never all whole at once."""
        longest, low, high = 0, math.inf, -math.inf
        for n, first, last in spans:
            longest, low, high = max(longest, n), min(low, first), max(high, last)
        if longest <= LIMIT:
            return cls(None)
        return cls(width(longest, low, high), low, longest)

    def line(
        self, label: str, x: Sequence[float], y: Sequence[float], *, group: str = "", dash: int = 0
    ) -> Series:
        """A line of the figure: reduced when longer than ``LIMIT``, read from
        any sequence (an ``array`` of a run's column) without copying it whole."""
        if self.step is not None and len(x) > LIMIT:
            rx, ry = minmax(x, y, self.step, self.origin)
            return Series(label, rx, ry, group=group, dash=dash)
        return Series(label, tuple(x), tuple(y), group=group, dash=dash)

    def caption(self, text: str) -> str:
        """The figure's caption, saying how its lines were drawn when reduced."""
        if self.step is None:
            return text
        note = caption(self.samples, self.step)
        return f"{text} {note}" if text else note


def figure(fig: Figure) -> Figure:
    """The figure with each line longer than ``LIMIT`` reduced to the min and
    max of its buckets (one width for the whole figure), and its caption
    saying so; the figure itself when none is that long."""
    buckets = Buckets.across((len(s.x), *span(s.x)) for s in fig.series if s.x)
    if buckets.step is None:
        return fig
    series = tuple(
        buckets.line(s.label, s.x, s.y, group=s.group, dash=s.dash) if s.y_low is None else s
        for s in fig.series
    )
    return dataclasses.replace(fig, series=series, caption=buckets.caption(fig.caption))
