"""The report: Markdown + self-contained HTML drawn from stored records.

Records come from tests/data/report/records.py (values from real runs on this
machine, see its docstring). The HTML is also loaded in headless Chromium, the
way a reader opens it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

from pgrig.document import fmt
from pgrig.document.model import Table
from pgrig.monitor.model import (
    Disturbance,
    IdleBaseline,
    MonitorResult,
    Noise,
    OtherLoad,
    OtherProcess,
)
from pgrig.registry import typed_result
from pgrig.report import markdown, svgplot, view
from pgrig.report import monitor as monitor_report
from pgrig.report import writer as report
from pgrig.report.samples import Columns
from pgrig.results import FioResult, PgbenchRun, RunRecord, from_dict, to_dict

DATA = Path(__file__).parent / "data" / "report"
GOLDEN_MD = DATA / "golden_report.md"
CHROMIUM = Path("/usr/bin/chromium")
SECTIONS = (
    "## Answer",
    "## Conclusions",
    "## Performance Summary",
    "## Environment",
    "## Clock timing overhead (pg_test_timing)",
    "## WAL sync methods (pg_test_fsync)",
    "## Storage IOPS and throughput (fio)",
    "## TPC-B (pgbench)",
    "## All runs",
)


def _load_fixtures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("report_records", DATA / "records.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fx = _load_fixtures()


@dataclasses.dataclass(frozen=True)
class Written:
    md_path: Path
    html_path: Path
    md: str
    html: str


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    out = tmp_path_factory.mktemp("report")
    md_path, html_path = report.write(fx.study(), fx.records(), out)
    return Written(
        md_path, html_path, md_path.read_text(encoding="utf-8"), html_path.read_text("utf-8")
    )


def _table_after(md: str, heading: str) -> list[str]:
    """The lines of the first Markdown table after ``heading``."""
    lines = md[md.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def _cells(line: str) -> list[str]:
    # Split on pipes that are not escaped; strip the outer empty pieces.
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


# --------------------------------------------------------------------------
# Files


def test_write_returns_both_files_with_default_stem(written: Written) -> None:
    stem = f"report-{fx.STUDY_ID}"
    assert written.md_path.name == f"{stem}.md"
    assert written.html_path.name == f"{stem}.html"
    assert written.md_path.parent == written.html_path.parent


_NS = "{http://www.w3.org/2000/svg}"


def _links(md: str) -> list[tuple[str, str]]:
    """The Markdown's images: (alt text, relative path)."""
    return re.findall(r"!\[([^\]]*)\]\(([^)]+)\)", md)


def test_markdown_links_svg_plots_next_to_it(written: Written) -> None:
    """Each image is a standalone SVG file drawing its figure: the figure's title,
    axes' labels and every series (a line titled with its label) are in it."""
    links = _links(written.md)
    assert len(links) == 4  # the answer's chart, drawn once (not again in its section)
    figures = {f.name: f for f in view.build(fx.study(), fx.records()).figures(folded=False)}
    for alt, link in links:
        assert not link.startswith("/") and "://" not in link and link.endswith(".svg")
        root = ET.parse(written.md_path.parent / link).getroot()
        assert root.tag == f"{_NS}svg" and root.get("viewBox") and root.get("width")
        spec = figures[Path(link).stem]
        texts = {t.text for t in root.iter(f"{_NS}text")}
        assert {alt, spec.title, spec.x_label, spec.y_label} <= texts
        lines = {p.findtext(f"{_NS}title") for p in root.iter(f"{_NS}path")}
        assert {s.label for s in spec.series} <= lines and spec.series
    assert f"report-{fx.STUDY_ID}_files/answer_tps_vs_clients.svg" in dict(links).values()


def test_custom_stem(tmp_path: Path) -> None:
    md_path, html_path = report.write(fx.study(), fx.records(), tmp_path / "new", stem="nightly")
    assert md_path == tmp_path / "new" / "nightly.md" and md_path.exists()
    assert html_path == tmp_path / "new" / "nightly.html" and html_path.exists()
    assert (tmp_path / "new" / "nightly_files" / "tps_over_time_read_write.svg").exists()


# --------------------------------------------------------------------------
# Markdown content


def test_markdown_matches_golden(written: Written) -> None:
    """Set PGRIG_UPDATE_GOLDEN=1 to rewrite the golden file after an intended change."""
    text = written.md.replace(f"report-{fx.STUDY_ID}_files", "FILES")
    if os.environ.get("PGRIG_UPDATE_GOLDEN"):
        GOLDEN_MD.write_text(text, encoding="utf-8")
    assert text == GOLDEN_MD.read_text(encoding="utf-8")


