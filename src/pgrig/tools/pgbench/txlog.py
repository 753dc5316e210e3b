"""Per-transaction logs (``-l``): the latency percentiles pgbench's report lacks.

A log is read as a stream into one HdrHistogram per script and a count of
completions per second: pgrig's memory does not grow with the number of log
lines (a 30-minute run logging every transaction used to keep every sample).
Several hosts' logs pool by adding their histograms and counts, so a pooled
percentile is that of all the samples together, never an average of
percentiles.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hdrh.histogram import HdrHistogram

from pgrig.errors import ParseError
from pgrig.results import LatencySummary

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    # Every array here holds integers (seconds, microseconds, counts); named
    # with its dtype so that numpy's stubs before and after 2.4 (type
    # parameters with defaults) both check it.
    Ints = npt.NDArray[np.int64]

# numpy is imported by the functions that make or read arrays, not with this
# module: every pgrig process imports it (through pgrig.load and the registry)
# and most never read a log (0.1 s of CPU a start: docs/bench.md, "Starting a
# pgrig process").

LOWEST_US = 1
HIGHEST_US = 3_600_000_000
"""One hour: far above any transaction a benchmark keeps (a longer one grows
the histogram's range rather than being dropped, see ``Histogram.of``)."""
DIGITS = 3
"""Significant digits kept: a value is known within 1/1024 (about 0.1%), finer
than two runs of the same benchmark agree, and the counts array stays small
(23,552 counters, 184 KiB, from 1 us to an hour)."""

_BLOCK_CHARS = 1 << 18  # a log is parsed this many characters at a time


def transaction_log_files(workdir: Path, prefix_name: str) -> list[Path]:
    """The files pgbench writes for ``--log-prefix=<workdir>/<prefix_name>``:
    ``<prefix_name>.<pid>`` for thread 0 and ``<prefix_name>.<pid>.<n>`` for the others."""
    names = log_names((p.name for p in workdir.iterdir() if p.is_file()), prefix_name)
    return [workdir / name for name in names]


def log_names(names: Iterable[str], prefix_name: str) -> list[str]:
    """Which of a directory's file ``names`` are the logs of ``--log-prefix=.../<prefix_name>``
    (``transaction_log_files``), on whichever host the directory is."""
    pattern = re.compile(re.escape(prefix_name) + r"\.\d+(?:\.\d+)?")
    return sorted(name for name in names if pattern.fullmatch(name))


def nearest_rank(pct: float, count: int) -> int:
    """The 1-based rank of the nearest-rank percentile among ``count`` samples:
    a value that was measured, never an interpolation between two."""
    return max(1, math.ceil(pct / 100.0 * count))


class Histogram:
    """Latencies in microseconds: an HdrHistogram plus the exact largest value
    (the HdrHistogram's own max is its bucket's upper end once added to).
    Made whole by ``of`` or ``+`` and only read after."""

    def __init__(self, highest_us: int = HIGHEST_US) -> None:
        self.hdr = HdrHistogram(LOWEST_US, highest_us, DIGITS)
        self.highest_us = highest_us
        self.max_us = 0

    @classmethod
    def of(cls, counts: Mapping[int, int]) -> Histogram:
        """The histogram of ``{latency_us: times seen}``; its range reaches past
        the largest value however long (doubling from an hour)."""
        top = max(counts, default=0)
        highest = HIGHEST_US
        while highest < top:
            highest *= 2
        hist = cls(highest)
        record = hist.hdr.record_value
        for value, n in counts.items():
            record(value, n)
        hist.max_us = top
        return hist

    @property
    def samples(self) -> int:
        return int(self.hdr.get_total_count())

    def __add__(self, other: Histogram) -> Histogram:
        both = Histogram(max(self.highest_us, other.highest_us))
        for part in (self, other):
            if part.samples:
                both.hdr.add(part.hdr)
        both.max_us = max(self.max_us, other.max_us)
        return both

    def counts(self) -> Ints:
        """The HdrHistogram's counters, read in place."""
        import numpy as np

        return np.frombuffer(self.hdr.counts, dtype=np.uint64, count=self.hdr.counts_len)

    def percentiles_us(self, pcts: Sequence[float]) -> list[int]:
        """Nearest-rank percentiles (as ``nearest_rank``): the upper end of the
        bucket holding that rank, which is at most 0.1% above the sample, and
        never above the exact max. Empty: zeros."""
        import numpy as np

        total = self.samples
        if not total:
            return [0 for _ in pcts]
        hdr = self.hdr
        cumulative = np.cumsum(self.counts())
        ranks = [nearest_rank(p, total) for p in pcts]
        indexes = np.searchsorted(cumulative, ranks, side="left")
        return [
            min(
                self.max_us, int(hdr.get_highest_equivalent_value(hdr.get_value_from_index(int(i))))
            )
            for i in indexes
        ]


MAX_SPAN_S = 31 * 86_400
"""The most seconds from a log's first completion to its last: a month, far
beyond any run; a line past it is no line of this run (and would cost 8 bytes
for each second between)."""


class PerSecond(Mapping[int, int]):
    """Completions per whole second, read as ``{second: completions}`` of the
    seconds with any: counted in a numpy array from ``first`` on (8 bytes a
    second of run, against about 90 for a dict of Python ints)."""

    __slots__ = ("first", "counts")

    def __init__(self, first: int = 0, counts: Ints | None = None) -> None:
        import numpy as np

        self.first = first
        self.counts = np.zeros(0, dtype=np.int64) if counts is None else counts

    def add(self, seconds: Ints) -> None:
        """Count one completion at each of ``seconds`` (integers)."""
        import numpy as np

        if not len(seconds):
            return
        self._cover(int(seconds.min()), int(seconds.max()))
        self.counts += np.bincount(seconds - self.first, minlength=len(self.counts))

    def _cover(self, low: int, high: int) -> None:
        """Grow the array to hold seconds ``low`` to ``high``."""
        import numpy as np

        if len(self.counts):
            low, high = min(low, self.first), max(high, self.first + len(self.counts) - 1)
        if high - low > MAX_SPAN_S:
            raise ValueError(f"completions {high - low:,} s apart (at most {MAX_SPAN_S:,})")
        if len(self.counts) and low == self.first and high - low + 1 == len(self.counts):
            return
        grown = np.zeros(high - low + 1, dtype=np.int64)
        at = self.first - low
        grown[at : at + len(self.counts)] = self.counts
        self.first, self.counts = low, grown

    def __add__(self, other: PerSecond) -> PerSecond:
        both = PerSecond(self.first, self.counts.copy())
        if len(other.counts):
            both._cover(other.first, other.first + len(other.counts) - 1)
            at = other.first - both.first
            both.counts[at : at + len(other.counts)] += other.counts
        return both

    def __getitem__(self, second: int) -> int:
        i = second - self.first
        if 0 <= i < len(self.counts) and self.counts[i]:
            return int(self.counts[i])
        raise KeyError(second)

    def __iter__(self) -> Iterator[int]:
        import numpy as np

        return (self.first + int(i) for i in np.flatnonzero(self.counts))

    def __len__(self) -> int:
        import numpy as np

        return int(np.count_nonzero(self.counts))


@dataclass(frozen=True)
class TxLog:
    """What ``-l`` logs hold, per script (``-f``/``-b`` in order, from 0): the
    latencies as histograms and the completions counted per whole second from
    ``origin_s`` (epoch seconds on this machine's clock)."""

    latencies: dict[int, Histogram]  # script number -> latencies (us)
    completed: dict[int, PerSecond]  # script number -> {second: completions}
    origin_s: float = 0.0

    @property
    def samples(self) -> int:
        return sum(h.samples for h in self.latencies.values())

    def pooled(self) -> Histogram:
        """Every script's latencies together."""
        total = Histogram()
        for hist in self.latencies.values():
            total = total + hist
        return total


def parse_logs(paths: Iterable[Path], clock_offset_s: float = 0.0, origin_s: float = 0.0) -> TxLog:
    """Per-script latencies and completions per second from ``-l`` log files,
    read as a stream; completion times are brought to this machine's clock by
    subtracting ``clock_offset_s`` (the clock of the host that wrote them minus
    ours) and counted per whole second from ``origin_s``.

    Each line is ``client_id transaction_no time script_no time_epoch time_us
    [schedule_lag] [retries]`` with ``time`` in microseconds (from the scheduled
    start under ``-R``). Transactions logged as ``skipped`` or failed (a word in
    place of the time) are not latency samples and are left out.
    """
    counts = _Counts(clock_offset_s + origin_s)
    for path in paths:
        with path.open(encoding="ascii", errors="replace") as fh:
            lineno = 1
            while lines := fh.readlines(_BLOCK_CHARS):
                rows = _numbers(lines, path, lineno)
                try:
                    counts.add(rows)
                except ValueError as exc:
                    raise ParseError(
                        f"{path}: lines {lineno}-{lineno + len(lines) - 1}: {exc}",
                        hint="the log's clock jumped, or it is not the log of one run",
                    ) from None
                lineno += len(lines)
    latencies = {s: Histogram.of(c) for s, c in sorted(counts.latencies.items())}
    return TxLog(latencies, dict(sorted(counts.completed.items())), origin_s)


def _numbers(lines: list[str], path: Path, first_lineno: int) -> Ints:
    """The block's lines as rows of integers, with the lines that are no latency
    sample left out. numpy's C parser reads a block of plain lines (the common
    case) in a fifth of a Python loop's time (bench/txlog.py); a block holding
    skipped or failed transactions loses them to one regular expression first;
    only a block still refused is read line by line, for the line to blame."""
    import numpy as np

    if not (lines[0].strip() or any(line.strip() for line in lines)):
        return _no_rows()  # (numpy warns of a block without data)
    rows = _plain(lines)
    if rows is None:
        # Skipped and failed transactions (a word for the time) dropped at C speed.
        text = _NO_SAMPLE.sub("", "".join(lines))
        rows = _plain(text.splitlines()) if text.strip() else _no_rows()
    if rows is not None:
        return rows
    kept = []
    for lineno, line in enumerate(lines, start=first_lineno):
        cols = line.split()
        if not cols:
            continue
        if len(cols) < 6 or not all(c.isdigit() for c in cols[3:6]):
            raise ParseError(
                f"{path}:{lineno}: not a pgbench transaction log line: {line.strip()!r}",
                hint="aggregated logs (--aggregate-interval) are not supported",
            )
        if cols[2].isdigit():
            kept.append(" ".join(cols[:6]))
    if not kept:
        return _no_rows()
    try:
        return np.loadtxt(kept, dtype=np.int64, ndmin=2).reshape(-1, 6)
    except (ValueError, OverflowError):
        raise ParseError(
            f"{path}: a number in lines {first_lineno}-{first_lineno + len(lines) - 1} "
            "does not fit in 64 bits",
            hint="this is not a log pgbench wrote",
        ) from None


def _plain(lines: list[str]) -> Ints | None:
    """Lines of six or more non-negative integers each, parsed by numpy; None
    for anything else."""
    import numpy as np

    try:
        rows = np.loadtxt(lines, dtype=np.int64, comments=None, ndmin=2)
    except (ValueError, OverflowError):
        return None
    return rows if rows.shape[1] >= 6 and not (rows[:, :6] < 0).any() else None


def _no_rows() -> Ints:
    import numpy as np

    return np.empty((0, 6), dtype=np.int64)


# pgbench's line for a transaction without a latency: "skipped", "failed",
# "serialization" or "deadlock" in place of the time, the rest numbers.
_NO_SAMPLE = re.compile(r"^\d+ \d+ [a-z]+ \d+ \d+ \d+(?: \d+)*\n", re.MULTILINE)


class _Counts:
    """Latencies and completions counted while the blocks of a log stream by:
    their memory grows with the distinct values and seconds, not with lines."""

    def __init__(self, shift_s: float) -> None:
        # A completion at epoch + us lies in second epoch - whole + (0 or -1)
        # from the origin (shift = whole + frac): -1 when us falls below frac.
        self.whole = math.floor(shift_s)
        self.frac_us = (shift_s - self.whole) * 1e6
        self.latencies: dict[int, Counter[int]] = {}
        self.completed: dict[int, PerSecond] = {}

    def add(self, rows: Ints) -> None:
        import numpy as np

        if not len(rows):
            return
        scripts = rows[:, 3]
        seconds = rows[:, 4] - self.whole - (rows[:, 5] < self.frac_us)
        for script in map(int, np.unique(scripts)):
            mine = scripts == script
            distinct, n = np.unique(rows[mine, 2], return_counts=True)
            self.latencies.setdefault(script, Counter()).update(
                dict(zip(distinct.tolist(), n.tolist(), strict=True))
            )
            self.completed.setdefault(script, PerSecond()).add(seconds[mine])


def pool(logs: Iterable[TxLog]) -> TxLog:
    """Several hosts' logs as one: histograms added, completions summed per
    second. They must count seconds from the same origin."""
    logs = list(logs)
    origins = {log.origin_s for log in logs}
    if len(origins) > 1:
        raise ValueError(f"logs counted from different origins: {sorted(origins)}")
    latencies: dict[int, Histogram] = {}
    completed: dict[int, PerSecond] = {}
    for log in logs:
        for script, hist in log.latencies.items():
            latencies[script] = latencies[script] + hist if script in latencies else hist
        for script, seconds in log.completed.items():
            completed[script] = completed[script] + seconds if script in completed else seconds
    origin = origins.pop() if origins else 0.0
    return TxLog(dict(sorted(latencies.items())), dict(sorted(completed.items())), origin)


def summary(hist: Histogram, sampling_rate: float) -> LatencySummary | None:
    """The percentiles a run reports; None without samples."""
    if not hist.samples:
        return None
    p50, p90, p95, p99 = (v / 1000.0 for v in hist.percentiles_us((50, 90, 95, 99)))
    return LatencySummary(
        samples=hist.samples,
        sampling_rate=sampling_rate,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        max_ms=hist.max_us / 1000.0,
        p90_ms=p90,
        digits=DIGITS,
    )


def parse_transaction_logs(paths: Iterable[Path], sampling_rate: float) -> LatencySummary | None:
    """Latency percentiles of all scripts from ``-l`` log files; None when no
    transaction was logged."""
    return summary(parse_logs(paths).pooled(), sampling_rate)
