"""The reports' plots, written as SVG text directly (pgrig.report.svgplot): inline
in the HTML, standalone files beside the Markdown."""

from __future__ import annotations

import math
import re
import time
import xml.etree.ElementTree as ET

from pgrig.document.model import Figure, Series
from pgrig.report import svgplot


def _fig(*series: Series, **kw: object) -> Figure:
    args: dict[str, object] = {"name": "f", "title": "T <1>", "x_label": "x", "y_label": "y"}
    args.update(kw)
    return Figure(series=series, **args)  # type: ignore[arg-type]


_NUMBER = re.compile(r"[Ml]|-?(?:\d+(?:\.\d*)?|\.\d+)")


def absolute(svg: str) -> str:
    """``svg`` as svgplot wrote it before its lines' steps were relative
    (``M x yL x y ...``, one decimal) and its tick labels grouped by alignment:
    the same points and labels, so a figure compares with one drawn then."""

    def tenths(text: str) -> int:
        return round(float(text) * 10)

    def fmt(t: int) -> str:
        return f"{'-' if t < 0 else ''}{abs(t) // 10}.{abs(t) % 10}"

    def rewrite(match: re.Match[str]) -> str:
        out, x, y, relative, pending = [], 0, 0, False, []
        for token in _NUMBER.findall(match[1]):
            if token in "Ml":
                relative = token == "l"
                continue
            pending.append(tenths(token))
            if len(pending) < 2:
                continue
            dx, dy = pending
            pending = []
            if relative:
                x, y = x + dx, y + dy
                out.append(f"L{fmt(x)} {fmt(y)}")
            else:
                x, y = dx, dy
                out.append(f"M{fmt(x)} {fmt(y)}")
        return f'<path d="{"".join(out)}" stroke='

    def ungroup(match: re.Match[str]) -> str:
        return re.sub(r"<text ([^>]*)>", rf'<text \1 text-anchor="{match[1]}">', match[2])

    svg = re.sub(r'<g text-anchor="(\w+)">\n(.*?)\n</g>', ungroup, svg, flags=re.S)
    line = r'<path d="(M[^"a-z]*l[^"a-z]*(?:M[^"a-z]*(?:l[^"a-z]*)?)*)" stroke='
    return re.sub(line, rewrite, svg)


def test_a_lines_relative_steps_draw_the_points_of_an_absolute_path() -> None:
    """Each step is the difference of two rounded positions, so no rounding
    error adds up along a long line; a negative step needs no space."""
    x = tuple(float(t) for t in range(500))
    y = tuple(1000.0 + 900.0 * math.sin(t / 3.7) for t in x)
    svg = svgplot.inline(_fig(Series("tps", x, y)))
    line = r'<path d="([^"]+)" stroke="#1f77b4" stroke-width="1.5" fill="none"'
    (path,) = re.findall(line, svg)
    assert path.count("l") == 1 and "L" not in path and "-" in path and " -" not in path
    (old,) = re.findall(line, absolute(svg))
    assert old.count("M") == 1 and old.count("L") == len(x) - 1
    # The highest and lowest points drawn are where the wave peaks, at the axes' ends.
    ys = [float(p.split()[1]) for p in old[1:].split("L")]
    assert abs(min(ys) - 26.0) < 20 and abs(max(ys) - (svgplot.HEIGHT - 40.0)) < 20
    assert len(path) < 0.8 * len(old), "shorter even for a wave of 35 px steps"


def _texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [t.text or "" for t in root.iter("text")]


def test_svg_is_well_formed_with_one_prefixed_id_and_escaped_text() -> None:
    fig = _fig(Series("a & b", (1.0, 2.0, 3.0), (5.0, 7.0, 6.0)))
    svg = svgplot.inline(fig)
    assert re.findall(r'\bid="([^"]+)"', svg) == ["fig-f"]
    texts = _texts(svg)  # parses: escaping is right
    assert "T <1>" in texts and "a & b" in texts
    assert svg == svgplot.inline(fig), "deterministic: reports diff cleanly"


