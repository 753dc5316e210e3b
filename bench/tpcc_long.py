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
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def around(samples: list[dict[str, Any]], start: float, end: float) -> str:
    """Median per-second tps in the minute before a checkpoint, during it, and its minimum."""
    before = [s["tps"] for s in samples if start - 60 <= s["t_s"] < start and s["tps"]]
    during = [s["tps"] for s in samples if start <= s["t_s"] <= end and s["tps"]]
    if not before or not during:
        return "no tps around it"
    return (
        f"tps median {statistics.median(before):,.0f} in the minute before, "
        f"{statistics.median(during):,.0f} during it (min {min(during):,.0f}, "
        f"{len(during)} s)"
    )


def report(results: Path, samples: list[tuple[float, float]]) -> None:
    with Store.open(results / "results.sqlite") as store:
        (study,) = store.studies()
        records = store.runs(study.id)
    for rec in records:
        if rec.status != "ok":
            print(f"{rec.key}: {rec.status}: {rec.reason}")
    load = next((r.result for r in records if r.kind == "tpcc_load" and r.result), None)
    if load:
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in load["phases"].items())
        print(f"load: {load['elapsed_s']:.1f} s, {load['rows']:,} rows ({phases})")
    run_rec = next((r for r in records if r.kind == "tpcc_run" and r.result), None)
    if run_rec is None or run_rec.result is None:
        print("no run recorded")
        return
    run = run_rec.result
    progress = run.get("progress") or []
    print(
        f"run: tpmC {run['tpmc']:,.0f}, tps {run['tps']:,.1f}, {run['transactions']:,} "
        f"transactions; {len(progress)} per-second tps points stored"
    )
    timeline = [(p["t_s"], p["tpmc"]) for p in run["timeline"]]
    if timeline:
        tpmc = [v for _, v in timeline]
        print(
            f"tpmC per {timeline[0][0]:.0f} s interval: median {statistics.median(tpmc):,.0f}, "
            f"min {min(tpmc):,.0f}, max {max(tpmc):,.0f}"
        )
    mon = next((r.result for r in records if r.kind == "monitor" and r.result), None)
    if mon:
        per_s = [s for s in mon["samples"] if s.get("in_run")]
        print(f"monitor: {len(mon['samples'])} samples, verdict: {mon['verdict']['summary']}")
        for c in mon["checkpoints"]:
            end = c["end_s"] if c["end_s"] is not None else float("inf")
            until = "the end" if c["end_s"] is None else f"{c['end_s']:.0f} s"
            print(
                f"  checkpoint {c['start_s']:7.0f} s - {until} "
                f"({'completed' if c['completed'] else 'not completed'}): "
                f"{around(per_s, c['start_s'], end)}"
            )
    if samples:
        begin, finish = epoch(run_rec.started_at), epoch(run_rec.finished_at)
        inside = [(t, mb) for t, mb in samples if begin <= t <= finish]
        mbs = [mb for _, mb in inside] or [mb for _, mb in samples]
        print(
            f"pgrig RSS during the run: start {mbs[0]:.1f} MB, middle {mbs[len(mbs) // 2]:.1f} MB, "
            f"end {mbs[-1]:.1f} MB, max {max(mbs):.1f} MB ({len(inside)} samples every "
            f"10 s); whole process max {max(mb for _, mb in samples):.1f} MB"
        )


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
    print(f"started {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {load_average()}")
    proc = subprocess.Popen([str(pgrig), "run", str(campaign), "--results", str(results)])
    samples: list[tuple[float, float]] = []  # (epoch s, RSS MB)

    def sample() -> None:
        while proc.poll() is None:
            if (mb := rss_mb(proc.pid)) is not None:
                samples.append((time.time(), mb))
            time.sleep(10)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        code = proc.wait()
    finally:
        # The cluster under target/ is pgrig's and gone with it; the directory is ours.
        shutil.rmtree(work / "target", ignore_errors=True)
    sampler.join(timeout=15)
    print(
        f"pgrig run exited {code} at {datetime.now(UTC):%H:%M} UTC, load average "
        f"{load_average()}; results in {results}"
    )
    report(results, samples)
    print(f"the report (TPS and checkpoints per second): {results}/*.html")


if __name__ == "__main__":
    main()
