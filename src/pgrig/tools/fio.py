"""fio: raw IOPS, bandwidth and latency of the disk under PostgreSQL.

The job is the one seed 000 runs (8k blocks, libaio, direct=1, one pattern of
randwrite / randread / write / read, time based, group reporting), written as
an argument list and read back from fio's JSON output. Latency is completion
latency (``clat``): from submission to the device answering, without the time
fio spends submitting.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgrig.errors import ParseError, ToolError, UsageError
from pgrig.hosts.executor import Executor
from pgrig.hosts.local import HERE
from pgrig.results import FioResult
from pgrig.tools import onhost

TOOL = "fio"
FILE_NAME = "pgrig_fio.tmp"
OUTPUT_NAME = "pgrig_fio.json"  # fio's JSON, beside the test file (made and removed as it is)
PATTERNS = ("randwrite", "randread", "write", "read")
INSTALL_HINT = "apt-get install fio"

ProgressCallback = Callable[[float, float | None], None]
"""Called as ``on_progress(done_fraction, remaining_s)``; remaining_s is None if unknown."""

_SIZE = re.compile(r"^(\d+)([kmgt]?)$", re.IGNORECASE)
_PERCENT = re.compile(r"\[(\d+(?:\.\d+)?)%\]")
_ETA = re.compile(r"\[eta ((?:\d+[dhms]:?)+)\]")
_ETA_PART = re.compile(r"(\d+)([dhms])")
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}
# fio prints an absurd ETA (about 2**31 s) when it cannot estimate one.
_ETA_UNKNOWN_S = 10 * 365 * 86400
_ODIRECT_REFUSED = ("does not support o_direct", "does not support direct=1")


@dataclass(frozen=True)
class FioJob:
    """What to run. ``size`` is fio's (e.g. "64M", "16G"): the test file's size,
    shared by all ``numjobs`` jobs because they name the same file."""

    directory: Path
    pattern: str
    block_size: str = "8k"
    ioengine: str = "libaio"
    direct: bool = True
    numjobs: int = 1
    iodepth: int = 8
    size: str = "1G"
    runtime_s: int = 30
    # fdatasync after every N writes (WAL-like: 1 with ioengine "sync", direct off);
    # the result then carries the sync latency percentiles
    fdatasync: int = 0
    # CPUs the jobs run on, one each (--cpus_allowed_policy=split), as seed 000
    # pinned its jobs to the CPUs of the disk's queues; None: wherever
    cpus_allowed: str | None = None

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise UsageError(
                f"unknown fio pattern {self.pattern!r}", hint=f"use one of {', '.join(PATTERNS)}"
            )
        for name in ("numjobs", "iodepth", "runtime_s"):
            if getattr(self, name) < 1:
                raise UsageError(f"fio {name} must be at least 1, not {getattr(self, name)}")
        for name in ("size", "block_size"):
            if not _SIZE.match(getattr(self, name)):
                raise UsageError(
                    f"fio {name} {getattr(self, name)!r} is not a size",
                    hint="a number with an optional k, M, G or T suffix, e.g. 8k or 16G",
                )

    @property
    def filename(self) -> Path:
        return Path(self.directory) / FILE_NAME

    @property
    def side(self) -> str:
        """Which half of fio's JSON holds the numbers: "read" or "write"."""
        return "read" if self.pattern in ("read", "randread") else "write"


def argv(job: FioJob, fio: str = TOOL, output: Path | None = None) -> list[str]:
    """The fio command line for ``job``; with ``output`` the JSON goes to that file
    and stdout is left to fio's status lines."""
    args = [
        fio,
        "--name=pgrig",
        f"--filename={job.filename}",
        f"--ioengine={job.ioengine}",
        f"--direct={int(job.direct)}",
        f"--bs={job.block_size}",
        f"--rw={job.pattern}",
        f"--numjobs={job.numjobs}",
        f"--iodepth={job.iodepth}",
        f"--size={job.size}",
        f"--runtime={job.runtime_s}",
        "--time_based",
        "--group_reporting",
        "--output-format=json",
    ]
    if job.fdatasync:
        args.append(f"--fdatasync={job.fdatasync}")
    if job.cpus_allowed:
        args += [f"--cpus_allowed={job.cpus_allowed}", "--cpus_allowed_policy=split"]
    if output is not None:
        args += [f"--output={output}", "--eta=always", "--eta-newline=1"]
    return args


