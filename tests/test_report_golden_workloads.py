"""Golden first screens of the workloads besides pgbench's built-in TPC-B (issue
42, "Done when"): a TPC-C three-target setting study, a custom-script two-target
study and a pg_basebackup two-target study, in Markdown and as headless Chromium
lays the HTML out at 1,400 x 900 px.

The records are real and stored (tests/data/report/*_study.json.gz, raw outputs
dropped): tiny campaigns run with pgrig on the dev VM on 2026-11-29 while other
engineers loaded it (every run says so) - TPC-C 1 warehouse, 2 connections, 3 s x
2 on stock servers with synchronous_commit on / off / wal_compression = pglz;
seed 001's login script at 2 clients, 2 s x 3, synchronous_commit on / off;
pg_basebackup of TPC-B scale 2 x 3 on two directories, full_page_writes on / off.
The first screen here is the answer, the conclusions and the comparison of the
targets (where the p95/p99 rows and the settings are)."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pgrig.document.model import Figure, ReportView, Table
from pgrig.report import markdown, view
from test_report_answer import DATA, HEIGHT, laid_out, stored
from test_report_golden import CHROMIUM, WIDTH, _chromium

STUDIES = ("tpcc_settings", "custom_login", "backup_two")
TARGETS = {
    "tpcc_settings": ("sync-on", "sync-off", "walcomp-on"),
    "custom_login": ("sync-on", "sync-off"),
    "backup_two": ("disk-a", "disk-b"),
}


def first_screen(name: str) -> ReportView:
    full = view.build(*stored(name))
    lead = []
    for s in full.sections:
        lead.append(s)
        if s.anchor not in ("answer", "conclusions"):
            break  # the comparison of the targets closes the first screen
    return ReportView(full.title, full.meta, tuple(lead))


def figures_of(v: ReportView) -> list[Figure]:
    return [b for s in v.sections for b in s.blocks if isinstance(b, Figure)]


def comparison(v: ReportView) -> Table:
    return next(b for s in v.sections for b in s.blocks
                if isinstance(b, Table) and b.caption == "Comparison of the targets")  # fmt: skip


@pytest.mark.parametrize("name", STUDIES)
def test_first_screen_markdown_matches_golden(name: str) -> None:
    """Set PGRIG_UPDATE_GOLDEN=1 to rewrite the golden files after an intended change."""
    v = first_screen(name)
    text = markdown.render(v, {f.name: f"{f.name}.svg" for f in figures_of(v)})
    golden = DATA / f"golden_first_{name}.md"
    if os.environ.get("PGRIG_UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", STUDIES)
def test_first_screen_names_every_target_with_its_median_and_interval(name: str) -> None:
    v = first_screen(name)
    table = comparison(v)
    for t in TARGETS[name]:
        assert any(t in str(c) for c in table.columns), (t, table.columns)
    headline = [r for r in table.rows if r.kind]
    assert headline, "no figure of the workload in the comparison"
    for row in headline:  # each target's median with its interval (n=3 or n=2: the range)
        for cell in (row.cells[1], *row.cells[2::2]):  # the baseline, then each other target
            assert re.search(r"\(n=\d, (75% CI|range) ", str(cell)), cell
    for figure in figures_of(v):  # each line named by its target
        assert all(any(t in s.label for t in TARGETS[name]) for s in figure.series), figure.title


def test_tpcc_first_screen_has_p99_why_and_flags() -> None:
    v = first_screen("tpcc_settings")
    table = comparison(v)
    latency = [r for r in table.rows if str(r.cells[0]).endswith("New-Order latency")]
    assert len(latency) == 2 and all("p99 " in str(c) for r in latency for c in r.cells[1:2])
    settings = next(r for r in table.rows if r.cells[0] == "PostgreSQL settings")
    assert settings.cells[5] == "differs: wal_compression=pglz"
    assert settings.cells[3] == "differs: synchronous_commit=off"
    for row in (r for r in table.rows if r.kind):  # the unsafe setting at its tpmC only
        assert str(row.cells[2]).endswith("⚠ synchronous_commit=off")
        assert "synchronous_commit" not in str(row.cells[1]) + str(row.cells[4])
    conclusions = next(s for s in v.sections if s.anchor == "conclusions")
    why = [p for p in conclusions.paragraphs if "the monitor's verdict" in p]
    assert why and "sync-on WAL / fsync bound" in why[0]
    (chart,) = figures_of(v)
    assert {s.label.split(",")[0] for s in chart.series} == set(TARGETS["tpcc_settings"])
    assert len({s.label for s in chart.series}) == len(chart.series) == 6  # 3 targets x 2 modes


def test_custom_first_screen_has_p99_and_the_flag() -> None:
    table = comparison(first_screen("custom_login"))
    (lat,) = [r for r in table.rows if str(r.cells[0]).endswith(": latency")]
    assert str(lat.cells[1]).startswith("p95 ") and "p99 " in str(lat.cells[2])
    (tps,) = [r for r in table.rows if r.kind and str(r.cells[0]).endswith("tps")]
    assert str(tps.cells[2]).endswith("⚠ synchronous_commit=off")


def test_backup_first_screen_flags_no_server_setting_at_a_copy() -> None:
    """full_page_writes = off does not change what a copy of the files measures:
    no flag at the MB/s; the settings row says what differs."""
    table = comparison(first_screen("backup_two"))
    (row,) = [r for r in table.rows if r.kind]
    assert "⚠ full_page_writes" not in str(row.cells[2])
    settings = next(r for r in table.rows if r.cells[0] == "PostgreSQL settings")
    assert settings.cells[3] == "differs: full_page_writes=off"


def test_the_unsafe_settings_note_says_each_targets_own_settings() -> None:
    """The ⚠ note under the comparison names the settings the targets' servers
    reported, target by target: not a fixed list (seed000-latency's report said
    "synchronous_commit=off, fsync=off" of two servers that had them on), and no
    note at all when every server's commits are durable."""
    study, records = stored("custom_login")
    note = [n for n in comparison(view.build(study, records)).notes if n.startswith("⚠")]
    assert note == [
        "⚠ synchronous_commit=off (sync-off): at every number it changes, numbers that do "
        "not wait for data to reach stable storage."
    ]
    # The same records with sync-off's server on, as seed000-latency's both were.
    env = study.target_environments["sync-off"]
    assert env.postgres is not None and env.postgres.settings["synchronous_commit"] == "off"
    durable = replace(env.postgres, settings={**env.postgres.settings, "synchronous_commit": "on"})
    on = replace(
        study,
        target_environments={
            **study.target_environments, "sync-off": replace(env, postgres=durable)
        },
    )  # fmt: skip
    built = view.build(on, records)
    assert not [n for n in comparison(built).notes if n.startswith("⚠")]
    text = markdown.render(built, {})
    assert "synchronous_commit=off" not in text and "fsync=off" not in text


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
@pytest.mark.parametrize("name", STUDIES)
def test_first_screen_in_chromium_opens_with_the_answer(name: str, tmp_path: Path) -> None:
    path, found = laid_out(first_screen(name), name, tmp_path)
    assert 0 <= int(found.group(1)) < HEIGHT / 2, "the answer is not on the first screen"
    assert int(found.group(3)) < HEIGHT, "the conclusions fell below the first screen"
    if os.environ.get("PGRIG_UPDATE_GOLDEN"):  # the screenshots docs/report.md shows
        shot = Path(__file__).parent.parent / "docs" / "img" / f"first-screen-{name}.png"
        _chromium([f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", path.as_uri()],
                  tmp_path / "p")  # fmt: skip


def test_a_tpcc_rate_sweep_gives_the_highest_tpmc_within_the_goal_on_the_first_screen() -> None:
    """tpcc-rates (stored, 2026-11-29): 2 targets, offered 20 and 80 tps, 2 x 2 s each,
    latency_target = "p99 <= 50 ms"."""
    full = view.build(*stored("tpcc_rates"))
    conclusions = next(s for s in full.sections if s.anchor == "conclusions")
    (within,) = [p for p in conclusions.paragraphs if p.startswith("Within p99 <= 50 ms")]
    for t in ("sync-on", "sync-off"):
        assert re.search(
            rf"{t} [\d,]+ tpmC at 2 connections, \d+ tps offered \(New-Order p99 ", within
        )
    cost = next(s for s in full.sections if s.anchor == "cost")
    (curve,) = [b for b in cost.blocks if isinstance(b, Figure) and "offered rate" in b.title]
    assert [s.label for s in curve.series] == ["sync-on", "sync-off", "the goal: p99 <= 50 ms"]
    assert curve.series[0].x == (20.0, 80.0)
