"""pg_test_fsync: how fast this filesystem makes a WAL write durable.

Every method of every section becomes one ``FsyncRow``. The section names are
short and stable, so that studies of different PostgreSQL versions compare:

========================  =====================================================
section                   pg_test_fsync's heading
========================  =====================================================
``one 8kB write``         Compare file sync methods using one 8kB write:
``two 8kB writes``        Compare file sync methods using two 8kB writes:
``open_sync sizes``       Compare open_sync with different write sizes:
``non-write descriptor``  Test if fsync on non-write file descriptor is honored:
``non-synced writes``     Non-sync'ed 8kB writes:
========================  =====================================================

The first two carry the WAL block size pg_test_fsync was built with, so a 16kB
build (seed 001) gives ``one 16kB write`` and ``two 16kB writes``. Method names
are kept as printed with runs of blanks collapsed: ``fdatasync``,
``2 * 8kB open_sync writes``, ``write, fsync, close``, ``write``. ``n/a`` (not on
this platform) and ``n/a*`` (the filesystem refuses O_DIRECT) become ``None``.
Versions before 9.3 print no ``usecs/op``; their ``usecs_per_op`` is ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pgrig.errors import ParseError, ToolError, UsageError
from pgrig.hosts.local import HERE
from pgrig.results import FsyncResult, FsyncRow
from pgrig.tools import onhost

if TYPE_CHECKING:
    from pgrig.hosts.executor import Executor

TOOL = "pg_test_fsync"
FILE_NAME = "pgrig_fsync.tmp"

# Tests that each last ``seconds`` on Linux (fsync_writethrough is n/a there):
# 4 + 4 sync methods, 5 open_sync sizes, 2 descriptor tests, 1 plain write.
# A caller can show progress as rows seen / TIMED_TESTS.
TIMED_TESTS = 16

# pg_test_fsync first writes and fsyncs one WAL segment (16MB); leave headroom.
_SPACE_NEEDED = 64 * 1024 * 1024

_SECONDS = re.compile(r"^(\d+) seconds? per test$")
_PLATFORM = re.compile(r"^(O_DIRECT|F_NOCACHE) supported on this platform|^Direct I/O is not")
_SECTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Compare file sync methods using one (\d+)kB write:$"), "one {}kB write"),
    (re.compile(r"^Compare file sync methods using two (\d+)kB writes:$"), "two {}kB writes"),
    (re.compile(r"^Compare open_sync with different write sizes:$"), "open_sync sizes"),
    (
        re.compile(r"^Test if fsync on non-write file descriptor is honored:$"),
        "non-write descriptor",
    ),
    (re.compile(r"^Non-sync'ed (\d+)kB writes:$", re.IGNORECASE), "non-synced writes"),
)
_ROW = re.compile(
    r"^(?P<method>\S.*?)\s+(?P<ops>\d+(?:\.\d+)?) ops/sec"
    r"(?:\s+(?P<usecs>\d+(?:\.\d+)?) usecs/op)?$"
)
_NA_ROW = re.compile(r"^(?P<method>\S.*?)\s+n/a\*?$")


def parse(text: str) -> FsyncResult:
    """Parse pg_test_fsync's stdout (PostgreSQL 9.2 to 18); raise ParseError otherwise."""
    seconds: float | None = None
    section: str | None = None
    in_parens = False  # the "(in wal_sync_method preference order ...)" notes
    in_footnote = False  # "* This file system ... do not support direct\n  I/O, ..."
    rows: list[FsyncRow] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            in_footnote = False
            continue
        if in_parens or line.startswith("("):
            in_parens = not line.endswith(")")
            continue
        if line.startswith("* "):
            in_footnote = True
            continue
        if m := _SECONDS.match(line):
            seconds = float(m.group(1))
            continue
        if _PLATFORM.match(line):
            continue
        heading = _section(line)
        if heading is not None:
            section, in_footnote = heading, False
            continue
        row = _row(line)
        if row is not None and section is not None:
            method, ops, usecs = row
            rows.append(FsyncRow(section, method, ops, usecs))
            continue
        if in_footnote:
            continue
        raise _error(f"line {lineno} not understood: {line!r}")
    if seconds is None:
        raise _error("no 'N seconds per test' line")
    if not rows:
        raise _error("no results")
    return FsyncResult(seconds_per_test=seconds, rows=tuple(rows))


def fdatasync_8k(result: FsyncResult) -> FsyncRow | None:
    """The headline number of the seeds: fdatasync after one WAL-block write.

    For builds with another WAL block size (seed 001: 16kB) this is the
    fdatasync row of the first, one-write section.
    """
    row = result.find("one 8kB write", "fdatasync")
    if row is not None:
        return row
    for row in result.rows:
        if row.section.startswith("one ") and row.method == "fdatasync":
            return row
    return None


