"""How to run a study again, for the ticket-sized summary: the ``pgrig run``
command with its campaign inline and pgrig's version, then per target the steps
as a person would type them - initdb, the settings, the loads, each distinct
pgbench command line - without the per-run temporary paths a record's argv holds
(the sockets, the script copies, the transaction-log prefixes).

Pure functions of the stored study: the campaign text and the rerun command are
what the study recorded when it began (``Study.params``: ``campaign_text``,
``command``); a study recorded before pgrig kept them says so."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from pgrig import __version__
from pgrig.report import index
from pgrig.report.index import StudyIndex
from pgrig.results import RunRecord, Study

# pgbench options whose value is a per-run path: the file's name is what a person types.
PATH_OPTIONS = ("-f", "--file")
PREFIX = "--log-prefix="


def typed(argv: Sequence[str]) -> str:
    """A recorded pgbench or pg_basebackup command line as a person types it: the
    program by name, scripts by file name, no log prefix, the copy's directory as
    $COPY_DIR, the connection left to the PG* environment (pgbench's last argument
    and pg_basebackup's -d are pgrig's conninfo strings)."""
    out: list[str] = []
    args = list(argv)
    if args and "=" in args[-1] and " " in args[-1]:  # "host=... port=... dbname=..."
        args = args[:-1]
    it = iter(args)
    for i, a in enumerate(it):
        if i == 0:
            out.append(PurePosixPath(a).name)
        elif a in ("-d", "--dbname"):  # pg_basebackup's conninfo: the PG* environment's
            next(it, "")
        elif a in ("-D", "--pgdata") and out[0] == "pg_basebackup":
            next(it, "")
            out += [a, "$COPY_DIR"]  # pgrig's per-run directory, removed after the copy
        elif a in PATH_OPTIONS:
            value = next(it, "")
            path, _, weight = value.partition("@")
            out += [a, PurePosixPath(path).name + (f"@{weight}" if weight else "")]
        elif a.startswith(PREFIX):
            continue
        else:
            out.append(a)
    return shlex.join(out)


def _initdb(target: dict[str, Any]) -> str:
    """initdb as pgrig ran it (``pgrig.cluster.postmaster.initdb_options``), its data
    directory left to $PGDATA."""
    opts = target.get("initdb") or {}
    argv = ["initdb", "-D", '"$PGDATA"', "-U", "postgres", "-E", str(opts.get("encoding", "UTF8"))]
    argv.append(f"--locale={opts.get('locale', 'C')}")
    if opts.get("wal_segsize_mb"):
        argv.append(f"--wal-segsize={opts['wal_segsize_mb']}")
    if opts.get("data_checksums"):
        argv.append("--data-checksums")
    return " ".join(argv)


def _settings(target: dict[str, Any]) -> list[str]:
    profile = target.get("profile")
    lines = [f"# postgresql.conf: pgrig's profile {profile!r} (src/pgrig/profiles), then"]
    for name, value in (target.get("settings") or {}).items():
        lines.append(f"#   {name} = '{value}'")
    return lines if target.get("settings") else lines[:1]


def _loads(study_index: StudyIndex, target: str) -> list[str]:
    """The loads of ``target``, as the commands that make the same data (each
    result kind says its own: ``ResultKind.rerun``)."""
    out = []
    for rec, kind, res in study_index.target(target).succeeded():
        if kind.rerun is not None and (argv := kind.rerun(rec.params, res)):
            out.append(shlex.join(argv))
    return out


_DEFINE = re.compile(r"(-D \S+?=)\S+")


def _runs(records: Sequence[RunRecord], target: str) -> list[str]:
    """Each distinct command line of ``target``'s runs (lines that differ only in
    their -D values, as TPC-C's run-time constants do, counted as one), with how
    many more runs ran it."""
    seen: dict[str, tuple[str, list[str]]] = {}
    for rec in records:
        argv = rec.result.get("argv") if rec.result else None
        if rec.target == target and isinstance(argv, list) and argv:
            line = typed([str(a) for a in argv]).replace("'$COPY_DIR'", '"$COPY_DIR"')
            seen.setdefault(_DEFINE.sub(r"\1", line), (line, []))[1].append(rec.key)
    out = []
    for line, keys in seen.values():
        n = len(keys) - 1
        more = f" (and {n} more run{'s' if n != 1 else ''}" if n else ""
        if more and _DEFINE.search(line):
            more += ", their -D values their own"
        out += [f"# {keys[0]}" + (more + ")" if more else ""), line]
    return out


def lines(study: Study, records: Sequence[RunRecord]) -> list[str]:
    """The Markdown of "How to run it again"."""
    params = study.params
    text = params.get("campaign_text")
    command = params.get("command")
    out = ["", "## How to run it again", ""]
    out.append(f"Recorded by pgrig {study.pgrig_version or 'of unknown version'}; "
               f"this summary written by pgrig {__version__}.")  # fmt: skip
    if isinstance(command, list) and command:
        where = " with this campaign file" if isinstance(text, str) else ""
        out += ["", f"The study{where}:", "", "```", shlex.join(map(str, command)), "```"]
        if isinstance(text, str):
            name = PurePosixPath(str(command[-1])).name
            out += ["", f"`{name}`:", "", "```toml", text.rstrip("\n"), "```"]
    else:
        out += ["", "The study's command and campaign were not kept: it was recorded by a pgrig "
                "that did not keep them (before issue 42)."]  # fmt: skip
    targets = [t for t in params.get("targets") or [] if isinstance(t, dict)]
    if not targets:
        return out
    study_index = index.read(records)
    out += ["", "Each step as a person would type it, per target (connections from the PG* "
            "environment; scripts by their file name in pgrig's source):", "", "```"]  # fmt: skip
    for t in targets:
        name = str(t.get("name", ""))
        out.append(f"# -- {name}")
        if not t.get("dsn"):
            out.append(_initdb(t))
            out += _settings(t)
            out.append('pg_ctl -D "$PGDATA" -l logfile start')
        out += _loads(study_index, name)
        out += _runs(records, name)
    out.append("```")
    return out
