"""The result kinds the storage lab records (see pgrig.registry)."""

from __future__ import annotations

from pgrig.results import ResultKind
from pgrig.storage.memcg import MemoryUse
from pgrig.storage.model import LabInfo

MEMORY = ResultKind(
    "memory_cgroup",
    MemoryUse,
    headline=MemoryUse.headline,
    columns=lambda r: {
        "limit_hits": r.limit_hits,
        "oom_kills": r.oom_kills,
        "peak_bytes": r.after.peak_bytes,
    },
)
LAB = ResultKind("storage_lab", LabInfo, headline=LabInfo.headline)
KINDS = (LAB, MEMORY)