def test_a_nan_breaks_the_line() -> None:
    nan = math.nan
    fig = _fig(Series("checkpoint", (1, 1, nan, 3, 3, nan), (0, 9, nan, 0, 9, nan)))
    line = r'<path d="([^"]+)" stroke="#1f77b4" stroke-width="1.5" fill="none"'
    (path,) = re.findall(line, svgplot.inline(fig))
    assert path.count("M") == 2 and path.count("l") == 2


def test_clients_axis_ticks_are_the_client_counts_and_log_y_whole_decades() -> None:
    fig = _fig(
        Series("p99", (1.0, 8.0, 64.0), (0.017, 0.5, 3.2)),
        x_label="clients",
        log_x=True,
        log_y=True,
    )
    texts = _texts(svgplot.inline(fig))
    assert {"1", "8", "64"} <= set(texts)
    assert "2" not in texts  # only the counts that ran
    assert {"0.01", "0.1", "1", "10"} <= set(texts)


def test_big_numbers_get_thousands_separators_and_no_data_says_so() -> None:
    texts = _texts(svgplot.inline(_fig(Series("tps", (1.0, 2.0), (12_000.0, 48_000.0)))))
    assert any("," in t and t.replace(",", "").isdigit() for t in texts)
    assert "no data" in _texts(svgplot.inline(_fig()))


