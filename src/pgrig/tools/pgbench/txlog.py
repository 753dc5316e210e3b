"""Per-transaction logs (``-l``): the latency percentiles pgbench's report lacks."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pgrig.errors import ParseError
from pgrig.results import LatencySummary


def transaction_log_files(workdir: Path, prefix_name: str) -> list[Path]:
    """The files pgbench writes for ``--log-prefix=<workdir>/<prefix_name>``:
    ``<prefix_name>.<pid>`` for thread 0 and ``<prefix_name>.<pid>.<n>`` for the others."""
    pattern = re.compile(re.escape(prefix_name) + r"\.\d+(?:\.\d+)?")
    return sorted(p for p in workdir.iterdir() if pattern.fullmatch(p.name) and p.is_file())


def _percentile(ordered: Sequence[int], pct: float) -> int:
    """Nearest-rank percentile of an ascending sequence: a value that was measured."""
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


def parse_transaction_logs(paths: Iterable[Path], sampling_rate: float) -> LatencySummary | None:
    """Latency percentiles from ``-l`` log files; None when no transaction was logged.

    Each line is ``client_id transaction_no time script_no time_epoch time_us
    [schedule_lag]`` with ``time`` in microseconds (from the scheduled start
    under ``-R``). Transactions logged as ``skipped`` or failed (a word in place
    of the time) are not latency samples and are left out.
    """
    samples: list[int] = []
    for path in paths:
        with path.open(encoding="ascii", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                cols = line.split()
                if not cols:
                    continue
                if len(cols) < 6:
                    raise ParseError(
                        f"{path}:{lineno}: not a pgbench transaction log line: {line.strip()!r}",
                        hint="aggregated logs (--aggregate-interval) are not supported",
                    )
                if cols[2].isdigit():
                    samples.append(int(cols[2]))
    if not samples:
        return None
    samples.sort()
    return LatencySummary(
        samples=len(samples),
        sampling_rate=sampling_rate,
        p50_ms=_percentile(samples, 50) / 1000.0,
        p95_ms=_percentile(samples, 95) / 1000.0,
        p99_ms=_percentile(samples, 99) / 1000.0,
        max_ms=samples[-1] / 1000.0,
    )
