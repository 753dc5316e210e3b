#!/usr/bin/env python3
"""A probe through a host's executor against the same probe run here: the numbers of docs/hosts.md.

One SSH host in a network namespace (tests/hosts_fixture.py), which shares
this machine's filesystem: pg_test_fsync and fio (8k randwrite, direct) on
one directory, run here (``HERE``) and on h1 through its SshExecutor,
alternating the order each round. Same disk, same files: the ratio
remote/local should be 1 within the run-to-run noise, and what it is not is
the cost of running over SSH (the tool's start, its output read over the
channel). pg_test_timing too: the clock loop is the host's CPU either way.

    .venv/bin/python bench/remote_probes.py [--rounds 3] [--seconds 1] [--fio-runtime 3]
        [--directory /var/tmp]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hosts_fixture import make_lab, netns_available  # noqa: E402
from pgrig.hosts import inventory, preflight  # noqa: E402
from pgrig.hosts.executor import Executor  # noqa: E402
from pgrig.hosts.local import HERE  # noqa: E402
from pgrig.pgsource import binaries  # noqa: E402
from pgrig.tools import fio, pg_test_fsync, pg_test_timing  # noqa: E402


def figures(
    host: Executor, bin_dir: Path, where: Path, args: argparse.Namespace
) -> dict[str, float]:
    timing, _ = pg_test_timing.run(bin_dir, duration_s=args.seconds, host=host)
    fsync, _ = pg_test_fsync.run(bin_dir, where, seconds=args.seconds, host=host)
    head = pg_test_fsync.fdatasync_8k(fsync)
    job = fio.FioJob(where, "randwrite", size="64M", runtime_s=args.fio_runtime)
    measured, _ = fio.run(job, host=host)
    return {
        "pg_test_timing ns/loop": timing.per_loop_ns,
        "fdatasync 8k ops/s": head.ops_per_sec if head and head.ops_per_sec else float("nan"),
        "fio 8k randwrite IOPS": measured.iops,
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} ({min(values):,.2f}-{max(values):,.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=1, help="pg_test_fsync/timing seconds")
    ap.add_argument("--fio-runtime", type=int, default=3)
    ap.add_argument("--directory", type=Path, default=Path("/var/tmp"))
    args = ap.parse_args()
    if why := netns_available():
        print(f"cannot run: {why}", file=sys.stderr)
        return 3
    bin_dir = binaries.find().bin_dir
    runs: dict[str, list[dict[str, float]]] = {"local": [], "h1": []}
    elapsed: dict[str, list[float]] = {"local": [], "h1": []}
    with (
        make_lab(1) as lab,
        tempfile.TemporaryDirectory(prefix="pgrig-probe-bench-", dir=args.directory) as tmp,
    ):
        hosts = list(inventory.load(lab.write_inventory()).hosts.values())
        with preflight.opened(hosts) as (ex,):
            sides: dict[str, Callable[[], dict[str, float]]] = {
                "local": lambda: figures(HERE, bin_dir, Path(tmp), args),
                "h1": lambda: figures(ex, bin_dir, Path(tmp), args),
            }
            for r in range(args.rounds):
                order = ["local", "h1"] if r % 2 == 0 else ["h1", "local"]
                for side in order:
                    start = time.monotonic()
                    runs[side].append(sides[side]())
                    elapsed[side].append(time.monotonic() - start)
                    print(f"round {r + 1} {side}: {runs[side][-1]}", flush=True)
    print(f"\n{args.rounds} rounds, alternating; median (min-max)")
    print("| figure | here | h1 over SSH | ratio h1/here |\n|---|---|---|---|")
    for name in runs["local"][0]:
        here = [run[name] for run in runs["local"]]
        there = [run[name] for run in runs["h1"]]
        ratios = [b / a for a, b in zip(here, there, strict=True)]
        print(f"| {name} | {spread(here)} | {spread(there)} | {spread(ratios)} |")
    print(f"| wall time of the three probes, s | {spread(elapsed['local'])} | "
          f"{spread(elapsed['h1'])} | |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
