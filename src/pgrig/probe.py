"""Storage probes as steps: pg_test_timing, pg_test_fsync and fio on the target directory.

These measure the machine and the storage under test before PostgreSQL does,
so the report can put the database's numbers next to the physical limits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pgrig.errors import BinaryNotFound, UsageError
from pgrig.results import FioResult, FsyncResult, ResultKind, TimingResult
from pgrig.schema import Schema, Table, choices, custom, flag, integer
from pgrig.step import Action, Call, Context, Skip, Step, StepKey
from pgrig.storage import cpuset
from pgrig.tools import fio, pg_test_fsync, pg_test_timing
from pgrig.ui import Step as ProgressLine
from pgrig.units import parse_size

FIO_PATTERNS = ("randwrite", "randread", "write", "read")


@dataclass(frozen=True)
class FioPlan:
    patterns: tuple[str, ...] = FIO_PATTERNS
    numjobs: int = 1
    iodepth: int = 8
    size: str = "256M"
    runtime_s: int = 10
    direct: bool = True
    ioengine: str = "libaio"
    cpus_allowed: str | None = None


@dataclass(frozen=True)
class ProbeSpec:
    timing_s: int | None = 3  # None: not run
    fsync_s: int | None = 2
    fio: FioPlan | None = field(default_factory=FioPlan)
    # Runs of pg_test_fsync. One run keeps the key pgrig 0.1 wrote
    # (T/probe/pg_test_fsync), so results files written before repeats existed
    # resume without running it again; repeats are keyed .../pg_test_fsync/rN.
    fsync_repeat: int = 1


def _seconds(default: int) -> Callable[[Table, str, int | bool], int | None]:
    def read(t: Table, key: str, value: int | bool) -> int | None:
        if value is False:
            return None
        if value is True:
            return default
        if value < 1:
            raise t.error(key, f"{value}: at least 1 second, or false to skip")
        return int(value)

    return read


def _size(t: Table, key: str, size: str) -> str:
    try:  # fio's own notation, as its runner reads it: refused here, not mid-study
        nbytes = fio.size_bytes(size)
    except UsageError as exc:
        raise t.error(key, exc.message, exc.hint) from exc
    if nbytes <= 0:  # fio ran and failed every step: "4 step(s) failed"
        raise t.error(key, f"{size}: fio needs a file of some size", hint="e.g. 256M or 1G")
    return str(size)


def _ioengine(t: Table, key: str, engine: str) -> str:
    try:
        found = fio.find_fio()
    except BinaryNotFound:
        return engine  # no fio here: its steps are skipped, saying so
    if not fio.engine_known(found, engine):  # every fio step failed, mid-study
        raise t.error(
            key,
            f"{engine!r}: {found} has no such I/O engine",
            hint="`fio --enghelp` lists them; libaio, io_uring, psync and sync are common",
        )
    return engine


_CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


def _cpus_allowed(t: Table, key: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not _CPU_LIST.fullmatch(value):
        raise t.error(key, f"{value!r} is not a CPU list", hint='e.g. "0", "0-1" or "0,2-3"')
    cpus: set[int] = set()
    for part in value.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    have = set(cpuset.available())
    if not cpus <= have:
        raise t.error(key, f"CPUs {sorted(cpus - have)} are not this machine's (it has "
                      f"{', '.join(map(str, sorted(have)))})")  # fmt: skip
    numjobs = t.get("numjobs", int, 1)
    if numjobs > len(cpus):  # seed 000's script refused it too
        raise t.error(key, f"{len(cpus)} CPU(s) for numjobs = {numjobs}: one job per CPU",
                      hint="list as many CPUs as jobs, or lower numjobs")  # fmt: skip
    return value


FIO_SCHEMA = Schema(
    "[probes.fio]",
    choices("patterns", FIO_PATTERNS, FIO_PATTERNS, "8k patterns to run"),
    integer("numjobs", 1, "fio `--numjobs`"),
    integer("iodepth", 8, "fio `--iodepth`"),
    custom("size", "256M", "size of the test file", _size, kind=str),
    integer("runtime", 10, "seconds per pattern", field="runtime_s"),
    flag("direct", True, "`O_DIRECT`, as the seeds"),
    custom("ioengine", "libaio", "fio `--ioengine`", _ioengine, kind=str),
    custom("cpus_allowed", None, "fio `--cpus_allowed` with `--cpus_allowed_policy=split` (a "
           "CPU per job), e.g. `\"0-1\"`: seed 000 pinned its jobs to the CPUs of the disk's "
           "queues", _cpus_allowed, kind=str),
)  # fmt: skip


def _fio_table(t: Table, key: str, table: Table | bool | None) -> FioPlan | None:
    if table is False:
        return None
    if not isinstance(table, Table):
        return FioPlan()
    read = FIO_SCHEMA.checked(table)
    return FioPlan(**(read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}))


PROBES_SCHEMA = Schema(
    "[probes]",
    custom("timing", 3, "pg_test_timing seconds, or `false`", _seconds(3), kind=(int, bool),
           field="timing_s"),
    custom("fsync", 2, "pg_test_fsync seconds per test, or `false`", _seconds(2),
           kind=(int, bool), field="fsync_s"),
    integer("fsync_repeat", 1, "runs of pg_test_fsync: the report shows each row's median "
            "and range, and flags orderings that contradict physics as noise"),
    custom("fio", None, "`{ patterns, numjobs, iodepth, size, runtime, direct, ioengine }` or "
           "`false`", _fio_table, kind=(Table, bool), shown_default="all four patterns"),
)  # fmt: skip


FIO_LABELS = {
    "randwrite": "8k random write",
    "randread": "8k random read",
    "write": "8k sequential write",
    "read": "8k sequential read",
}


def timing_action(seconds: int) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[TimingResult, str]:
        return pg_test_timing.run(
            ctx.tool_dir("pg_test_timing"), duration_s=seconds, timeout=seconds + 60, host=ctx.host
        )

    return action


def fsync_action(seconds: int) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[FsyncResult, str]:
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
            ctx.tool_dir("pg_test_fsync"),
            ctx.target,
            seconds=seconds,
            timeout=30 * seconds + 120,
            on_line=on_line,
            preexec=ctx.preexec,
            host=ctx.host,
        )

    return action


def fio_action(fio_plan: FioPlan, pattern: str) -> Action:
    def action(ctx: Context, line: ProgressLine) -> tuple[FioResult, str]:
        try:
            binary = fio.find_fio(host=ctx.host)
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
            cpus_allowed=fio_plan.cpus_allowed,
        )

        def on_progress(fraction: float, remaining: float | None) -> None:
            line.update(
                completed=fraction * fio_plan.runtime_s,
                detail=f"{remaining:.0f} s left" if remaining is not None else None,
            )

        return fio.run(
            job,
            on_progress=on_progress,
            timeout=fio_plan.runtime_s * 4 + 300,
            fio=binary,
            preexec=ctx.preexec,
            host=ctx.host,
        )

    return action


def steps(probes: ProbeSpec, target: str, directory: Path) -> list[Step]:
    out: list[Step] = []
    where = str(directory)
    if probes.timing_s:
        out.append(
            Step(
                key=StepKey(target, "probe", ("pg_test_timing",)),
                kind="pg_test_timing",
                label=f"{target}: pg_test_timing",
                params={"duration_s": probes.timing_s},
                action=Call("probe.timing", {"seconds": probes.timing_s}),
                tools=("pg_test_timing",),
                estimate_s=probes.timing_s + 1,
            )
        )
    if probes.fsync_s:
        repeats = probes.fsync_repeat
        for rep in range(1, repeats + 1):
            params: dict[str, object] = {"seconds_per_test": probes.fsync_s, "directory": where}
            if repeats > 1:
                params["repeat"] = rep
            out.append(
                Step(
                    key=StepKey(target, "probe", ("pg_test_fsync",), rep if repeats > 1 else None),
                    kind="pg_test_fsync",
                    label=f"{target}: pg_test_fsync in {where}"
                    + (f", run {rep} of {repeats}" if repeats > 1 else ""),
                    params=params,
                    action=Call("probe.fsync", {"seconds": probes.fsync_s}),
                    total=pg_test_fsync.TIMED_TESTS * probes.fsync_s,
                    tools=("pg_test_fsync",),
                    estimate_s=pg_test_fsync.TIMED_TESTS * probes.fsync_s + 1,
                )
            )
    if probes.fio is not None:
        for pattern in probes.fio.patterns:
            out.append(
                Step(
                    key=StepKey(target, "probe", ("fio", pattern)),
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
                        **(
                            {"cpus_allowed": probes.fio.cpus_allowed}
                            if probes.fio.cpus_allowed
                            else {}
                        ),
                        "directory": where,
                    },
                    action=Call("probe.fio", {"fio_plan": probes.fio, "pattern": pattern}),
                    total=probes.fio.runtime_s,
                    tools=("fio",),
                    estimate_s=probes.fio.runtime_s + 3,
                )
            )
    return out


def disk_bytes(probes: ProbeSpec) -> int:
    """What the probes write in a target directory (fio's test file)."""
    return parse_size(probes.fio.size) + 64 * 2**20 if probes.fio is not None else 0


def _fdatasync(res: FsyncResult) -> dict[str, float | None]:
    head = next((r for r in res.rows if r.method == "fdatasync"), None)
    return {"fdatasync_ops_per_sec": head.ops_per_sec} if head is not None else {}


TIMING = ResultKind(
    "pg_test_timing",
    TimingResult,
    headline=lambda r: f": {r.per_loop_ns:.2f} ns per loop",
    columns=lambda r: {"per_loop_ns": r.per_loop_ns},
)
FSYNC = ResultKind(
    "pg_test_fsync",
    FsyncResult,
    headline=lambda r: (
        f": fdatasync 8K {head.ops_per_sec:,.0f} ops/s"
        if (head := pg_test_fsync.fdatasync_8k(r)) is not None and head.ops_per_sec
        else ""
    ),
    columns=_fdatasync,
    limits=True,
)
FIO = ResultKind(
    "fio",
    FioResult,
    headline=lambda r: f": {r.iops:,.0f} IOPS, {r.bandwidth_mib_s:,.1f} MiB/s",
    columns=lambda r: {
        "iops": r.iops,
        "bandwidth_mib_s": r.bandwidth_mib_s,
        "clat_p99_us": r.clat_p99_us,
    },
    limits=True,
)
KINDS = (TIMING, FSYNC, FIO)
