#!/usr/bin/env python3
"""How held back a load host must be before pgrig names it (issue 40, round
three: a host under 30% slower went unnamed). Three namespace hosts
(tests/hosts_fixture.py), the server on h1 and pgbench from h2 and h3, the
campaign of tests/test_remote_faults.py; h3's link shaped inside its namespace
with a token bucket (``tc qdisc ... tbf``, as the held-back test does) at each
rate asked, ``none`` for no shaper: each run's per-host tps, h3's share
against h2, and whether its record names h3 held back.

    .venv/bin/python bench/hosts_throttle.py [--rates none,4mbit,2mbit] [--times 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hosts_fixture import make_lab, netns_available  # noqa: E402
from pgrig.registry.shared import LoadHostsRun  # noqa: E402
from pgrig.results import typed  # noqa: E402
from pgrig.store import Store  # noqa: E402
from test_remote_faults import _link_of  # noqa: E402
from test_remote_target import campaign  # noqa: E402

KEY = "db/tpcb/s1/select-only/c2/d{d}/r1"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="none,8mbit,4mbit,2mbit")
    ap.add_argument("--times", type=int, default=2)
    ap.add_argument("--duration", type=int, default=5, help="seconds of each run (5)")
    args = ap.parse_args()
    if why := netns_available():
        print(f"cannot run: {why}", file=sys.stderr)
        return 3
    print("| h3's link | run | h2 tps | h3 tps | h3 / h2 | named | disturbed |")
    print("|---|---|---|---|---|---|---|")
    with make_lab(3) as lab:
        link = _link_of(lab.hosts[2].netns)
        shaper = ["ip", "netns", "exec", lab.hosts[2].netns, "tc", "qdisc"]
        for rate in args.rates.split(","):
            for n in range(1, args.times + 1):
                if rate != "none":
                    tbf = ["tbf", "rate", rate, "burst", "4kb", "latency", "100ms"]
                    subprocess.run(
                        [*shaper, "add", "dev", link, "root", *tbf], check=True, timeout=30
                    )
                try:
                    with tempfile.TemporaryDirectory() as tmp:
                        row = _one(Path(tmp), lab.write_inventory(), args.duration)
                finally:
                    if rate != "none":
                        subprocess.run([*shaper, "del", "dev", link, "root"], timeout=30)
                print(f"| {rate} | {n} | {row}", flush=True)
    return 0


def _one(tmp: Path, inventory: Path, duration: int) -> str:
    path = campaign(tmp, inventory, durations=str(duration), name="hosts-throttle")
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "run", str(path), "--results", str(tmp / "r")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]} | | | | |"
    key = KEY.format(d=duration)
    with Store.open(tmp / "r" / "results.sqlite") as st:
        records = {r.key: r for r in st.runs("hosts-throttle")}
    multi = typed(records[f"{key}/hosts"], LoadHostsRun)
    assert multi is not None
    tps = {h.host: h.tps for h in multi.hosts}
    monitor = records[f"{key}/monitor"].result or {}
    disturbed = monitor.get("disturbed")
    named = "-"
    if multi.imbalance:
        named = multi.imbalance.split(" with the same clients")[0]
    return (
        f"{tps['h2']:,.0f} | {tps['h3']:,.0f} | {tps['h3'] / tps['h2']:.2f} | {named} | "
        f"{'yes' if disturbed else 'no'} |"
    )


if __name__ == "__main__":
    sys.exit(main())
