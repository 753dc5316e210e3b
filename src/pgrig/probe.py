"""Storage probes as steps: pg_test_timing, pg_test_fsync and fio on the target directory.

These measure the machine and the storage under test before PostgreSQL does,
so the report can put the database's numbers next to the physical limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pgrig.campaign import FioPlan, ProbeSpec
from pgrig.errors import BinaryNotFound
from pgrig.step import Context, Skip, Step
from pgrig.tools import fio, pg_test_fsync, pg_test_timing
from pgrig.ui import Step as ProgressLine

FIO_LABELS = {
    "randwrite": "8k random write",
    "randread": "8k random read",
    "write": "8k sequential write",
    "read": "8k sequential read",
}


def _timing(seconds: int) -> Any:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        return pg_test_timing.run(ctx.bins.bin_dir, duration_s=seconds, timeout=seconds + 60)

    return action


def _fsync(seconds: int) -> Any:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        done = 0

        def on_line(text: str) -> None:
            nonlocal done
            # pg_test_fsync finishes a method's line only when its test is over.
            if "ops/sec" in text or "n/a" in text:
                done += 1
                line.update(
                    completed=done * seconds, detail=f"{done}/{pg_test_fsync.TIMED_TESTS} tests"
                )

        return pg_test_fsync.run(
            ctx.bins.bin_dir,
            ctx.target,
            seconds=seconds,
            timeout=30 * seconds + 120,
            on_line=on_line,
        )

    return action


def _fio(fio_plan: FioPlan, pattern: str) -> Any:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        try:
            fio.find_fio()
        except BinaryNotFound as exc:
            raise Skip(f"{exc.message}: {exc.hint}" if exc.hint else exc.message) from exc
        job = fio.FioJob(
            directory=ctx.target,
            pattern=pattern,
            numjobs=fio_plan.numjobs,
            iodepth=fio_plan.iodepth,
            size=fio_plan.size,
            runtime_s=fio_plan.runtime_s,
            direct=fio_plan.direct,
            ioengine=fio_plan.ioengine,
        )

        def on_progress(fraction: float, remaining: float | None) -> None:
            line.update(
                completed=fraction * fio_plan.runtime_s,
                detail=f"{remaining:.0f} s left" if remaining is not None else None,
            )

        return fio.run(job, on_progress=on_progress, timeout=fio_plan.runtime_s * 4 + 300)

    return action


def steps(probes: ProbeSpec, target: str, directory: Path) -> list[Step]:
    out: list[Step] = []
    where = str(directory)
    if probes.timing_s:
        out.append(
            Step(
                key=f"{target}/probe/pg_test_timing",
                kind="pg_test_timing",
                label=f"{target}: pg_test_timing",
                params={"duration_s": probes.timing_s},
                action=_timing(probes.timing_s),
                tools=("pg_test_timing",),
            )
        )
    if probes.fsync_s:
        out.append(
            Step(
                key=f"{target}/probe/pg_test_fsync",
                kind="pg_test_fsync",
                label=f"{target}: pg_test_fsync in {where}",
                params={"seconds_per_test": probes.fsync_s, "directory": where},
                action=_fsync(probes.fsync_s),
                total=pg_test_fsync.TIMED_TESTS * probes.fsync_s,
                tools=("pg_test_fsync",),
            )
        )
    if probes.fio is not None:
        for pattern in probes.fio.patterns:
            out.append(
                Step(
                    key=f"{target}/probe/fio/{pattern}",
                    kind="fio",
                    label=f"{target}: fio {FIO_LABELS[pattern]}",
                    params={
                        "pattern": pattern,
                        "block_size": "8k",
                        "numjobs": probes.fio.numjobs,
                        "iodepth": probes.fio.iodepth,
                        "size": probes.fio.size,
                        "runtime_s": probes.fio.runtime_s,
                        "direct": probes.fio.direct,
                        "ioengine": probes.fio.ioengine,
                        "directory": where,
                    },
                    action=_fio(probes.fio, pattern),
                    total=probes.fio.runtime_s,
                    tools=("fio",),
                )
            )
    return out
