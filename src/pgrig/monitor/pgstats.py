"""PostgreSQL's side of a sample: wait events of the client backends and the
cumulative statistics, read in one statement per second.

The statement is built once per server from the views and columns it has:
``pg_stat_wal`` exists from 14, ``pg_stat_io`` from 16, and 17 moved the
checkpointer's counters from ``pg_stat_bgwriter`` to ``pg_stat_checkpointer``
(18 moved WAL writes and syncs into ``pg_stat_io``). A view that is missing is
simply not sampled; ``notes`` says so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import cast

import psycopg

from pgrig.monitor.model import PgSample

MIB = 1024 * 1024

# One row of wait-event counts over the client backends of the benchmark's
# database: "CPU" when active with no wait event (running or runnable).
# {event}: the wait event as "Type:Event"; {client}: the filter on client backends;
# {state}: the backend's process state, or NULL where it is not read. A key is
# "event|state" where the state was read ("IO:WALWrite|R"), else the event alone.
WAITS_SQL = """
(SELECT json_object_agg(k || coalesce('|' || s, ''), n) FROM (
   SELECT CASE WHEN {event} IS NOT NULL THEN {event}
               WHEN state = 'active' THEN 'CPU'
               ELSE coalesce(state, 'unknown') END AS k,
          {state} AS s,
          count(*) AS n
   FROM pg_stat_activity
   WHERE {client} pid <> pg_backend_pid()
     AND datname = current_database()
   GROUP BY 1, 2) w)
"""
# The state letter of /proc/<pid>/stat ("123 (postgres) R 1 ..."), read by the
# server on its own host in the statement that reads pg_stat_activity: moments
# after the wait events were taken, not a round trip later. Only for the I/O and
# lightweight-lock waits the WAL and storage verdicts read (a file read per
# backend waiting so, not per idle one); a backend gone meanwhile reads NULL.
PROC_STATE = (
    "CASE WHEN wait_event_type IN ('IO', 'LWLock') THEN "
    "substring(pg_read_file('/proc/' || pid || '/stat', 0, 512, true) from '^.*\\) (\\S)') END"
)
NO_STATE = "NULL::text"
# 10+: wait_event_type and wait_event for every kind of wait; 9.6: the same columns,
# but only lock and lightweight-lock waits are reported; 9.5: a "waiting" flag for
# heavyweight locks.
EVENT_10 = "wait_event_type || ':' || wait_event"
# 9.6 splits lightweight locks into two types that 10 merged into "LWLock".
EVENT_96 = (
    "CASE WHEN wait_event_type LIKE 'LWLock%' THEN 'LWLock' ELSE wait_event_type END"
    " || ':' || wait_event"
)
EVENT_95 = "CASE WHEN waiting THEN 'Lock:waiting' END"
CHECKPOINTER_SQL = (
    "(SELECT coalesce(wait_event, 'CPU') FROM pg_stat_activity WHERE backend_type = 'checkpointer')"
)
DATABASE_SQL = """
(SELECT json_build_object('commits', xact_commit, 'rollbacks', xact_rollback,
        'blks_hit', blks_hit, 'blks_read', blks_read, 'temp_bytes', temp_bytes,
        'deadlocks', deadlocks)
 FROM pg_stat_database WHERE datname = current_database())
"""
# Relations only: 18 added WAL rows (object 'wal') to pg_stat_io, which would
# change what "writes" means from one major to the next; WAL is sampled apart.
# {ops}: VALUES rows of the counters this major has: read_time (ms, with
# track_io_timing) from 16, read_bytes from 18 (before: reads x op_bytes, 8 kB;
# 18 combines adjacent blocks into one read, so reads alone undercount bytes).
IO_SQL = """
(SELECT json_object_agg(backend_type || ':' || op, n) FROM (
   SELECT backend_type, op, sum(n) AS n FROM pg_stat_io,
     LATERAL (VALUES {ops}) v(op, n)
   WHERE n IS NOT NULL AND object <> 'wal' GROUP BY 1, 2) i)
"""
IO_COUNTERS = ("reads", "writes", "extends", "fsyncs", "hits", "read_time", "read_bytes")


def _io_sql(have: set[str]) -> str:
    ops = [f"('{c}', {c}::float8)" for c in IO_COUNTERS if c in have]
    if "read_bytes" not in have and "op_bytes" in have:
        ops.append("('read_bytes', (reads * op_bytes)::float8)")
    return IO_SQL.format(ops=", ".join(ops))


# 18 moved WAL writes and syncs from pg_stat_wal to pg_stat_io; context 'normal' is
# what pg_stat_wal counted ('init' is the zero-filling of new segment files).
WAL_IO_SQL = """
(SELECT json_build_object('writes', sum(writes), 'syncs', sum(fsyncs),
                          'sync_time', sum(fsync_time))
 FROM pg_stat_io WHERE object = 'wal' AND context = 'normal')
