"""A report's memory and figures stay bounded in a run's length (issue 18.6):
the monitor section reads a run's samples once, as columns, and a long run's
lines are drawn as the min and max of each bucket (pgrig.report.decimate),
while a short run's figures are drawn exactly as before. Tested by counting
(Sample objects alive, points per line, bytes of page), not by timing."""

from __future__ import annotations

import gc
import hashlib
import math
import re
import weakref
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from pgrig.document.model import Figure, Series
from pgrig.monitor.model import MonitorResult, Sample
from pgrig.report import decimate, svgplot, writer
from pgrig.report import monitor as monitor_section
from pgrig.report import progress as report_progress
from pgrig.report import samples as report_samples
from pgrig.report.samples import Columns
from pgrig.report.view import build
from pgrig.results import PgbenchRun, ProgressPoint, RunRecord, Study
from pgrig.store import Store
from test_monitor_report import KEY, captured, record
from test_report_samples import StoreView
from test_svgplot import absolute

GOLDEN = Path(__file__).parent / "data" / "report" / "golden_monitor_figures.svg"
# The SVGs of the captured run repeated to 1,200 samples (decimate.LIMIT: the
# longest line still drawn point for point), as 9776f51 drew them (the lines'
# paths written back as absolute points: the same figure, in more text).
LIMIT_SHA256 = "6749b96e932ff50f1466954ed27bdf882d9fcf6422d9bb4aa006f7fdd331ea01"