def parse(json_text: str, job: FioJob) -> FioResult:
    """Read ``job``'s numbers from fio's JSON; raise ParseError if they are not there."""
    data = _load_json(json_text)
    try:
        jobs = data["jobs"]
        if len(jobs) != 1:
            raise _error(f"expected one job group (--group_reporting), found {len(jobs)}")
        result = jobs[0]
        if result.get("error"):
            code = int(result["error"])
            raise ToolError(
                f"fio job failed: error {code} ({os.strerror(code)})",
                hint=f"check that {job.directory} is writable and has room for {job.size}",
            )
        rw = result.get("job options", {}).get("rw")
        if rw is not None and rw != job.pattern:
            raise _error(f"the output is for rw={rw}, expected rw={job.pattern}")
        side = result[job.side]
        if not side["total_ios"]:
            raise _error(f"no {job.side} I/O in the output of a {job.pattern} job")
        if "clat_ns" in side:
            clat, per_us = side["clat_ns"], 1000.0
        else:  # fio before 3.0 reported microseconds
            clat, per_us = side["clat"], 1.0
        percentiles = clat.get("percentile")
        if not percentiles:
            raise _error("no completion latency percentiles (was clat_percentiles=0 set?)")
        bw_bytes = side["bw_bytes"] if "bw_bytes" in side else side["bw"] * 1024
        return FioResult(
            pattern=job.pattern,
            block_size=job.block_size,
            ioengine=job.ioengine,
            direct=job.direct,
            numjobs=job.numjobs,
            iodepth=job.iodepth,
            cpus_allowed=job.cpus_allowed,
            size=job.size,
            runtime_s=side["runtime"] / 1000.0,
            iops=float(side["iops"]),
            bandwidth_mib_s=bw_bytes / 2**20,
            clat_mean_us=clat["mean"] / per_us,
            clat_p50_us=percentiles["50.000000"] / per_us,
            clat_p99_us=percentiles["99.000000"] / per_us,
            clat_p999_us=percentiles["99.900000"] / per_us,
            fio_version=str(data.get("fio version", "")),
            **_iops_samples(side),
            **_sync_latency(result),
        )
    except (KeyError, IndexError, TypeError) as exc:
        raise _error(f"missing or malformed field {exc}") from None


def _sync_latency(result: dict[str, Any]) -> dict[str, Any]:
    """fio's fsync/fdatasync latencies (a job with --fdatasync), in us."""
    lat = result.get("sync", {}).get("lat_ns", {})
    percentiles = lat.get("percentile")
    if not percentiles:
        return {}
    return {
        "sync_p50_us": percentiles["50.000000"] / 1000.0,
        "sync_p99_us": percentiles["99.000000"] / 1000.0,
    }


def _iops_samples(side: dict[str, Any]) -> dict[str, Any]:
    """fio's per-interval IOPS samples (3.x): their count, range and standard
    deviation; nothing when fio took fewer than two (or is older)."""
    samples = side.get("iops_samples")
    if not isinstance(samples, int) or samples < 2:
        return {}
    try:
        return {
            "iops_samples": samples,
            "iops_min": float(side["iops_min"]),
            "iops_max": float(side["iops_max"]),
            "iops_stddev": float(side["iops_stddev"]),
        }
    except (KeyError, TypeError, ValueError):
        return {}


def parse_status(line: str) -> tuple[float, float | None] | None:
    """``(done_fraction, remaining_s)`` from a fio status line, e.g.
    ``Jobs: 1 (f=1): [w(1)][60.0%][w=596MiB/s][w=76.3k IOPS][eta 00m:02s]``;
    None for lines without a percentage."""
    percent = _PERCENT.search(line)
    if percent is None:
        return None
    remaining: float | None = None
    if eta := _ETA.search(line):
        seconds = sum(int(n) * _UNIT_S[unit] for n, unit in _ETA_PART.findall(eta.group(1)))
        remaining = float(seconds) if seconds < _ETA_UNKNOWN_S else None
    return min(float(percent.group(1)) / 100.0, 1.0), remaining


def find_fio(search_path: str | None = None, host: Executor = HERE) -> str:
    """The fio executable on ``host``'s PATH (default: this machine's, where
    ``search_path`` may stand for $PATH)."""
    return host.on_path(TOOL, hint=host.install_hint(INSTALL_HINT), search_path=search_path)