@dataclass(frozen=True)
class Inversion:
    """Two rows in an order physics forbids: ``expected`` does less work per
    operation than ``observed`` but was measured slower. On a quiet machine
    this does not happen; it says how large the noise of the run was."""

    expected: FsyncRow  # does less work: should be at least as fast
    observed: FsyncRow  # does more work, yet measured faster
    why: str

    @property
    def pct(self) -> float:
        """How much faster the slower-by-physics row was, in % of the other."""
        assert self.expected.ops_per_sec and self.observed.ops_per_sec
        return (self.observed.ops_per_sec / self.expected.ops_per_sec - 1) * 100

    def describe(self) -> str:
        return (
            f"{self.observed.method} ({self.observed.section}) ran {self.pct:.0f}% faster "
            f"than {self.expected.method} ({self.expected.section}), though {self.why}"
        )


TIE_PCT = 0.5  # an inversion is at least this many % (printed as "1%" or more)

# (less work, more work, why): a datasync does not flush the file's metadata.
_DATASYNC = (
    ("fdatasync", "fsync", "fdatasync flushes less than fsync"),
    ("open_datasync", "open_sync", "O_DSYNC flushes less than O_SYNC"),
)


def inversions(result: FsyncResult) -> list[Inversion]:
    """Orderings that contradict what each test does: two writes per sync faster
    than one, more and smaller open_sync writes faster than fewer larger ones,
    a full sync faster than a data-only one. Such a row is noise, not a finding
    about the method."""
    found: list[Inversion] = []

    def check(less: FsyncRow | None, more: FsyncRow | None, why: str) -> None:
        if less is None or more is None or not less.ops_per_sec or not more.ops_per_sec:
            return
        # A tie is no contradiction: below TIE_PCT the report would print "0% faster".
        if (more.ops_per_sec / less.ops_per_sec - 1) * 100 >= TIE_PCT:
            found.append(Inversion(less, more, why))

    one = next((r.section for r in result.rows if r.section.startswith("one ")), None)
    two = next((r.section for r in result.rows if r.section.startswith("two ")), None)
    for section in (one, two):
        for less, more, why in _DATASYNC:
            if section is not None:
                check(result.find(section, less), result.find(section, more), why)
    if one is not None and two is not None:
        for row in result.rows:
            if row.section == one:
                check(row, result.find(two, row.method), "it writes twice as much per sync")
    sizes = [r for r in result.rows if r.section == "open_sync sizes"]
    for fewer, more_writes in zip(sizes, sizes[1:], strict=False):
        check(fewer, more_writes, "the same 16kB takes twice as many synced writes")
    return found


def run(
    bin_dir: Path | str,
    directory: Path,
    seconds: int = 5,
    timeout: float | None = None,
    on_line: Callable[[str], None] | None = None,
    preexec: Callable[[], None] | None = None,
    host: Executor = HERE,
) -> tuple[FsyncResult, str]:
    """Run ``pg_test_fsync -s seconds -f <directory>/pgrig_fsync.tmp`` on ``host``
    (this machine's executor by default; ``preexec`` is this machine's).

    Refuses to start if that file already exists (it may be someone's data) and
    removes it afterwards, also after a failure or Ctrl-C. ``on_line`` gets each
    stdout line as it completes; pg_test_fsync prints a method's name and then
    waits ``seconds`` before finishing the line, so a result row arrives when
    its test is done (see ``TIMED_TESTS`` for a progress fraction).
    A run takes about ``TIMED_TESTS * seconds``.
    """
    if seconds < 1:
        raise UsageError(
            f"{TOOL}: {seconds} seconds per test: at least 1 is needed",
            hint="set --fsync-seconds (campaign: fsync in [probes]) to 1 or more, "
            "or skip the probe",
        )
    binary = host.tool(bin_dir, TOOL)
    directory = Path(directory)
    onhost.check_directory(host, directory, _SPACE_NEEDED, TOOL)
    target = directory / FILE_NAME
    host.create_exclusively(target)

    def forward(stream_name: str, line: str) -> None:
        if on_line is not None and stream_name == "stdout":
            on_line(line)

    try:
        done = host.stream(
            [binary, "-s", str(seconds), "-f", target],
            timeout=timeout if timeout is not None else 20.0 * seconds + 120.0,
            on_line=forward,
            what=TOOL,
            preexec=preexec,
        )
    except ToolError as exc:
        if exc.hint is None and exc.returncode is not None:
            exc.hint = f"check that {directory} is writable and its filesystem is healthy"
        raise
    finally:
        # pg_test_fsync unlinks the file itself when it ends normally; this
        # covers timeouts and crashes. The file is ours: we created it above.
        host.remove_file(target)
    return parse(done.stdout), done.stdout


def _section(line: str) -> str | None:
    for pattern, name in _SECTIONS:
        if m := pattern.match(line):
            return name.format(*m.groups())
    return None


def _row(line: str) -> tuple[str, float | None, float | None] | None:
    if m := _ROW.match(line):
        usecs = m.group("usecs")
        return _method(m.group("method")), float(m.group("ops")), _float(usecs)
    if m := _NA_ROW.match(line):
        return _method(m.group("method")), None, None
    return None


def _method(label: str) -> str:
    return " ".join(label.split())


def _float(text: str | None) -> float | None:
    return None if text is None else float(text)


def _error(detail: str) -> ParseError:
    return ParseError(
        f"{TOOL}: {detail}",
        hint="this pg_test_fsync prints something pgrig does not know; "
        "please report it together with the tool's output",
    )