def test_markdown_has_sections_in_order(written: Written) -> None:
    positions = [written.md.index(f"\n{h}\n") for h in SECTIONS]
    assert positions == sorted(positions)


def test_header_says_how_it_was_obtained(written: Written) -> None:
    assert "- **Target:** /tmp/rcap (ext4 on vda)" in written.md
    assert "- **pgrig version:** 0.1.0" in written.md
    line = next(x for x in written.md.splitlines() if x.startswith("- **How it was obtained:**"))
    # Each tool's name once (fio --version prints "fio-3.33"), each version once.
    assert "tools: fio 3.33, pg_test_fsync/pg_test_timing/pgbench 15.18 (Debian" in line
    assert "profile: default" in line and "scale=5" in line


def test_every_markdown_table_is_rectangular(written: Written) -> None:
    """An unescaped pipe in a cell (the skipped reason has one) would add a column."""
    block: list[str] = []
    for line in [*written.md.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            widths = {len(_cells(row)) for row in block}
            assert len(widths) == 1, block
            assert set(_cells(block[1])) <= {"---", "---:"}
            block = []


def test_summary_in_seed_layout(written: Written) -> None:
    table = _table_after(written.md, "## Performance Summary")
    assert _cells(table[0]) == ["Test Case", fx.TARGET]
    fsync = ["fdatasync 8K", "9,256 ops/s (108 us/op); ⚠ noisy, see pg_test_fsync"]
    assert _cells(table[2]) == fsync
    assert _cells(table[3])[1].startswith("IOPS=78.0k (78,000; ")
    assert _cells(table[3])[1].endswith("), BW=609 MiB/s")
    # each mode at its peak (select-only at 2 clients, not its most), with p95/p99
    row = [
        "TPC-B read-write, 4 clients",
        "tps: 4,059 (per second CV 28%) ⚠; qps: 20,297; p95 1.755 / p99 4.470 ms",
    ]
    assert row in map(_cells, table)
    select = next(_cells(r) for r in table if "select-only" in r)
    assert select[0] == "TPC-B select-only, 2 clients" and "tps: 82,959 (n=3" in select[1]


def test_fsync_headline_row_first_then_every_method(written: Written) -> None:
    table = _table_after(written.md, "## WAL sync methods")
    assert _cells(table[0]) == ["Test Case", "Method", "ops/s", "usecs/op"]
    assert _cells(table[2]) == [
        "**fdatasync 8K**",
        "**fdatasync (one 8kB write)**",
        "**9,255.519**",
        "**108**",
    ]
    fsync = typed_result(fx.records()[1])
    assert len(table) == 3 + len(fsync.rows)
    assert ["two 8kB writes", "open_datasync", "4,360.564", "229"] in map(_cells, table)
    assert ["one 8kB write", "fsync_writethrough", "n/a", "n/a"] in map(_cells, table)


def test_fio_rows_with_exact_and_short_iops_and_job_parameters(written: Written) -> None:
    table = _table_after(written.md, "## Storage IOPS and throughput")
    assert _cells(table[0]) == [
        "Test Case",
        "IOPS",
        "MiB/s",
        "clat mean (us)",
        "clat p50 (us)",
        "clat p99 (us)",
        "clat p99.9 (us)",
        "IOPS over the run",
    ]
    labels = [_cells(row)[0] for row in table[2:]]
    assert labels == [
        "8k random write",
        "8k random read",
        "8k sequential write",
        "8k sequential read",
    ]
    read: FioResult = fx.FIO_READ
    row = _cells(table[5])
    assert row[1] == f"47.2k ({read.iops:,.0f})"
    assert row[2] == f"{read.bandwidth_mib_s:.0f}"
    assert row[4:7] == [f"{read.clat_p50_us:.0f}", f"{read.clat_p99_us:.0f}", "4,080"]
    after = written.md[written.md.index("## Storage IOPS") :]
    assert "- Job parameters: bs=8k, ioengine=libaio, direct=1, numjobs=1, iodepth=16" in after


def test_tpcb_tables_with_units(written: Written) -> None:
    load = _table_after(written.md, "## TPC-B (pgbench)")
    # The rate is over the generate step (0.71 s), the time the whole load.
    value = "1.08 s in all; generating the rows 0.71 s (704,225 rows/s)"
    assert ["TPC-B load, scale 5 (500,000 rows)", value] in map(_cells, load)
    assert ["count(\\*), index-only scan", "47.890 ms (500,000 rows)"] in map(_cells, load)
    assert ["count(\\*), seq scan", "46.600 ms (500,000 rows)"] in map(_cells, load)

    tput = _table_after(written.md, "**Throughput per client count")
    assert _cells(tput[0]) == [
        "Clients",
        "select-only tps",
        "select-only per-second spread",
        "select-only qps",
        "read-write tps",
        "read-write per-second spread",
        "read-write qps",
    ]
    assert _cells(tput[2])[:4] == ["1", "30,238", "CV 59.6%, 10,889–50,451 ⚠", "30,238"]

    lat = _table_after(written.md, "**Transaction latency")
    assert _cells(lat[0]) == [
        "Mode",
        "Clients",
        "avg (ms)",
        "stddev (ms)",
        "p50 (ms)",
        "p95 (ms)",
        "p99 (ms)",
        "max (ms)",
    ]
    assert _cells(lat[8]) == [
        "read-write",
        "4",
        "0.978",
        "0.763",
        "0.835",
        "1.755",
        "4.470",
        "15.119",
    ]

    stmts = _table_after(
        written.md, "**Per-statement latencies (pgbench -r), read-write, 4 clients"
    )
    assert ["END;", "0.357", "0"] in map(_cells, stmts)


def test_repeated_points_show_median_spread_and_noise_flag(written: Written) -> None:
    runs = [
        typed_result(r)
        for r in fx.records()
        if r.kind == "pgbench_run" and r.params["clients"] == 2 and r.params["mode"] == "read-write"
    ]
    tps = sorted(r.tps for r in runs)
    assert len(tps) == 3
    tput = _table_after(written.md, "**Throughput per client count")
    cell = _cells(tput[3])[4]
    # the median and its order-statistic interval: [min, max] of 3 runs is a 75% CI
    assert cell.startswith(f"{tps[1]:,.0f} (n=3, 75% CI {tps[0]:,.0f}–{tps[2]:,.0f})")
    assert cell.endswith("⚠")
    assert _cells(tput[3])[5].endswith("(least steady of 3) ⚠")
    # Six of six points are noisy: one note for them all, the details in the rows.
    assert "- ⚠ 6 of 6 points are noisy: per-second tps varied with a CV of 18–60% and " in (
        written.md
    )


def test_one_noisy_point_gets_its_own_warning(tmp_path: Path) -> None:
    records = [
        r
        for r in fx.records()
        if r.kind == "pgbench_run" and r.params["clients"] == 2 and r.params["mode"] == "read-write"
    ]
    md_path, _ = report.write(fx.study(), records, tmp_path)
    md = md_path.read_text(encoding="utf-8")
    assert (
        "- ⚠ read-write, 2 clients: tps varied 2,630–4,086 per second (CV 18%) over 4 s in run 2 "
        "of 3 and the 3 repeats ranged 40.8% (2,428–3,582, more than 5%): treat differences "
        "smaller than that range as noise; raise the duration (30 s or more) or repeat; see TPS "
        "over time.\n"
    ) in md


def test_failed_and_skipped_runs_are_rows_with_reasons(written: Written) -> None:
    tput = _table_after(written.md, "**Throughput per client count")
    row = _cells(tput[-1])
    assert row[0] == "64"
    assert row[1] == "skipped: 64 clients exceed max_connections=50 \\| raise it in the profile"
    assert row[4].startswith("failed: pgbench exited with code 2")
    lat = _table_after(written.md, "**Transaction latency")
    assert any(_cells(r)[:2] == ["read-write", "64"] and "failed:" in r for r in lat)
    runs = _table_after(written.md, "## All runs")
    statuses = [_cells(r)[2] for r in runs[2:]]
    assert statuses.count("failed") == 1 and statuses.count("skipped") == 1


def test_records_round_tripped_through_json_render_the_same(written: Written, tmp_path: Path):
    """The store hands the report records rebuilt from JSON (lists, not tuples)."""
    stored = [from_dict(RunRecord, json.loads(json.dumps(to_dict(r)))) for r in fx.records()]
    md_path, _ = report.write(fx.study(), stored, tmp_path, stem=f"report-{fx.STUDY_ID}")
    assert md_path.read_text(encoding="utf-8") == written.md


def test_whole_tool_missing_shows_skipped_rows_and_no_plots(tmp_path: Path) -> None:
    skipped = [
        dataclasses.replace(
            r,
            status="skipped",
            result=None,
            reason="fio not installed: apt-get install fio",
        )
        if r.kind == "fio"
        else r
        for r in fx.records()
        if r.kind in ("fio", "pg_test_fsync")
    ]
    study = fx.study(environment=None)
    md_path, html_path = report.write(study, skipped, tmp_path)
    md = md_path.read_text(encoding="utf-8")
    fio = _table_after(md, "## Storage IOPS and throughput")
    assert len(fio) == 6
    for row in fio[2:]:
        assert _cells(row)[1] == "skipped: fio not installed: apt-get install fio"
    assert "The environment was not captured." in md
    # No pgbench workload and no pg_test_timing ran: no section of either, not even empty.
    assert "TPC-B" not in md and "## Clock timing overhead" not in md
    assert "Not run in this study" not in md
    assert not (tmp_path / f"report-{fx.STUDY_ID}_files").exists()
    page = html_path.read_text(encoding="utf-8")
    assert "<svg" not in page
    assert '<tr class="skipped"><td>8k random read</td><td colspan="7">skipped: fio' in page


def test_study_without_records(tmp_path: Path) -> None:
    md_path, html_path = report.write(fx.study(status="failed", finished_at=None), [], tmp_path)
    md = md_path.read_text(encoding="utf-8")
    assert "- **Runs:** none recorded" in md
    assert "- **Finished:** not finished" in md
    assert "<table" in html_path.read_text(encoding="utf-8")  # the environment


# --------------------------------------------------------------------------
# HTML


def test_html_is_self_contained(written: Written) -> None:
    page = written.html
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert not re.search(r"\b(src|href)=\"(?!#)", page)
    assert page.count("<svg") == 4
    assert "<style>" in page and "table.data" in page


def test_html_is_deterministic(written: Written, tmp_path: Path) -> None:
    _, html_path = report.write(fx.study(), fx.records(), tmp_path)
    assert html_path.read_text(encoding="utf-8") == written.html


def test_html_svg_ids_do_not_collide(written: Written) -> None:
    ids = re.findall(r'\bid="([^"]+)"', written.html)
    assert len(ids) == len(set(ids))


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
def test_html_renders_in_chromium(written: Written, tmp_path: Path) -> None:
    url = written.html_path.as_uri()
    dom = _chromium(["--dump-dom", url], tmp_path / "profile").stdout
    assert dom.count("<table") == written.html.count("<table") >= 8
    for text in ("fdatasync 8K", "8k random write", "8k sequential read", "select-only tps"):
        assert text in dom
    assert dom.count("<svg") == 4
    # Plot titles are real SVG text (svgplot writes <text>), so the browser has them.
    titles = ("TPS vs clients", "TPS over time, select-only", "Latency percentiles vs clients")
    for title in titles:
        assert f">{title}</text>" in dom
    shot = tmp_path / "report.png"
    _chromium(["--window-size=1200,5000", f"--screenshot={shot}", url], tmp_path / "profile")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a blank page is a few kB


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
def test_the_markdowns_svg_files_show_as_images_in_chromium(written: Written) -> None:
    """GitHub shows a Markdown image through an ``<img>``, which draws an SVG file
    only if it is a standalone document (its namespace): an ``<img>`` of each file
    in a page beside the Markdown loads at the figure's size, none fails."""
    images = "".join(
        f'<img src="{link}" onload="this.dataset.shown = this.naturalWidth" '
        "onerror=\"this.dataset.shown = 'error'\">"
        for _, link in _links(written.md)
    )
    page = written.md_path.parent / "images.html"
    page.write_text(f"<!doctype html><body>{images}</body>", encoding="utf-8")
    dom = _chromium(["--dump-dom", page.as_uri()], written.md_path.parent / "profile").stdout
    shown = re.findall(r'data-shown="([^"]*)"', dom)
    assert shown == [str(svgplot.WIDTH)] * 4, dom[-2000:]


# --------------------------------------------------------------------------
# Pure pieces


@pytest.mark.parametrize(
    ("value", "text"),
    [(957, "957"), (1234, "1.23k"), (91_900, "91.9k"), (131_234, "131k"), (1_500_000, "1.50M")],
)
def test_si_like_fio(value: float, text: str) -> None:
    assert fmt.si(value) == text


def test_spread_and_noise_threshold() -> None:
    quiet = fmt.spread([100.0, 104.0, 102.0])
    assert quiet.median == 102.0 and not quiet.noisy
    # [min, max] of 3 runs holds the median with probability 1 - 2 x 0.5^3 = 75%
    assert fmt.with_spread(quiet) == "102 (n=3, 75% CI 100–104)"
    assert quiet.describe() == "n=3, 75% CI 100–104"
    assert fmt.with_spread(quiet, unit="tps") == "102 tps (n=3, 75% CI 100–104)"
    two = fmt.spread([100.0, 104.0])
    assert fmt.with_spread(two) == "102 (n=2, range 100–104)"
    noisy = fmt.spread([100.0, 106.0, 103.0])
    assert noisy.noisy and fmt.with_spread(noisy).endswith(" ⚠")
    assert fmt.with_spread(fmt.spread([42.0])) == "42.0"
    with pytest.raises(ValueError):
        fmt.spread([])


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("pg_test_fsync", "pg_test_fsync"),
        ("a | b", "a \\| b"),
        ("count(*)", "count(\\*)"),
        ("<builtin: select only>", "\\<builtin: select only>"),
        ("/proc/<pid>/io, p < 0.05 & n > 2", "/proc/\\<pid>/io, p < 0.05 & n > 2"),
        ("run `pgrig audit -v` first", "run `pgrig audit -v` first"),
        ("clients=[1,2,4]", "clients=[1,2,4]"),
        ("[a](b)", "\\[a](b)"),
        ("&amp; stays text", "\\&amp; stays text"),
        ("\\set aid", "\\set aid"),
        ("C:\\*", "C:\\\\\\*"),
        ("_private_", "\\_private\\_"),
        ("two\nlines", "two lines"),
    ],
)
def test_markdown_escape(text: str, escaped: str) -> None:
    assert markdown.escape(text) == escaped


