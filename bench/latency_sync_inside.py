#!/usr/bin/env python3
"""Why the disk's own sync, timed inside the native latency layer, rises with the
factor the layer applies (docs/storage-lab.md, "Syncs in proportion"): at
factor 4.7 the backing fdatasync inside the layer took up to twice what it took
back to back on the disk, which is why the calibration needs a gain of about
0.5 on the factor.

One 8 kB block rewritten and fdatasync'ed in a loop (as pg_test_fsync does),
the disk's own fdatasync timed per call:

- **the disk directly**: back to back; paced by a sleep of ``factor - 1`` times
  each sync after it (what the layer does to the process it serves); paced by
  spinning that long instead (the CPU never idles);
- **through the layer** (a fresh ``NativeMount`` over the same disk): the
  backing fdatasync inside it from the layer's own counters
  (``backing_sync_ns / syncs``), at factor 1, at ``factor`` with the layer
  sleeping its wait (as pgrig runs it), and at ``factor`` with the layer
  spinning its whole wait (``spin``: the waiting thread busy, its CPU never
  idle).

Modes interleaved round by round (``--rounds`` of ``--seconds`` each); per
mode the median over rounds of each round's mean sync, and the 1-minute load.
What it found (docs/storage-lab.md, "Why, measured again"): the disk directly,
paced by the same sleeps, rises as much as inside the layer; spinning instead
of sleeping takes most of it away at factors 2-4.7 (the idle vCPU's wake-up),
not at 10.

    .venv/bin/python bench/latency_sync_inside.py [--factor 4.7] [--seconds 1] [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from latency_layers import load, native_missing

from pgrig.storage.nativefs import NativeMount

BLOCK = b"x" * 8192


def _wait(seconds: float, spin: bool) -> None:
    if spin:
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            pass
    else:
        time.sleep(seconds)


def direct(path: Path, seconds: float, extra: float, spin: bool) -> float:
    """The mean fdatasync of one rewritten block, us, each followed by ``extra``
    times its own time waited (sleeping, or spinning)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    took: list[float] = []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.pwrite(fd, BLOCK, 0)
            started = time.perf_counter()
            os.fdatasync(fd)
            took.append(time.perf_counter() - started)
            if extra:
                _wait(extra * took[-1], spin)
    finally:
        os.close(fd)
    return statistics.fmean(took) * 1e6


def layered(mount: NativeMount, seconds: float) -> float:
    """The mean backing fdatasync inside the layer over the loop, us (its counters)."""
    before = mount.stats()
    direct(mount.mountpoint / "wal", seconds, 0.0, False)
    after = mount.stats()
    syncs = after["syncs"] - before["syncs"]
    return (after["backing_sync_ns"] - before["backing_sync_ns"]) / max(syncs, 1) / 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=4.7)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--base", type=Path, default=Path("/var/tmp"))
    args = parser.parse_args()
    if native_missing():
        return 3
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-inside-", dir=args.base))
    f, s = args.factor, args.seconds
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    seen: dict[str, list[float]] = {}
    loads: list[float] = []
    try:
        (base / "backing").mkdir()
        with NativeMount(base / "backing", base / "mnt") as mount:
            assert mount.control is not None
            control = mount.control

            def through(factor: float, spin_us: float) -> Callable[[], float]:
                def run() -> float:
                    mount.set_sync_delay(0.0, factor=factor)
                    control.set_spin(spin_us)
                    return layered(mount, s)

                return run

            modes: dict[str, Callable[[], float]] = {
                "the disk directly, back to back": lambda: direct(base / "d", s, 0.0, False),
                f"the disk directly, sleeping {f - 1:.1f}x each sync after it":
                    lambda: direct(base / "d", s, f - 1, False),
                f"the disk directly, spinning {f - 1:.1f}x each sync after it":
                    lambda: direct(base / "d", s, f - 1, True),
                "inside the layer, factor 1": through(1.0, 0.0),
                f"inside the layer, factor {f:.1f}, sleeping its wait": through(f, 0.0),
                # a spin longer than any wait: the waiting thread never sleeps
                f"inside the layer, factor {f:.1f}, spinning its wait": through(f, 1e6),
            }  # fmt: skip
            for _ in range(args.rounds):
                for name, run in modes.items():
                    seen.setdefault(name, []).append(run())
                loads.append(os.getloadavg()[0])
            control.set_spin(0.0)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{started} to {time.strftime('%H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} CPUs; "
          f"one 8 kB block rewritten + fdatasync over {args.base}, {args.rounds} rounds of "
          f"{s:g} s per mode, interleaved; load (1 min) {min(loads):.1f}-{max(loads):.1f} "
          f"(now {load()})")  # fmt: skip
    print("| the disk's own fdatasync | median of the rounds' means | rounds |")
    print("|---|---:|---|")
    for name, values in seen.items():
        rounds = ", ".join(f"{v:,.0f}" for v in values)
        print(f"| {name} | {statistics.median(values):,.0f} us | {rounds} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
