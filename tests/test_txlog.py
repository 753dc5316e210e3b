"""pgbench's per-transaction logs read as a stream into HdrHistograms
(pgrig.tools.pgbench.txlog), on logs captured from real pgbench runs."""

from __future__ import annotations

import math
import tracemalloc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pgrig.commands import tpcc as tpcc_cli
from pgrig.document import fmt
from pgrig.errors import ParseError
from pgrig.report.points import Point
from pgrig.results import LatencySummary, RunRecord, from_dict, to_dict
from pgrig.tools import pgbench
from pgrig.tools.pgbench import txlog
from pgrig.workloads import pgbench_report as tpcb_report
from pgrig.workloads.tpcc import driver
from pgrig.workloads.tpcc import report as tpcc_report
from pgrig.workloads.tpcc.model import TpccRun

DATA = Path(__file__).parent / "data"
CAPTURED = (
    # pgbench -n -c 4 -j 2 -T 2 -l at scale 1, read-write, fsync on: 0.26 to 56 ms
    ("pgbench_txlog_rw2s.5794.log", "pgbench_txlog_rw2s.5794.1.log"),
    ("pgbench_txlog_rw.7285.log", "pgbench_txlog_rw.7285.1.log"),
    ("pgbench_txlog_select.7261.log", "pgbench_txlog_select.7261.1.log"),
    ("pgbench_txlog_rate.7379.log",),  # -R with -L: two "skipped" lines
    ("tpcc_txlog.txt",),  # five scripts, TPC-C
)
PCTS = (0.1, 1, 10, 50, 90, 95, 99, 99.9, 100)