def test_view_keeps_every_record() -> None:
    """Every record appears in the All runs table, whatever its kind or status."""
    records = fx.records()
    built = view.build(fx.study(), records)
    runs = next(s for s in built.sections if s.anchor == "runs")
    table = runs.blocks[0]
    assert isinstance(table, Table)
    assert [row.cells[0] for row in table.rows] == [r.key for r in records]


# --------------------------------------------------------------------------
# With the real tools and pgrig's own parsers

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _record(key: str, kind: str, params: dict[str, object], result: object) -> RunRecord:
    return RunRecord(
        study=fx.STUDY_ID,
        key=key,
        kind=kind,
        target=fx.TARGET,
        params=params,
        status="ok",
        started_at="2026-11-22T04:15:00+00:00",
        finished_at="2026-11-22T04:15:05+00:00",
        result=to_dict(result),
    )


@pytest.mark.skipif(not (PG_BIN / "pg_test_timing").exists(), reason="needs PostgreSQL 15 binaries")
def test_report_from_live_timing_and_parsed_captures(tmp_path: Path) -> None:
    """pg_test_timing runs now; fsync and pgbench text captured here go through pgrig's parsers."""
    from pgrig.tools import pg_test_fsync, pg_test_timing, pgbench

    timing, _ = pg_test_timing.run(PG_BIN, duration_s=1)
    fsync = pg_test_fsync.parse((DATA / "captured" / "fsync.txt").read_text())
    run = pgbench.parse_run((DATA / "captured" / "run_read-write_c4_r0.txt").read_text())
    records = [
        _record("probe/pg_test_timing", "pg_test_timing", {}, timing),
        _record("probe/pg_test_fsync", "pg_test_fsync", {}, fsync),
        _record("tpcb/run", "pgbench_run", {"mode": "read-write", "clients": 4}, run),
    ]
    md_path, html_path = report.write(fx.study(), records, tmp_path)
    md = md_path.read_text(encoding="utf-8")
    assert f"Per loop time including overhead: {timing.per_loop_ns:.2f} ns" in md
    fsync_table = _table_after(md, "## WAL sync methods")
    assert _cells(fsync_table[2])[:3] == [
        "**fdatasync 8K**",
        "**fdatasync (one 8kB write)**",
        "**9,255.519**",
    ]
    tput = _table_after(md, "**Throughput per client count")
    assert _cells(tput[2]) == ["4", "4,059", "CV 28.5%, 2,406–5,259 ⚠", "20,297"]
    page = html_path.read_text(encoding="utf-8")
    # One client count: TPS over time is drawn, no "vs clients" curve of one point.
    assert page.count("<svg") == 1 and "TPS over time, read-write" in page
    assert "vs clients" not in page


