"""Line charts written as SVG text directly: every figure of a report.

The HTML page carries each figure inline (``inline``); the Markdown links each
as a standalone ``.svg`` file beside it (``document``): one drawing for both.
matplotlib's ``savefig`` took about 0.15 s and 30 kB per figure, and
matplotlib with its fonts and Pillow was about 100 MB of the run venv (issue
41); a study of 300 records draws some 600 figures (four per monitored run).
The report's figures are all the same simple kind - lines over linear or
logarithmic axes, markers, error bars, a legend - so they are written here as a
few ``<path>`` and ``<text>`` elements: about a millisecond and a few kB each.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape

from pgrig.document.model import Figure, Series

# A page is up to 1,400 px wide (report.css): a figure uses most of it, and
# shrinks with a narrower window (max-width: 100%).
WIDTH, HEIGHT = 1300, 400
XMLNS = "http://www.w3.org/2000/svg"
_FONT = 12  # px: 9 pt at matplotlib's 100 dpi scale
# matplotlib's tab10 then the dark shades of tab20b/tab20c: twenty colours no two
# alike, the same in every report. A plot of more groups reuses them with
# another dash (``style``).
COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#3182bd",
    "#e6550d",
    "#31a354",
    "#756bb1",
    "#636363",
)
# matplotlib's "-", "--", ":", "-." at a 1.5 px line.
_DASHES = ("", "5.5,2.4", "1.5,2.5", "9.6,2.4,1.5,2.4")


def groups_of(spec: Figure) -> list[str]:
    """The figure's colour groups, in the order their first series come."""
    groups: list[str] = []
    for s in spec.series:
        if s.group not in groups:
            groups.append(s.group)
    return groups


def style(s: Series, groups: Sequence[str]) -> tuple[str, int]:
    """A series' colour and dash index: its group's colour; past the palette's
    twenty groups, the colours again with the next dash."""
    i = groups.index(s.group)
    return COLOURS[i % len(COLOURS)], s.dash + i // len(COLOURS)


def inline(spec: Figure) -> str:
    """The figure as an ``<svg>`` element to paste into the HTML page."""
    return render(spec, prefix=f"fig-{spec.name}")


def document(spec: Figure) -> str:
    """The figure as a standalone ``.svg`` file (next to the Markdown): the same
    drawing as ``inline``, with the XML namespace without which an ``<img>`` -
    GitHub's rendering of ``![...](x.svg)``, a browser's - shows nothing."""
    svg = render(spec, prefix=f"fig-{spec.name}", xmlns=True)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{svg}\n'


def render(spec: Figure, *, prefix: str, xmlns: bool = False) -> str:
    """The figure as an ``<svg>`` element whose only id is ``prefix``."""
    series = [s for s in spec.series if _finite(zip(s.x, s.y, strict=True))]
    groups = groups_of(spec)
    # The legend beside the axes, never over the data (issue 30: one covered an error bar).
    legend_w = _legend_width(spec.series) if spec.series else 0.0
    left, right = 62.0, WIDTH - 12.0 - legend_w
    top, bottom = 26.0, HEIGHT - 40.0
    xs = [x for s in series for x in _ok(s.x)]
    ys = [y for s in series for y in _ok(s.y)]
    ys += [v for s in series for v in _ok((s.y_low or ()) + (s.y_high or ()))]
    xaxis = _Axis.make(xs, left, right, log=spec.log_x, base=2, zero=False)
    if spec.stacked:  # shares of the whole: the axis is the whole, 0 to 100
        yaxis = _Axis(0.0, 100.0, bottom, top, 0, [20.0 * i for i in range(6)])
    else:
        yaxis = _Axis.make(ys, bottom, top, log=spec.log_y, base=10, zero=not spec.log_y)
    if spec.x_label == "clients" and xs:
        xaxis = _Axis(xaxis.low, xaxis.high, left, right, xaxis.log, sorted(set(xs)))
    big = max(ys, default=0.0) >= 10_000
    namespace = f' xmlns="{XMLNS}"' if xmlns else ""
    out = [
        f'<svg{namespace} id="{escape(prefix)}" class="plot" role="img" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-size="{_FONT}" '
        'font-family="sans-serif">',
        f"<title>{escape(spec.title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
    ]
    if spec.stacked:
        out += _bands(spec.series, groups, xaxis, yaxis)
    grid, under, beside = [], [], []
    for t in xaxis.ticks:
        px = xaxis.px(t)
        grid.append(f"M{px:.1f} {top:.1f}V{bottom:.1f}")
        under.append(f'<text x="{px:.1f}" y="{bottom + 14:.1f}">{_num(t, False)}</text>')
    for t in yaxis.ticks:
        py = yaxis.px(t)
        grid.append(f"M{left:.1f} {py:.1f}H{right:.1f}")
        beside.append(f'<text x="{left - 4:.1f}" y="{py + 4:.1f}">{_num(t, big)}</text>')
    out.append(f'<path d="{"".join(grid)}" stroke="#b0b0b0" stroke-opacity="0.3" fill="none"/>')
    # The tick labels of an axis share their alignment through a group, said
    # once rather than on each (a report of hundreds of figures has thousands).
    for anchor, labels in (("middle", under), ("end", beside)):
        if labels:
            out += [f'<g text-anchor="{anchor}">', *labels, "</g>"]
    out.append(
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" '
        f'height="{bottom - top:.1f}" fill="none" stroke="#000" stroke-width="0.8"/>'
    )
    for s in spec.series:
        colour, dash = style(s, groups)
        out += _series(s, colour, dash, xaxis, yaxis, dots=not spec.stacked)
    mid = (left + right) / 2
    out.append(
        f'<text x="{mid:.1f}" y="{top - 8:.1f}" text-anchor="middle">{escape(spec.title)}</text>'
    )
    x_label = escape(spec.x_label)
    out.append(f'<text x="{mid:.1f}" y="{HEIGHT - 8:.1f}" text-anchor="middle">{x_label}</text>')
    cy = (top + bottom) / 2
    out.append(
        f'<text x="14" y="{cy:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {cy:.1f})">{escape(spec.y_label)}</text>'
    )
    if not spec.series:
        out.append(f'<text x="{mid:.1f}" y="{cy:.1f}" text-anchor="middle">no data</text>')
    else:
        out += _legend(spec.series, groups, right + 8, top, filled=spec.stacked)
    out.append("</svg>")
    return "\n".join(out)


