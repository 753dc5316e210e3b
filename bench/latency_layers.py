#!/usr/bin/env python3
"""The native latency layer (pgrig-latencyfs) against the Python one (pgrig.lossyfs),
side by side on the same disk (issue 44):

- the floor: what each adds at zero delay - fio's 8 kB O_DIRECT random read at
  queue depth 1, and an 8 kB write + fdatasync - beside the disk's own;
- CPU per 8 kB I/O: the layer's PID's CPU time (/proc/PID/stat, user + system,
  all threads) over a zero-delay random-read run, over the I/Os fio did;
- achieved against target at queue depth 1, 4 and 16: the read delay converged
  at qd 1 to ``--target-us`` (storage/latency.converge, the calibration's loop),
  then kept for qd 4 and 16 - a cloud disk's latency does not grow with the
  queue below its IOPS cap, so neither should the layer's.

The machine is shared: every figure has the 1-minute load average beside it, and
``--hog`` adds one CPU hog of this script's own (a busy loop, stopped by PID).

    .venv/bin/python bench/latency_layers.py [--seconds 2] [--target-us 200] [--hog]
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pgrig.lossyfs import LossyMount
from pgrig.storage import latency, nativefs
from pgrig.storage.latency import Latency
from pgrig.storage.nativefs import NativeMount
from pgrig.tools import fio


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def reads(directory: Path, seconds: int, depth: int) -> tuple[Latency, int]:
    """fio's 8 kB O_DIRECT random reads at ``depth``: its latency and its I/Os."""
    job = fio.FioJob(directory, "randread", ioengine="psync" if depth == 1 else "libaio",
                     direct=True, iodepth=depth, size="16M", runtime_s=seconds)  # fmt: skip
    result, _raw = fio.run(job)
    return Latency(result.clat_p50_us, result.clat_p99_us), round(result.iops * result.runtime_s)


@contextmanager
def hog(on: bool) -> Iterator[None]:
    """One busy loop beside the measurement, stopped by its PID."""
    if not on:
        yield
        return
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # noqa: S603
    try:
        yield
    finally:
        busy.send_signal(signal.SIGKILL)
        busy.wait(timeout=10)


def bench(name: str, layer: latency.Emulator, disk: Path, seconds: int, target: float) -> list[str]:
    rows, mount = [], layer.mount
    mount.set_read_delay(0.0)
    mount.set_sync_delay(0.0)
    local, _ = reads(disk, seconds, 1)
    before = layer.cpu()
    floor, ios = reads(mount.mountpoint, seconds, 1)
    after = layer.cpu()
    per_io = (after.seconds - before.seconds) / ios * 1e6 if before and after else float("nan")
    rows.append(f"| {name} | read floor, qd 1 (the disk: {local.p50_us:,.0f} us) | "
                f"{floor.p50_us:,.0f} us (p99 {floor.p99_us:,.0f}) | | {load()} |")  # fmt: skip
    rows.append(f"| {name} | CPU per 8 kB read, zero delay ({ios:,} reads) | "
                f"{per_io:,.1f} us | | {load()} |")  # fmt: skip
    sync_disk = latency.measure(disk, seconds)
    sync_floor = latency.measure(mount.mountpoint, seconds)
    rows.append(f"| {name} | 8 kB write + fdatasync floor (the disk: "
                f"{sync_disk.p50_us:,.0f} us) | {sync_floor.p50_us:,.0f} us "
                f"(p99 {sync_floor.p99_us:,.0f}) | | {load()} |")  # fmt: skip
    delay, got, steps = latency.converge(
        mount.set_read_delay, lambda: reads(mount.mountpoint, seconds, 1)[0], lambda: target,
        latency.delay_for(target, floor.p50_us),
    )  # fmt: skip
    tried = ", ".join(f"{d:,.0f}->{g:,.0f}" for d, g in steps)
    for depth in (1, 4, 16):
        achieved = got if depth == 1 else reads(mount.mountpoint, seconds, depth)[0]
        miss = achieved.p50_us / target - 1
        rows.append(f"| {name} | read at qd {depth}, delay {delay:,.0f} us (steps: {tried}) | "
                    f"{achieved.p50_us:,.0f} us (p99 {achieved.p99_us:,.0f}) | "
                    f"{target:,.0f} us, {miss:+.0%} | {load()} |")  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--target-us", type=float, default=200.0)
    parser.add_argument("--hog", action="store_true", help="one CPU hog beside the measurements")
    parser.add_argument("--base", type=Path, default=Path("/var/tmp"))
    args = parser.parse_args()
    reason = nativefs.unavailable()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 3
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-layers-", dir=args.base))
    rows = ["| layer | what | measured | target, miss | load (1 min) |", "|---|---|---|---|---|"]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        for name in ("native", "python"):
            (base / name / "backing").mkdir(parents=True)
            (base / name / "disk").mkdir()
            backing, mnt = base / name / "backing", base / name / "mnt"
            mount: NativeMount | LossyMount = (
                NativeMount(backing, mnt)
                if name == "native"
                else LossyMount(backing, mnt, metadata="journal")
            )
            with mount, hog(args.hog):
                rows += bench(name, latency.Emulator(name, mount), base / name / "disk",
                              args.seconds, args.target_us)  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)
    hogged = ", one CPU hog beside it" if args.hog else ""
    print(f"{started}, {os.cpu_count()} CPUs shared with other work{hogged}; "
          f"fio {args.seconds} s per figure, medians")  # fmt: skip
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