def test_repeated_fsync_shows_medians_ranges_and_flags_noise(tmp_path: Path) -> None:
    """Three pg_test_fsync runs (the captured one scaled by 0.9, 1 and 1.1): every
    row is the median with the range beside it; orderings physics forbids are flagged."""
    runs = []
    for rep, factor in ((1, 0.9), (2, 1.0), (3, 1.1)):
        rows = tuple(
            dataclasses.replace(r, ops_per_sec=r.ops_per_sec * factor if r.ops_per_sec else None)
            for r in fx.FSYNC.rows
        )
        res = dataclasses.replace(fx.FSYNC, rows=rows)
        rec = _record(f"local/probe/pg_test_fsync/r{rep}", "pg_test_fsync", {"repeat": rep}, res)
        runs.append(rec)
    md_path, _ = report.write(fx.study(), runs, tmp_path)
    md = md_path.read_text(encoding="utf-8")
    summary = _table_after(md, "## Performance Summary")
    assert _cells(summary[2]) == [
        "fdatasync 8K",
        "9,256 ops/s (108 us/op; n=3, 75% CI 8,330–10,181); ⚠ noisy, see pg_test_fsync",
    ]
    table = _table_after(md, "## WAL sync methods")
    assert _cells(table[0])[-1] == "ops/s over the runs"
    assert [
        "one 8kB write",
        "fdatasync",
        "9,255.519",
        "108",
        "n=3, 75% CI 8,330–10,181",
    ] in (map(_cells, table))
    assert "**Target: /tmp/rcap (ext4 on vda); 1 s per test; median of 3 runs**" in md
    assert "- ⚠ noise, not findings: 2 ordering(s) contradict what the tests do - " in md
    assert "fsync (two 8kB writes) ran 8% faster than fdatasync (two 8kB writes)" in md


