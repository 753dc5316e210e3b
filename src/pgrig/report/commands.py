"""The exact command lines a study ran: pgbench's and pg_basebackup's argv as
their records keep them (``argv`` in the result), for the runs table and the
ticket-sized summary. Records made before pgrig kept them have none: they are
left out, never guessed from the parameters."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from pgrig.document.model import Row, Table
from pgrig.results import RunRecord


def command_lines(records: Sequence[RunRecord]) -> list[tuple[str, str]]:
    """(run key, its command line) of every run whose record keeps its argv."""
    out = []
    for rec in records:
        argv = rec.result.get("argv") if rec.result else None
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            out.append((rec.key, shlex.join(str(a) for a in argv)))
    return out


def commands_table(records: Sequence[RunRecord]) -> Table | None:
    """The runs' command lines, folded away like the runs table; None when no
    record keeps one."""
    lines = command_lines(records)
    if not lines:
        return None
    return Table(
        ("Run", "Command line"),
        tuple(Row((key, line)) for key, line in lines),
        caption=f"The exact command lines of {len(lines)} runs",
        notes=("Passwords travel in the environment (PGPASSWORD), never on a command line.",),
        collapsed=True,
    )
