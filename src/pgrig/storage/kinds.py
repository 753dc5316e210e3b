"""The result kinds the storage lab records (see pgrig.registry)."""

from __future__ import annotations

from pgrig.storage.model import LabInfo
from pgrig.workloads.base import ResultKind

KINDS = (ResultKind("storage_lab", LabInfo, headline=LabInfo.headline),)
