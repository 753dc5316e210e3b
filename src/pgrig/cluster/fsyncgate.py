"""What a failed fsync does to PostgreSQL, by release ("fsyncgate", 2018).

Linux reports a write-back error once: after fsync returned EIO the kernel may
have dropped the dirty pages, and a retried fsync succeeds with the data gone.
PostgreSQL used to retry, so a checkpoint could complete over lost writes - a
silent loss. Since 11.2, 10.7, 9.6.12 and 9.5.16 the server PANICs instead
(``data_sync_retry = off``, the default) and crash recovery replays the WAL over
the pages that failed. Older minors retry: flagged wherever pgrig runs them.
"""

from __future__ import annotations

# the first minor of each major that PANICs on a failed data-file fsync
FIXED_IN = {9_05: 90516, 9_06: 90612, 10: 100007, 11: 110002}


def retries_failed_fsync(version_num: int) -> bool:
    """True for a server that retries a failed fsync (and may lose data silently)."""
    major = version_num // 10000 if version_num >= 100000 else version_num // 100
    fixed = FIXED_IN.get(major)
    if fixed is not None:
        return version_num < fixed
    return version_num < 90516  # 9.4 and older were never fixed


def warning(version: str, version_num: int) -> str | None:
    """The line to show beside an old minor's results, or None."""
    if not retries_failed_fsync(version_num):
        return None
    return (
        f"PostgreSQL {version} retries a failed fsync instead of PANICking (fixed in "
        "9.5.16, 9.6.12, 10.7, 11.2: data_sync_retry = off): after a disk write error "
        "a checkpoint can complete over lost writes - use a later minor for durability"
    )
