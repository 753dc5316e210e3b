"""The result kinds the storage lab records (see pgrig.registry)."""

from __future__ import annotations

from pgrig.results import ResultKind
from pgrig.storage.emulator import EmulationAtEnd, EmulatorUse
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
EMULATOR = ResultKind(
    "emulator",
    EmulatorUse,
    headline=EmulatorUse.headline,
    columns=lambda r: {
        "cpu_share": r.share_of_machine,
        "cpu_us_per_io": r.cpu_us_per_io,
        "read_in_layer_us": r.read_in_layer_us,
    },
)
# The emulated disks measured again at the end of the study (a target's step
# after its last run, before its storage is removed)
EMULATOR_END = ResultKind("emulator_end", EmulationAtEnd, headline=EmulationAtEnd.headline)
KINDS = (LAB, MEMORY, EMULATOR, EMULATOR_END)
