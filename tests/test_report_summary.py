"""The ticket-sized summary (``report-*.summary.md``, issue 30): under 60,000
characters for a study the size of seed 004's (296 records), with the exact
command lines, and no HTML entity in it or in the full Markdown.

Building a 296-run study takes an hour here, so its records are synthesised
from real ones: tiny_cloud.json's pgbench runs (captured pgbench output parsed
by pgrig, see test_report_golden) copied over seed 004's axes - two targets,
six scales, six client counts, two modes, two repeats - each with the command
line run_argv would have given it. The layout is what is tested, not the numbers."""

from __future__ import annotations

import dataclasses
import re

from pgrig.report import html, markdown
from pgrig.report import summary as summary_md
from pgrig.report.commands import command_lines
from pgrig.report.view import build
from pgrig.results import RunRecord
from test_report_golden import tiny_cloud

SCALES = (1, 10, 50, 100, 200, 500)
CLIENTS = (1, 2, 4, 8, 16, 32)


def seed004_sized() -> tuple[object, list[RunRecord]]:
    study, records = tiny_cloud()
    kept = [r for r in records if r.kind not in ("pgbench_run", "monitor")]
    runs = [r for r in records if r.kind == "pgbench_run" and r.result]
    out = list(kept)
    for target in ("local", "essd-pl1"):
        model = next(r for r in runs if r.target == target)
        for scale in SCALES:
            for mode in ("select-only", "read-write"):
                for clients in CLIENTS:
                    for repeat in (1, 2):
                        key = f"{target}/tpcb/s{scale}/{mode}/c{clients}/d3/r{repeat}"
                        argv = [
                            "/usr/lib/postgresql/15/bin/pgbench",
                            *(["-n"] if mode == "select-only" else []),
                            *["-M", "prepared", "-c"],
                            *(str(clients), "-j", str(clients)),
                            *["-T", "3", "-P", "1", "-b"],
                            *(mode, "-l"),
                            f"--log-prefix=/var/tmp/pgrig-work/{target}/pgrig_txlog_{repeat:08x}",
                            f"host=/tmp/pgrig-sock-{target} port=5432 user=postgres dbname=pgrig",
                        ]
                        params = {**model.params, "scale": scale, "mode": mode}
                        params.update(clients=clients, threads=clients, repeat=repeat)
                        assert model.result is not None
                        result = {**model.result, "scale": scale, "mode": mode}
                        result.update(clients=clients, argv=argv)
                        run = dataclasses.replace(model, key=key, params=params, result=result)
                        out.append(run)
    # seed 004 had 296: one point repeated a third time
    last = out[-1]
    params = {**last.params, "repeat": 3}
    out.append(dataclasses.replace(last, key=last.key[:-1] + "3", params=params))
    return study, out


def test_a_seed004_sized_studys_summary_fits_a_github_comment() -> None:
    """What ``writer.write`` writes, without drawing the plots (PNG and SVG took
    most of the 28 s this test took through the writer)."""
    study, records = seed004_sized()
    assert len(records) == 296
    view = build(study, records)  # type: ignore[arg-type]
    full = markdown.render(view, {})
    summary = summary_md.render(view, {}, "big.md", command_lines(records))
    assert len(full) > 65_536  # the full report is too long for a comment: a real cut
    assert len(summary) < 60_000
    assert summary.startswith("# pgrig report: tiny-cloud\n")
    assert "## Conclusions" in summary and "## Performance Summary" in summary
    # The exact command lines, as many as fit, and where the rest are.
    assert "## Commands run" in summary
    assert re.search(r"\n/usr/lib/postgresql/15/bin/pgbench( -n)? -M prepared -c \d+ -j", summary)
    assert re.search(r"\d+ more command lines are in big\.md \(All runs\)", summary)
    for text in (summary, full):
        assert not re.search(r"&(#x?[0-9a-fA-F]+|[a-z]+);", text)
    assert "&#x27;" not in html.render(view, {}, css="")


def test_summary_text_and_cells_keep_identifiers_whole() -> None:
    """A <summary> is HTML: quotes stay as typed; only a "<" that opens a tag is
    escaped. A cell's long path may break after "/", an identifier never."""
    assert markdown.summary_text("'-' where a version lacks it") == "'-' where a version lacks it"
    assert markdown.summary_text("/proc/<pid>/io") == "/proc/&lt;pid>/io"
    assert html.cell_text("pgbench_run") == "pgbench_run"
    long = "/var/lib/postgresql/15/main/pg_wal/archive_status"
    assert html.cell_text(long).count("<wbr>") == long.count("/")
    assert "pg_<wbr>" not in html.cell_text(long)
    assert html.cell_text("-c fast --progress") == '-c fast <span class="nobr">--progress</span>'
    assert html.cell_text("-86.3%") == "-86.3%"