def test_settings_that_change_the_meaning_sit_beside_the_numbers(tmp_path: Path) -> None:
    """The oltp profile's synchronous_commit = off is said next to read-write tps,
    in the summary and the throughput table, in Markdown and HTML alike."""
    pg = dataclasses.replace(
        fx.ENVIRONMENT.postgres,
        settings={**fx.ENVIRONMENT.postgres.settings, "synchronous_commit": "off"},
    )
    env = dataclasses.replace(fx.ENVIRONMENT, postgres=pg)
    study = fx.study(environment=env, params={**fx.study().params, "profile": "oltp"})
    md_path, html_path = report.write(study, fx.records(), tmp_path)
    md = md_path.read_text(encoding="utf-8")
    summary = _table_after(md, "## Performance Summary")
    line = (
        "profile oltp: synchronous_commit=off, fsync=on, full_page_writes=on, shared_buffers=256MB"
    )
    assert ["PostgreSQL settings", line] in map(_cells, summary)
    rw = next(_cells(r) for r in summary if "read-write" in r)
    assert rw[1].endswith("; qps: 20,297; p95 1.755 / p99 4.470 ms; with synchronous_commit=off")
    select = next(_cells(r) for r in summary if "select-only" in r)
    assert "synchronous_commit" not in select[1], "reads do not commit anything"
    assert "- synchronous_commit=off: commits return before their WAL is flushed" in md
    assert "- read-write: synchronous_commit=off: commits return before" in md
    page = html_path.read_text(encoding="utf-8")
    assert f'<td>PostgreSQL settings</td><td class="num">{line}</td>' in page


