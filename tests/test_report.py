"""The report: Markdown + self-contained HTML drawn from stored records.

Records come from tests/data/report/records.py (values from real runs on this
machine, see its docstring). The HTML is also loaded in headless Chromium, the
way a reader opens it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from pgrig.registry import typed_result
from pgrig.report import fmt, markdown, view
from pgrig.report import writer as report
from pgrig.report.model import Table
from pgrig.results import FioResult, RunRecord, from_dict, to_dict

DATA = Path(__file__).parent / "data" / "report"
GOLDEN_MD = DATA / "golden_report.md"
CHROMIUM = Path("/usr/bin/chromium")
SECTIONS = (
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


def test_markdown_links_png_plots_next_to_it(written: Written) -> None:
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", written.md)
    assert len(links) == 4
    for link in links:
        assert not link.startswith("/") and "://" not in link
        png = written.md_path.parent / link
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"report-{fx.STUDY_ID}_files/tps_vs_clients.png" in links


def test_custom_stem(tmp_path: Path) -> None:
    md_path, html_path = report.write(fx.study(), fx.records(), tmp_path / "new", stem="nightly")
    assert md_path == tmp_path / "new" / "nightly.md" and md_path.exists()
    assert html_path == tmp_path / "new" / "nightly.html" and html_path.exists()
    assert (tmp_path / "new" / "nightly_files" / "tps_over_time_read_write.png").exists()


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
    assert "fio fio-3.33" in line and "pgbench 15.18" in line
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
    assert _cells(table[2]) == ["fdatasync 8K", "9,256 ops/s (108 us/op)"]
    assert _cells(table[3]) == ["8k random write", "IOPS=78.0k (78,000), BW=609 MiB/s"]
    assert ["TPC-B read-write, 4 clients", "tps: 4,059; qps: 20,297"] in map(_cells, table)


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
    assert row[4:] == [f"{read.clat_p50_us:.0f}", f"{read.clat_p99_us:.0f}", "4,080"]
    after = written.md[written.md.index("## Storage IOPS") :]
    assert "- Job parameters: bs=8k, ioengine=libaio, direct=1, numjobs=1, iodepth=16" in after


def test_tpcb_tables_with_units(written: Written) -> None:
    load = _table_after(written.md, "## TPC-B (pgbench)")
    assert ["TPC-B load, scale 5 (500,000 rows)", "1.08 s (462,963 rows/s)"] in map(_cells, load)
    assert ["count(\\*), index-only scan", "47.890 ms (500,000 rows)"] in map(_cells, load)
    assert ["count(\\*), seq scan", "46.600 ms (500,000 rows)"] in map(_cells, load)

    tput = _table_after(written.md, "**Throughput per client count")
    assert _cells(tput[0]) == [
        "Clients",
        "select-only tps",
        "select-only qps",
        "read-write tps",
        "read-write qps",
    ]
    assert _cells(tput[2])[:3] == ["1", "30,238", "30,238"]

    lat = _table_after(written.md, "**Transaction latency")
    assert _cells(lat[0]) == [
        "Mode",
        "Clients",
        "avg (ms)",
        "p50 (ms)",
        "p95 (ms)",
        "p99 (ms)",
        "max (ms)",
    ]
    assert _cells(lat[8]) == ["read-write", "4", "0.978", "0.835", "1.755", "4.470", "15.119"]

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
    cell = _cells(tput[3])[3]
    assert cell.startswith(f"{tps[1]:,.0f} ({tps[0]:,.0f}–{tps[2]:,.0f}, range ")
    assert cell.endswith("⚠")
    assert "⚠ read-write, 2 clients: tps varied by 40.8% across 3 repeats" in written.md


def test_failed_and_skipped_runs_are_rows_with_reasons(written: Written) -> None:
    tput = _table_after(written.md, "**Throughput per client count")
    row = _cells(tput[-1])
    assert row[0] == "64"
    assert row[1] == "skipped: 64 clients exceed max_connections=50 \\| raise it in the profile"
    assert row[3].startswith("failed: pgbench exited with code 2")
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
    assert "## TPC-B (pgbench)\n\nNot run in this study." in md
    assert not (tmp_path / f"report-{fx.STUDY_ID}_files").exists()
    page = html_path.read_text(encoding="utf-8")
    assert "<svg" not in page
    assert '<tr class="skipped"><td>8k random read</td><td colspan="6">skipped: fio' in page


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
    # Plot titles are real SVG text (svg.fonttype none), so the browser has them.
    titles = ("TPS vs clients", "TPS over time, select-only", "Latency percentiles vs clients")
    for title in titles:
        assert f">{title}</text>" in dom
    shot = tmp_path / "report.png"
    _chromium(["--window-size=1200,5000", f"--screenshot={shot}", url], tmp_path / "profile")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a blank page is a few kB


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
    assert fmt.with_spread(quiet) == "102 (100–104, range 3.9%)"
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
        ("<builtin: select only>", "&lt;builtin: select only&gt;"),
        ("\\set aid", "\\\\set aid"),
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
    assert _cells(tput[2]) == ["4", "4,059", "20,297"]
    assert html_path.read_text(encoding="utf-8").count("<svg") >= 2
