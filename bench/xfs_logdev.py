#!/usr/bin/env python3
"""XFS's external log under an I/O cap on the data device (seed 002's logdev claim).

Two lab targets, XFS with its log inside and XFS with a 64 MiB external log on
a second loop device, the data device capped at --iops (the log's device is
outside the cap, as a disk of its own). On each, pgrig's fio probe writes 8 kB
blocks with fdatasync after each (sync engine, buffered, sequential then
random) into fio's freshly allocated file, so every fdatasync forces the log;
the kernel's counters (/sys/block/loopN/stat) say how many writes and flushes
each device saw per fdatasync. Prints a Markdown table (docs/storage-lab.md).

    .venv/bin/python bench/xfs_logdev.py [--rounds 2] [--iops 300] [--base /var/tmp]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pgrig.storage import LabSpec, lab_target
from pgrig.tools import fio

PATTERNS = ("write", "randwrite")


def counters(device: str) -> tuple[int, int]:
    """(writes completed, flushes completed) of a block device."""
    fields = Path(f"/sys/block/{Path(device).name}/stat").read_text().split()
    return int(fields[4]), int(fields[15])


def one(base: Path, log: bool, pattern: str, args: argparse.Namespace) -> tuple[float, str]:
    keys: dict[str, str | int] = {"fs": "xfs", "size": "1GiB", "iops": args.iops}
    if log:
        keys["log_size"] = "64MiB"
    with lab_target(base, LabSpec.from_mapping(keys)) as target:
        fs = target.filesystem
        assert fs is not None
        devices = [fs.device, *([fs.log_device] if fs.log_device else [])]
        before = [counters(d) for d in devices]
        job = fio.FioJob(
            directory=target.directory, pattern=pattern, size="64M", iodepth=1,
            runtime_s=args.runtime, fdatasync=1, ioengine="sync", direct=False,
        )  # fmt: skip
        result, _ = fio.run(job, preexec=target.preexec)
        syncs = result.iops * args.runtime
        seen = []
        after = [counters(d) for d in devices]
        for device, (w0, f0), (w1, f1) in zip(devices, before, after, strict=True):
            seen.append(f"{device}: {(w1 - w0) / syncs:.2f} / {(f1 - f0) / syncs:.2f}")
        return result.iops, "; ".join(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, default=Path("/var/tmp"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iops", type=int, default=300)
    ap.add_argument("--runtime", type=int, default=8)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; data device capped at {args.iops} IOPS")
    print("| round | fio 8k, fdatasync each | log | IOPS | writes / flushes per fdatasync |")
    print("|---|---|---|---:|---|")
    for r in range(1, args.rounds + 1):
        for pattern in PATTERNS:
            for log in (False, True):
                iops, seen = one(args.base, log, pattern, args)
                where = "external" if log else "internal"
                print(f"| {r} | {pattern} | {where} | {iops:,.0f} | {seen} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