def _monitored_study(runs: int) -> list[RunRecord]:
    """``runs`` measured runs, each with the monitor's record captured from a
    real run (tests/data/monitor): the shape of a quick study with repeats."""
    data = json.loads((Path(__file__).parent / "data/monitor/result_storage_read.json").read_text())
    run = from_dict(PgbenchRun, data["run"])
    out = []
    for i in range(1, runs + 1):
        clients, repeat = 2 ** (i % 4), 1 + i // 4
        key = f"local/tpcb/s10/select-only/c{clients}/d10/r{repeat}"
        params = {"workload": "tpcb", "mode": "select-only", "scale": 10, "clients": clients,
                  "duration_s": 10, "repeat": repeat}  # fmt: skip
        rec = _record(key, "pgbench_run", params, run)
        out += [rec, dataclasses.replace(rec, key=f"{key}/monitor", kind="monitor",
                                         result=data["monitor"])]  # fmt: skip
    return out


def test_per_run_monitor_evidence_is_folded(tmp_path: Path) -> None:
    """Each run's monitor table and plots sit behind one <details> line."""
    md_path, html_path = report.write(fx.study(), _monitored_study(6), tmp_path)
    page = html_path.read_text(encoding="utf-8")
    assert page.count('<details class="fold">') == 6
    monitor = page[page.index('id="monitor"') :]
    outside = re.sub(r'<details class="fold">.*?</details>', "", monitor, flags=re.DOTALL)
    assert "<svg" not in outside, "no monitor plot is left unfolded"
    assert monitor.count("<svg") == 6 * 4
    md = md_path.read_text(encoding="utf-8")
    assert md.count("<details><summary>local/tpcb/s10/select-only/") == 6
    assert "- **Runs:** 6 (6 ok); host and server monitored during 6 of them" in md
    assert not list(tmp_path.glob("*_files/monitor_*.svg")), "folded plots: HTML only"
    assert md.count("*Plots in the HTML report: TPS and checkpoints, ") == 6


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
def test_html_page_of_many_monitored_runs_stays_short(tmp_path: Path) -> None:
    """24 monitored runs (the quick study's 8 points x 3 repeats): the page, as
    Chromium lays it out 1200 px wide, is a few screens tall (7,300 px here), not 50,000."""
    _, html_path = report.write(fx.study(), _monitored_study(24), tmp_path)
    probe = tmp_path / "height.html"
    script = "<script>document.title = 'H=' + document.documentElement.scrollHeight</script>"
    probe.write_text(html_path.read_text(encoding="utf-8").replace("</body>", script + "</body>"))
    dom = _chromium(["--window-size=1200,900", "--dump-dom", probe.as_uri()], tmp_path / "p").stdout
    height = int(re.search(r"<title>H=(\d+)</title>", dom).group(1))  # type: ignore[union-attr]
    assert 3000 < height < 10_000, height  # 49,985 px before the runs were folded


