"""Figures -> inline SVG (for the HTML) or PNG (next to the Markdown).

The SVG is written directly by ``svgplot`` (fast and small: a report draws
hundreds). The PNG uses matplotlib's object API with the Agg canvas, never
pyplot, so rendering keeps no global state and needs no display."""

from __future__ import annotations

import io
import math
from collections.abc import Iterable

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FuncFormatter, NullFormatter, StrMethodFormatter
from matplotlib.typing import RcKeyType

from pgrig.document.model import Figure
from pgrig.report import svgplot

_DASHES = ("-", "--", ":", "-.")
_RC: dict[RcKeyType, object] = {
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


def _draw(spec: Figure) -> MplFigure:
    # Fixed margins, not layout="constrained": its measuring of every text took
    # 40% of the drawing time; titles and labels are short, the legend's width
    # is estimated from its longest label.
    fig = MplFigure(figsize=(9.0, 3.6))
    FigureCanvasAgg(fig)  # attaches itself as fig.canvas
    ax = fig.add_subplot()
    handles = []
    groups = svgplot.groups_of(spec)
    if spec.stacked:
        _bands(ax, spec, groups)
    for s in spec.series:
        colour, dash = svgplot.style(s, groups)
        style = _DASHES[dash % len(_DASHES)]
        many = len(s.x) > 30 or spec.stacked
        (line,) = ax.plot(
            s.x,
            s.y,
            linestyle=style,
            marker=None if many else "o",
            markersize=4,
            color=colour,
        )
        handles.append(line)
        if s.y_low is not None and s.y_high is not None and s.y_low != s.y_high:
            yerr = [
                [y - lo for y, lo in zip(s.y, s.y_low, strict=True)],
                [hi - y for y, hi in zip(s.y, s.y_high, strict=True)],
            ]
            ax.errorbar(s.x, s.y, yerr=yerr, fmt="none", ecolor=colour, capsize=3)
    if spec.log_x:
        ax.set_xscale("log", base=2)
    if spec.x_label == "clients":
        ticks = sorted({x for s in spec.series for x in s.x})
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    if max((y for s in spec.series for y in s.y), default=0) >= 10_000:
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.set_title(spec.title)
    ax.set_xlabel(spec.x_label)
    ax.set_ylabel(spec.y_label)
    # A log axis over no positive value (latencies all 0 ms) is matplotlib's
    # UserWarning on stderr (defect 19.20) and an empty plot: linear instead.
    limits = decade_limits(y for s in spec.series for y in s.y) if spec.log_y else None
    if spec.stacked:
        ax.set_ylim(0, 100)
    elif limits:
        ax.set_yscale("log")
        # 0.1, 1, 10 reads faster than 10^-1, 10^0, 10^1 for latencies in ms.
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        # Every point between two labelled ticks: matplotlib's own limits can
        # leave 0.017 ms below the lowest tick, unlabelled.
        ax.set_ylim(*limits)
    else:
        ax.set_ylim(bottom=0)
    # The legend beside the axes, never over the data (issue 30: one covered an error bar).
    outside = bool(spec.series)
    longest = max((len(s.label) for s in spec.series), default=0)
    right = 1.0 - (0.05 + longest * 0.0056 if outside else 0.0) - 0.02
    fig.subplots_adjust(left=0.1, right=right, top=0.91, bottom=0.13)
    # Labels given with their lines: matplotlib drops a label that starts with
    # "_" (a target named "_old") when it collects them, and warns on stderr.
    labels = [s.label for s in spec.series]
    if outside:
        ax.legend(
            handles,
            labels,
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0,
            handlelength=3,
        )
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center")
    return fig


def _bands(ax: Axes, spec: Figure, groups: list[str]) -> None:
    """A stacked figure's shares as filled bands, as ``svgplot._bands`` draws them."""
    below: list[tuple[float, float]] = []
    for s in spec.series:
        points = [
            (x, min(max(y, 0.0), 100.0))
            for x, y in zip(s.x, s.y, strict=True)
            if math.isfinite(x) and math.isfinite(y)
        ]
        if not points:
            continue
        floor = below[::-1] or [(points[-1][0], 0.0), (points[0][0], 0.0)]
        polygon = points + floor
        colour, _ = svgplot.style(s, groups)
        ax.fill([x for x, _ in polygon], [y for _, y in polygon], color=colour, alpha=0.55, lw=0)
        below = points


def decade_limits(values: Iterable[float]) -> tuple[float, float] | None:
    """The powers of ten just below the smallest and above the largest positive value."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return None
    low = 10.0 ** math.floor(math.log10(min(positive)))
    high = 10.0 ** math.ceil(math.log10(max(positive)))
    return low, high if high > low else low * 10


def to_png(spec: Figure, *, dpi: int = 110) -> bytes:
    with matplotlib.rc_context(_RC):
        fig = _draw(spec)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def to_svg(spec: Figure) -> str:
    """The figure as an ``<svg>`` element ready to paste into HTML: written
    directly (``svgplot``), a millisecond and a few kB rather than matplotlib's
    0.15 s and 30 kB, which made the report of 600 figures take minutes."""
    return svgplot.render(spec, prefix=f"fig-{spec.name}")
