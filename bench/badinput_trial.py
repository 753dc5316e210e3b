"""The bad-input trial of issue 33, re-runnable: pgrig run as a new user would
run it (a DBA or SRE who knows pgbench, libpq's PG* variables and Ansible
inventories), one subprocess per bad input, and the counts the issue's
"Done when" asks for.

    .venv/bin/python bench/badinput_trial.py [--jobs 3] [--only REGEX] [--json FILE]

Each case runs in its own sandbox under /tmp (a target directory, a results
store where the case needs one); its TMPDIR and PGRIG_STATE_DIR are the
sandbox's, so a socket directory or a registry entry it leaves is its own and
not another test's, and its processes carry a marker in their environment. For
each case: the exit code against docs/exit-codes.md, the first line of the
message, whether it is clear (an ``error:`` naming what the case says it must:
the file, key, value, host, and a fix), a traceback, whether a study, store,
report or work directory was created, whether a store's data was lost or
changed, and what was left behind (processes, socket and work directories,
mounts, loop devices, OS users). Tiny studies only (scale 1, 1-s runs): a bad
input that is accepted runs in seconds. Cleans up after itself (it stops only
the processes its own cases started). Root only: cases run as ``nobody``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pgrig.results import RunRecord, Study
from pgrig.store import Store

MARK = "PGRIG_TRIAL_CASE"
PGRIG = [sys.executable, "-m", "pgrig"]
# A bad input that is accepted runs this quick study: seconds, not minutes.
Q = ("run", "--skip", "timing,fsync,fio", "--scale", "1", "--clients", "1", "--duration", "1",
     "--repeat", "1", "--modes", "select-only", "--no-count")  # fmt: skip
GIB = 2**30
Setup = Callable[[Path], Callable[[], None] | None]


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    code: int  # what docs/exit-codes.md says
    names: tuple[str, ...]  # what a clear message names (case-insensitive)
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str | bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # name -> target
    fifos: tuple[str, ...] = ()
    setup: Setup | None = None
    user: str | None = None  # run as this OS user (the sandbox is given to it)
    stdout: str | None = None  # a file stdout goes to (/dev/full)
    untouched: tuple[str, ...] = ()  # files that must be left byte for byte
    verify: Callable[[str, str], str | None] | None = None  # (stdout, stderr) -> a falsehood
    timeout: float = 120
    # an address-space limit (bytes): /dev/zero read whole took 18 GiB in 30 s
    memory: int | None = None
    stack: int | None = None  # a stack limit (bytes): ulimit -s, which the server inherits


def c(id: str, argv: str | tuple[str, ...], code: int, *names: str, **kw: object) -> Case:
    args = tuple(argv.split()) if isinstance(argv, str) else argv
    return Case(id, args, code, names, **kw)  # type: ignore[arg-type]


def q(id: str, extra: str | tuple[str, ...], code: int, *names: str, **kw: object) -> Case:
    more = tuple(extra.split()) if isinstance(extra, str) else extra
    return c(id, (*Q, *more), code, *names, **kw)


# -- campaign files -------------------------------------------------------------------

HEAD = '[campaign]\nname = "bad"\n'
TARGET = '[[target]]\nname = "t"\ndirectory = "data"\n'
NO_PROBES = "[probes]\ntiming = false\nfsync = false\nfio = false\n"
TPCB = (
    '[[workload]]\ntype = "tpcb"\nscales = [1]\nclients = [1]\nduration = 1\n'
    'modes = ["select-only"]\n'
)
CUSTOM = (
    '[[workload]]\ntype = "custom"\nname = "c"\nscripts = {scripts}\nclients = [1]\nduration = 1\n'
)


def toml(**parts: str) -> str:
    sections = {"head": HEAD, "target": TARGET, "probes": NO_PROBES, "workload": TPCB}
    sections.update(parts)
    return "\n".join(s for s in sections.values() if s)


def target(extra: str, directory: bool = True) -> str:
    return '[[target]]\nname = "t"\n' + ('directory = "data"\n' if directory else "") + extra


def camp(
    id: str, text: str | bytes, code: int, *names: str, cmd: str = "plan", **kw: object
) -> Case:
    files = dict(kw.pop("files", {}) or {})  # type: ignore[call-overload]
    files["c.toml"] = text
    return c(f"toml-{id}", (cmd, "c.toml"), code, *names, files=files, **kw)


# -- stores ---------------------------------------------------------------------------


def _study(id: str, status: str = "finished", **params: object) -> Study:
    return Study(id=id, name=id, target="t", started_at="2026-01-01T00:00:00", status=status,
                 params={"targets": [{"name": "t"}], **params}, pgrig_version="0")  # fmt: skip


def _run(study: str, n: int) -> RunRecord:
    return RunRecord(study=study, key=f"t/timing/r{n}", kind="timing", target="t", params={},
                     status="failed", started_at="2026-01-01T00:00:00",
                     finished_at="2026-01-01T00:00:01", reason="a stand-in")  # fmt: skip


def store(name: str = "s.sqlite", studies: tuple[str, ...] = ("s1", "s2")) -> Setup:
    def make(box: Path) -> None:
        with Store.open(box / name) as st:
            for sid in studies:
                st.begin_study(_study(sid))
                for n in range(3):
                    st.record(_run(sid, n))

    return make


def _sql(name: str, statement: str) -> Setup:
    def make(box: Path) -> None:
        store(name)(box)
        with sqlite3.connect(box / name) as db:
            db.execute(statement)

    return make


def _foreign(box: Path) -> None:
    with sqlite3.connect(box / "s.sqlite") as db:
        db.execute("CREATE TABLE contacts (name TEXT)")


def _live(box: Path) -> Callable[[], None]:
    """A study whose pgrig is alive: a sleeping child stands for it."""
    child = subprocess.Popen(["sleep", "300"])
    with Store.open(box / "other.sqlite") as st:
        st.begin_study(_study("live", status="running", pid=child.pid))
        st.record(_run("live", 0))

    def stop() -> None:
        child.kill()
        child.wait(timeout=30)

    return stop


def _both(*setups: Setup) -> Setup:
    def make(box: Path) -> Callable[[], None] | None:
        undo = [u for u in (s(box) for s in setups) if u]
        return (lambda: [u() for u in undo] and None) if undo else None

    return make


def _not_doubled(out: str, _err: str) -> str | None:
    rows = out.strip().splitlines()
    return None if len(rows) == 1 + 3 else f"{len(rows) - 1} rows for a study of 3 runs"


# -- the cases ------------------------------------------------------------------------

QUICK = [
    q("scale-0", "--scale 0", 2, "--scale"),
    q("scale-word", "--scale banana", 2, "--scale"),
    q("clients-0", "--clients 0", 2, "--clients"),
    q("clients-huge", "--clients 99999999999", 2, "99,999,999,999", "262,143"),
    q("clients-over-max-connections", "--clients 100000", 2, "max_connections"),
    q("clients-empty", ("--clients", ""), 2, "--clients"),
    q("threads-0", "--threads 0", 2, "--threads"),
    q("duration-0", "--duration 0", 2, "--duration"),
    q("duration-with-unit", "--duration 10s", 2, "--duration"),
    q("duration-absurd", "--duration 999999999", 2, "--duration"),
    q("repeat-0", "--repeat 0", 2, "--repeat"),
    q("modes-unknown", "--modes select-only,bogus", 2, "--modes", "bogus"),
    q("modes-empty", ("--modes", ""), 2, "--modes"),
    c("skip-unknown", "run --skip timing,bogus", 2, "--skip", "bogus"),
    q("query-mode", "--query-mode fast", 2, "--query-mode"),
    q("generate", "--generate both", 2, "--generate"),
    q("partitions-negative", "--partitions -1", 2, "--partitions"),
    c("fio-size-1P", "run --skip timing,fsync,tpcb --fio-size 1P", 2, "--fio-size", "1P"),
    c("fio-size-word", "run --skip timing,fsync,tpcb --fio-size banana", 2, "banana"),
    c("fio-size-0", "run --skip timing,fsync,tpcb --fio-size 0", 2, "--fio-size"),
    q("wal-segsize-3", "--wal-segsize 3", 2, "--wal-segsize"),
    q("encoding", "--encoding KLINGON", 2, "--encoding", "KLINGON"),
    q("locale", "--locale xx_YY", 2, "--locale", "xx_YY"),
    q("encoding-locale-mismatch", "--encoding LATIN1 --locale C.UTF-8", 2, "LATIN1", "C.UTF-8"),
    q("memory-1P", "--memory 1P", 2, "--memory"),
    q("memory-1PiB", "--memory 1PiB", 2, "--memory", "RAM"),
    q("memory-word", "--memory lots", 2, "--memory", "lots"),
    q("fs-unknown", "--fs zfs", 2, "--fs"),
    q("fs-size-without-fs", "--fs-size 1GiB", 2, "--fs-size"),
    q("fs-size-1PiB", "--fs xfs --fs-size 1PiB", 5, "--fs-size"),
    q("disk-unknown", "--disk ssd", 2, "--disk", "ssd"),
    q("target-missing", "--target /nonexistent/dir", 2, "/nonexistent/dir", "--target"),
    q("target-file", "--target afile", 2, "afile", files={"afile": "x"}),
    q("target-symlink-loop", "--target loop", 2, "loop", "symbolic link", links={"loop": "loop"}),
    q("target-empty", ("--target", ""), 2, "--target"),
    q("target-unreadable-dev", "--target /proc", 4, "/proc"),
    q("results-is-a-file", "--results afile", 2, "afile", files={"afile": "x"}),
    q("results-dev-null", "--results /dev/null", 2, "/dev/null"),
    q("pg-bin-missing", "--pg-bin /nonexistent/bin", 3, "/nonexistent/bin"),
    q("pg-bin-a-file", "--pg-bin /bin/true", 3, "/bin/true"),
    q("tablespace-missing", "--tablespace /nonexistent/ts", 2, "/nonexistent/ts"),
    q("os-user-root", "--os-user root", 2, "--os-user", "root"),
    q("os-user-bad-name", ("--os-user", "bad name"), 2, "--os-user", "bad name"),
    q("os-user-option-like", ("--os-user", "-rf"), 2, "--os-user"),
    q("set-no-equals", "--set fsync", 2, "--set"),
    q("set-unknown", "--set shared_bufers=1GB", 2, "shared_bufers", "shared_buffers"),
    q("set-bad-bool", "--set fsync=maybe", 2, "fsync"),
    q("set-bad-size", "--set shared_buffers=banana", 2, "shared_buffers"),
    q("set-newline", ("--set", "work_mem=4MB\nfsync=off"), 2, "--set", "work_mem"),
    q("set-quote", ("--set", "work_mem=4MB' fsync=off"), 2, "work_mem"),
    q("set-max-connections-3", "--set max_connections=3", 2, "max_connections"),
    q("set-shared-buffers-huge", "--set shared_buffers=100GB", 5, "shared_buffers"),
    q("profile-unknown", "--profile oltpp", 2, "oltpp", "oltp"),
    q("profile-missing-file", "--profile /nonexistent/x.conf", 2, "/nonexistent/x.conf"),
    q("profile-empty", ("--profile", ""), 2, "--profile"),
    q(
        "profile-not-utf8",
        "--profile ./bad.conf",
        2,
        "bad.conf:2",
        "UTF-8",
        files={"bad.conf": b"shared_buffers = 64MB\nwork_mem = \xff4MB\n"},
    ),  # fmt: skip
    q(
        "profile-include",
        "--profile ./inc.conf",
        2,
        "inc.conf:1",
        "include",
        files={"inc.conf": "include 'x.conf'\nshared_buffers = 64MB\n"},
    ),  # fmt: skip
    q(
        "profile-include-dir",
        "--profile ./inc.conf",
        2,
        "inc.conf:1",
        "include_dir",
        files={"inc.conf": "include_dir 'conf.d'\n"},
    ),  # fmt: skip
    q("profile-directory", "--profile data", 2, "data", "directory"),
    q(
        "profile-symlink-loop",
        "--profile ./loop.conf",
        2,
        "loop.conf",
        "symbolic link",
        links={"loop.conf": "loop.conf"},
    ),  # fmt: skip
    q("profile-dev-zero", "--profile /dev/zero", 2, "/dev/zero", timeout=60, memory=2 * GIB),
    q("profile-fifo", "--profile ./fifo.conf", 2, "fifo.conf", fifos=("fifo.conf",), timeout=60),
    q("profile-junk-line", "--profile ./j.conf", 2, "j.conf", files={"j.conf": "this is junk\n"}),
    q(
        "profile-open-quote",
        "--profile ./j.conf",
        2,
        "j.conf",
        files={"j.conf": "work_mem = '4MB\n"},
    ),  # fmt: skip
    q("dsn-invalid", ("--dsn", "host=127.0.0.1 password=S3cret sslmode", "--yes"), 2, "--dsn"),
    q("dsn-unreachable", ("--dsn", "host=127.0.0.1 port=1", "--yes"), 2, "--dsn", "port=1"),
    q("dsn-socket-missing", "--dsn host=/nonexistent --yes", 2, "/nonexistent"),
    q("dsn-without-yes", "--dsn host=/nonexistent", 2, "--yes"),
    q("dsn-with-set", "--dsn host=/nonexistent --set fsync=off", 2, "--set", "--dsn"),
    q("dsn-with-profile", "--dsn host=/nonexistent --profile stock", 2, "--profile", "--dsn"),
    q("unknown-option", "--bogus", 2, "--bogus"),
]

PG_ENV = [
    q("PGSSLMODE-junk-throwaway", "--throwaway", 2, "PGSSLMODE", "junk", env={"PGSSLMODE": "junk"}),
    q(
        "PGSSLMODE-junk-existing",
        "--yes",
        2,
        "PGSSLMODE",
        env={"PGSSLMODE": "junk", "PGHOST": "/nonexistent"},
    ),  # fmt: skip
    q("PGPORT-abc-throwaway", "--throwaway", 2, "PGPORT", "abc", env={"PGPORT": "abc"}),
    q("PGPORT-abc-existing", "--yes", 2, "PGPORT", env={"PGPORT": "abc"}),
    q("PGPORT-0", "--yes", 2, "PGPORT", env={"PGPORT": "0"}),
    q("PGPORT-99999-throwaway", "--throwaway", 2, "PGPORT", env={"PGPORT": "99999"}),
    q("PGHOST-junk.invalid", "--yes", 2, "junk.invalid", env={"PGHOST": "junk.invalid"}),
    q("PGHOST-without-yes", "", 2, "PGHOST", "--yes", env={"PGHOST": "/nonexistent"}),
    q("PGHOSTADDR-abc", "--yes", 2, "PGHOSTADDR", env={"PGHOSTADDR": "abc"}),
    q(
        "PGCONNECT_TIMEOUT-abc",
        "--yes",
        2,
        "PGCONNECT_TIMEOUT",
        env={"PGCONNECT_TIMEOUT": "abc", "PGHOST": "/nonexistent"},
    ),  # fmt: skip
    q("PGSERVICE-missing", "--yes", 2, "PGSERVICE", "nosuch", env={"PGSERVICE": "nosuch"}),
    q(
        "PGTARGETSESSIONATTRS-junk",
        "--yes",
        2,
        "PGTARGETSESSIONATTRS",
        env={"PGTARGETSESSIONATTRS": "junk", "PGHOST": "/nonexistent"},
    ),  # fmt: skip
    q(
        "PGGSSENCMODE-junk-throwaway",
        "--throwaway",
        2,
        "PGGSSENCMODE",
        env={"PGGSSENCMODE": "junk"},
    ),  # fmt: skip
    q(
        "PGOPTIONS-bogus-throwaway",
        "--throwaway",
        2,
        "PGOPTIONS",
        env={"PGOPTIONS": "-c bogus_setting=1"},
    ),  # fmt: skip
    q(
        "PGCLIENTENCODING-junk-throwaway",
        "--throwaway",
        2,
        "PGCLIENTENCODING",
        env={"PGCLIENTENCODING": "junk"},
    ),  # fmt: skip
]

TERMINAL = [
    q("COLUMNS-0", "--target /nonexistent/dir", 2, "/nonexistent/dir", env={"COLUMNS": "0"}),
    q("COLUMNS-word", "--target /nonexistent/dir", 2, "/nonexistent/dir", env={"COLUMNS": "x"}),
    q(
        "COLUMNS-negative",
        "--target /nonexistent/dir",
        2,
        "/nonexistent/dir",
        env={"COLUMNS": "-5"},
    ),  # fmt: skip
    c(
        "HOME-nonexistent-nobody",
        Q,
        4,
        "PGRIG_STATE_DIR",
        env={"HOME": "/nonexistent"},
        user="nobody",
    ),  # fmt: skip
    c(
        "nobody-target-unwritable",
        (*Q, "--target", "/root", "--results", "r"),
        4,
        "/root",
        user="nobody",
    ),  # fmt: skip
    c("help-to-full-disk", "--help", 1, "standard output", stdout="/dev/full"),
    c(
        "list-to-full-disk",
        "list --store s.sqlite",
        1,
        "standard output",
        "No space",
        stdout="/dev/full",
        setup=store(),
    ),  # fmt: skip
    c(
        "export-to-full-disk",
        "export --store s.sqlite",
        1,
        "standard output",
        "No space",
        stdout="/dev/full",
        setup=store(),
    ),  # fmt: skip
    c(
        "export-o-full-disk",
        "export --store s.sqlite -o /dev/full",
        2,  # a device named as the output, refused before the export (issue 40.6)
        "-o /dev/full",
        "is a device",
        setup=store(),
    ),  # fmt: skip
]

CAMPAIGNS = [
    camp("not-toml", "this is not toml", 2, "c.toml", "TOML"),
    camp("binary", b"\x89PNG\r\n\x1a\n\x00\xff\xfe", 2, "c.toml", "UTF-8"),
    camp("empty", "", 2, "[campaign]"),
    c("campaign-dev-zero", "plan /dev/zero", 2, "/dev/zero", timeout=60, memory=2 * GIB),
    c("campaign-fifo", "plan c.toml", 2, "c.toml", fifos=("c.toml",), timeout=60),
    c("campaign-symlink-loop", "plan c.toml", 2, "c.toml", links={"c.toml": "c.toml"}),
    c("campaign-directory", "plan data", 2, "data", "directory"),
    c("campaign-missing", "run nothere.toml", 2, "nothere.toml"),
    camp("name-space", toml(head='[campaign]\nname = "a b"\n'), 2, "campaign.name"),
    camp("name-rf", toml(head='[campaign]\nname = "-rf"\n'), 2, "campaign.name", "-rf"),
    camp("name-dot", toml(head='[campaign]\nname = "."\n'), 2, "campaign.name"),
    camp("name-dotdot", toml(head='[campaign]\nname = ".."\n'), 2, "campaign.name"),
    camp(
        "name-250", toml(head=f'[campaign]\nname = "{"a" * 250}"\n'), 2, "250 characters", cmd="run"
    ),  # fmt: skip
    camp(
        "targets-300",
        toml(
            target="".join(f'[[target]]\nname = "{ch * 300}"\ndirectory = "data"\n' for ch in "tu")
        ),
        2,
        "300 characters",
        cmd="run",
    ),  # fmt: skip
    camp("name-unicode-slash", toml(head='[campaign]\nname = "a\u2215b"\n'), 2, "campaign.name"),
    camp(
        "duration-true",
        toml(workload=TPCB.replace("duration = 1", "duration = true")),
        2,
        "duration",
    ),  # fmt: skip
    camp(
        "scales-true", toml(workload=TPCB.replace("scales = [1]", "scales = [true]")), 2, "scales"
    ),
    camp(
        "scales-float", toml(workload=TPCB.replace("scales = [1]", "scales = [1.5]")), 2, "scales"
    ),  # fmt: skip
    camp(
        "scales-int64",
        toml(workload=TPCB.replace("[1]", "[9223372036854775807]", 1)),
        5,
        "target t",
    ),  # fmt: skip
    camp(
        "scales-twice",
        toml(workload=TPCB.replace("scales = [1]", "scales = [1, 1]")),
        2,
        "scales",
        "twice",
    ),  # fmt: skip
    camp(
        "clients-empty", toml(workload=TPCB.replace("clients = [1]", "clients = []")), 2, "clients"
    ),  # fmt: skip
    camp(
        "clients-string",
        toml(workload=TPCB.replace("clients = [1]", 'clients = "1,2"')),
        2,
        "clients",
    ),  # fmt: skip
    camp("unknown-key", toml(head=HEAD + "repeats = 3\n"), 2, "repeats", "repeat"),
    camp("repeat-0", toml(head=HEAD + "repeat = 0\n"), 2, "repeat"),
    camp("rate-nan", toml(workload=TPCB + "rate = nan\n"), 2, "rate", "finite"),
    camp("latency-limit-inf", toml(workload=TPCB + "latency_limit_ms = inf\n"), 2, "finite"),
    camp("until-ci-nan", toml(head=HEAD + "repeat = { until_ci_pct = nan }\n"), 2, "until_ci_pct"),
    camp("wait-quiet-nan", toml(head=HEAD + "wait_quiet = nan\n"), 2, "wait_quiet"),
    camp(
        "directory-missing",
        toml(target=target('directory = "/nonexistent/d"\n', False)),
        2,
        "/nonexistent/d",
    ),  # fmt: skip
    camp(
        "directory-file",
        toml(target=target('directory = "afile"\n', False)),
        2,
        "afile",
        files={"afile": "x"},
    ),  # fmt: skip
    camp(
        "directory-symlink-loop",
        toml(target=target('directory = "loop"\n', False)),
        2,
        "loop",
        links={"loop": "loop"},
    ),  # fmt: skip
    camp("directory-empty", toml(target=target('directory = ""\n', False)), 2, "directory"),
    camp(
        "profile-include",
        toml(target=target('profile = "inc.conf"\n')),
        2,
        "inc.conf",
        "include",
        files={"inc.conf": "include 'x.conf'\n"},
    ),  # fmt: skip
    camp(
        "profile-not-utf8",
        toml(target=target('profile = "b.conf"\n')),
        2,
        "b.conf",
        "UTF-8",
        files={"b.conf": b"work_mem = \xff\n"},
    ),  # fmt: skip
    camp("profile-directory", toml(target=target('profile = "data"\n')), 2, "data", "directory"),
    camp(
        "script-missing", toml(workload=CUSTOM.format(scripts='["nothere.sql"]')), 2, "nothere.sql"
    ),  # fmt: skip
    camp(
        "script-directory", toml(workload=CUSTOM.format(scripts='["data"]')), 2, "data", "directory"
    ),  # fmt: skip
    camp(
        "script-symlink-loop",
        toml(workload=CUSTOM.format(scripts='["l.sql"]')),
        2,
        "l.sql",
        links={"l.sql": "l.sql"},
    ),  # fmt: skip
    # pgbench reads a script's bytes as they are (a LATIN1 literal is the user's to send)
    camp(
        "script-not-utf8",
        toml(workload=CUSTOM.format(scripts='["b.sql"]')),
        0,
        files={"b.sql": b"SELECT '\xff';\n"},
    ),  # fmt: skip
    camp(
        "script-fifo",
        toml(workload=CUSTOM.format(scripts='["f.sql"]')),
        2,
        "f.sql",
        fifos=("f.sql",),
        timeout=60,
    ),  # fmt: skip
    camp(
        "script-dev-zero",
        toml(workload=CUSTOM.format(scripts='["/dev/zero"]')),
        2,
        "/dev/zero",
        timeout=60,
        memory=2 * GIB,
    ),  # fmt: skip
    camp(
        "setup-directory",
        toml(workload=CUSTOM.format(scripts='["a.sql"]') + 'setup = ["data"]\n'),
        2,
        "data",
        "directory",
        files={"a.sql": "SELECT 1;\n"},
    ),  # fmt: skip
    # psql, as pgbench, sends the bytes as they are: whether the server takes them
    # is the cluster's encoding's business (SQL_ASCII does)
    camp(
        "setup-not-utf8",
        toml(workload=CUSTOM.format(scripts='["a.sql"]') + 'setup = ["s.sql"]\n'),
        0,
        files={"a.sql": "SELECT 1;\n", "s.sql": b"SELECT '\xff';\n"},
    ),
    # planned, not created: the OS user is made by the run (leftovers look for it)
    camp("os-user-typo", toml(target=target('os_user = "pgtrialtypo"\n')), 0),
    camp(
        "wal-directory-missing",
        toml(target=target('wal_directory = "/nonexistent/w"\n')),
        2,
        "/nonexistent/w",
    ),  # fmt: skip
    camp(
        "tablespace-missing",
        toml(target=target('tablespace = "/nonexistent/ts"\n')),
        2,
        "/nonexistent/ts",
    ),  # fmt: skip
    camp("set-unknown", toml(target=target("set = { shared_bufers = 1 }\n")), 2, "shared_bufers"),
    camp(
        "set-newline",
        toml(target=target('set = { work_mem = "4MB\\nfsync = off" }\n')),
        2,
        "work_mem",
    ),  # fmt: skip
    camp("kernel-unknown", toml(target=target('kernel = { "vm.nosuch" = 1 }\n')), 2, "vm.nosuch"),
    camp(
        "axes-unknown",
        toml(head=HEAD + "axes = { shared_bufers = ['1GB', '2GB'] }\n"),
        2,
        "shared_bufers",
    ),  # fmt: skip
    camp("versions-99", toml(head=HEAD + 'versions = ["99"]\n'), 2, "99", timeout=90),
    camp("inventory-missing", toml(head=HEAD + 'inventory = "nothere.ini"\n'), 2, "nothere.ini"),
]

STORES = [
    c("store-mysql", "list --store mysql://u@h/db", 2, "mysql://", "postgresql://"),
    q("store-sqlite-uri", "--store sqlite:///x", 2, "sqlite://"),
    c(
        "store-unreachable-postgres",
        "list --store postgresql://u@127.0.0.1:1/db",
        2,
        "127.0.0.1",
        timeout=60,
    ),  # fmt: skip
    c(
        "store-foreign",
        "list --store s.sqlite",
        2,
        "s.sqlite",
        "another program",
        setup=_foreign,
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "store-zero-length",
        "list --store s.sqlite",
        2,
        "s.sqlite",
        "empty",
        files={"s.sqlite": b""},
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "store-garbage",
        "list --store s.sqlite",
        1,
        "s.sqlite",
        "damaged",
        files={"s.sqlite": bytes(range(256)) * 16},
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "store-schema-abc-list",
        "list --store s.sqlite",
        1,
        "schema_version",
        "abc",
        setup=_sql("s.sqlite", "UPDATE meta SET value = 'abc' WHERE key = 'schema_version'"),
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "store-schema-abc-report",
        "report s1 --store s.sqlite --out out",
        1,
        "schema_version",
        setup=_sql("s.sqlite", "UPDATE meta SET value = 'abc' WHERE key = 'schema_version'"),
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "store-bad-json-list",
        "list --store s.sqlite",
        1,
        "s1/t/timing/r1",
        "JSON",
        setup=_sql(
            "s.sqlite",
            "UPDATE runs SET result = '{bad' WHERE key = 't/timing/r1' AND study_id = 's1'",
        ),
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "store-bad-json-report",
        "report s1 --store s.sqlite --out out",
        1,
        "s1/t/timing/r1",
        setup=_sql(
            "s.sqlite",
            "UPDATE runs SET result = '{bad' WHERE key = 't/timing/r1' AND study_id = 's1'",
        ),
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "store-bad-json-import",
        "import s.sqlite --store into.sqlite",
        1,
        "s1/t/timing/r1",
        setup=_sql(
            "s.sqlite",
            "UPDATE runs SET result = '{bad' WHERE key = 't/timing/r1' AND study_id = 's1'",
        ),
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c("store-a-directory", "list --store data", 2, "data", "directory"),
    c("store-symlink-loop", "list --store l.sqlite", 2, "l.sqlite", links={"l.sqlite": "l.sqlite"}),
    c("store-missing-list", "list --store /nonexistent/s.sqlite", 2, "/nonexistent/s.sqlite"),
    c(
        "compare-same-twice",
        "compare s1 s1 --store s.sqlite",
        2,
        "two different studies",
        setup=store(),
    ),  # fmt: skip
    c(
        "export-same-twice",
        "export s1 s1 --store s.sqlite --format csv",
        0,
        setup=store(),
        verify=_not_doubled,
    ),  # fmt: skip
    c(
        "import-running",
        "import other.sqlite --store into.sqlite",
        2,
        "live",
        "running",
        setup=_live,
        untouched=("other.sqlite",),
    ),  # fmt: skip
    c(
        "import-damaged",
        "import s.sqlite --store into.sqlite",
        1,
        "s.sqlite",
        files={"s.sqlite": bytes(range(256)) * 16},
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "import-into-itself",
        "import s.sqlite --store s.sqlite",
        2,
        "s.sqlite",
        setup=store(),
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "import-already-there",
        "import o.sqlite s1 --store s.sqlite",
        2,
        "s1",
        setup=_both(store(), store("o.sqlite", ("s1",))),
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "import-as-existing",
        "import o.sqlite s1 --as s2 --store s.sqlite",
        2,
        "s2",
        setup=_both(store(), store("o.sqlite", ("s1",))),
        untouched=("s.sqlite",),
    ),  # fmt: skip
    c(
        "import-as-escape",
        "import s.sqlite s1 --as ../../x --store into.sqlite",
        2,
        "--as",
        setup=store(),
    ),  # fmt: skip
    c("report-unknown", "report nope --store s.sqlite", 2, "nope", setup=store()),
    c(
        "report-out-file",
        "report s1 --store s.sqlite --out afile",
        2,
        "afile",
        setup=store(),
        files={"afile": "x"},
    ),  # fmt: skip
    c(
        "compare-out-file",
        "compare s1 s2 --store s.sqlite --out afile",
        2,
        "afile",
        setup=store(),
        files={"afile": "x"},
    ),  # fmt: skip
    c("export-unknown", "export nope --store s.sqlite", 2, "nope", setup=store()),
    c("export-format", "export --format xml --store s.sqlite", 2, "--format", setup=store()),
    c(
        "export-o-missing-dir",
        "export -o /nonexistent/d/x.json --store s.sqlite",
        2,
        "/nonexistent/d",
        setup=store(),
    ),  # fmt: skip
    c("history-unknown", "history nosuch --store s.sqlite", 2, "nosuch", setup=store()),
    c("check-unknown", "check nope --baseline s1 --store s.sqlite", 2, "nope", setup=store()),
    c(
        "check-regression-word",
        "check s2 --baseline s1 --max-regression abc --store s.sqlite",
        2,
        "--max-regression",
        setup=store(),
    ),  # fmt: skip
    c(
        "check-regression-negative",
        "check s2 --baseline s1 --max-regression -5% --store s.sqlite",
        2,
        "--max-regression",
        setup=store(),
    ),  # fmt: skip
    c(
        "check-regression-nan",
        "check s2 --baseline s1 --max-regression nan% --store s.sqlite",
        2,
        "--max-regression",
        setup=store(),
    ),  # fmt: skip
    c(
        "check-junit-missing-dir",
        "check s2 --baseline s1 --store s.sqlite --junit /nonexistent/d/j.xml",
        2,
        "--junit /nonexistent/d/j.xml",  # refused before the studies are read (issue 40.6)
        "does not exist",
        setup=store(),
    ),  # fmt: skip
    c("list-no-store", "list", 2, "no results store"),
]

HOSTS = [
    c("inventory-missing", "hosts check -i nothere.ini", 2, "nothere.ini"),
    c("inventory-empty", "hosts check -i h.ini", 2, "h.ini", files={"h.ini": ""}),
    c(
        "inventory-garbage",
        "hosts check -i h.ini",
        2,
        "h.ini",
        files={"h.ini": "[db\nh1 ansible_host\n"},
    ),  # fmt: skip
    c(
        "inventory-yaml-garbage",
        "hosts check -i h.yml",
        2,
        "h.yml",
        files={"h.yml": "all:\n  hosts: [unclosed\n"},
    ),  # fmt: skip
    c("inventory-directory", "hosts check -i data", 2, "data"),
    c(
        "inventory-port-word",
        "hosts check -i h.ini",
        2,
        "ansible_port",
        "abc",
        files={"h.ini": "h1 ansible_host=127.0.0.1 ansible_port=abc\n"},
    ),  # fmt: skip
    c(
        "inventory-host-unresolvable",
        "hosts check -i h.ini",
        7,
        "junk.invalid",
        files={"h.ini": "h1 ansible_host=junk.invalid\n"},
        timeout=90,
    ),  # fmt: skip
    c(
        "inventory-key-missing",
        "hosts check -i h.ini",
        7,
        "/nonexistent/key",
        files={
            "h.ini": "h1 ansible_host=127.0.0.1 ansible_ssh_private_key_file=/nonexistent/key\n"
        },
    ),
    c(
        "inventory-vault",
        "hosts check -i h.yml",
        2,
        "vault",
        files={"h.yml": "$ANSIBLE_VAULT;1.1;AES256\n6162\n"},
    ),  # fmt: skip
    c(
        "inventory-unknown-host",
        "hosts check -i h.ini nosuch",
        2,
        "nosuch",
        files={"h.ini": "h1 ansible_host=127.0.0.1\n"},
    ),  # fmt: skip
    c("clean-inventory-missing", "clean --inventory nothere.ini", 2, "nothere.ini"),
    # issue 40, items 13-15
    c("inventory-ipv6", "hosts check -i h.ini", 2, "ansible_host=::1", "IPv6",
      files={"h.ini": "h1 ansible_host=::1\n"}),
    c("inventory-become-word", "hosts check -i h.ini", 2, "ansible_become",
      files={"h.ini": "h1 ansible_host=127.0.0.1 ansible_become=maybe\n"}),
    c("inventory-range-mixed", "hosts check -i h.ini", 2, "x[a:3]",
      files={"h.ini": "x[a:3] ansible_host=127.0.0.1\n"}),
    *(
        camp(f"remote-{key}", toml(head=HEAD + 'inventory = "h.ini"\n', target=(
            f'[[target]]\nname = "t"\nhost = "db1"\n{key} = {value}\n')), code, key,
            files={"h.ini": "db1 ansible_connection=local\nc1 ansible_connection=local\n"})
        for key, value, code in (
            ("memory", '"512MiB"', 2), ("fs", '"xfs"', 2), ("cpus", "1", 2),
            ("latency", '"essd-pl1"', 2), ("os_user", '"nobody"', 2),
            ("directory", '"/proc/pgrig-x"', 4),
        )
    ),
    camp("remote-one-machine-twice", toml(head=HEAD + 'inventory = "h.ini"\n', target=(
        '[[target]]\nname = "t"\nhost = "db1"\nload_hosts = "load"\n')), 2, "one machine",
        files={"h.ini": "db1 ansible_host=10.255.254.1\n[load]\n"
               "c[001:999] ansible_host=10.255.255.9\n"}),
]  # fmt: skip

OTHER = [
    c("pg-install-99", "pg install 99", 2, "99", timeout=90),
    c("pg-install-word", "pg install latest", 2, "latest"),
    c("pg-path-99", "pg path 99", 3, "99"),
    c("essd-level", "storage essd PL9 100", 2, "PL9"),
    c("essd-size-negative", "storage essd PL1 -5", 2, "-5"),
    c("essd-size-word", "storage essd PL1 big", 2, "big"),
    c("audit-apply-restore", "audit --apply --restore", 2, "--restore"),
    c("durability-interval-nan", "durability --interval nan", 2, "--interval", "finite"),
    c("durability-recovery-nan", "durability --recovery-timeout nan", 2, "--recovery-timeout"),
    c("durability-clients-huge", "durability --clients 100000", 2, "100000", "max_connections"),
    c("durability-target-missing", "durability --target /nonexistent/d", 2, "/nonexistent/d"),
    c("tpcc-warehouses-0", "tpcc study -w 0", 2, "-w"),
    c("tpcc-warehouses-word", "tpcc study -w abc", 2, "abc"),
    c("tpcc-duration-0", "tpcc study -T 0", 2, "--duration 0"),
    c("env-target-missing", "env --target /nonexistent/d", 2, "/nonexistent/d"),
    c("env-dsn-unreachable", "env --dsn host=/nonexistent", 2, "/nonexistent"),
    c("unknown-command", "frobnicate", 2, "frobnicate"),
]


def _pgbench_edited(edit: str) -> Setup:
    """A store of one real-shaped pgbench record, then edited with SQL (issue 40.6)."""

    def make(box: Path) -> None:
        from pgrig.results import PgbenchRun, to_dict

        run = PgbenchRun(mode="select-only", transaction_type="<builtin: select only>",
                         scale=1, query_mode="prepared", clients=1, threads=1, duration_s=2.0,
                         transactions=2000, failed=0, tps=1000.0, latency_avg_ms=1.0,
                         latency_stddev_ms=None, initial_connection_ms=None,
                         statements_per_txn=1)  # fmt: skip
        with Store.open(box / "s.sqlite") as st:
            st.begin_study(_study("s1"))
            st.record(RunRecord(study="s1", key="t/tpcb/r1", kind="pgbench_run", target="t",
                                params={}, status="ok", started_at="2026-01-01T00:00:00",
                                finished_at="2026-01-01T00:00:02",
                                result=to_dict(run)))  # fmt: skip
        with sqlite3.connect(box / "s.sqlite") as db:
            db.execute(f"UPDATE runs SET result = {edit}")

    return make


EXPORT_JSON = '{"schema": "pgrig-export/1", "studies": [], "runs": []}'

# Issue 40 (items 2-8): settings said but not applied, start-time failures, the new
# commands' outputs, import strictness, leftovers, wrong blame.
ISSUE40 = [
    q("set-port", "--set port=5433", 2, "port is set by pgrig", "free port"),
    q("set-listen", "--set listen_addresses=*", 2, "listen_addresses is set by pgrig"),
    q("set-hba-file", "--set hba_file=/etc/passwd", 2, "hba_file is set by pgrig"),
    # on a machine without free huge pages (this one: HugePages_Free 0)
    q("set-huge-pages-on", "--set huge_pages=on", 2, "huge_pages = on", "vm.nr_hugepages"),
    camp("set-port", toml(target=target("set = { port = 5433 }\n")), 2, "port is set by pgrig"),
    camp("set-data-directory", toml(target=target('set = { data_directory = "x" }\n')), 2,
         "data_directory is set by pgrig", cmd="run"),
    camp("set-twice-by-case",
         toml(target=target('set = { shared_buffers = "64MB", Shared_Buffers = "32MB" }\n')),
         2, "shared_buffers is given twice"),
    camp("axes-port", toml(head=HEAD + "[campaign.axes]\nport = [1, 2]\n"), 2,
         "port is set by pgrig"),
    camp("target-single-brackets", toml(target='[target]\nname = "t"\ndirectory = "data"\n'),
         2, "[[target]]"),
    camp("duplicate-key", toml(head=HEAD + 'name = "again"\n'), 2, "'name' is given twice"),
    camp("nested-600", toml(head=HEAD + "x = " + "[" * 600 + "]" * 600 + "\n"), 2,
         "nested too deep"),
    camp("kernel-clocksource-nosuch", toml(target=target('kernel = { clocksource = "nosuch" }\n')),
         2, "clocksource = nosuch"),
    camp("script-undefined-variable", toml(workload=CUSTOM.format(scripts='["u.sql"]')), 2,
         "u.sql", ":nope", files={"u.sql": "SELECT :nope;\n"}),
    c("state-dir-a-file", Q, 4, "PGRIG_STATE_DIR", "not a directory",
      env={"PGRIG_STATE_DIR": "sf"}, files={"sf": "a file"}),
    c("check-baseline-itself", "check s1 --baseline s1 --store s.sqlite", 2,
      "against itself", setup=store()),
    c("check-junit-dev-full", "check s1 --baseline s2 --store s.sqlite --junit /dev/full", 2,
      "--junit /dev/full", "device", setup=store()),
    c("check-summary-proc", "check s1 --baseline s2 --store s.sqlite --summary /proc/x.md", 2,
      "--summary /proc/x.md", setup=store()),
    c("check-junit-no-dir", "check s1 --baseline s2 --store s.sqlite --junit no/x.xml", 2,
      "--junit no/x.xml", "does not exist", setup=store()),
    c("report-out-dev-full", "report s1 --store s.sqlite --out /dev/full", 2,
      "--out /dev/full", setup=store()),
    c("history-out-proc", "history s1 --store s.sqlite --out /proc/pgrig", 2,
      "--out /proc/pgrig", setup=store()),
    c("compare-out-dev-full", "compare s1 s2 --store s.sqlite --out /dev/full", 2,
      "--out /dev/full", setup=store()),
    c("import-export-json", "import e.json --store into.sqlite", 2, "e.json",
      "pgrig export (JSON)", files={"e.json": EXPORT_JSON}),
    c("import-tps-string", "import s.sqlite --store into.sqlite", 2, "tps is '1000' (str)",
      setup=_pgbench_edited("json_set(result, '$.tps', '1000')"), untouched=("s.sqlite",)),
    c("import-tps-missing", "import s.sqlite --store into.sqlite", 2, "tps is missing",
      setup=_pgbench_edited("json_remove(result, '$.tps')"), untouched=("s.sqlite",)),
    c("import-params-not-json", "import s.sqlite --store into.sqlite", 1, "not valid JSON",
      setup=_sql("s.sqlite", "UPDATE studies SET params = '{bad' WHERE id = 's1'"),
      untouched=("s.sqlite",)),
    # limits the server inherits (issue 40.4, 40.8): under PostgreSQL's 100 kB + 512 kB
    # of stack; a max_stack_depth the stack cannot hold; less address space than the
    # oltp profile's shared buffers (a quarter of this machine's 24 GiB: 6026MB)
    q("ulimit-s-256", "", 2, "ulimit -s", "256 kB", "ulimit -s 8192", stack=256 * 1024),
    q("ulimit-s-max-stack-depth", "--set max_stack_depth=6MB", 2, "ulimit -s",
      "max_stack_depth = 6MB (--set)", "lower max_stack_depth", stack=4096 * 1024),
    q("ulimit-v-4000000", "", 5, "ulimit -v", "4000000 kB", "shared_buffers",
      "ulimit -v unlimited", memory=4000000 * 1024),
]  # fmt: skip

CASES = [*QUICK, *PG_ENV, *TERMINAL, *CAMPAIGNS, *STORES, *HOSTS, *OTHER, *ISSUE40]


# -- running one case -----------------------------------------------------------------


@dataclass
class Outcome:
    id: str
    argv: str
    expected: int
    code: int | None
    first: str
    clear: bool
    traceback: bool
    created: list[str]
    lost: list[str]
    left: list[str]
    seconds: float

    @property
    def wrong_code(self) -> bool:
        return self.code != self.expected


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def _studies(path: Path) -> dict[str, int]:
    """Each study of a store and its number of runs; {} when it is no store."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            rows = db.execute(
                "SELECT s.id, (SELECT count(*) FROM runs r WHERE r.study_id = s.id) FROM studies s"
            ).fetchall()
    except sqlite3.Error:
        return {}
    return {str(sid): int(n) for sid, n in rows}