def _bands(
    series: Sequence[Series], groups: Sequence[str], xaxis: _Axis, yaxis: _Axis
) -> list[str]:
    """A stacked figure's shares as filled bands: each series' running total down
    to the one before it (the first down to 0), drawn under the grid and lines."""
    out = []
    below: list[tuple[float, float]] = []
    for s in series:
        points = [
            (xaxis.px(x), yaxis.px(min(max(y, 0.0), 100.0)))
            for x, y in zip(s.x, s.y, strict=True)
            if math.isfinite(x) and math.isfinite(y)
        ]
        if not points:
            continue
        floor = below[::-1] or [(points[-1][0], yaxis.p0), (points[0][0], yaxis.p0)]
        d = "M" + "L".join(f"{px:.1f} {py:.1f}" for px, py in points + floor) + "Z"
        colour, _ = style(s, groups)
        out.append(f'<path d="{d}" fill="{colour}" fill-opacity="0.55" stroke="none"/>')
        below = points
    return out


class _Axis:
    """Data -> pixels along one axis, with its tick values."""

    def __init__(
        self, low: float, high: float, p0: float, p1: float, log: int, ticks: Sequence[float]
    ) -> None:
        self.low, self.high, self.p0, self.p1, self.log = low, high, p0, p1, log
        self.ticks = [t for t in ticks if low <= t <= high]

    @classmethod
    def make(
        cls, values: Sequence[float], p0: float, p1: float, *, log: bool, base: int, zero: bool
    ) -> _Axis:
        positive = [v for v in values if v > 0]
        if log and positive:
            lo, hi = math.log(min(positive), base), math.log(max(positive), base)
            if base == 10:  # whole decades: every point between two labelled ticks
                lo, hi = math.floor(lo), math.ceil(hi)
                hi = hi if hi > lo else lo + 1
            else:
                pad = max(hi - lo, 1.0) * 0.05
                lo, hi = lo - pad, hi + pad
            ticks = [float(base**e) for e in range(math.floor(lo), math.ceil(hi) + 1)]
            return cls(float(base**lo), float(base**hi), p0, p1, base, ticks)
        # A log axis over no positive value (latencies all 0 ms): linear instead.
        low, high = (min(values), max(values)) if values else (0.0, 1.0)
        if zero:
            low = min(low, 0.0)
        if high <= low:
            high = low + (abs(low) or 1.0)
        step = _nice_step((high - low) / 5)
        if zero and low == 0.0:
            high = math.ceil(high * 1.05 / step) * step
        else:
            pad = (high - low) * 0.05
            # Seconds since the start never go below 0: no -0.15 s on the axis.
            low, high = (low - pad if low - pad >= 0 or low < 0 else 0.0), high + pad
        first = math.ceil(low / step) * step
        ticks = [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]
        return cls(low, high, p0, p1, 0, ticks)

    def px(self, v: float) -> float:
        if self.log:
            a, b, v = (math.log(max(x, 1e-300), self.log) for x in (self.low, self.high, v))
        else:
            a, b = self.low, self.high
        return self.p0 + (v - a) / ((b - a) or 1.0) * (self.p1 - self.p0)


def _nice_step(raw: float) -> float:
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next((m * mag for m in (1, 2, 2.5, 5) if raw <= m * mag), 10 * mag)


def _num(v: float, big: bool) -> str:
    if big:
        return f"{v:,.0f}"
    return f"{round(v, 10):g}"