"""


def _columns(conn: psycopg.Connection, view: str) -> set[str]:
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0",
        (view,),
    ).fetchall()
    return {r[0] for r in rows}


def _json_of(view: str, wanted: Mapping[str, str], have: set[str]) -> str | None:
    """``json_build_object`` of the columns ``view`` has, renamed to our names."""
    pairs = [f"'{ours}', {col}" for ours, col in wanted.items() if col in have]
    if not pairs:
        return None
    return f"(SELECT json_build_object({', '.join(pairs)}) FROM {view})"


def _reads_states(conn: psycopg.Connection) -> str | None:
    """None when the server can read its backends' /proc/<pid>/stat, else why not."""
    try:
        with conn.transaction():
            row = conn.execute(
                "SELECT pg_read_file('/proc/' || pg_backend_pid() || '/stat', 0, 512, true)"
            ).fetchone()
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0]
    if not row or not row[0]:
        return "no /proc/<pid>/stat on the server's host"
    return None


def _waits_sql(activity: Collection[str], notes: list[str], state: str = NO_STATE) -> str:
    """The client backends' wait events, as far as the server reports them (what
    it does not report is said in ``notes``), with their processes' ``state``."""
    client = "backend_type = 'client backend' AND" if "backend_type" in activity else ""
    if "wait_event" in activity and "backend_type" in activity:
        event = EVENT_10
    elif "wait_event" in activity:
        event = EVENT_96
        notes.append(
            "PostgreSQL 9.6 reports only lock waits: active backends waiting for I/O count as CPU"
        )
    else:
        event = EVENT_95
        notes.append(
            "PostgreSQL 9.5 reports no wait events, only heavyweight lock waits: "
            "active backends waiting for anything else count as CPU"
        )
    return WAITS_SQL.format(event=event, client=client, state=state)


def _checkpoint_parts(conn: psycopg.Connection) -> dict[str, str]:
    """The checkpoints' and the background writer's counters: from
    pg_stat_checkpointer (17+) or pg_stat_bgwriter, whichever has them."""
    bgwriter = _columns(conn, "pg_stat_bgwriter")
    checkpointer = _columns(conn, "pg_stat_checkpointer")
    if checkpointer:  # 17+
        ckpt = _json_of(
            "pg_stat_checkpointer",
            {
                "timed": "num_timed",
                "requested": "num_requested",
                "done": "num_done",
                "buffers_checkpoint": "buffers_written",
            },
            checkpointer,
        )
    else:
        ckpt = _json_of(
            "pg_stat_bgwriter",
            {
                "timed": "checkpoints_timed",
                "requested": "checkpoints_req",
                "buffers_checkpoint": "buffers_checkpoint",
            },
            bgwriter,
        )
    bg = _json_of(
        "pg_stat_bgwriter",
        {"buffers_clean": "buffers_clean", "buffers_backend": "buffers_backend"},
        bgwriter,
    )
    return {name: sql for name, sql in (("ckpt", ckpt), ("bgwriter", bg)) if sql}


