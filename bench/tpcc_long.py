#!/usr/bin/env python3
"""A long TPC-C run (issue 18.9): 100 warehouses, 30 minutes, checkpoints inside it.

Writes a one-target campaign (a throwaway cluster under ``--dir``, ``oltp``
profile with ``checkpoint_timeout`` shorter than the run so checkpoints fall
inside it; the server-side mode once; the consistency check at the end), runs
``pgrig run`` on it, and samples pgrig's own resident memory (the ``pgrig``
process, from /proc) every 10 s. Then prints: the load's time and phases, the
run's tpmC, the per-interval tpmC around each checkpoint the server logged
(the dips), and pgrig's memory at the start, middle and end of the run with
its maximum - flat means the first and the last are within a few MB.

Not a test and not run by the suite: about 45 minutes here (the load of 100
warehouses, about 25 GB, is some 10 minutes of it).

    .venv/bin/python bench/tpcc_long.py [--warehouses 100] [--duration 1800]
        [--connections 8] [--checkpoint-timeout 300] [--dir /var/tmp]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pgrig.store import Store

CAMPAIGN = """
[campaign]
name = "tpcc-long"
monitor = true

[[target]]
name = "local"
directory = "{directory}"
profile = "oltp"
set = {{ checkpoint_timeout = "{checkpoint}s", log_checkpoints = "on" }}

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "tpcc"
warehouses = {warehouses}
connections = {connections}
duration = {duration}
modes = ["server"]
check = "end"
"""


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warehouses", type=int, default=100)
    ap.add_argument("--duration", type=int, default=1800)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--checkpoint-timeout", type=int, default=300)
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"))
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="pgrig-bench-tpcc-long-", dir=args.dir))
    work.chmod(0o755)
    campaign = work / "tpcc-long.toml"
    campaign.write_text(
        CAMPAIGN.format(
            directory=work / "target",
            checkpoint=args.checkpoint_timeout,
            warehouses=args.warehouses,
            connections=args.connections,
            duration=args.duration,
        )
    )
    (work / "target").mkdir()
    (work / "target").chmod(0o755)
    results = work / "results"
    pgrig = Path(sys.executable).with_name("pgrig")
    proc = subprocess.Popen([str(pgrig), "run", str(campaign), "--results", str(results)])
    samples: list[tuple[float, float]] = []

    def sample() -> None:
        t0 = time.monotonic()
        while proc.poll() is None:
            if (mb := rss_mb(proc.pid)) is not None:
                samples.append((time.monotonic() - t0, mb))
            time.sleep(10)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = proc.wait()
    sampler.join(timeout=15)
    print(f"pgrig run exited {code}; results in {results}")
    with Store.open(results / "results.sqlite") as store:
        (study,) = store.studies()
        runs = {r.key: r for r in store.runs(study.id)}
    load = next(r.result for k, r in runs.items() if "/load/" in k and r.result)
    print(f"load: {load['elapsed_s']:.1f} s, {load['rows']:,} rows, phases {load['phases']}")
    run = next(r.result for k, r in runs.items() if "/run/" in k and r.result)
    timeline = [(p["t_s"], p["tpmc"]) for p in run["timeline"]]
    print(f"run: tpmC {run['tpmc']:,.0f}, {len(timeline)} intervals")
    if timeline:
        tpmc = [v for _, v in timeline]
        print(
            f"tpmC per interval: median {statistics.median(tpmc):,.0f}, "
            f"min {min(tpmc):,.0f}, max {max(tpmc):,.0f}"
        )
        for t, v in timeline:
            print(f"  t={t:7.0f} s tpmC {v:>10,.0f}")
    if samples:
        mbs = [mb for _, mb in samples]
        print(
            f"pgrig RSS: first {mbs[0]:.0f} MB, middle {mbs[len(mbs) // 2]:.0f} MB, "
            f"last {mbs[-1]:.0f} MB, max {max(mbs):.0f} MB over {len(mbs)} samples"
        )
    print(f"the report (checkpoint dips in tpmC over time): {results}/*.html")


if __name__ == "__main__":
    main()
