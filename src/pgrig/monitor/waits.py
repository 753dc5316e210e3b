"""Wait events by the cause they count towards, in every major's spelling.

pg_stat_activity names a backend's wait as ``Type:Event``; 17 renamed many I/O
events (``WALSync`` -> ``WalSync``, ``BufFileRead`` -> ``BuffileRead``), 18 added
the asynchronous I/O waits. Every name here is checked against ``pg_wait_events``
of a real 18 (tests/test_versions.py), the renamed ones against their absence.
"""

from __future__ import annotations

WAL_EVENTS = {
    "IO:WALSync",
    "IO:WALWrite",
    "IO:WALInitSync",
    "IO:WALInitWrite",
    "LWLock:WALWrite",  # the lightweight locks keep their spelling in 17 and 18
    "LWLock:WALInsert",
    "LWLock:WALBufMapping",
    # PostgreSQL 17 renamed the I/O wait events to CamelCase (checked on a real 18
    # against pg_wait_events: tests/test_versions.py).
    "IO:WalSync",
    "IO:WalWrite",
    "IO:WalInitSync",
    "IO:WalInitWrite",
}
READ_EVENTS = {
    "IO:DataFileRead",
    "IO:DataFilePrefetch",
    "IO:BufFileRead",
    "IO:SLRURead",
    "IO:BuffileRead",  # 17+
    "IO:SlruRead",  # 17+
    # PostgreSQL 18's asynchronous I/O, used for reads only: a backend waiting for a
    # read it handed to an I/O worker or to io_uring (DataFileRead is then not seen).
    "IO:AioIoCompletion",
    "IO:AioIoUringExecution",
    "IO:AioIoUringSubmit",
}
WRITE_EVENTS = {
    "IO:DataFileWrite",
    "IO:DataFileExtend",
    "IO:DataFileFlush",
    "IO:DataFileSync",
    "IO:BufFileWrite",
    "IO:SLRUWrite",
    "IO:SLRUSync",
    "IO:BuffileWrite",  # 17+
    "IO:SlruWrite",
    "IO:SlruSync",
    "IO:SlruFlushSync",
}
# The spellings of 16 and before that 17 renamed (kept for older servers).
RENAMED_IN_17 = {
    "IO:WALSync",
    "IO:WALWrite",
    "IO:WALInitSync",
    "IO:WALInitWrite",
    "IO:BufFileRead",
    "IO:BufFileWrite",
    "IO:SLRURead",
    "IO:SLRUWrite",
    "IO:SLRUSync",
}


def wait_class(event: str) -> str:
    """Which cause a wait-event key (as PgSample.waits has them) counts towards."""
    if event == "CPU":
        return "cpu"
    if event.startswith("Client:") or event.startswith("idle"):
        return "client"
    if event in WAL_EVENTS:
        return "wal"
    if event.startswith("Lock:"):
        return "lock"
    if event in READ_EVENTS:
        return "read"
    if event in WRITE_EVENTS:
        return "write"
    if event.startswith("LWLock:"):
        return "lwlock"
    return "other"