def _tree(box: Path) -> set[str]:
    """Every path under the sandbox but its TMPDIR and state directory; links
    are not followed (a case's symbolic-link loop is a name, not an error)."""
    out: set[str] = set()
    for top, dirs, names in os.walk(box):
        rel = Path(top).relative_to(box)
        if rel.parts[:1] in (("tmp",), ("state",)):
            dirs.clear()
            continue
        out.update(str(rel / n) for n in (*dirs, *names))
    return out


def _marked(box: Path) -> list[int]:
    """Processes whose environment carries this case's marker."""
    needle = f"{MARK}={box}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _users() -> set[str]:
    return {line.split(":", 1)[0] for line in Path("/etc/passwd").read_text().splitlines()}


def _leftovers(box: Path, users_before: set[str], case: Case) -> list[str]:
    left = []
    deadline = time.monotonic() + 10
    while (pids := _marked(box)) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        left.append(f"process {pid} ({name})")
        os.kill(pid, signal.SIGKILL)  # our own case's: it carries the marker
    for sock in (box / "tmp").glob("pgrig-sock-*"):
        left.append(f"socket directory {sock.name}")
    for rel in _tree(box):  # a marked work directory (its marker is .pgrig-workdir)
        if Path(rel).name.startswith(".pgrig-workdir"):
            left.append(f"work directory {Path(rel).parent}")
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    left += [f"mount {m}" for m in mounts if m.startswith(str(box))]
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True, timeout=30).stdout
    left += [f"loop device {line.split(':')[0]}" for line in loops.splitlines() if str(box) in line]
    left += [f"OS user {u}" for u in _named_users(case, users_before)]
    return left


