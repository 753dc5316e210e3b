"""Storage probes as steps: pg_test_timing, pg_test_fsync and fio on the target directory.

These measure the machine and the storage under test before PostgreSQL does,
so the report can put the database's numbers next to the physical limits.
"""

from __future__ import annotations

from typing import Any

from pgrig.errors import BinaryNotFound
from pgrig.plan import StudyPlan
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


def _fio(plan: StudyPlan, pattern: str) -> Any:
    def action(ctx: Context, line: ProgressLine) -> tuple[Any, str]:
        try:
            fio.find_fio()
        except BinaryNotFound as exc:
            raise Skip(f"{exc.message}: {exc.hint}" if exc.hint else exc.message) from exc
        job = fio.FioJob(
            directory=ctx.target,
            pattern=pattern,
            numjobs=plan.fio.numjobs,
            iodepth=plan.fio.iodepth,
            size=plan.fio.size,
            runtime_s=plan.fio.runtime_s,
            direct=plan.fio.direct,
            ioengine=plan.fio.ioengine,
        )

        def on_progress(fraction: float, remaining: float | None) -> None:
            line.update(
                completed=fraction * plan.fio.runtime_s,
                detail=f"{remaining:.0f} s left" if remaining is not None else None,
            )

        return fio.run(job, on_progress=on_progress, timeout=plan.fio.runtime_s * 4 + 300)

    return action


def steps(plan: StudyPlan) -> list[Step]:
    out: list[Step] = []
    target = str(plan.target)
    if "timing" in plan.probes:
        out.append(
            Step(
                key="probe/pg_test_timing",
                kind="pg_test_timing",
                label="pg_test_timing",
                params={"duration_s": plan.timing_s},
                action=_timing(plan.timing_s),
                total=None,
                tools=("pg_test_timing",),
            )
        )
    if "fsync" in plan.probes:
        out.append(
            Step(
                key="probe/pg_test_fsync",
                kind="pg_test_fsync",
                label=f"pg_test_fsync in {target}",
                params={"seconds_per_test": plan.fsync_s, "directory": target},
                action=_fsync(plan.fsync_s),
                total=pg_test_fsync.TIMED_TESTS * plan.fsync_s,
                tools=("pg_test_fsync",),
            )
        )
    if "fio" in plan.probes:
        for pattern in plan.fio.patterns:
            out.append(
                Step(
                    key=f"probe/fio/{pattern}",
                    kind="fio",
                    label=f"fio {FIO_LABELS[pattern]}",
                    params={
                        "pattern": pattern,
                        "block_size": "8k",
                        "numjobs": plan.fio.numjobs,
                        "iodepth": plan.fio.iodepth,
                        "size": plan.fio.size,
                        "runtime_s": plan.fio.runtime_s,
                        "direct": plan.fio.direct,
                        "ioengine": plan.fio.ioengine,
                        "directory": target,
                    },
                    action=_fio(plan, pattern),
                    total=plan.fio.runtime_s,
                    tools=("fio",),
                )
            )
    return out
