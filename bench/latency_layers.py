#!/usr/bin/env python3
"""The native latency layer (pgrig-latencyfs) against the Python one (pgrig.lossyfs),
side by side on the same disk, quiet and beside one CPU hog (issue 44's table):

- the floor: what each adds at zero delay - fio's 8 kB O_DIRECT random read at
  queue depth 1, and an 8 kB write + fdatasync - beside the disk's own;
- CPU per 8 kB I/O: the layer's PID's CPU time (/proc/PID/stat, user + system,
  all threads) over a zero-delay random-read run, over the I/Os fio did;
- achieved against target at queue depth 1, 4 and 16: the read delay converged
  at qd 1 to ``--target-us`` (storage/latency.converge, the calibration's loop),
  then kept for qd 4 and 16 - a cloud disk's latency does not grow with the
  queue below its IOPS cap, so neither should the layer's.

One table, a column per layer and pass: each layer on a fresh mount, first
beside nothing of this script's, then beside one CPU hog of its own (a busy
loop, stopped by its PID); ``--no-hog`` skips the second pass. The machine may
be shared: the last row is the 1-minute load average at the end of each column.
About 25 s a column on a quiet machine (2 s fio windows), 2 minutes in all.

    .venv/bin/python bench/latency_layers.py [--seconds 2] [--target-us 200] [--no-hog]
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


def native_missing() -> bool:
    """True, said on stderr, when the native layer cannot mount here (exit 3)."""
    reason = nativefs.unavailable()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
    return reason is not None


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


ROWS = (
    "read floor, 8 kB O_DIRECT qd 1 (zero delay)",
    "the disk's own read, qd 1",
    "CPU per 8 kB read (the layer's PID, user + system)",
    "write + fdatasync floor (zero delay)",
    "the disk's own write + fdatasync",
    "a {target} us read target at qd 1: achieved (the delay found)",
    "the same delay at qd 4",
    "the same delay at qd 16",
    "load (1 min) at the end",
)


def _lat(x: Latency) -> str:
    return f"{x.p50_us:,.0f} us (p99 {x.p99_us:,.0f})"


def bench(layer: latency.Emulator, disk: Path, seconds: int, target: float) -> list[str]:
    """One column: the cells of ``ROWS`` for this layer, as measured now."""
    mount = layer.mount
    mount.set_read_delay(0.0)
    mount.set_sync_delay(0.0)
    local, _ = reads(disk, seconds, 1)
    before = layer.cpu()
    floor, ios = reads(mount.mountpoint, seconds, 1)
    after = layer.cpu()
    per_io = (after.seconds - before.seconds) / ios * 1e6 if before and after else float("nan")
    sync_disk = latency.measure(disk, seconds)
    sync_floor = latency.measure(mount.mountpoint, seconds)
    delay, got, steps = latency.converge(
        mount.set_read_delay, lambda: reads(mount.mountpoint, seconds, 1)[0], lambda: target,
        latency.delay_for(target, floor.p50_us),
    )  # fmt: skip
    converged = abs(got.p50_us / target - 1) <= latency.TOLERANCE / 2
    how = f"{delay:,.0f} us in {len(steps)} step(s)" + ("" if converged else ", not converged")
    qd1 = f"{got.p50_us:,.0f} us, {got.p50_us / target - 1:+.0%} ({how})"
    cells = [_lat(floor), _lat(local), f"{per_io:,.1f} us ({ios:,} reads)", _lat(sync_floor),
             _lat(sync_disk), qd1]  # fmt: skip
    for depth in (4, 16):
        achieved = reads(mount.mountpoint, seconds, depth)[0]
        cells.append(f"{achieved.p50_us:,.0f} us, {achieved.p50_us / target - 1:+.0%}")
    return [*cells, load()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--target-us", type=float, default=200.0)
    parser.add_argument("--no-hog", action="store_true", help="skip the pass beside one CPU hog")
    parser.add_argument("--base", type=Path, default=Path("/var/tmp"))
    args = parser.parse_args()
    if native_missing():
        return 3
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-layers-", dir=args.base))
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    columns: list[tuple[tuple[bool, bool], str, list[str]]] = []
    try:
        for hogged in (False,) if args.no_hog else (False, True):
            for name in ("native", "python"):
                here = base / f"{name}-{'hog' if hogged else 'quiet'}"
                (here / "backing").mkdir(parents=True)
                (here / "disk").mkdir()
                backing, mnt = here / "backing", here / "mnt"
                mount: NativeMount | LossyMount = (
                    NativeMount(backing, mnt)
                    if name == "native"
                    else LossyMount(backing, mnt, metadata="journal")
                )
                with mount, hog(hogged):
                    cells = bench(latency.Emulator(name, mount), here / "disk", args.seconds,
                                  args.target_us)  # fmt: skip
                heading = f"{name}, {'one CPU hog' if hogged else 'quiet'}"
                columns.append(((name != "native", hogged), heading, cells))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    order = [(h, c) for _, h, c in sorted(columns, key=lambda c: c[0])]  # native first, quiet first
    print(f"{started} to {time.strftime('%H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} CPUs "
          f"(shared with whatever else ran: the load row); fio {args.seconds} s per figure, "
          f"medians, over {args.base}")  # fmt: skip
    print("| | " + " | ".join(name for name, _ in order) + " |")
    print("|---|" + "---:|" * len(order))
    for i, row in enumerate(ROWS):
        label = row.format(target=f"{args.target_us:,.0f}")
        print(f"| {label} | " + " | ".join(cells[i] for _, cells in order) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
