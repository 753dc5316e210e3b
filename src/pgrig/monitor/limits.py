"""The physical limits a run is compared with, from the study's own probes."""

from __future__ import annotations

from collections.abc import Iterable

from pgrig.monitor.model import Limits
from pgrig.results import FioResult, FsyncResult


def limits_from(results: Iterable[object]) -> Limits | None:
    """Limits from the typed results of the probes (``FioResult``, ``FsyncResult``):
    8k randread / randwrite IOPS and pg_test_fsync's fdatasync of one 8kB write.
    None when no probe result is among them."""
    randread = randwrite = fdatasync = None
    for res in results:
        if isinstance(res, FioResult) and res.block_size == "8k":
            if res.pattern == "randread":
                randread = res.iops
            elif res.pattern == "randwrite":
                randwrite = res.iops
        elif isinstance(res, FsyncResult):
            for row in res.rows:
                if row.method == "fdatasync" and "one 8kb write" in row.section.lower():
                    fdatasync = row.ops_per_sec
    if randread is None and randwrite is None and fdatasync is None:
        return None
    return Limits(randread_iops=randread, randwrite_iops=randwrite, fdatasync_ops=fdatasync)
