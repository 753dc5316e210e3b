"""pg_basebackup: the command line, its ``--progress --verbose`` output, the copy.

``argv`` builds the command from a spec's options; ``run`` streams it with a
timeout (its process group stopped on timeout and Ctrl-C, by ``pgrig.proc``),
timing its milestones as the lines arrive; ``parse_output`` reads what the
tool printed (tested on captured output in tests/data/); ``measure`` sizes
the copy on disk.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pgrig import proc
from pgrig.errors import ParseError, ToolError
from pgrig.hosts.executor import Launch
from pgrig.hosts.local import HERE
from pgrig.workloads.basebackup.model import Phases

TOOL = "pg_basebackup"

# "53767/53767 kB (100%), 1/1 tablespace" - the live progress line (-P).
_PROGRESS = re.compile(r"^\s*(\d+)/(\d+) kB \((\d+)%\), (\d+)/(\d+) tablespaces?")
_START = re.compile(r"write-ahead log start point: (\S+) on timeline (\d+)")
_END = re.compile(r"write-ahead log end point: (\S+)")
_VERSION = re.compile(r"^pg_basebackup \(PostgreSQL\) (\S.*)$")

# The --verbose lines whose arrival times split the wall time into phases.
MILESTONES = {
    "checkpoint completed": "checkpoint",
    "write-ahead log end point": "end",
    "syncing data to disk": "sync",
    "base backup completed": "done",
}


@dataclass(frozen=True)
class Options:
    """What the campaign asks of pg_basebackup (spec keys, checked at parse)."""

    format: str = "plain"  # -F p|t
    checkpoint: str = "fast"  # -c
    wal_method: str = "stream"  # -X
    compress: str = "none"  # --compress (15+), -z/-Z before
    max_rate: str | None = None  # -r, e.g. "100M"


@dataclass(frozen=True)
class Output:
    """What pg_basebackup printed, parsed."""

    total_kb: int  # the last progress line's total: the data received, WAL excluded
    done_kb: int
    tablespaces: int
    start_lsn: str | None
    end_lsn: str | None
    timeline: int | None
    completed: bool  # "base backup completed" was printed


def compress_args(compress: str, version_num: int) -> list[str]:
    """``--compress`` as the client of this major spells it: 15 took methods
    (gzip, lz4, zstd, server-side); before, only gzip levels (-z, -Z N)."""
    if compress == "none":
        return []
    if version_num >= 150000:
        return [f"--compress={compress}"]
    method, _, level = compress.partition(":")
    if method not in ("gzip", "client-gzip") or (level and not level.isdigit()):
        raise ToolError(
            f"{TOOL} {version_num // 10000} has no --compress={compress}: before "
            "PostgreSQL 15 it compresses with gzip on the client only",
            hint='use compress = "gzip" or "gzip:LEVEL", or pg_basebackup 15 or later',
        )
    return ["-z", *([f"-Z{level}"] if level else [])]


def argv(
    binary: Path,
    conninfo: Sequence[str],
    directory: Path,
    opts: Options,
    *,
    version_num: int,
    tablespace_map: Sequence[tuple[str, Path]] = (),
) -> list[str]:
    """The command line; ``tablespace_map`` relocates tablespaces of a plain copy
    (otherwise it would write into the server's own tablespace directories)."""
    args = [
        str(binary),
        *(["-d", conninfo[0]] if conninfo else []),
        "-D",
        str(directory),
        "-F",
        opts.format[0],
        "-X",
        opts.wal_method,
        "-c",
        opts.checkpoint,
        "--progress",
        "--verbose",
        "--no-password",
        *compress_args(opts.compress, version_num),
    ]
    if opts.max_rate:
        args += ["-r", opts.max_rate]
    for old, new in tablespace_map:
        # '=' in a path is escaped as '\=' (pg_basebackup -T)
        args.append(f"-T{old.replace('=', chr(92) + '=')}={str(new).replace('=', chr(92) + '=')}")
    return args


def parse_output(text: str) -> Output:
    """The progress totals and WAL positions from --progress --verbose output
    (lines may end in \\r: the progress line is redrawn in place)."""
    last: re.Match[str] | None = None
    start = end = None
    timeline = None
    for line in text.replace("\r", "\n").splitlines():
        if m := _PROGRESS.match(line):
            last = m
        elif m := _START.search(line):
            start, timeline = m.group(1), int(m.group(2))
        elif m := _END.search(line):
            end = m.group(1)
    if last is None:
        raise ParseError(
            f"{TOOL} printed no progress line ('N/M kB (P%), T/N tablespace')",
            hint="pgrig runs it with --progress; see the raw output in the results",
        )
    return Output(
        total_kb=int(last.group(2)),
        done_kb=int(last.group(1)),
        tablespaces=int(last.group(5)),
        start_lsn=start,
        end_lsn=end,
        timeline=timeline,
        completed="base backup completed" in text,
    )


def phases(events: Sequence[tuple[float, str]], ended: float) -> Phases:
    """Seconds between milestones, from (seconds since start, line) pairs."""
    seen: dict[str, float] = {}
    for t, line in events:
        for text, name in MILESTONES.items():
            if text in line:
                seen.setdefault(name, t)
    done = seen.get("done", ended)

    def span(a: float | None, b: float | None) -> float | None:
        return round(b - a, 3) if a is not None and b is not None else None

    return Phases(
        checkpoint_s=span(0.0, seen.get("checkpoint")),
        transfer_s=span(seen.get("checkpoint"), seen.get("end")),
        finish_s=span(seen.get("end"), done),
        sync_s=span(seen.get("sync"), done),
    )


def version_num(text: str) -> int:
    """As server_version_num: ``15.18 (Debian ...)`` -> 150018, ``9.6.24`` -> 90624."""
    parts = [int(p) for p in re.findall(r"\d+", text.split()[0])] + [0, 0, 0]
    if parts[0] < 10:
        return parts[0] * 10000 + parts[1] * 100 + parts[2]
    return parts[0] * 10000 + parts[1]


def version(binary: Path, timeout: float = 30.0) -> str:
    done = HERE.run([str(binary), "--version"], timeout=timeout, what=TOOL)
    for line in done.stdout.splitlines():
        if m := _VERSION.match(line.strip()):
            return m.group(1).strip()
    raise ParseError(f"{TOOL} --version printed no version: {done.stdout.strip()[:200]!r}")


@dataclass(frozen=True)
class Ran:
    output: Output
    phases: Phases
    wall_s: float
    raw: str


def run(
    args: Sequence[str],
    *,
    timeout: float,
    env: dict[str, str],
    user: proc.OsUser | None,
    on_progress: Callable[[int, int], None] | None = None,
    preexec: Callable[[], None] | None = None,
) -> Ran:
    """Run pg_basebackup here (this machine's executor), as ``user``; stopped (its
    whole process group) on timeout or Ctrl-C. ``env`` is added to this
    machine's; ``preexec`` puts it in the target's cgroup, so a storage lab's I/O
    caps apply."""
    events: list[tuple[float, str]] = []
    lines: list[str] = []
    started = time.monotonic()

    def on_line(_stream: str, line: str) -> None:
        now = time.monotonic() - started
        lines.append(line)
        events.append((now, line))
        if on_progress is not None and (m := _PROGRESS.match(line)):
            on_progress(int(m.group(1)), int(m.group(2)))

    done = HERE.stream(
        args,
        timeout=timeout,
        on_line=on_line,
        env=env,
        check=False,
        launch=Launch(user.name if user is not None else None),
        what=TOOL,
        preexec=preexec,
    )
    wall = time.monotonic() - started
    raw = "\n".join(_dedup_progress(lines)) + "\n"
    if not done.ok:
        raise ToolError(
            f"{TOOL} failed",
            argv=list(args),
            returncode=done.returncode,
            stderr=done.stderr or done.stdout,
            hint=_hint(done.stderr),
        )
    return Ran(parse_output(raw), phases(events, wall), wall, raw)


def _dedup_progress(lines: list[str]) -> list[str]:
    """Keep the last of each run of redrawn progress lines: the raw output stays
    small however long the copy took."""
    out: list[str] = []
    for line in lines:
        if out and _PROGRESS.match(line) and _PROGRESS.match(out[-1]):
            out[-1] = line
        else:
            out.append(line)
    return out


def _hint(stderr: str) -> str | None:
    if "pg_hba.conf" in stderr and "replication" in stderr:
        return (
            "the server refuses replication connections: add a 'replication' line to its "
            "pg_hba.conf (pgrig's own clusters have one)"
        )
    if "must be superuser or replication role" in stderr or "permission denied" in stderr:
        return "connect as a role with REPLICATION (ALTER ROLE ... REPLICATION)"
    if "number of requested standby connections exceeds" in stderr or "max_wal_senders" in stderr:
        return "raise max_wal_senders on the server (set.max_wal_senders = 10)"
    if "does not support compression" in stderr or "compression" in stderr:
        return "pick a compress method this build supports (gzip always is)"
    return None


@dataclass(frozen=True)
class Copied:
    """What a copy holds on its filesystem: its regular files' sizes summed, and their number."""

    bytes: int = 0
    files: int = 0

    def __add__(self, other: Copied) -> Copied:
        return Copied(self.bytes + other.bytes, self.files + other.files)


def measure(directory: Path) -> Copied:
    """The copy in ``directory``, as its filesystem holds it."""
    total = files = 0
    for root, _dirs, names in os.walk(directory):
        for name in names:
            st = os.lstat(os.path.join(root, name))
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
                files += 1
    return Copied(total, files)