def nearest_rank(values: list[int], pct: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def at_rank(got_ms: float | None, values: list[int], pct: float) -> bool:
    """Whether a histogram's percentile stands for the exact nearest-rank sample:
    at or above it by less than 1/1024 of it (the widest HdrHistogram bucket at 3
    significant digits holds values from 1024 x its width up)."""
    exact = nearest_rank(values, pct)
    return got_ms is not None and exact <= round(got_ms * 1000) <= exact * (1 + 2**-10)


def samples(paths: list[Path], script: int | None = None) -> list[int]:
    """Every logged latency, the exact way: skipped and failed lines left out."""
    return [
        int(cols[2])
        for path in paths
        for cols in (line.split() for line in path.read_text().splitlines())
        if cols[2].isdigit() and (script is None or int(cols[3]) == script)
    ]


def first_epoch(path: Path) -> int:
    return int(path.read_text().split(maxsplit=5)[4])


@pytest.mark.parametrize("names", CAPTURED, ids=lambda names: names[0])
def test_percentiles_are_the_nearest_ranks_within_the_histograms_precision(
    names: tuple[str, ...],
) -> None:
    paths = [DATA / n for n in names]
    log = txlog.parse_logs(paths)
    for script, hist in log.latencies.items():
        exact = samples(paths, script)
        assert hist.samples == len(exact) and hist.max_us == max(exact)
        for pct, got in zip(PCTS, hist.percentiles_us(PCTS), strict=True):
            assert at_rank(got / 1000, exact, pct), (script, pct, got, nearest_rank(exact, pct))
    everything = samples(paths)
    summary = txlog.parse_transaction_logs(paths, 0.5)
    assert summary is not None
    assert (summary.samples, summary.sampling_rate, summary.digits) == (len(everything), 0.5, 3)
    assert summary.max_ms == max(everything) / 1000, "max is exact"
    for pct in (50, 90, 95, 99):
        assert at_rank(getattr(summary, f"p{pct}_ms"), everything, pct), pct


def test_the_bucket_is_what_differs_from_the_exact_rank() -> None:
    """The rw2s log reaches past 2,048 us, where buckets are wider than 1 us: the
    tolerance above is used (the test could not pass by exactness alone)."""
    paths = [DATA / n for n in CAPTURED[0]]
    exact = samples(paths)
    hist = txlog.parse_logs(paths).pooled()
    got = hist.percentiles_us(PCTS)
    assert any(g != nearest_rank(exact, p) for g, p in zip(got, PCTS, strict=True))
    assert all(g >= nearest_rank(exact, p) for g, p in zip(got, PCTS, strict=True))


def test_pooling_two_logs_equals_parsing_both() -> None:
    """Two hosts' logs pooled (histograms and per-second counts added) are the
    logs parsed as one - counted from one fractional origin and clock offset."""
    a, b = (DATA / n for n in CAPTURED[0])
    origin, offset = first_epoch(a) + 0.25, 0.6
    one = txlog.parse_logs([a, b], offset, origin)
    pooled = txlog.pool(
        [txlog.parse_logs([a], offset, origin), txlog.parse_logs([b], offset, origin)]
    )
    assert pooled.origin_s == one.origin_s == origin
    assert pooled.completed == one.completed
    assert sorted(pooled.latencies) == sorted(one.latencies)
    for script, hist in one.latencies.items():
        other = pooled.latencies[script]
        assert (other.samples, other.max_us) == (hist.samples, hist.max_us)
        assert np.array_equal(other.counts(), hist.counts())
        assert other.percentiles_us(PCTS) == hist.percentiles_us(PCTS)
    with pytest.raises(ValueError, match="origins"):
        txlog.pool([txlog.parse_logs([a]), txlog.parse_logs([b], origin_s=origin)])


def test_completions_are_counted_per_second_from_the_origin() -> None:
    """Each completion (epoch + us on the host's clock) falls in the second
    floor(time - offset - origin), as a float computation puts it."""
    paths = [DATA / n for n in CAPTURED[0]]
    origin, offset = first_epoch(paths[0]) + 0.75, -0.3
    log = txlog.parse_logs(paths, offset, origin)
    expected: dict[int, dict[int, int]] = {}
    for path in paths:
        for cols in (line.split() for line in path.read_text().splitlines()):
            if cols[2].isdigit():
                second = math.floor(int(cols[4]) + int(cols[5]) / 1e6 - offset - origin)
                per = expected.setdefault(int(cols[3]), {})
                per[second] = per.get(second, 0) + 1
    assert log.completed == expected
    assert sum(log.completed[0].values()) == log.samples


def test_completions_are_counted_in_an_array_and_a_clock_jump_is_refused(
    tmp_path: Path,
) -> None:
    """8 bytes a second of run, whatever the rate (a dict of Python ints took
    about 90); a line a month from the others would take one for every second
    between: refused, naming the file."""
    log = txlog.parse_logs([DATA / "tpcc_txlog.txt"])
    for seconds in log.completed.values():
        assert seconds.counts.dtype == np.int64
        assert len(seconds.counts) == max(seconds) - min(seconds) + 1 <= 11
    jumped = tmp_path / "txlog.2"
    text = (DATA / "tpcc_txlog.txt").read_text()
    jumped.write_text(text + "1 99 1524 1 1800000000 808860 0\n")
    with pytest.raises(ParseError, match=r"txlog\.2: lines 1-\d+: completions 4,675,354 s apart"):
        txlog.parse_logs([jumped])


def test_skipped_and_failed_lines_are_left_out(tmp_path: Path) -> None:
    rate = txlog.parse_logs([DATA / "pgbench_txlog_rate.7379.log"])
    assert rate.samples == 298 == len(samples([DATA / "pgbench_txlog_rate.7379.log"]))
    log = tmp_path / "txlog.1"
    failed = "3 99 failed 1 1795324650 1 0\n3 100 serialization 1 1795324650 2 0\n"
    log.write_text((DATA / "tpcc_txlog.txt").read_text() + failed)
    tpcc = txlog.parse_logs([log])
    assert sorted(tpcc.latencies) == [0, 1, 2, 3]
    assert tpcc.latencies[0].samples == 27
    assert tpcc.latencies[1].samples == 26  # the failed ones are no latency samples
    assert sum(tpcc.completed[1].values()) == 26


def test_bad_lines_raise_parse_error_naming_file_and_line(tmp_path: Path) -> None:
    good = (DATA / "pgbench_txlog_rw.7285.log").read_text()
    # The bad line past the first block read: lines are counted across blocks.
    repeats = 1 + txlog._BLOCK_CHARS // len(good)
    for bad in ("1795321839 100 2000", "0 1 5 x 1795321839 1", "0 1 5 0 epoch 1", "0 1 5 0"):
        path = tmp_path / "pgrig_txlog_a.1"
        path.write_text(good * repeats + bad + "\n" + good)
        lineno = 300 * repeats + 1
        with pytest.raises(ParseError, match="not a pgbench transaction log line") as caught:
            txlog.parse_logs([path])
        assert f"{path}:{lineno}: " in caught.value.message, caught.value.message
        assert caught.value.hint is not None and "aggregate" in caught.value.hint


def test_a_latency_past_an_hour_widens_the_histogram(tmp_path: Path) -> None:
    """Not dropped (HdrHistogram ignores a value past its range): the range
    doubles until it fits, and pooling with an hour-wide histogram works."""
    long = tmp_path / "long.1"
    long.write_text("0 1 9000000000 0 1795321839 1\n0 2 1500 0 1795321839 2\n")
    hist = txlog.parse_logs([long]).pooled()
    assert (hist.samples, hist.max_us) == (2, 9_000_000_000)
    assert hist.percentiles_us((50, 100)) == [1500, 9_000_000_000]
    both = hist + txlog.parse_logs([DATA / "pgbench_txlog_rw.7285.log"]).pooled()
    assert (both.samples, both.max_us) == (302, 9_000_000_000)


def _log(path: Path, lines: int) -> Path:
    """``lines`` lines of a captured log's shape: its rows again and again, all
    within its two seconds (more lines means a higher rate, not a longer run)."""
    template = [
        line.split() for name in CAPTURED[0] for line in (DATA / name).read_text().splitlines()
    ]
    with path.open("w") as fh:
        for i in range(lines):
            cols = template[i % len(template)]
            fh.write(f"{cols[0]} {i} {cols[2]} {cols[3]} {cols[4]} {cols[5]}\n")
    return path


def _peak(path: Path) -> int:
    tracemalloc.start()
    try:
        txlog.parse_logs([path]).pooled()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    """Ten times the lines take no more memory: the peak is one block of the
    file and the histograms, under 12 MiB (the list-and-sort parse that came
    before held ~70 bytes a line: 35 MiB for these 500,000)."""
    small = _peak(_log(tmp_path / "small.1", 50_000))
    large = _peak(_log(tmp_path / "large.1", 500_000))
    assert large <= small * 1.1 + 256 * 1024, (small, large)
    assert large < 12 * 2**20, large


def test_old_records_read_as_exact_and_new_ones_say_histogram() -> None:
    """Records made before histograms have neither p90 nor digits: they read
    back as exact nearest ranks, and the note under a table says so."""
    old = {"samples": 600, "sampling_rate": 1.0, "p50_ms": 0.9, "p95_ms": 1.2, "p99_ms": 1.6,
           "max_ms": 3.5}  # fmt: skip
    summary = from_dict(LatencySummary, old)
    assert (summary.p90_ms, summary.digits) == (None, None)
    assert from_dict(LatencySummary, to_dict(summary)) == summary
    assert "every sample sorted (600 per run)" in fmt.percentile_method([(600, None)])
    note = fmt.percentile_method([(600, 3), (1200, 3), (700, None)])
    assert "HdrHistogram of 600-1,200 samples per run at 3 significant digits" in note
    assert "(within about 0.1%); max exact; older runs: every sample sorted (700 per run)" in note
    stdout = (DATA / "tpcc_pgbench_server_stdout.txt").read_text()
    facts = driver.RunFacts(driver.RunOptions(duration_s=10), 1, 1, 1.0, None)
    run = driver.build_result(
        stdout, "", [DATA / "tpcc_txlog.txt"], facts, started_epoch=1795324646.0
    )
    assert run.latency_digits == txlog.DIGITS == 3
    counts = "-".join(f"{n:,}" for n in sorted({min(t.samples for t in run.types if t.samples),
                                                 max(t.samples for t in run.types)}))  # fmt: skip
    said = f"HdrHistogram of {counts} samples per type at 3 significant digits"
    assert said in tpcc_cli.format_run(run).splitlines()[-1]
    stored = to_dict(run)
    del stored["latency_digits"]
    assert from_dict(TpccRun, stored).latency_digits is None


def test_the_reports_tables_say_how_the_percentiles_were_made() -> None:
    """Under the TPC-B latency table and the TPC-C mix table, once: an
    HdrHistogram of N samples at 3 digits - and, beside runs recorded before,
    every sample sorted."""
    run = pgbench.parse_run(
        (DATA / "pgbench_run_read_write.stdout.txt").read_text(),
        (DATA / "pgbench_run_read_write.stderr.txt").read_text(),
        mode="read-write",
    )
    new = replace(run, latency=txlog.parse_transaction_logs([DATA / n for n in CAPTURED[0]], 1))
    old = replace(run, latency=LatencySummary(600, 1.0, 0.9, 1.2, 1.6, 3.5))
    rec = RunRecord("s", "k", "pgbench_run", "t", {}, "ok", "", "")
    table = tpcb_report.latency_table([Point("read-write", 4, ((rec, new), (rec, old)), ())])
    said = [n for n in table.notes if "HdrHistogram" in n]
    assert said == [
        "Nearest-rank percentiles from an HdrHistogram of 896 samples per run at 3 "
        "significant digits (within about 0.1%); max exact; older runs: every sample sorted "
        "(600 per run)."
    ]
    tpcc = driver.build_result(
        (DATA / "tpcc_pgbench_server_stdout.txt").read_text(), "", [DATA / "tpcc_txlog.txt"],
        driver.RunFacts(driver.RunOptions(duration_s=10), 1, 1, 1.0, None),
        started_epoch=1795324646.0,
    )  # fmt: skip
    notes = tpcc_report.mix_table(rec, tpcc).notes
    assert (
        sum("HdrHistogram of" in n and "per type at 3 significant digits" in n for n in notes) == 1
    )