def tiled(mon: MonitorResult, n: int) -> tuple[Sample, ...]:
    """``n`` samples: the captured run's end to end, tps waving so that no two
    laps are alike (the recipe the golden hash above was made with)."""
    src = mon.samples
    lap = src[-1].t_s - src[0].t_s + mon.interval_s
    return tuple(
        replace(
            s,
            t_s=s.t_s + lap * (i // len(src)),
            wall=s.wall + lap * (i // len(src)),
            tps=None if s.tps is None else s.tps * (1 + 0.2 * math.sin(i / 7)),
        )
        for i in range(n)
        for s in (src[i % len(src)],)
    )


def _svgs(mon: MonitorResult, label: str) -> str:
    figs = monitor_section.figures("run", label, mon, Columns(mon.samples, mon.devices))
    return "\n".join(svgplot.inline(f) for f in figs if f.series)


def test_a_short_runs_figures_are_drawn_as_before() -> None:
    mon, _ = captured()
    assert absolute(_svgs(mon, KEY)) + "\n" == GOLDEN.read_text()
    at_limit = replace(mon, samples=tiled(mon, decimate.LIMIT))
    text = absolute(_svgs(at_limit, "long"))
    assert hashlib.sha256(text.encode()).hexdigest() == LIMIT_SHA256
    assert "drawn as the min and max" not in text


def test_a_reduced_line_keeps_each_buckets_min_and_max() -> None:
    n = 3600
    x = [float(i) for i in range(n)]
    y = [1000.0 + (i % 5) for i in range(n)]
    y[1234] = 100.0  # a one-second checkpoint dip
    y[2345] = 5000.0  # and a one-second spike
    fig = decimate.figure(
        Figure("f", "t", "seconds since start", "tps", (Series("tps", tuple(x), tuple(y)),), "c.")
    )
    (line,) = fig.series
    assert len(line.x) <= 2 * decimate.COLUMNS
    assert (1234.0, 100.0) in zip(line.x, line.y, strict=True)
    assert (2345.0, 5000.0) in zip(line.x, line.y, strict=True)
    assert list(line.x) == sorted(line.x), "in time order"
    step = 6.0  # 3,599 s over 600 buckets, rounded up to whole seconds
    assert fig.caption == "c. 3,600 samples, drawn as the min and max of each 6-second bucket."
    for k in range(n // int(step)):
        inside = y[int(k * step) : int((k + 1) * step)]
        kept = [v for t, v in zip(line.x, line.y, strict=True) if k * step <= t < (k + 1) * step]
        assert sorted(kept) == sorted({min(inside), max(inside)})


def test_a_nan_still_breaks_a_reduced_line_and_short_lines_are_kept_whole() -> None:
    n = 2000
    x = tuple(float(i) for i in range(n))
    y = tuple(math.nan if i == 1000 else float(i % 7) for i in range(n))
    buckets = decimate.Buckets.over(x)
    line = buckets.line("l", x, y)
    assert sum(math.isnan(v) for v in line.y) == 1 and len(line.x) < n
    short = decimate.Buckets.over(x[: decimate.LIMIT])
    assert short.step is None and short.caption("c.") == "c."
    assert short.line("l", x[:10], y[:10]) == Series("l", x[:10], y[:10])
    fig = Figure("f", "t", "x", "y", (Series("l", x[: decimate.LIMIT], y[: decimate.LIMIT]),))
    assert decimate.figure(fig) is fig


class Counting(StoreView):
    """The real SQLite store, counting the decoded samples and -P points alive
    at once, and which run's points the report asked for."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.alive = 0
        self.most_alive = 0
        self.points_alive = 0
        self.most_points_alive = 0
        self.points_asked: list[int] = []
        # ProgressPoint objects anywhere in the process, at each read of a run's
        # samples or points, beyond those alive before the report (earlier
        # tests' records): records carrying their points would hold them all
        self.points_anywhere: list[int] = []
        self._before = self._points()

    def samples(self, run_id: int) -> Iterator[dict[str, object]]:
        self._look()
        return self.store.samples(run_id)

    def progress(self, run_id: int) -> Iterator[dict[str, object]]:
        self._look()
        self.points_asked.append(run_id)
        return self.store.progress(run_id)

    def _look(self) -> None:
        self.points_anywhere.append(self._points() - self._before)

    @staticmethod
    def _points() -> int:
        gc.collect()
        return sum(type(o) is ProgressPoint for o in gc.get_objects())

    def points(self) -> report_progress.ProgressReader:
        read = report_progress.stored(self)

        def counted(rec: RunRecord) -> Iterator[ProgressPoint]:
            for p in read(rec):
                self.points_alive += 1
                self.most_points_alive = max(self.most_points_alive, self.points_alive)
                weakref.finalize(p, self._point_gone)
                yield p

        return counted

    def _point_gone(self) -> None:
        self.points_alive -= 1

    def reader(self) -> report_samples.SampleReader:
        read = report_samples.stored(self)

        def counted(rec: RunRecord) -> Iterator[Sample]:
            for s in read(rec):
                self.alive += 1
                self.most_alive = max(self.most_alive, self.alive)
                weakref.finalize(s, self._gone)
                yield s

        return counted

    def _gone(self) -> None:
        self.alive -= 1


STUDY = Study(id="s", name="long", target="/var/tmp", started_at="x", status="finished")


def _long_store(path: Path, n: int, watched: bool = True) -> Path:
    """A store of one run of ``n`` seconds, watched by the monitor or not
    (nothing of it left alive)."""
    mon, run = captured()
    long_run = replace(mon, samples=tiled(mon, n))
    progress = tuple(
        replace(p, t_s=float(i + 1), tps=p.tps * (1 + 0.2 * math.sin(i / 7)))
        for i in range(n)
        for p in run.progress[:1]
    )
    pgbench: PgbenchRun = replace(run, progress=progress, duration_s=float(n))
    with Store.open(path) as store:
        store.begin_study(STUDY)
        store.record(replace(record(KEY, "pgbench_run", pgbench), id=None))
        if watched:
            store.record(replace(record(f"{KEY}/monitor", "monitor", long_run), id=None))
    return path


def _report(tmp_path: Path, n: int, watched: bool = True) -> tuple[list[Figure], Counting, int]:
    """The figures, what was counted and the page's bytes of a study of one
    run of ``n`` seconds."""
    with Store.open(_long_store(tmp_path / f"r{n}.sqlite", n, watched)) as store:
        counting = Counting(store)
        records, _, _ = report_samples.read(counting, "s")
        view = build(STUDY, records, counting.reader(), counting.points())
        _, page = writer.write(
            STUDY,
            records,
            tmp_path / f"out{n}",
            samples=counting.reader(),
            progress=counting.points(),
        )
    return view.figures(), counting, page.stat().st_size


def test_a_ten_times_longer_run_keeps_no_more_samples_nor_points(tmp_path: Path) -> None:
    short_figs, short, short_page = _report(tmp_path, 1_500)
    long_figs, long_, long_page = _report(tmp_path, 15_000)
    # one decoded sample at a time, however long the run (a tuple of them held all)
    assert short.most_alive <= 2 and long_.most_alive <= 2
    most = max(len(s.x) for f in long_figs for s in f.series)
    assert most <= 2 * decimate.COLUMNS < 15_000
    assert most < 1.5 * max(len(s.x) for f in short_figs for s in f.series)
    assert long_page < 1.5 * short_page
    # every figure of the long run says how it was drawn, the Markdown's (TPS over time) too
    drawn = [f for f in long_figs if any(len(s.x) > 100 for s in f.series)]
    assert {f.name for f in drawn} >= {
        "tps_over_time_select_only",
        "monitor_tpcb_run_select_only_c4_cpu",
    }
    captions = {re.search(r"15,000 samples, drawn as .*", f.caption) for f in drawn}
    assert None not in captions
    assert all(
        re.fullmatch(
            r"15,000 samples, drawn as the min and max of each 2[56]-second bucket\.", m[0]
        )
        for m in captions
        if m is not None
    )


def test_a_ten_times_longer_run_keeps_no_more_progress_points(tmp_path: Path) -> None:
    """pgbench's -P points come to the report one run at a time, from the store,
    and are let go: the records carry none, the store is asked for the run's
    by its id (its noise worked out once, its line read when drawn), and at
    no read are more points alive than the one being decoded."""
    for n in (1_500, 15_000):
        figs, counting, _ = _report(tmp_path, n, watched=False)
        assert counting.most_points_alive <= 2
        assert max(counting.points_anywhere) <= 2
        run_ids = set(counting.points_asked)
        assert len(run_ids) == 1
        # build and write: the run's Seconds, then its TPS-over-time line, each
        assert len(counting.points_asked) <= 2 * 2
        (tps,) = [f for f in figs if f.name == "tps_over_time_select_only"]
        assert len(tps.series) == 1 and len(tps.series[0].x) <= decimate.LIMIT
        with Store.open(tmp_path / f"r{n}.sqlite") as store:
            (run,) = [r for r in report_samples.read(store, "s")[0] if r.kind == "pgbench_run"]
            assert run.result is not None and run.result["progress"] == []
            # what was left out is all there, one point at a time
            assert sum(1 for _ in store.progress(run.id or 0)) == n