def _ok(values: Iterable[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def _finite(points: Iterable[tuple[float, float]]) -> bool:
    return any(math.isfinite(x) and math.isfinite(y) for x, y in points)


def _tenths(v: float) -> int:
    """``v`` in tenths of a pixel, rounded as ``f"{v:.1f}"`` rounds it."""
    return int(f"{v:.1f}".replace(".", ""))


def _decimal(tenths: int) -> str:
    """Tenths of a pixel as SVG's shortest number: 38 -> "3.8", 30 -> "3",
    -5 -> "-.5"."""
    sign = "-" if tenths < 0 else ""
    whole, tenth = divmod(abs(tenths), 10)
    if not tenth:
        return f"{sign}{whole}"
    return f"{sign}{whole or ''}.{tenth}"


def _numbers(values: Iterable[int]) -> str:
    """Numbers of a path, a space between two unless a minus sign parts them."""
    out = ""
    for t in values:
        text = _decimal(t)
        out += text if not out or text.startswith("-") else " " + text
    return out


def _line(segments: Sequence[Sequence[tuple[int, int]]]) -> str:
    """A line's path data: each unbroken segment from its first point, then
    each step relative to the one before (``l``, repeated implicitly). The
    points are those an absolute ``M x yL x y ...`` path in tenths of a pixel
    draws - the same figure - in about half the text: the HTML of seed 004's
    296 records of 120 s runs weighed 6.4 MB, its line paths most of it."""
    out = []
    for seg in segments:
        (x0, y0), rest = seg[0], seg[1:]
        steps = [v for (x, y), (px, py) in zip(rest, seg, strict=False) for v in (x - px, y - py)]
        out.append(f"M{_numbers((x0, y0))}" + (f"l{_numbers(steps)}" if steps else ""))
    return "".join(out)


def _series(
    s: Series, colour: str, dash_i: int, xaxis: _Axis, yaxis: _Axis, *, dots: bool = True
) -> list[str]:
    dash = _DASHES[dash_i % len(_DASHES)]
    segments: list[list[tuple[int, int]]] = []
    pen = "M"
    points: list[tuple[float, float]] = []
    for x, y in zip(s.x, s.y, strict=True):
        if not (math.isfinite(x) and math.isfinite(y)) or (xaxis.log and x <= 0):
            pen = "M"  # NaN breaks the line, as in matplotlib
            continue
        if yaxis.log and y <= 0:
            pen = "M"
            continue
        px, py = xaxis.px(x), yaxis.px(y)
        if pen == "M":
            segments.append([])
        segments[-1].append((_tenths(px), _tenths(py)))
        points.append((px, py))
        pen = "L"
    d = _line(segments)
    out = []
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    if d:
        out.append(
            f'<path d="{"".join(d)}" stroke="{colour}" stroke-width="1.5" fill="none"'
            f"{dash_attr}><title>{escape(s.label)}</title></path>"
        )
    if dots and len(s.x) <= 30 and points:
        marks = "".join(
            f"M{px - 2.5:.1f} {py:.1f}a2.5 2.5 0 1 0 5 0a2.5 2.5 0 1 0 -5 0" for px, py in points
        )
        out.append(f'<path d="{marks}" fill="{colour}"/>')
    if s.y_low is not None and s.y_high is not None and s.y_low != s.y_high:
        bars = []
        for x, lo, hi in zip(s.x, s.y_low, s.y_high, strict=True):
            if not all(math.isfinite(v) for v in (x, lo, hi)) or (yaxis.log and lo <= 0):
                continue
            px, p_lo, p_hi = xaxis.px(x), yaxis.px(lo), yaxis.px(hi)
            bars.append(f"M{px:.1f} {p_lo:.1f}V{p_hi:.1f}")
            bars.append(f"M{px - 3:.1f} {p_lo:.1f}h6M{px - 3:.1f} {p_hi:.1f}h6")
        if bars:
            out.append(f'<path d="{"".join(bars)}" stroke="{colour}" fill="none"/>')
    return out


def _legend_width(series: Sequence[Series]) -> float:
    return 40.0 + 6.2 * max((len(s.label) for s in series), default=0)


def _legend(
    series: Sequence[Series], groups: list[str], x0: float, y0: float, *, filled: bool
) -> list[str]:
    """Beside the axes on the right, top-aligned: never over a line or an error bar."""
    w, h = _legend_width(series) - 10, 16.0 * len(series) + 6
    out = [
        f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{w:.1f}" height="{h:.1f}" fill="#fff" '
        'stroke="#ccc"/>'
    ]
    # A stack's legend lists its top band first, as the bands lie on the plot.
    for i, s in enumerate(series[::-1] if filled else series):
        colour, dash_i = style(s, groups)
        dash = _DASHES[dash_i % len(_DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        y = y0 + 13 + 16 * i
        if filled:
            out.append(
                f'<rect x="{x0 + 5:.1f}" y="{y - 9:.1f}" width="24" height="10" '
                f'fill="{colour}" fill-opacity="0.55"/>'
            )
        else:
            out.append(
                f'<path d="M{x0 + 5:.1f} {y - 4:.1f}h24" stroke="{colour}" stroke-width="1.5"'
                f"{dash_attr}/>"
            )
        out.append(f'<text x="{x0 + 34:.1f}" y="{y:.1f}" font-size="10">{escape(s.label)}</text>')
    return out