def _frame(svg: str) -> tuple[float, float]:
    """The axes' left and right edges (the black frame)."""
    m = re.search(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*stroke="#000"', svg)
    assert m is not None
    return float(m[1]), float(m[1]) + float(m[2])


def test_the_legend_is_beside_the_axes_never_over_the_data() -> None:
    """Issue 30: a legend in the plot's "best" corner covered pg17's 8-client error bar."""
    for n in (1, 3, 8):
        lines = [Series(f"run {i}", (1.0, 2.0), (1.0, 2.0)) for i in range(n)]
        svg = svgplot.inline(_fig(*lines))
        _, right = _frame(svg)
        legend = re.search(r'<rect x="([\d.]+)"[^>]*stroke="#ccc"', svg)
        assert legend is not None and float(legend[1]) > right


def test_nine_series_get_nine_distinct_colours() -> None:
    """Issue 30: the quick study's 12 lines shared 10 colours (two were #1f77b4)."""
    lines = [Series(f"s{i}", (0.0, 1.0), (float(i), float(i + 1)), group=f"s{i}") for i in range(9)]
    svg = svgplot.inline(_fig(*lines))
    strokes = re.findall(r'<path d="M[^"]*" stroke="(#[0-9a-f]{6})" stroke-width="1.5" fill', svg)
    assert len(strokes) == 9 and len(set(strokes)) == 9
    assert len(set(svgplot.COLOURS)) == len(svgplot.COLOURS) >= 20


def test_stacked_shares_are_bands_on_an_axis_to_100() -> None:
    """Issue 30: stacked CPU shares were lines on an axis to 120%."""
    x = (0.0, 1.0, 2.0)
    server = Series("server", x, (30.0, 40.0, 35.0), group="server")
    client = Series("pgbench", x, (50.0, 60.0, 55.0), group="pgbench")
    svg = svgplot.inline(_fig(server, client, stacked=True, x_label="seconds since start"))
    assert len(re.findall(r'fill-opacity="0.55" stroke="none"', svg)) == 2
    ticks = [t for t in _texts(svg) if t.replace(".", "").isdigit()]
    assert "100" in ticks and "120" not in ticks


def test_a_time_axis_starting_at_zero_does_not_go_below_it() -> None:
    """Issue 30: a pg_basebackup run's plot began at -0.15 s."""
    svg = svgplot.inline(_fig(Series("tps", (0.0, 1.0, 2.0, 3.0), (5.0, 6.0, 7.0, 8.0))))
    assert not any(t.startswith("-") for t in _texts(svg))


def test_error_bars_are_drawn_where_repeats_differ() -> None:
    s = Series("tps", (1.0, 2.0), (10.0, 20.0), y_low=(8.0, 19.0), y_high=(12.0, 22.0))
    svg = svgplot.inline(_fig(s))
    bars = re.findall(r'<path d="([^"]+)" stroke="#1f77b4" fill="none"/>', svg)
    assert len(bars) == 1 and bars[0].count("V") == 2


def test_a_monitor_plot_is_small_and_quick() -> None:
    """The reason svgplot exists: 600 such figures made a 19 MB, minutes-long report."""
    x = tuple(float(t) for t in range(60))
    fig = _fig(*(Series(f"s{i}", x, tuple(float(i + t % 7) for t in x)) for i in range(7)))
    t0 = time.process_time()
    svg = svgplot.render(fig, prefix="p")
    assert time.process_time() - t0 < 0.05
    assert len(svg) < 12_000


def _y_ticks(svg: str) -> list[str]:
    """The y axis's tick labels (the group aligned at their end, left of the axes)."""
    root = ET.fromstring(svg)
    return [t.text or "" for g in root.iter("g") if g.get("text-anchor") == "end" for t in g]


def test_a_log_axis_spans_whole_decades_and_falls_back_to_linear_over_no_positive_value() -> None:
    """Every point lies between two labelled ticks (0.017 ms sat below the lowest
    one); latencies all 0 ms (defect 19.20) get a linear axis, not an empty plot."""
    for ys, ticks in (
        ((0.017, 3.2), ["0.01", "0.1", "1", "10"]),
        ((0.0, 5.0), ["1", "10"]),
        ((10.0, 10.0), ["10", "100"]),
    ):
        svg = svgplot.inline(_fig(Series("p99", (1.0, 2.0), ys), log_y=True))
        assert _y_ticks(svg) == ticks, ys
    zero = svgplot.inline(_fig(Series("p99", (1.0, 2.0), (0.0, 0.0)), log_y=True))
    assert _y_ticks(zero)[0] == "0" and len(_y_ticks(zero)) > 2
    assert "p99" in _texts(zero)


def test_a_label_starting_with_an_underscore_stays_in_the_legend() -> None:
    """matplotlib dropped "_old" (a target's name) from its legend, with a warning."""
    svg = svgplot.inline(_fig(Series("_old", (1.0, 2.0), (5.0, 6.0))))
    assert "_old" in _texts(svg)


_NS = "{http://www.w3.org/2000/svg}"


def test_a_standalone_file_is_the_inline_drawing_with_its_namespace() -> None:
    """The Markdown's figure files: an ``<img>`` (GitHub's, a browser's) shows an
    SVG only with the SVG namespace, and its size from width/height/viewBox."""
    fig = _fig(
        Series("select-only", (1.0, 2.0, 4.0), (900.0, 1700.0, 2500.0)),
        Series("read-write", (1.0, 2.0, 4.0), (300.0, 500.0, 650.0), group="rw"),
        x_label="clients",
        y_label="tps",
    )
    text = svgplot.document(fig)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns=')
    root = ET.fromstring(text.encode())
    assert root.tag == f"{_NS}svg"
    assert (root.get("width"), root.get("height")) == (str(svgplot.WIDTH), str(svgplot.HEIGHT))
    assert root.get("viewBox") == f"0 0 {svgplot.WIDTH} {svgplot.HEIGHT}"
    texts = [t.text for t in root.iter(f"{_NS}text")]
    assert {"T <1>", "clients", "tps", "select-only", "read-write"} <= set(texts)
    titles = [p.findtext(f"{_NS}title") for p in root.iter(f"{_NS}path")]
    assert [t for t in titles if t] == ["select-only", "read-write"]  # one line each
    # One drawing for both outputs: the file is the page's element, namespaced.
    assert text.split("\n", 1)[1].rstrip("\n") == svgplot.inline(fig).replace(
        "<svg ", f'<svg xmlns="{svgplot.XMLNS}" ', 1
    )
