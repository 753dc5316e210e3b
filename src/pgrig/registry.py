"""Every workload and result kind pgrig knows, in one visible place.

Adding a workload: write its package (a ``pgrig.workloads.base.Workload``
subclass and its spec, steps, results and report section; see
docs/workloads.md) and add one line to ``WORKLOADS``. Plan, runner, store,
report and export ask this module; none of them names a workload.
"""

from __future__ import annotations

from typing import Any

from pgrig import probe
from pgrig.durability.workload import WORKLOAD as DURABILITY
from pgrig.errors import PgrigError
from pgrig.monitor.model import MonitorResult
from pgrig.results import RunRecord, typed
from pgrig.storage import kinds as storage_kinds
from pgrig.workloads.base import ResultKind, Workload, WorkloadSpec
from pgrig.workloads.basebackup.workload import WORKLOAD as BASEBACKUP
from pgrig.workloads.custom.workload import WORKLOAD as CUSTOM
from pgrig.workloads.tpcb.workload import WORKLOAD as TPCB
from pgrig.workloads.tpcc.workload import WORKLOAD as TPCC

WORKLOADS: dict[str, Workload] = {w.type: w for w in (TPCB, CUSTOM, TPCC, DURABILITY, BASEBACKUP)}

# What is recorded besides workloads' own kinds: the storage probes and the
# monitor's record of every measured run.
MONITOR = ResultKind("monitor", MonitorResult)
CORE_KINDS: tuple[ResultKind, ...] = (*probe.KINDS, MONITOR, *storage_kinds.KINDS)


def register(workload: Workload) -> None:
    """Add a workload at run time (a plugin, or a test's toy workload)."""
    if workload.type in WORKLOADS and WORKLOADS[workload.type] is not workload:
        raise PgrigError(f"a workload of type {workload.type!r} is registered already")
    WORKLOADS[workload.type] = workload


def unregister(workload: Workload) -> None:
    if WORKLOADS.get(workload.type) is workload:
        del WORKLOADS[workload.type]


def of(spec: WorkloadSpec) -> Workload:
    """The workload a parsed spec belongs to."""
    return WORKLOADS[spec.kind]


def kinds() -> dict[str, ResultKind]:
    out = {k.name: k for k in CORE_KINDS}
    for workload in WORKLOADS.values():
        out.update({k.name: k for k in workload.kinds})
    return out


def kind(name: str) -> ResultKind | None:
    return kinds().get(name)


def typed_result(record: RunRecord) -> Any:
    """The record's result as its registered dataclass; None when the run did not
    succeed or its kind is unknown to this version of pgrig."""
    found = kind(record.kind)
    if found is None or record.status != "ok" or record.result is None:
        return None
    return typed(record, found.type)


def headline(kind_name: str, result: Any) -> str:
    found = kind(kind_name)
    return found.headline(result) if found is not None and result is not None else ""


def columns(kind_name: str, result: Any) -> dict[str, Any]:
    found = kind(kind_name)
    return found.columns(result) if found is not None and result is not None else {}


def result_type(kind_name: str) -> type:
    found = kind(kind_name)
    if found is None:
        raise KeyError(f"no result kind {kind_name!r} is registered")
    return found.type