class PgSampler:
    """Reads one snapshot per call; ``sample`` returns the deltas since the previous one."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
        self.version_num = int(row[0]) if row else 0
        self.notes: list[str] = []
        activity = _columns(conn, "pg_stat_activity")
        unread = _reads_states(conn)
        if unread is not None:
            self.notes.append(
                f"the backends' process states not read ({unread}): a backend preempted "
                "with a wait event set counts as waiting on it (superuser or "
                "pg_read_server_files reads them, PostgreSQL 11+)"
            )
        state = NO_STATE if unread is not None else PROC_STATE
        parts = {"waits": _waits_sql(activity, self.notes, state), "db": DATABASE_SQL}
        if "backend_type" in activity:  # 10+: the checkpointer is in pg_stat_activity
            parts["checkpointer"] = CHECKPOINTER_SQL
        parts.update(_checkpoint_parts(conn))
        wal = _columns(conn, "pg_stat_wal")
        if wal:
            wal_sql = _json_of(
                "pg_stat_wal",
                {
                    "bytes": "wal_bytes",
                    "records": "wal_records",
                    "fpi": "wal_fpi",
                    "writes": "wal_write",
                    "syncs": "wal_sync",
                    "sync_time": "wal_sync_time",
                },
                wal,
            )
            assert wal_sql is not None
            parts["wal"] = wal_sql
        else:
            self.notes.append("pg_stat_wal is not available before PostgreSQL 14: no WAL rates")
        io_columns = _columns(conn, "pg_stat_io")
        self.has_io = bool(io_columns)
        if self.has_io:
            parts["io"] = _io_sql(io_columns)
            if wal and "wal_sync" not in wal:  # 18: WAL writes and syncs live in pg_stat_io
                parts["walio"] = WAL_IO_SQL
        else:
            self.notes.append(
                "pg_stat_io is not available before PostgreSQL 16: I/O by backend type not sampled"
            )
        self.names = list(parts)
        self.sql = "SELECT " + ",\n".join(f"{sql} AS {name}" for name, sql in parts.items())
        self._prev: dict[str, object] | None = None

    def snapshot(self) -> dict[str, object]:
        row = self.conn.execute(self.sql).fetchone()
        assert row is not None
        return dict(zip(self.names, row, strict=True))

    def sample(self, seconds: float) -> PgSample | None:
        """Deltas since the previous call; None on the first call (nothing to compare)."""
        snap = self.snapshot()
        prev, self._prev = self._prev, snap
        if prev is None:
            return None
        return to_sample(prev, snap, seconds)

    def prime(self) -> None:
        self._prev = self.snapshot()


# One view's counters, as json_build_object gives them: numbers, None where absent.
Counters = Mapping[str, float | None]
# One snapshot: each part's counters (``ckpt``, ``db``, ...), the client
# backends' wait events with their counts (``waits``), the checkpointer's wait
# event (``checkpointer``: text).
Snapshot = Mapping[str, object]


def _group(snap: Snapshot, name: str) -> Counters | None:
    return cast("Counters | None", snap.get(name))


def _delta(prev: Counters | None, cur: Counters | None, key: str) -> float:
    """Counter difference, never negative (a stats reset between the two reads)."""
    if not prev or not cur:
        return 0.0
    before, after = prev.get(key), cur.get(key)
    if before is None or after is None:
        return 0.0
    return max(0.0, float(after) - float(before))


def to_sample(prev: Snapshot, cur: Snapshot, seconds: float) -> PgSample:
    def rate(group: str, key: str) -> float:
        return _delta(_group(prev, group), _group(cur, group), key) / seconds

    def optional_rate(group: str, key: str) -> float | None:
        counters = _group(cur, group)
        if not counters or counters.get(key) is None:
            return None
        return rate(group, key)

    ckpt_prev, ckpt_cur = _group(prev, "ckpt"), _group(cur, "ckpt") or {}
    if ckpt_cur.get("done") is not None:
        checkpoints = _delta(ckpt_prev, ckpt_cur, "done")
    else:
        checkpoints = _delta(ckpt_prev, ckpt_cur, "timed") + _delta(
            ckpt_prev, ckpt_cur, "requested"
        )
    wal_group = "walio" if cur.get("walio") else "wal"
    io: dict[str, float] = {}
    io_cur = _group(cur, "io")
    if io_cur:
        for key in io_cur:
            io[key] = _delta(_group(prev, "io"), io_cur, key) / seconds
    wal_bytes = optional_rate("wal", "bytes")
    keyed = cast("Mapping[str, int] | None", cur.get("waits")) or {}
    waits: dict[str, int] = {}
    states: dict[str, int] = {}
    for key, n in keyed.items():
        event, _, state = str(key).partition("|")
        waits[event] = waits.get(event, 0) + int(n)
        if state:
            states[f"{event}|{state}"] = int(n)
    return PgSample(
        waits=waits,
        states=states,
        checkpoint_active=cur.get("checkpointer") not in (None, "CheckpointerMain")
        or bool(_delta(ckpt_prev, ckpt_cur, "buffers_checkpoint")),
        commits_s=rate("db", "commits"),
        rollbacks_s=rate("db", "rollbacks"),
        blks_hit_s=rate("db", "blks_hit"),
        blks_read_s=rate("db", "blks_read"),
        temp_mib_s=rate("db", "temp_bytes") / MIB,
        deadlocks=int(_delta(_group(prev, "db"), _group(cur, "db"), "deadlocks")),
        checkpoints=int(checkpoints),
        buffers_checkpoint_s=rate("ckpt", "buffers_checkpoint"),
        buffers_clean_s=rate("bgwriter", "buffers_clean"),
        buffers_backend_s=optional_rate("bgwriter", "buffers_backend"),
        wal_mib_s=None if wal_bytes is None else wal_bytes / MIB,
        wal_records_s=optional_rate("wal", "records"),
        wal_fpi_s=optional_rate("wal", "fpi"),
        wal_writes_s=optional_rate(wal_group, "writes"),
        wal_syncs_s=optional_rate(wal_group, "syncs"),
        wal_sync_ms_s=optional_rate(wal_group, "sync_time"),
        io=io,
    )
