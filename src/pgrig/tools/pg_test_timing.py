"""pg_test_timing: how expensive reading the clock is (kvm-clock vs tsc in seed 000).

The output has been stable from PostgreSQL 9.x through 18::

    Testing timing overhead for 3 seconds.
    Per loop time including overhead: 27.09 ns
    Histogram of timing durations:
      < us   % of total      count
         1     97.42483  107896492
         2      2.57309    2849652

Seed 000 pasted the same text with trailing blanks; those are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from pgrig.errors import ParseError, UsageError
from pgrig.hosts.local import HERE
from pgrig.results import TimingBucket, TimingResult

if TYPE_CHECKING:
    from pgrig.hosts.executor import Executor

TOOL = "pg_test_timing"

_DURATION = re.compile(r"^Testing timing overhead for (\d+) seconds?\.$")
_PER_LOOP = re.compile(r"^Per loop time including overhead: ([\d.]+) ns$")
_HEADER = re.compile(r"^<\s*us\s+%\s*of total\s+count$")
_BUCKET = re.compile(r"^(\d+)\s+([\d.]+)\s+(\d+)$")


def parse(text: str) -> TimingResult:
    """Parse pg_test_timing's stdout; raise ParseError on anything unexpected."""
    duration: float | None = None
    per_loop: float | None = None
    in_histogram = False
    buckets: list[TimingBucket] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if m := _DURATION.match(line):
            duration = float(m.group(1))
        elif m := _PER_LOOP.match(line):
            per_loop = float(m.group(1))
        elif line == "Histogram of timing durations:":
            in_histogram = True
        elif in_histogram and _HEADER.match(line):
            continue
        elif in_histogram and (m := _BUCKET.match(line)):
            buckets.append(TimingBucket(int(m.group(1)), float(m.group(2)), int(m.group(3))))
        else:
            raise _error(f"line {lineno} not understood: {raw.strip()!r}")
    if duration is None:
        raise _error("no 'Testing timing overhead for N seconds.' line")
    if per_loop is None:
        raise _error("no 'Per loop time including overhead' line")
    if not buckets:
        raise _error("no histogram rows")
    return TimingResult(duration_s=duration, per_loop_ns=per_loop, histogram=tuple(buckets))


def run(
    bin_dir: Path | str,
    duration_s: int = 3,
    timeout: float | None = None,
    host: Executor = HERE,
) -> tuple[TimingResult, str]:
    """Run ``<bin_dir>/pg_test_timing -d duration_s`` on ``host`` (this
    machine's executor by default); return the result and its stdout."""
    if duration_s < 1:
        raise UsageError(
            f"{TOOL}: a duration of {duration_s} seconds: at least 1 is needed",
            hint="set --timing-seconds (campaign: timing in [probes]) to 1 or more, "
            "or skip the probe",
        )
    binary = host.tool(bin_dir, TOOL)
    # The clock loop is busy-waiting, so the only slack needed is start-up.
    done = host.stream(
        [binary, "-d", str(duration_s)],
        timeout=timeout if timeout is not None else duration_s + 30.0,
        what=TOOL,
    )
    return parse(done.stdout), done.stdout


def _error(detail: str) -> ParseError:
    return ParseError(
        f"{TOOL}: {detail}",
        hint="this pg_test_timing prints something pgrig does not know; "
        "please report it together with the tool's output",
    )
