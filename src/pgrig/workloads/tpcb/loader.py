"""pgrig's parallel TPC-B loader: the rows of ``pgbench -i``, loaded by N connections.

What stays pgbench's: the tables. ``pgbench -i --init-steps=dt`` with the
campaign's options (partitions, fillfactor, unlogged, tablespaces) drops and
creates them, so names, types (``aid`` bigint from scale 20,000), fillfactor
and partition bounds are pgbench's own. What pgrig does instead of ``g``,
``v`` and ``p``:

* generate: ``pgbench_accounts`` in binary COPY of ``(aid, bid)``, the rows
  built by numpy in blocks (bid = (aid - 1) / 100,000 + 1), spread over
  ``jobs`` connections. ``abalance`` 0 and ``filler`` '' (char(84): 84 blanks,
  as pgbench's empty text field) come from column defaults set for the load
  and dropped after it: the server copies one constant per row instead of
  receiving and padding a field (0.3-0.6 s of 2.9 s at scale 100). A
  partitioned table loads one partition per unit with ``TRUNCATE`` +
  ``COPY ... FREEZE`` in one transaction; one table loaded by one
  connection does the same; one table loaded by several cannot be frozen (only
  the transaction that created or truncated it may), so it is loaded in
  chunks and the vacuum step sets the hint bits and the visibility map.
  ``pgbench_branches`` and ``pgbench_tellers`` load in text COPY with a NULL
  filler, as pgbench's client-side generation does.
* vacuum: ``VACUUM ANALYZE`` per table (per partition), in parallel.
* primary keys: the ``ALTER TABLE ... ADD PRIMARY KEY`` of pgbench's ``p``
  step, in parallel connections, with as many parallel maintenance workers as
  fill ``jobs`` cores (``build_workers``); a partitioned table builds each
  partition's key in its own connection, then the parent's key, which attaches
  them without a rebuild.

Given the cluster pgrig created, the whole load runs at ``wal_level =
minimal`` (``pgrig.cluster.loadwal``): the server restarted before and after,
both restarts counted in the load's time. Then one table is always one frozen
COPY: chunks copied by several connections would write WAL (only a table
created or truncated in the copying transaction skips it), cost a VACUUM
setting every hint bit, and hand the key's sort an interleaved heap.

The result is a ``PgbenchInit`` whose steps read like pgbench's "done in"
line, with ``parallel generate`` as the generation step.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psycopg
from psycopg import sql

from pgrig.cluster import loadwal
from pgrig.conninfo import Conn
from pgrig.results import PgbenchInit
from pgrig.tools import pgbench
from pgrig.workloads.parallel import Unit, build_workers, load_settings, run_parallel

BRANCHES_PER_SCALE = 1
TELLERS_PER_SCALE = 10
BLOCK_ROWS = 65_536  # rows built and sent at a time: about 2 MB of COPY data
CHUNK_ROWS = 1_000_000  # one unit of an unpartitioned table loaded by several connections


# The columns pgrig sends; the others take these defaults during the load.
ACCOUNT_COLUMNS = ("aid", "bid")
ACCOUNT_DEFAULTS = {"abalance": "0", "filler": "''"}


def account_rows(first: int, last: int, aid_bytes: int) -> bytes:
    """Binary COPY rows (``ACCOUNT_COLUMNS``) of pgbench_accounts for aid
    ``first`` to ``last`` inclusive."""
    # numpy here, not with the module: the registry imports this one in every
    # pgrig process (docs/bench.md, "Starting a pgrig process").
    import numpy as np

    aid_type = ">i4" if aid_bytes == 4 else ">i8"
    row = np.dtype(
        [
            ("fields", ">i2"),
            ("aid_len", ">i4"), ("aid", aid_type),
            ("bid_len", ">i4"), ("bid", ">i4"),
        ]
    )  # fmt: skip
    aid = np.arange(first, last + 1, dtype=np.int64)
    block = np.empty(len(aid), dtype=row)
    block["fields"] = len(ACCOUNT_COLUMNS)
    block["aid_len"] = aid_bytes
    block["aid"] = aid
    block["bid_len"] = 4
    block["bid"] = (aid - 1) // pgbench.ROWS_PER_SCALE + 1
    return block.tobytes()


def _account_defaults(set_them: bool) -> Unit:
    """Set (or drop) the defaults of the columns the COPY leaves out; on a
    partitioned table ALTER TABLE reaches every partition."""
    clauses = [
        sql.SQL("ALTER {} SET DEFAULT {}").format(sql.Identifier(col), sql.SQL(value))
        if set_them
        else sql.SQL("ALTER {} DROP DEFAULT").format(sql.Identifier(col))
        for col, value in ACCOUNT_DEFAULTS.items()
    ]
    statement = sql.SQL("ALTER TABLE pgbench_accounts ") + sql.SQL(", ").join(clauses)
    return Unit("defaults of pgbench_accounts", statement.as_string())


def _copy_accounts(table: str, first: int, last: int, aid_bytes: int, freeze: bool) -> Unit:
    def run(db: psycopg.Connection) -> None:
        from pgrig.workloads.copybin import COPY_HEADER, COPY_TRAILER  # numpy: account_rows

        ident = sql.Identifier(table)
        options = sql.SQL("FORMAT binary, FREEZE" if freeze else "FORMAT binary")
        with db.transaction():
            if freeze:  # FREEZE needs the table created or truncated in this transaction
                db.execute(sql.SQL("TRUNCATE {}").format(ident))
            columns = sql.SQL(", ").join(map(sql.Identifier, ACCOUNT_COLUMNS))
            copy = sql.SQL("COPY {} ({}) FROM STDIN ({})").format(ident, columns, options)
            with db.cursor().copy(copy) as out:
                out.write(COPY_HEADER)
                for start in range(first, last + 1, BLOCK_ROWS):
                    out.write(account_rows(start, min(last, start + BLOCK_ROWS - 1), aid_bytes))
                out.write(COPY_TRAILER)

    return Unit(f"{table} {first}-{last}", run=run)


def _copy_small(table: str, lines: Callable[[int], str], count: int) -> Unit:
    def run(db: psycopg.Connection) -> None:
        with db.transaction():
            db.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
            copy = sql.SQL("COPY {} FROM STDIN (FREEZE)").format(sql.Identifier(table))
            with db.cursor().copy(copy) as out:
                out.write("".join(lines(i) for i in range(1, count + 1)))

    return Unit(table, run=run)


def account_units(opts: pgbench.InitOptions, jobs: int, aid_bytes: int) -> list[Unit]:
    """The COPY units of pgbench_accounts, with pgbench's range partition bounds."""
    rows = opts.rows
    if opts.partitions:
        size = -(-rows // opts.partitions)  # pgbench: (naccounts + partitions - 1) / partitions
        return [
            _copy_accounts(
                f"pgbench_accounts_{p}", (p - 1) * size + 1, min(rows, p * size), aid_bytes, True
            )
            for p in range(1, opts.partitions + 1)
            if (p - 1) * size < rows
        ]
    if jobs == 1:
        return [_copy_accounts("pgbench_accounts", 1, rows, aid_bytes, True)]
    chunk = min(CHUNK_ROWS, -(-rows // jobs))
    return [
        _copy_accounts("pgbench_accounts", first, min(rows, first + chunk - 1), aid_bytes, False)
        for first in range(1, rows + 1, chunk)
    ]


def _server_facts(conn: Conn) -> tuple[int, int, bool]:
    """The bytes of pgbench_accounts.aid as pgbench created it (bigint from scale
    20,000), the server's version (server_version_num), and whether pgrig
    connects as a superuser."""
    with conn.connect() as db:
        row = db.execute(
            "SELECT format_type(atttypid, NULL), current_setting('is_superuser') = 'on'"
            " FROM pg_attribute"
            " WHERE attrelid = 'pgbench_accounts'::regclass AND attname = 'aid'"
        ).fetchone()
        aid_bytes = 8 if row and row[0] == "bigint" else 4
        return aid_bytes, db.info.server_version, bool(row and row[1])


def _primary_key(table: str, column: str, index_tablespace: str | None) -> Unit:
    statement = sql.SQL("ALTER TABLE {} ADD PRIMARY KEY ({})").format(
        sql.Identifier(table), sql.Identifier(column)
    )
    if index_tablespace:
        statement += sql.SQL(" USING INDEX TABLESPACE {}").format(sql.Identifier(index_tablespace))
    return Unit(f"primary key of {table}", statement.as_string())


def load(
    bin_dir: Path | str,
    conn: Conn,
    opts: pgbench.InitOptions,
    jobs: int,
    on_progress: Callable[[int, int], None] | None = None,
    *,
    minimal_wal: loadwal.Restartable | None = None,
) -> tuple[PgbenchInit, str]:
    """Load the TPC-B tables as ``pgbench -i`` would; return the result and a
    log: pgbench's own output for the tables, then a "done in" line of ours.
    ``minimal_wal``: the cluster (pgrig's own) to restart at ``wal_level =
    minimal`` for the load; None: load at the server's settings."""
    jobs = max(1, jobs)
    t0 = time.monotonic()
    steps: dict[str, float] = {}
    restarts = loadwal.minimal_wal(minimal_wal, steps) if minimal_wal else contextlib.nullcontext()
    with restarts:
        raw = _load(bin_dir, conn, opts, jobs, on_progress, steps, frozen=minimal_wal is not None)
    elapsed = time.monotonic() - t0
    summary = ", ".join(f"{name} {s:.2f} s" for name, s in steps.items())
    line = f"done in {elapsed:.2f} s ({summary}).\n"
    result = replace(
        pgbench.parse_init(line, opts),
        jobs=jobs,
        wal_level=loadwal.MINIMAL if minimal_wal is not None else None,
    )
    return result, f"{raw}pgrig: {line}"


def _load(
    bin_dir: Path | str,
    conn: Conn,
    opts: pgbench.InitOptions,
    jobs: int,
    on_progress: Callable[[int, int], None] | None,
    steps: dict[str, float],
    *,
    frozen: bool,
) -> str:
    """The load's steps, their seconds into ``steps``; returns pgbench's output.
    ``frozen``: one table is one frozen COPY whatever ``jobs`` is."""
    timeout_s = pgbench.load_timeout_s(opts.scale)
    tables, raw = pgbench.run_init(bin_dir, conn, opts, steps="dt", timeout=timeout_s)
    steps.update(tables.steps)
    t_created = time.monotonic()
    aid_bytes, version, superuser = _server_facts(conn)
    setup = load_settings(version, timeout_s=timeout_s, workers=jobs, superuser=superuser)
    accounts = account_units(opts, 1 if frozen and not opts.partitions else jobs, aid_bytes)
    units = [
        *accounts,
        _copy_small("pgbench_branches", lambda i: f"{i}\t0\t\\N\n", opts.scale),
        _copy_small(
            "pgbench_tellers",
            lambda i: f"{i}\t{(i - 1) // TELLERS_PER_SCALE + 1}\t0\t\\N\n",
            opts.scale * TELLERS_PER_SCALE,
        ),
    ]
    account_labels = {u.label for u in accounts}
    done_units = 0

    def done(unit: Unit) -> None:
        nonlocal done_units
        if unit.label in account_labels and on_progress is not None:
            done_units += 1
            on_progress(opts.rows * done_units // len(accounts), opts.rows)

    run_parallel(conn, 1, [_account_defaults(True)], what="TPC-B load", setup=setup)
    run_parallel(conn, jobs, units, done, what="TPC-B load", setup=setup)
    run_parallel(conn, 1, [_account_defaults(False)], what="TPC-B load", setup=setup)
    t_generated = time.monotonic()
    steps["parallel generate"] = round(t_generated - t_created, 2)
    if opts.partitions:
        vacuum = [Unit(u.label, f"VACUUM {u.label.split()[0]}") for u in accounts]
        vacuum.append(Unit("analyze", "ANALYZE pgbench_accounts"))
    else:
        vacuum = [Unit("accounts", "VACUUM ANALYZE pgbench_accounts")]
    vacuum += [
        Unit(t, f"VACUUM ANALYZE {t}")
        for t in ("pgbench_branches", "pgbench_tellers", "pgbench_history")
    ]
    run_parallel(conn, jobs, vacuum, what="TPC-B vacuum", setup=setup)
    t_vacuumed = time.monotonic()
    steps["vacuum"] = round(t_vacuumed - t_generated, 2)
    # The keys' builds: one table's alone, partitions' as many at once as connections.
    builds = min(jobs, len(accounts)) if opts.partitions else 1
    workers = build_workers(jobs, builds)
    setup = load_settings(version, timeout_s=timeout_s, workers=workers, superuser=superuser)
    space = opts.index_tablespace
    keys = [
        _primary_key("pgbench_branches", "bid", space),
        _primary_key("pgbench_tellers", "tid", space),
    ]
    if opts.partitions:
        parts = [_primary_key(u.label.split()[0], "aid", space) for u in accounts]
        run_parallel(conn, jobs, [*parts, *keys], what="TPC-B primary keys", setup=setup)
        # The parent's key finds each partition's and attaches it: no index is built twice.
        run_parallel(conn, 1, [_primary_key("pgbench_accounts", "aid", space)],
                     what="TPC-B primary keys", setup=setup)  # fmt: skip
    else:
        keys.insert(0, _primary_key("pgbench_accounts", "aid", space))
        run_parallel(conn, jobs, keys, what="TPC-B primary keys", setup=setup)
    steps["primary keys"] = round(time.monotonic() - t_vacuumed, 2)
    return raw
