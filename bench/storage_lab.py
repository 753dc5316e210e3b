#!/usr/bin/env python3
"""fio 8k random read/write on the storage lab's targets (issue 12 measurements).

Targets, all loop devices on a file of --base (O_DIRECT loop, preallocated):

* xfs and ext4 with default mkfs options and noatime;
* xfs under the ESSD presets PL1 and PL3 at small sizes (the throttle binds
  only where the preset is below what the disk here can do).

Each cell is the median of --rounds runs of pgrig's own fio probe (libaio,
direct=1, iodepth --iodepth, --runtime s), the targets rotated within each
round so slow drift of a shared machine favours none. Prints a Markdown table
and the load average before and after.

    .venv/bin/python bench/storage_lab.py [--rounds 3] [--runtime 10] [--base /var/tmp]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path

from pgrig.storage import FilesystemInfo, FsSpec, IoLimits, essd, loop_filesystem, throttled
from pgrig.tools import fio

PATTERNS = ("randread", "randwrite")


@contextlib.contextmanager
def nothing() -> Iterator[None]:
    yield None


def measure(
    info: FilesystemInfo,
    pattern: str,
    args: argparse.Namespace,
    preexec: Callable[[], None] | None,
) -> float:
    job = fio.FioJob(
        directory=Path(info.data_dir),
        pattern=pattern,
        size=args.size,
        iodepth=args.iodepth,
        runtime_s=args.runtime,
    )
    result, _ = fio.run(job, preexec=preexec)
    return result.iops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base", type=Path, default=Path("/var/tmp"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runtime", type=int, default=10)
    parser.add_argument("--iodepth", type=int, default=16)
    parser.add_argument("--size", default="256M")
    args = parser.parse_args()

    cases: list[tuple[str, str, IoLimits | None]] = [
        ("xfs", "xfs, noatime", None),
        ("ext4", "ext4, noatime", None),
        ("xfs", "xfs + ESSD PL1 20 GiB", essd("PL1", 20)),
        ("xfs", "xfs + ESSD PL1 100 GiB", essd("PL1", 100)),
        ("xfs", "xfs + ESSD PL3 1,261 GiB", essd("PL3", 1261)),
    ]
    results: dict[tuple[str, str], list[float]] = {}
    print(f"load average before: {os.getloadavg()}")
    with contextlib.ExitStack() as stack:
        targets = {
            fstype: stack.enter_context(
                loop_filesystem(args.base, FsSpec.parse(fstype, "1G", mount="noatime"))
            )
            for fstype in ("xfs", "ext4")
        }
        for round_no in range(args.rounds):
            order = cases[round_no % len(cases) :] + cases[: round_no % len(cases)]
            for fstype, label, limits in order:
                info = targets[fstype]
                cgroup = throttled(limits, info.major_minor) if limits else nothing()
                with cgroup as cg:
                    for pattern in PATTERNS:
                        preexec = cg.preexec() if cg is not None else None
                        iops = measure(info, pattern, args, preexec)
                        results.setdefault((label, pattern), []).append(iops)
                        print(f"round {round_no + 1}: {label} {pattern}: {iops:,.0f} IOPS")
    print(f"load average after: {os.getloadavg()}")
    print()
    print("| Target | cap (IOPS) | 8k randread IOPS | 8k randwrite IOPS |")
    print("| --- | ---: | ---: | ---: |")
    for _fstype, label, limits in cases:
        cap = f"{limits.read_iops:,}" if limits and limits.read_iops else "-"
        cells = []
        for pattern in PATTERNS:
            runs = results[(label, pattern)]
            spread = f" ({min(runs):,.0f}-{max(runs):,.0f})" if len(runs) > 1 else ""
            cells.append(f"{statistics.median(runs):,.0f}{spread}")
        print(f"| {label} | {cap} | {cells[0]} | {cells[1]} |")
    print()
    print(
        f"fio libaio direct=1 bs=8k iodepth={args.iodepth} numjobs=1 size={args.size} "
        f"runtime={args.runtime}s; median (min-max) of {args.rounds} rounds"
    )


if __name__ == "__main__":
    main()
