"""``pgrig tpcc check``: the consistency conditions of clause 3.3.2, all twelve.

Every condition is one query in ``sql/checks.sql`` returning the offending and
the examined row counts; all run in one REPEATABLE READ transaction, so they see
one snapshot even while something else writes. Condition 11 holds only for a
database fresh from the load (Delivery removes NEW-ORDER rows and New-Order adds
ORDER rows), so it is skipped, with that reason, once a run has started.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import psycopg

from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.workloads.common import limit_by_size
from pgrig.workloads.tpcc import sqlfiles
from pgrig.workloads.tpcc.model import Condition, TpccCheck

_HEADER = re.compile(r"^-- condition (\d+): (.*)$")
ONLY_AFTER_LOAD = 11


@dataclass(frozen=True)
class Loaded:
    """The ``tpcc.meta`` row: what the loader wrote when it finished."""

    warehouses: int
    c_last_load: int
    c_id: int
    ol_i_id: int
    runs: int
    load_bytes: int | None = None  # None: loaded by a pgrig that did not record it


def conditions() -> list[tuple[int, str, str]]:
    """(number, title, query) for each condition in ``sql/checks.sql``."""
    out: list[tuple[int, str, str]] = []
    for line in sqlfiles.sql("checks").splitlines():
        if m := _HEADER.match(line):
            out.append((int(m.group(1)), m.group(2).strip(), ""))
        elif out and not line.startswith("--"):
            number, title, query = out[-1]
            out[-1] = (number, title, f"{query}{line}\n")
    return [(n, t, q.strip().rstrip(";")) for n, t, q in out]


def loaded(db: psycopg.Connection) -> Loaded:
    """The loaded schema's description; a clear error when there is none."""
    row = db.execute("SELECT to_regclass('tpcc.meta') IS NOT NULL").fetchone()
    if not row or not row[0]:
        raise UsageError(
            "no TPC-C schema in this database",
            hint="load one first: pgrig tpcc load --warehouses W (same --dsn)",
        )
    # to_jsonb: a schema loaded before load_bytes existed reads as NULL, not an error.
    meta = db.execute(
        "SELECT warehouses, c_last_load, c_id, ol_i_id, runs,"
        " (to_jsonb(m) ->> 'load_bytes')::bigint FROM tpcc.meta m"
    ).fetchone()
    if meta is None:
        raise UsageError(
            "the tpcc schema in this database was not loaded to the end",
            hint="load it again: pgrig tpcc load --warehouses W --yes",
        )
    w, c_last, c_id, ol_i_id, runs, load_bytes = meta
    return Loaded(
        int(w), int(c_last), int(c_id), int(ol_i_id), int(runs),
        None if load_bytes is None else int(load_bytes),
    )  # fmt: skip


def check(conn: Conn, timeout_s: float | None = None) -> TpccCheck:
    """Every consistency condition, in one read-only snapshot; each query ends
    after ``timeout_s`` (else a time sized from the database)."""
    t0 = time.monotonic()
    results = []
    with conn.connect() as db:
        limit_by_size(db, timeout_s)
        info = loaded(db)
        db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        for number, title, query in conditions():
            if number == ONLY_AFTER_LOAD and info.runs > 0:
                results.append(
                    Condition(
                        number,
                        title,
                        passed=True,
                        offending=0,
                        checked=0,
                        skipped=f"holds only right after the load; {info.runs} run(s) since",
                    )
                )
                continue
            row = db.execute(query).fetchone()
            assert row is not None
            offending, checked = int(row[0]), int(row[1])
            results.append(Condition(number, title, offending == 0, offending, checked))
        db.execute("COMMIT")
    return TpccCheck(
        warehouses=info.warehouses,
        conditions=tuple(results),
        elapsed_s=round(time.monotonic() - t0, 3),
    )
