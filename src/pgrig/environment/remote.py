"""The environment of another host, read through its executor.

One small Python program on the host (``SNAPSHOT``) prints, as JSON, the raw
text of the files the parsers read (``FILES``), where the /sys/dev/block links
of the paths under test lead, the stat of each path, and what ``lscpu`` and the
PostgreSQL tools print about themselves; the same parsers as for this machine
then read those texts. One command per host: over SSH a command costs
tens of milliseconds (0.5 s as root on the development VM, whose login shell
runs pyenv), a file read as much, and the parsers read about a hundred files.

What stays this machine's and is not read there: the process limits (they are
pgrig's own process's) and the storage audit (``pgrig audit`` on the host).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from pgrig.environment import FILES, Reader, cpu, from_files, read_each, software, storage
from pgrig.environment.sources import Files
from pgrig.errors import ParseError
from pgrig.results import Environment, PostgresInfo

if TYPE_CHECKING:
    from pgrig.hosts.executor import Executor

TIMEOUT_S = 60.0

# Run on the host: argv[1] is the JSON request. Reads only; prints one JSON line.
SNAPSHOT = r"""
import glob, json, os, platform, socket, subprocess, sys
req = json.loads(sys.argv[1])
out = {"files": {}, "links": {}, "stats": {}, "programs": {},
       "hostname": socket.gethostname(), "python": platform.python_version()}
for pattern in req["files"]:
    for path in glob.glob(pattern):
        try:
            with open(path, errors="replace") as f:
                out["files"][path] = f.read()
        except OSError:
            pass
def link(path):
    real = os.path.realpath(path)
    out["links"][path] = [real, os.path.exists(os.path.join(real, "partition"))]
for path in req["paths"]:
    target = os.path.realpath(os.path.abspath(path))
    while not os.path.exists(target) and target != os.path.dirname(target):
        target = os.path.dirname(target)
    try:
        st, vfs = os.stat(target), os.statvfs(target)
    except OSError:
        out["stats"][path] = [target, None, 0, 0]
        continue
    dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    out["stats"][path] = [target, dev, vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize]
    if os.path.exists("/sys/dev/block/" + dev):
        link("/sys/dev/block/" + dev)
for name, argv in req["programs"].items():
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10,
                              env=dict(os.environ, LC_ALL="C"))
        out["programs"][name] = [done.returncode, done.stdout, done.stderr]
    except (OSError, subprocess.SubprocessError):
        pass
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Snapshot:
    """A host's files and links, path stats and program outputs, as SNAPSHOT printed them."""

    host: str
    hostname: str
    python: str | None
    files: Files
    stats: dict[str, storage.PathStat]
    programs: dict[str, tuple[int, str, str]]  # name -> (exit code, stdout, stderr)

    def tools(self) -> dict[str, str]:
        """The versions the server's programs and the host's Python said."""
        found = {}
        for name in ("postgres", "pgbench"):
            code, out, err = self.programs.get(name, (1, "", ""))
            if code == 0 and (said := software.first_line(out) or software.first_line(err)):
                found[name] = said
        if self.python:
            found["python"] = self.python
        return found


def snapshot(ex: Executor, paths: Sequence[str], bin_dir: str | None) -> Snapshot:
    """One command on ``ex``'s host: everything ``capture_on`` parses."""
    programs: dict[str, list[str]] = {"lscpu": ["lscpu"]}
    if bin_dir is not None:
        programs |= {n: [f"{bin_dir}/{n}", "--version"] for n in ("postgres", "pgbench")}
    request = {"files": FILES, "paths": list(paths), "programs": programs}
    done = ex.run(
        ["python3", "-c", SNAPSHOT, json.dumps(request)],
        timeout=TIMEOUT_S,
        what="the environment snapshot",
    )
    try:
        data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise ParseError(
            f"the environment snapshot of host {ex.name} printed no JSON ({exc}): "
            f"{done.stdout[-200:]!r}"
        ) from None
    return Snapshot(
        host=ex.name,
        hostname=str(data.get("hostname") or ex.name),
        python=data.get("python"),
        files=Files(
            texts={str(k): str(v).strip() for k, v in data.get("files", {}).items()},
            links={str(k): (str(v[0]), bool(v[1])) for k, v in data.get("links", {}).items()},
        ),
        stats={
            str(k): storage.PathStat(str(v[0]), v[1], int(v[2]), int(v[3]))
            for k, v in data.get("stats", {}).items()
        },
        programs={
            str(k): (int(v[0]), str(v[1]), str(v[2])) for k, v in data.get("programs", {}).items()
        },
    )


def capture_on(
    ex: Executor,
    paths: Sequence[str],
    *,
    pg_conninfo: Mapping[str, object] | str | None = None,
    bin_dir: str | None = None,
) -> Environment:
    """``pgrig.environment.capture`` of ``ex``'s host, through ``ex``; the server,
    if given, is read over its connection from here."""
    snap = snapshot(ex, paths, bin_dir)
    lscpu: dict[str, str] = {}
    if (done := snap.programs.get("lscpu")) is not None and done[0] == 0:
        lscpu = cpu.parse_lscpu(done[1])
    files, stats = snap.files, snap.stats
    filesystems: list[Reader] = [
        (
            f"filesystem of {p} on {ex.name}",
            partial(storage.parse_filesystem, files, p, stats[p]),
            None,
        )
        for p in paths
        if p in stats
    ]
    readers = [*from_files(files, lscpu, 1, filesystems), ("tool versions", snap.tools, {})]
    if pg_conninfo is not None:
        readers.append(("PostgreSQL", partial(software.read_postgres, pg_conninfo), None))
    found = read_each(readers)
    postgres: PostgresInfo | None = found.get("PostgreSQL")
    return Environment(
        captured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        hostname=snap.hostname,
        os_release=found["os-release"] or "unknown",
        kernel=found["kernel"] or "unknown",
        cpu=found["cpu"],
        memory_bytes=found["memory"] or 0,
        disks=found["disks"],
        filesystems=tuple(fs for what, _, _ in filesystems if (fs := found[what]) is not None),
        sysctls=found["sysctls"],
        transparent_hugepages=found["transparent hugepages"],
        clocksource=found["clocksource"][0],
        available_clocksources=found["clocksource"][1],
        postgres=replace(postgres, bin_dir=bin_dir) if postgres is not None else None,
        tools=found["tool versions"],
        host=ex.name,
        address=ex.host.address,
    )
