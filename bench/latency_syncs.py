#!/usr/bin/env python3
"""Syncs through the native latency layer (pgrig-latencyfs): achieved against
target fdatasync latency at queue depth 1 for ESSD PL1, PL2 and PL3 (issue 44,
"within 25% of the class's at qd 1 for syncs"), as docs/storage-lab.md has for
reads.

Per class, on a fresh mount over ``--base``, three rows:

- **as pgrig calibrates, on a deadline** (``latency.calibrate_syncs``, the lab
  target's own step, the default): where this disk's fdatasync is slower than
  the local SSD the class was measured beside (35 us), the aim is the class's
  ratio times the disk's median sync at calibration, and each sync lasts the
  longer of the disk's own and a delay from its arrival that the loop finds;
- **as pgrig calibrates, in proportion** (the class as ``"NAME:proportion"``):
  each sync lasts the ratio times the disk's own sync of that moment (the aim:
  the ratio times the disk measured directly either side of the last step;
  the in-layer ratio column: what the layer applied to the disk's sync inside
  it, factor x the gain the loop found);
- **the class's figure, fixed**: the delay converged (``latency.converge``) on
  the published/measured latency itself (PL1/PL2 200 us, PL3 164 us) - only
  possible where the layer's floor is under it; else the row says so.

After each calibration, ``--hold`` more windows (3 by default) as a study's
runs would see the layer: fio through it, nothing adjusted, each against the
build's aim (what a run's "sync in the layer / aim" is held to), and the mean
sync in the layer by its counters over them (the report's per-run figure,
bulk flushes aside), and the disk directly after each (how far it moved).

Over two backing directories: ``/var/tmp`` (this VM's disk, whose own
fdatasync is 0.2-5 ms: slower than the 35 us local SSD the classes were
measured beside, so pgrig keeps the ratio) and ``/dev/shm`` (tmpfs: a sync
costs nothing there, so the layer must add the class's whole latency, and the
calibration aims at the class's own figure). Both beside nothing this script
controls (the 1-minute load average printed on every row: the machine is
shared), then again beside one CPU hog of its own (a busy loop, stopped by its
PID); ``--no-hog`` skips the second pass.

    .venv/bin/python bench/latency_syncs.py [--seconds 2] [--base /var/tmp,/dev/shm] [--no-hog]
        [--hold 3] [--modes deadline,proportion,fixed]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import tempfile
import time
from pathlib import Path

from latency_layers import hog, load, native_missing  # the read bench's, one copy

from pgrig.storage import latency
from pgrig.storage.latency import Latency
from pgrig.storage.nativefs import NativeMount

CLASSES = ("essd-pl1", "essd-pl2", "essd-pl3")


def as_calibrated(
    mount: NativeMount, disk: Path, name: str, seconds: int, beside: str, hold: int
) -> str:
    """The lab target's own calibration of syncs (``name`` may end ``:proportion``):
    the row as it would be built, then held for ``hold`` windows."""
    cls = latency.parse_class(name)
    cal = latency.calibrate_syncs(mount, disk, cls, seconds)
    before = cal.local_before.p50_us if cal.local_before else 0.0
    after = cal.local_after.p50_us if cal.local_after else 0.0
    if cal.proportional:
        how = (
            f"in proportion, {cal.factor:.1f}x the disk's own ({cal.local.p50_us:,.0f} us; "
            f"{before:,.0f} and {after:,.0f} around the last step), gain {cal.gain:.2f}"
        )
        ratio = f"{cal.in_layer_ratio:.2f}x" if cal.in_layer_ratio is not None else "-"
    elif cal.target.ratio_kept:
        how = (f"on a deadline, {cls.ratio:.1f}x the disk's median "
               f"({cal.local.p50_us:,.0f} and {before:,.0f} us; {after:,.0f} after), delay "
               f"{cal.delay_us:,.0f}")  # fmt: skip
        ratio = "-"
    else:
        how = f"{cal.target.us:,.0f} us (the disk {cal.local.p50_us:,.0f} us is faster than 35)"
        ratio = "-"
    return (f"| {cls.name} | {beside} | as calibrated: {how} | {cal.floor.p50_us:,.0f} | "
            f"{cal.aimed_us:,.0f} | {cal.achieved.p50_us:,.0f} (p99 {cal.achieved.p99_us:,.0f}) "
            f"| {ratio} | {cal.miss:+.0%} | {len(cal.steps)} | "
            f"{held(mount, disk, cal.aimed_us, seconds, hold)} | {load()} |")  # fmt: skip


def held(mount: NativeMount, disk: Path, aim: float, seconds: int, windows: int) -> str:
    """fio through the layer ``windows`` times as the build left it, against the
    build's aim (nothing adjusted: what a study's runs get), the mean small sync
    in the layer over them by its counters, and the disk directly after each."""
    if windows <= 0:
        return "-"
    first = mount.stats()
    through, disk_us = [], []
    for _ in range(windows):
        through.append(latency.measure(mount.mountpoint, seconds).p50_us)
        disk_us.append(latency.measure(disk, seconds).p50_us)
    last = mount.stats()
    syncs = (last["syncs"] - first["syncs"]) - (last["bulk_syncs"] - first["bulk_syncs"])
    spent = (last["sync_delay_ns"] - first["sync_delay_ns"]) - (
        last["bulk_sync_ns"] - first["bulk_sync_ns"]
    )
    mean = spent / syncs / 1e3 if syncs else 0.0
    return (", ".join(f"{x:,.0f} ({x / aim - 1:+.0%})" for x in through)
            + f"; in the layer {mean:,.0f} ({mean / aim - 1:+.0%}); the disk "
            + "-".join(f"{x:,.0f}" for x in (min(disk_us), max(disk_us))))  # fmt: skip


def fixed(mount: NativeMount, name: str, seconds: int, beside: str) -> str:
    """The delay converged on the class's own figure, whatever this disk does."""
    cls = latency.parse_class(name)
    aim = cls.fdatasync_us
    mount.set_sync_delay(0.0)
    floor = latency.measure(mount.mountpoint, seconds)
    if floor.p50_us >= aim:
        return (f"| {cls.name} | {beside} | the class's {aim:,.0f} us, fixed | "
                f"{floor.p50_us:,.0f} | {aim:,.0f} | the floor alone is over it | - | "
                f"{floor.p50_us / aim - 1:+.0%} | 0 | - | {load()} |")  # fmt: skip
    delay, got, steps = latency.converge(
        mount.set_sync_delay, lambda: latency.measure(mount.mountpoint, seconds), lambda: aim,
        latency.delay_for(aim, floor.p50_us),
    )  # fmt: skip
    return (f"| {cls.name} | {beside} | the class's {aim:,.0f} us, fixed (delay {delay:,.0f}) | "
            f"{floor.p50_us:,.0f} | {aim:,.0f} | {_lat(got)} | - | {got.p50_us / aim - 1:+.0%} | "
            f"{len(steps)} | - | {load()} |")  # fmt: skip