def _named_users(case: Case, before: set[str]) -> list[str]:
    """OS users made since ``before`` whose names the case gave."""
    text = " ".join(case.argv) + json.dumps({k: str(v) for k, v in case.files.items()})
    return sorted(u for u in _users() - before if u in text)


def _as(user: str, box: Path) -> tuple[str, ...]:
    """Run as USER. This venv's interpreter lives under /root (mode 700 on
    Debian), so in a private mount namespace - gone with the process - /root is a
    tmpfs holding only the interpreter's tree."""
    script = (
        'mkdir "$0/pyenv" && mount --bind /root/.pyenv "$0/pyenv"'
        " && mount -t tmpfs -o mode=755 tmpfs /root && mkdir /root/.pyenv"
        ' && mount --move "$0/pyenv" /root/.pyenv'
        f' && exec setpriv --reuid {user} --regid nogroup --clear-groups -- "$@"'
    )
    return ("unshare", "-m", "--propagation", "private", "sh", "-c", script, str(box / "tmp"))


def _limit(case: Case) -> Callable[[], None] | None:
    limits = [(resource.RLIMIT_AS, case.memory), (resource.RLIMIT_STACK, case.stack)]
    wanted = [(which, n) for which, n in limits if n is not None]
    if not wanted:
        return None

    def apply() -> None:
        for which, n in wanted:
            resource.setrlimit(which, (n, n))

    return apply


