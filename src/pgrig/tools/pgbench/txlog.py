"""Per-transaction logs (``-l``): the latency percentiles pgbench's report lacks."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pgrig.errors import ParseError
from pgrig.results import LatencySummary


def transaction_log_files(workdir: Path, prefix_name: str) -> list[Path]:
    """The files pgbench writes for ``--log-prefix=<workdir>/<prefix_name>``:
    ``<prefix_name>.<pid>`` for thread 0 and ``<prefix_name>.<pid>.<n>`` for the others."""
    pattern = re.compile(re.escape(prefix_name) + r"\.\d+(?:\.\d+)?")
    return sorted(p for p in workdir.iterdir() if pattern.fullmatch(p.name) and p.is_file())


def percentile(ordered: Sequence[int], pct: float) -> int:
    """Nearest-rank percentile of a non-empty ascending sequence: a value that was
    measured (never an interpolation between two)."""
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class TxLog:
    """What ``-l`` logs hold, per script (``-f``/``-b`` in order, from 0)."""

    latencies_us: dict[int, list[int]]  # script number -> ascending latencies
    completed: dict[int, list[float]]  # script number -> completion times (epoch s)

    def pooled(self) -> list[int]:
        """Every script's latencies together, ascending."""
        return sorted(v for values in self.latencies_us.values() for v in values)


def parse_logs(paths: Iterable[Path], clock_offset_s: float = 0.0) -> TxLog:
    """Per-script latencies and completion times from ``-l`` log files; the
    times brought to this machine's clock by subtracting ``clock_offset_s`` (the
    clock of the host that wrote them minus ours).

    Each line is ``client_id transaction_no time script_no time_epoch time_us
    [schedule_lag] [retries]`` with ``time`` in microseconds (from the scheduled
    start under ``-R``). Transactions logged as ``skipped`` or failed (a word in
    place of the time) are not latency samples and are left out.
    """
    latencies: dict[int, list[int]] = {}
    completed: dict[int, list[float]] = {}
    for path in paths:
        with path.open(encoding="ascii", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                cols = line.split()
                if not cols:
                    continue
                if len(cols) < 6 or not cols[3].isdigit():
                    raise ParseError(
                        f"{path}:{lineno}: not a pgbench transaction log line: {line.strip()!r}",
                        hint="aggregated logs (--aggregate-interval) are not supported",
                    )
                if not cols[2].isdigit():
                    continue
                script = int(cols[3])
                latencies.setdefault(script, []).append(int(cols[2]))
                completed.setdefault(script, []).append(
                    int(cols[4]) + int(cols[5]) / 1e6 - clock_offset_s
                )
    for values in latencies.values():
        values.sort()
    return TxLog(latencies, completed)


def pool(logs: Iterable[TxLog]) -> TxLog:
    """Several hosts' logs as one: every sample kept, latencies ascending."""
    latencies: dict[int, list[int]] = {}
    completed: dict[int, list[float]] = {}
    for log in logs:
        for script, values in log.latencies_us.items():
            latencies.setdefault(script, []).extend(values)
        for script, times in log.completed.items():
            completed.setdefault(script, []).extend(times)
    for values in latencies.values():
        values.sort()
    return TxLog(latencies, completed)


def parse_transaction_logs(paths: Iterable[Path], sampling_rate: float) -> LatencySummary | None:
    """Latency percentiles of all scripts from ``-l`` log files; None when no
    transaction was logged."""
    samples = parse_logs(paths).pooled()
    if not samples:
        return None
    return LatencySummary(
        samples=len(samples),
        sampling_rate=sampling_rate,
        p50_ms=percentile(samples, 50) / 1000.0,
        p95_ms=percentile(samples, 95) / 1000.0,
        p99_ms=percentile(samples, 99) / 1000.0,
        max_ms=samples[-1] / 1000.0,
    )
