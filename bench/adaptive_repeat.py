#!/usr/bin/env python3
"""Adaptive repeats (issue 30.4): ``repeat = { until_diff_pct = X, min, max }``
stops as soon as the difference is known to within ±X%, and at ``max`` when
the machine is too noisy for that.

Two identical targets (a and b: the same profile, the same point of a custom
script) are compared by ``pgrig run`` twice: once on the machine as it is
("quiet"), once with a CPU hog that alternates - two busy processes per CPU for
``--period`` seconds, idle for as long - so that some runs share the CPUs and
others do not ("noisy"). The script is ``SELECT pg_sleep(SLEEP)`` and a little
CPU work (``--work`` rows of generate_series): a transaction's time is mostly a
timer's, which other work on a shared machine barely moves, plus a CPU part the
hog stretches - so "quiet" stays quiet on a machine others share too. The
monitor is off: with it, runs disturbed by the hog would be marked and left
out of the count instead of widening the interval. Each scenario prints the
repeats run, each target's tps (median and interval), the ratio b / a of the
medians with its bootstrap 95% interval, and why the repeats stopped.

    .venv/bin/python bench/adaptive_repeat.py [--precision 5] [--min 3] [--max 6]
        [--duration 3] [--period 4] [--work 10000] [--sleep-ms 2] [--only quiet|noisy]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pgrig import stats
from pgrig.document import fmt
from pgrig.policy import RunPolicy
from pgrig.store import Store

STUDY = "adaptive"
HOG = """
import os, sys, time
period = float(sys.argv[1])
def burn():
    while True:
        if int(time.monotonic() / period) % 2 == 0:
            x = 0
            for _ in range(200_000):
                x += 1
        else:
            time.sleep(0.02)
for _ in range(2 * int(sys.argv[2]) - 1):
    if os.fork() == 0:
        burn()
burn()
"""


def campaign(base: Path, args: argparse.Namespace) -> Path:
    targets = ""
    for name in ("a", "b"):
        (base / name).mkdir()
        (base / name).chmod(0o755)
        targets += (
            f'[[target]]\nname = "{name}"\ndirectory = "{base / name}"\nprofile = "stock"\n\n'
        )
    text = f"""[campaign]
name = "{STUDY}"
repeat = {{ until_diff_pct = {args.precision:g}, min = {args.min}, max = {args.max} }}
monitor = false

{targets}[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "custom"
name = "sleep"
scripts = ["sleep.sql"]
clients = [1]
duration = {args.duration}
"""
    (base / "sleep.sql").write_text(
        f"SELECT pg_sleep({args.sleep_ms / 1000:g});\n"
        f"SELECT count(*) FROM generate_series(1, {args.work});\n"
    )
    path = base / "campaign.toml"
    path.write_text(text)
    return path


def scenario(name: str, args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix=f"pgrig-adaptive-{name}-", dir="/var/tmp"))
    base.chmod(0o755)
    hog = None
    try:
        path = campaign(base, args)
        if name == "noisy":
            hog = subprocess.Popen(
                [sys.executable, "-c", HOG, str(args.period), str(os.cpu_count() or 2)],
                start_new_session=True,
            )
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pgrig", "run", str(path), "--results", str(base / "r")],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        wall = time.monotonic() - started
        if hog is not None:
            os.killpg(hog.pid, signal.SIGTERM)
            hog.wait(timeout=10)
            hog = None
        if done.returncode != 0:
            print(f"{name}: pgrig run failed ({done.returncode}): {done.stderr.strip()[-800:]}")
            return
        with Store.open(base / "r" / "results.sqlite") as store:
            runs = [r for r in store.runs(STUDY) if r.kind == "pgbench_run" and r.result]
        tps = {t: [float(r.result["tps"]) for r in runs if r.target == t] for t in ("a", "b")}
        report(name, tps, wall, args)
    finally:
        if hog is not None:
            os.killpg(hog.pid, signal.SIGTERM)
            hog.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


def report(name: str, tps: dict[str, list[float]], wall: float, args: argparse.Namespace) -> None:
    a, b = tps["a"], tps["b"]
    pol = RunPolicy(repeat=args.min, until_diff_pct=args.precision, max_repeat=args.max)
    reps = min(len(a), len(b))
    met = pol.diff_ok([a, b])
    why = (
        f"precision met (±{args.precision:g}%)"
        if met and reps < args.max
        else ("precision met at max" if met else f"max_repeat ({args.max}) reached")
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{name}: {reps} repeats, {wall:.0f} s; stopped: {why} (load average now {load})")
    for t, values in tps.items():
        print(f"  {t}: {fmt.with_spread(fmt.spread(values), unit='tps')}")
        print(f"     runs: {', '.join(fmt.rate(v) for v in values)}")
    ratio = stats.headline(b) / stats.headline(a)
    ratios = stats.difference_interval(a, b, ratio=True)
    diff = stats.difference_interval(a, b)
    ratio_ci = f"{ratios.low:.3f}–{ratios.high:.3f}" if ratios else "n/a"
    half = f"±{(diff.high - diff.low) / 2:.1f}%" if diff else "n/a"
    print(f"  ratio b/a of the medians: {ratio:.3f} (95% CI {ratio_ci}); difference {half}")
    per_rep = [f"{y / x:.3f}" for x, y in zip(a, b, strict=False)]
    print(f"  ratio b/a repeat by repeat: {', '.join(per_rep)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", type=float, default=5.0, help="until_diff_pct")
    parser.add_argument("--min", type=int, default=3)
    parser.add_argument("--max", type=int, default=6)
    parser.add_argument("--duration", type=int, default=3, help="seconds per pgbench run")
    parser.add_argument("--sleep-ms", type=float, default=2.0, help="pg_sleep per transaction")
    parser.add_argument("--work", type=int, default=10000, help="generate_series rows")
    parser.add_argument("--period", type=float, default=4.0, help="hog on/off seconds")
    parser.add_argument("--only", choices=("quiet", "noisy"), default=None)
    args = parser.parse_args()
    for name in ("quiet", "noisy"):
        if args.only in (None, name):
            scenario(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