def test_tool_names_are_not_doubled() -> None:
    """`pgbench --version` prints 'pgbench (PostgreSQL) 15.18': the name is not repeated."""
    tools = {
        "fio": "fio-3.33",
        "pgbench": "pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)",
        "psql": "psql (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)",
        "python": "3.11.7",
    }
    assert view.tools_text(tools) == (
        "fio 3.33, pgbench/psql (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1), python 3.11.7"
    )


def _disturb(monitor: dict[str, object], hog: str, cpu: float) -> dict[str, object]:
    """The stored monitor record of a run, as the monitor writes it when ``hog``
    took ``cpu``% of the machine (the attribution itself is tested against a
    real hog in test_monitor_interference)."""
    top = (OtherProcess(hog, 1, cpu), OtherProcess("backup", 2, 5.0))
    reason = f"other processes took {cpu + 5:.0f}% of the machine's CPU on average: {hog}"
    mon = from_dict(MonitorResult, monitor)
    return to_dict(
        dataclasses.replace(
            mon,
            others=OtherLoad(cpu + 5, cpu + 10, 0.0, top),
            disturbed=Disturbance((reason,), cpu + 5, None, top, 10.0, 0.2),
            baseline=IdleBaseline(3.0, 2, cpu + 6, cpu + 5, cpu + 8, 0.0, 0.0, top=top),
            noise=Noise(10, 9_000.0, 0.3, 3_000.0, 14_000.0),
        )
    )


