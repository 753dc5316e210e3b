#!/usr/bin/env python3
"""Reading pgbench's per-transaction log: HdrHistograms against the lists they replaced.

pgrig reads ``pgbench -l`` logs streaming into one HdrHistogram per script
(``pgrig.tools.pgbench.txlog``). Before, it kept every latency and every
completion time in Python lists and sorted them (``list_and_sort`` below, the
code as it was). This bench generates logs of a real log's shape - the lines
of a captured ``pgbench -l`` log again and again, its clock moving on by the
template's span each time, so more lines is a longer run at the template's
rate - at several sizes, and parses each with both methods alternately (the
order flipping every round), each parse in a fresh Python process.

Per parse: the wall time of the parse and its peak memory (the process's peak
RSS growth during the parse: VmHWM reset through /proc/self/clear_refs just
before). Per size: the ratios new / old with their median and range over the
rounds, and the largest relative difference between the two methods' p50,
p95, p99 and max (the histogram's precision: at most 1/1024).

    .venv/bin/python bench/txlog.py [--sizes 100000 1000000 5000000] [--rounds 3]
        [--template tests/data/pgbench_txlog_rw2s.5794.log ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
TEMPLATE = (DATA / "pgbench_txlog_rw2s.5794.log", DATA / "pgbench_txlog_rw2s.5794.1.log")
FIELDS = ("p50_ms", "p95_ms", "p99_ms", "max_ms")


# --------------------------------------------------------------------------
# The parse that came before (pgrig.tools.pgbench.txlog at 9776f51), kept as
# the reference: every latency and completion time in lists, sorted.


def list_and_sort(paths: list[Path]) -> dict[str, float] | None:
    latencies: dict[int, list[int]] = {}
    completed: dict[int, list[float]] = {}
    for path in paths:
        with path.open(encoding="ascii", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                cols = line.split()
                if not cols:
                    continue
                if len(cols) < 6 or not cols[3].isdigit():
                    raise ValueError(f"{path}:{lineno}: not a pgbench transaction log line")
                if not cols[2].isdigit():
                    continue
                script = int(cols[3])
                latencies.setdefault(script, []).append(int(cols[2]))
                completed.setdefault(script, []).append(int(cols[4]) + int(cols[5]) / 1e6)
    for values in latencies.values():
        values.sort()
    samples = sorted(v for values in latencies.values() for v in values)
    if not samples:
        return None

    def rank(pct: float) -> float:
        return samples[max(1, math.ceil(pct / 100.0 * len(samples))) - 1] / 1000.0

    return {"p50_ms": rank(50), "p95_ms": rank(95), "p99_ms": rank(99), "max_ms": samples[-1] / 1e3}


def histogram(paths: list[Path]) -> dict[str, float] | None:
    from pgrig.tools.pgbench import txlog

    summary = txlog.parse_transaction_logs(paths, 1.0)
    return None if summary is None else {f: getattr(summary, f) for f in FIELDS}


METHODS = {"old": list_and_sort, "new": histogram}


# --------------------------------------------------------------------------
# One parse in this process (the child side)


def _vm_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def one(method: str, paths: list[Path]) -> None:
    """Parse once; print JSON: seconds, peak RSS growth (KiB), the percentiles."""
    import numpy  # noqa: F401  (loaded before the baseline, as pgrig has it loaded)

    import pgrig.tools.pgbench.txlog  # noqa: F401

    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _vm_kib("VmHWM")
    start = time.perf_counter()
    result = METHODS[method](paths)
    elapsed = time.perf_counter() - start
    grown = _vm_kib("VmHWM") - before
    print(json.dumps({"s": elapsed, "peak_kib": grown, "pct": result}))


# --------------------------------------------------------------------------
# The parent: generate, alternate, compare


def generate(template: list[Path], out: Path, lines: int) -> None:
    """``lines`` lines in the template's shape, one file (pgbench writes one per
    thread; the parse reads them one after the other, so one is the same work)."""
    rows = [line.split() for path in template for line in path.read_text().splitlines()]
    rows.sort(key=lambda c: (int(c[4]), int(c[5])))
    first, last = int(rows[0][4]), int(rows[-1][4])
    span = last - first + 1
    with out.open("w") as fh:
        written = 0
        lap = 0
        while written < lines:
            shift = lap * span
            chunk = []
            for cols in rows[: lines - written]:
                moved = [cols[0], str(written + len(chunk)), cols[2], cols[3],
                         str(int(cols[4]) + shift), *cols[5:]]  # fmt: skip
                chunk.append(" ".join(moved) + "\n")
            fh.writelines(chunk)
            written += len(chunk)
            lap += 1


@dataclass(frozen=True)
class Parse:
    seconds: float
    peak_mib: float
    pct: dict[str, float]


def run_one(method: str, path: Path) -> Parse:
    done = subprocess.run(
        [sys.executable, __file__, "--one", method, str(path)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    got = json.loads(done.stdout)
    return Parse(float(got["s"]), got["peak_kib"] / 1024, dict(got["pct"] or {}))


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--template", type=Path, nargs="+", default=list(TEMPLATE))
    parser.add_argument("--workdir", type=Path, default=None, help="for the generated logs")
    parser.add_argument("--one", nargs=2, metavar=("METHOD", "LOG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one[0], [Path(args.one[1])])
        return
    print(f"template: {', '.join(str(p) for p in args.template)}")
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    work = Path(tempfile.mkdtemp(prefix="bench-txlog-", dir=args.workdir))
    summary = []
    try:
        for size in args.sizes:
            log = work / f"pgbench_log.{size}"
            generate(args.template, log, size)
            mib = log.stat().st_size / 2**20
            times: list[float] = []
            peaks: list[float] = []
            differences: list[float] = []
            for r in range(1, args.rounds + 1):
                order = ("old", "new") if r % 2 else ("new", "old")
                got = {m: run_one(m, log) for m in order}
                old, new = got["old"], got["new"]
                times.append(new.seconds / old.seconds)
                peaks.append(new.peak_mib / max(old.peak_mib, 1 / 1024))
                differences.append(
                    max(abs(new.pct[f] - old.pct[f]) / old.pct[f] for f in FIELDS if old.pct[f])
                )
                print(
                    f"{size:>10,} lines ({mib:,.0f} MiB) round {r} ({order[0]} first): "
                    f"old {old.seconds:.3f} s, {old.peak_mib:,.1f} MiB; "
                    f"new {new.seconds:.3f} s, {new.peak_mib:,.1f} MiB; "
                    f"p99 old {old.pct['p99_ms']:.3f} new {new.pct['p99_ms']:.3f} ms",
                    flush=True,
                )
            log.unlink()
            summary.append(
                f"{size:>10,} lines: time new/old {_spread(times)}, "
                f"peak memory new/old {_spread(peaks)}, "
                f"largest percentile difference {100 * max(differences):.3f}%"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("median (range) over the rounds:")
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