def _first(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("error:", "Error:", "Traceback")):
            return line
    return lines[0] if lines else ""


def run_case(case: Case, root: Path, src: Path | None) -> Outcome:
    try:
        return _run_case(case, root, src)
    except Exception as exc:  # the harness's own failure: said, and the trial goes on
        return Outcome(case.id, " ".join(case.argv), case.code, None, f"HARNESS: {exc!r}",
                       False, False, [], [], [f"harness error {exc!r}"], 0.0)  # fmt: skip


def _run_case(case: Case, root: Path, src: Path | None) -> Outcome:
    box = root / case.id
    box.mkdir()
    for sub in ("data", "tmp", "state"):
        (box / sub).mkdir()
    for name, content in case.files.items():
        if isinstance(content, bytes):
            (box / name).write_bytes(content)
        else:
            (box / name).write_text(content)
    for name, to in case.links.items():
        (box / name).symlink_to(to)
    for name in case.fifos:
        os.mkfifo(box / name)
    undo = case.setup(box) if case.setup else None
    if case.user:
        subprocess.run(["chown", "-R", case.user, str(box)], check=True, timeout=30)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update({MARK: str(box), "TMPDIR": str(box / "tmp"), "PGRIG_STATE_DIR": str(box / "state")})
    if src is not None:
        env["PYTHONPATH"] = str(src)
    if case.user:
        env.pop("PGRIG_STATE_DIR")
        env["HOME"] = str(box / "state")  # ~/.local/state/pgrig: its state, not a study
    env.update(case.env)
    stores = {p: _studies(p) for p in box.glob("*.sqlite")}
    kept = {name: _digest(box / name) for name in case.untouched}
    before, users = _tree(box), _users()
    start = time.monotonic()
    out_file = open(case.stdout, "w") if case.stdout else None  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            [*(_as(case.user, box) if case.user else ()), *PGRIG, *case.argv],
            cwd=box,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out_file or subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=_limit(case),
        )
        try:
            out, err = proc.communicate(timeout=case.timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # as timeout(1) would: pgrig stops its own
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
            code = None
            err = f"(still running after {case.timeout:.0f} s: stopped)\n{err}"
    finally:
        if out_file:
            out_file.close()
    seconds = time.monotonic() - start
    out = out or ""
    tb = "Traceback (most recent call last)" in err + out
    lower = err.lower()
    named = all(n.lower() in lower for n in case.names)
    clear = not tb and named and (code == 0 if case.code == 0 else ("error:" in lower))
    created = sorted(_tree(box) - before)
    created = [p for p in created if not any(p.startswith(c + "/") for c in created)]
    for path, studies in stores.items():
        after = _studies(path)
        created += [f"study {s} in {path.name}" for s in after.keys() - studies.keys()]
    for path in set(box.glob("*.sqlite")) - set(stores):
        created += [f"study {s} in {path.name}" for s in _studies(path)]
    lost = []
    for path, studies in stores.items():
        after = _studies(path)
        lost += [f"{path.name}: study {s} lost runs" for s, n in studies.items()
                 if after.get(s, 0) < n]  # fmt: skip
    lost += [f"{name} changed" for name, d in kept.items() if _digest(box / name) != d]
    if case.verify and code == 0 and (wrong := case.verify(out, err)):
        lost.append(wrong)
    left = _leftovers(box, users, case)
    if undo:
        undo()
    # only the users this case named: other suites on the machine make their own
    for user in _named_users(case, users):
        subprocess.run(["userdel", user], check=False, timeout=30, capture_output=True)
    for line in Path("/proc/mounts").read_text().splitlines():
        if line.split()[1].startswith(str(box)):
            subprocess.run(["umount", "-l", line.split()[1]], check=False, timeout=30)
    shutil.rmtree(box, ignore_errors=True)
    return Outcome(case.id, " ".join(case.argv), case.code, code, _first(err)[:160], clear, tb,
                   created, lost, left, seconds)  # fmt: skip


def table(outcomes: list[Outcome]) -> str:
    n = len(outcomes)
    rows = [
        ("tried", n),
        (
            "clear (names the file, key, value or host; exit as documented)",
            sum(o.clear and not o.wrong_code for o in outcomes),
        ),  # fmt: skip
        ("weak or misleading message", sum(not o.clear for o in outcomes)),
        ("tracebacks", sum(o.traceback for o in outcomes)),
        ("exit code differs from docs/exit-codes.md", sum(o.wrong_code for o in outcomes)),
        (
            "created a study, store, report or directory for bad input",
            sum(bool(o.created) for o in outcomes if o.expected),
        ),  # fmt: skip
        ("data lost or falsified", sum(bool(o.lost) for o in outcomes)),
        ("left something behind", sum(bool(o.left) for o in outcomes)),
    ]
    return "\n".join(["| | count |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--only", help="a regular expression on the case ids")
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument(
        "--src",
        type=Path,
        help="run pgrig from this source directory (another commit's src/, for a before"
        " and after: git archive COMMIT src | tar -x -C DIR)",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the trial runs as root: some cases run as nobody, some look at mounts")
    cases = [x for x in CASES if not args.only or re.search(args.only, x.id)]
    assert len({x.id for x in CASES}) == len(CASES), "case ids must differ"
    root = Path(tempfile.mkdtemp(prefix="pgt-", dir="/tmp"))
    root.chmod(0o755)  # the server's OS user must reach a target under it
    os.umask(0o022)
    outcomes: list[Outcome] = []
    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            for o in pool.map(lambda x: run_case(x, root, args.src), cases):
                outcomes.append(o)
                flags = [f for f, on in (("TRACEBACK", o.traceback), ("unclear", not o.clear),
                         (f"exit {o.code}!={o.expected}", o.wrong_code), ("created", o.created),
                         ("LOST", o.lost), ("LEFT", o.left)) if on]  # fmt: skip
                print(f"{o.id:34} {o.code!s:>4} {o.seconds:5.1f}s {' '.join(flags) or 'ok':28}"
                      f" {o.first[:90]}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(table(outcomes))
    for o in outcomes:
        for what, items in (("created", o.created), ("lost", o.lost), ("left", o.left)):
            if items:
                print(f"{o.id}: {what}: {', '.join(items[:5])}")
    if args.json:
        args.json.write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    bad = [o for o in outcomes if o.traceback or o.lost or o.left]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