def test_disturbed_runs_are_said_above_the_summary_table(tmp_path: Path) -> None:
    """Other work during the runs is the first thing the report says - before the
    headline numbers - and each headline point disturbed says so in its row; the
    monitor's warnings stay one sentence each, however many runs there were."""
    records = _monitored_study(24)
    for i, rec in enumerate(records):
        if rec.kind == "monitor":  # every other record: 40% to 63% for the hog
            records[i] = dataclasses.replace(
                rec, result=_disturb(rec.result or {}, "cpuhog", 40 + i // 2)
            )
    md_path, html_path = report.write(fx.study(), records, tmp_path)
    md = md_path.read_text(encoding="utf-8")
    summary = md[md.index("## Performance Summary") : md.index("## Environment")]
    said = summary.index("⚠ 24 of 24 measured runs shared the machine with other work")
    assert said < summary.index("| Test Case |")
    assert "other processes took 45–68% of the CPU (cpuhog 52%, backup 5%)" in summary
    assert "⚠ Before the study the idle machine was 46% busy" in summary
    (row,) = [_cells(r) for r in _table_after(md, "## Performance Summary") if "TPC-B" in r]
    assert row[1].endswith("; ⚠ 24 of 24 runs disturbed by other work")
    tput = _table_after(md, "**Throughput per client count")
    assert all("disturbed" in _cells(r)[1] for r in tput[2:]), tput
    monitor = md[md.index("## Bottlenecks") :]
    warnings = [ln for ln in monitor.splitlines() if ln.startswith("Warning:")]
    assert len(warnings) == 3 and all(len(w) < 600 for w in warnings), warnings
    assert "24 of 24 runs were noisy (per-second tps CV 30%)" in warnings[2]
    page = html_path.read_text(encoding="utf-8")
    top = page[page.index('id="summary"') : page.index('id="environment"')]
    assert top.index("measured runs shared the machine") < top.index("<table")


def test_a_quiet_study_says_nothing_about_other_work(tmp_path: Path) -> None:
    md_path, _ = report.write(fx.study(), _monitored_study(6), tmp_path)
    md = md_path.read_text(encoding="utf-8")
    assert "shared the machine" not in md and "disturbed" not in md
    assert "idle machine was" not in md


def test_fio_figures_carry_the_spread_of_fios_own_samples(written: Written) -> None:
    """fio runs once per pattern; its IOPS samples (every 500 ms) give each figure
    a spread, flagged like a noisy pgbench run from a CV of 10%."""
    summary = dict(map(_cells, _table_after(written.md, "## Performance Summary")[2:]))
    assert summary["8k random read"] == (
        "IOPS=46.5k (46,520; 3 samples: CV 4.1%, 44.5k–48.2k), BW=363 MiB/s"
    )
    assert summary["8k random write"].startswith("IOPS=78.0k (78,000; 3 samples: CV 27.4%, ")
    assert "63.4k–104k ⚠)" in summary["8k random write"]
    table = _table_after(written.md, "## Storage IOPS and throughput")
    assert _cells(table[0])[-1] == "IOPS over the run"
    assert "- IOPS over the run: fio's own IOPS samples (one per 500 ms)" in written.md


def test_the_cpu_plot_is_stacked_bands_only() -> None:
    """Nothing but the stacked consumers is drawn on the CPU plot: a line of
    another unit (the hit ratio, once) hid the 'other processes' band."""
    data = json.loads((Path(__file__).parent / "data/monitor/result_storage_read.json").read_text())
    mon = from_dict(MonitorResult, _disturb(data["monitor"], "cpuhog", 40.0))
    fig = monitor_report.cpu_figure("x", "x", Columns(mon.samples))
    labels = [s.label for s in fig.series]
    assert "hit" not in " ".join(labels).lower()
    assert all(s.dash == 0 for s in fig.series)
    for lower, upper in itertools.pairwise(s.y for s in fig.series):
        assert all(a <= b + 1e-9 for a, b in zip(lower, upper, strict=True)), "stacked"


def test_tps_caption_claims_bars_only_when_there_are_repeats() -> None:
    """One run per client count (the default before the quick study repeated):
    no bars drawn, and the caption says so instead of 'min to max of the repeats'."""
    from pgrig.report import points
    from pgrig.workloads import pgbench_report as pgbench

    once = points.points([r for r in fx.records() if r.params.get("repeat", 0) == 0])
    fig = pgbench.tps_vs_clients(once)
    assert "no error bars" in fig.caption and "min to max" not in fig.caption
    assert all(s.y_low == s.y_high for s in fig.series)
    repeated = pgbench.tps_vs_clients(points.points(fx.records()))
    assert "bars span min to max of the runs" in repeated.caption


def test_verdict_table_keeps_one_line_of_evidence_per_run(tmp_path: Path) -> None:
    """The verdict table holds the verdict, other load and noise; what else was
    seen (and the probes' limits) moves into the run's fold, which halved the
    real quick study's Bottlenecks section in Chromium (9,511 -> 4,521 px)."""
    md_path, _ = report.write(fx.study(), _monitored_study(2), tmp_path)
    md = md_path.read_text(encoding="utf-8")
    table = _table_after(md, "## Bottlenecks")
    header = ["Run", "Verdict (primary cause: evidence)", "Other load", "Per-second tps"]
    assert _cells(table[0]) == header
    assert all("CPU-bound in the server" not in row for row in table), "secondary: in the fold"
    fold = md[md.index("<details><summary>local/tpcb/") :]
    assert fold.index("- Also seen: CPU-bound in the server: CPUs 100% busy") < fold.index(
        "</details>"
    )


def test_the_quick_studys_repeats_say_what_they_can_tell(written: Written) -> None:
    """Issue 30.4: the minimum detectable difference of the quick study's 3 repeats
    is printed, with the repeats a 5% change would need."""
    found = re.search(
        r"What 3 repeats can tell: .* a tps change smaller than (\d+)% .* not be decided .*"
        r"a 5% change would need (\d+)(?:–(\d+))? repeats a point",
        written.md,
    )
    assert found is not None
    assert int(found.group(1)) > 5 and int(found.group(2)) > 3