def _lat(x: Latency) -> str:
    return f"{x.p50_us:,.0f} (p99 {x.p99_us:,.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--base", default="/var/tmp,/dev/shm", help="backing directories")
    parser.add_argument("--no-hog", action="store_true", help="skip the pass beside one CPU hog")
    parser.add_argument("--hold", type=int, default=3,
                        help="windows through the layer after each calibration")  # fmt: skip
    parser.add_argument("--modes", default="deadline,proportion,fixed",
                        help="rows per class: deadline, proportion, fixed")  # fmt: skip
    args = parser.parse_args()
    modes = args.modes.split(",")
    if native_missing():
        return 3
    rows = [
        "| class | backing | beside | aim | floor us | aimed us | achieved us | in-layer ratio "
        "| miss | steps | held: fio's medians after (miss); the layer's mean sync; the disk "
        "| load (1 min) |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    passes = (False,) if args.no_hog else (False, True)
    for where in args.base.split(","):
        base = Path(tempfile.mkdtemp(prefix="pgrig-bench-syncs-", dir=where))
        try:
            for i, hogged in enumerate(passes):
                beside = f"{where} | " + ("one CPU hog" if hogged else "nothing of ours")
                for name, mode in itertools.product(CLASSES, modes):
                    here = base / f"{name}-{mode}-{i}"
                    (here / "backing").mkdir(parents=True)
                    (here / "disk").mkdir()
                    with NativeMount(here / "backing", here / "mnt") as mount, hog(hogged):
                        if mode == "fixed":
                            rows.append(fixed(mount, name, args.seconds, beside))
                            continue
                        spec = f"{name}:{mode}"
                        rows.append(as_calibrated(mount, here / "disk", spec, args.seconds,
                                                  beside, args.hold))  # fmt: skip
                    print(rows[-1], flush=True)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    print(f"{started} to {time.strftime('%H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} CPUs "
          f"shared with other work; fio 8 kB writes + fdatasync, qd 1, {args.seconds} s per "
          "figure, medians; the load average at the end: "
          + " ".join(f"{x:.1f}" for x in os.getloadavg()))  # fmt: skip
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