@functools.cache
def engine_known(fio: str, engine: str) -> bool:
    """Whether ``fio`` has the I/O engine ``engine``, built in or loadable:
    ``--enghelp=NAME`` says "not found" for one it lacks (``--enghelp`` alone
    lists the built-in ones only). About 20 ms; once per binary and name."""
    if engine.startswith("external:"):
        return True  # a path to an engine of the user's own, loaded at run time
    done = HERE.run([fio, f"--enghelp={engine}"], timeout=30.0, check=False, what=TOOL)
    return "not found" not in done.stdout + done.stderr


def fio_version(fio: str | None = None) -> str:
    """This machine's fio's version string, e.g. "fio-3.33" (a run's result
    carries the version of the fio that ran it, from its JSON)."""
    done = HERE.run([fio or find_fio(), "--version"], timeout=30.0, what=TOOL)
    return done.stdout.strip()


def odirect_refused(stderr: str) -> bool:
    """Whether fio failed because the filesystem rejects O_DIRECT (tmpfs before
    Linux 6.6, ramfs, some FUSE and network filesystems)."""
    text = stderr.lower()
    return any(phrase in text for phrase in _ODIRECT_REFUSED)


def run(
    job: FioJob,
    on_progress: ProgressCallback | None = None,
    timeout: float | None = None,
    fio: str | None = None,
    preexec: Callable[[], None] | None = None,
    host: Executor = HERE,
) -> tuple[FioResult, str]:
    """Run ``job`` with the real fio on ``host`` (this machine's executor by
    default); return the result and fio's JSON text.

    Refuses to start if the test file already exists (it may be someone's data)
    and removes it afterwards, also after a failure or Ctrl-C. ``preexec`` runs
    in fio's process before exec (e.g. ``Cgroup.preexec()`` of a throttled target).
    """
    binary = fio or find_fio(host=host)
    directory = Path(job.directory)
    size = size_bytes(job.size)
    onhost.check_directory(host, directory, size + 64 * 2**20, f"fio (size {job.size})")
    if timeout is None:
        # fio first lays the file out; allow for a slow disk (20 MiB/s) on top of the runtime.
        timeout = job.runtime_s + 120.0 + size / (20 * 2**20)

    def forward(stream_name: str, line: str) -> None:
        if on_progress is None or stream_name != "stdout":
            return
        status = parse_status(line)
        if status is not None:
            on_progress(*status)

    target = job.filename
    host.create_exclusively(target)
    try:
        with _output(host, directory) as output:
            try:
                host.stream(
                    argv(job, binary, output),
                    timeout=timeout,
                    on_line=forward,
                    what=TOOL,
                    preexec=preexec,
                )
            except ToolError as exc:
                if odirect_refused(exc.stderr):
                    raise ToolError(
                        f"the filesystem of {directory} does not support O_DIRECT",
                        argv=exc.argv,
                        returncode=exc.returncode,
                        stderr=exc.stderr,
                        hint="use --fio-direct 0 (buffered I/O, through the page cache) "
                        "or test a directory on another filesystem",
                    ) from exc
                raise
            text = host.read_text(str(output))
    finally:
        host.remove_file(target)
    return parse(text, job), text


@contextlib.contextmanager
def _output(host: Executor, directory: Path) -> Iterator[Path]:
    """Where fio writes its JSON (stdout carries its status lines): a file beside
    the test file, made and removed as it is, on whichever host."""
    output = directory / OUTPUT_NAME
    host.create_exclusively(output)
    try:
        yield output
    finally:
        host.remove_file(output)


def size_bytes(size: str) -> int:
    """fio's size notation in bytes; fio reads k/M/G/T as powers of 1024."""
    m = _SIZE.match(size)
    if m is None:
        raise UsageError(f"{size!r} is not a size", hint="e.g. 64M or 16G")
    power = "kmgt".find(m.group(2).lower()) + 1 if m.group(2) else 0
    return int(m.group(1)) << (10 * power)


def _load_json(text: str) -> dict[str, Any]:
    # fio may print warnings ("fio: ...") ahead of the JSON document.
    start = text.find("{")
    if start < 0:
        first = text.strip().splitlines()[0] if text.strip() else "(empty)"
        raise _error(f"no JSON document in the output; first line: {first!r}")
    try:
        data, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise _error(f"invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise _error("the JSON document is not an object")
    return data


def _error(detail: str) -> ParseError:
    return ParseError(
        f"fio: {detail}",
        hint="this fio prints something pgrig does not know; "
        "please report it together with the tool's output",
    )
