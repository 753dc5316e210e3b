"""Every workload, target kind, result kind and step action pgrig knows, in one
visible place.

Adding a workload: write its package (a ``pgrig.workloads.base.Workload``
subclass and its spec, steps, results and report section; see
docs/workloads.md) and add one line to ``WORKLOADS``. Adding a kind of target:
write its module (a ``pgrig.targets.base.TargetKind``; docs/targets.md) and
add one line to ``TARGET_KINDS``. Adding an action a step can run: write its
function (plain-data parameters -> what runs on the step's Context) and add one
line to ``ACTIONS``; a step names it with ``Call("name", {...})``. Plan, runner,
lifecycle, store, report and export ask this module; none of them names a
workload, a target kind or an action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pgrig import probe
from pgrig.durability import workload as durability
from pgrig.durability.workload import WORKLOAD as DURABILITY
from pgrig.errors import PgrigError
from pgrig.monitor.model import MonitorResult
from pgrig.results import ResultKind, RunRecord, typed
from pgrig.step import Action, Call, Prepare
from pgrig.storage import kinds as storage_kinds
from pgrig.targets.base import TargetKind, build_action
from pgrig.targets.directory import KIND as DIRECTORY
from pgrig.targets.existing import KIND as SERVER
from pgrig.targets.lab import KIND as LAB
from pgrig.targets.lossy import KIND as LOSSY
from pgrig.targets.remote import KIND as REMOTE
from pgrig.workloads import common
from pgrig.workloads.base import Workload, WorkloadSpec
from pgrig.workloads.basebackup import steps as basebackup
from pgrig.workloads.basebackup.workload import WORKLOAD as BASEBACKUP
from pgrig.workloads.custom import workload as custom
from pgrig.workloads.custom.workload import WORKLOAD as CUSTOM
from pgrig.workloads.tpcb import steps as tpcb
from pgrig.workloads.tpcb.workload import WORKLOAD as TPCB
from pgrig.workloads.tpcc import steps as tpcc
from pgrig.workloads.tpcc.workload import WORKLOAD as TPCC

if TYPE_CHECKING:  # campaign imports this module
    from pgrig.campaign import TargetSpec

WORKLOADS: dict[str, Workload] = {w.type: w for w in (TPCB, CUSTOM, TPCC, DURABILITY, BASEBACKUP)}

# A remote target is chosen by its ``host`` key. Without ``kind = "..."`` a
# target is otherwise the first kind here that claims it: the
# lossy filesystem when a workload cuts the power, then an existing server (dsn),
# the storage lab (its keys), and a plain directory (anything else).
TARGET_KINDS: dict[str, TargetKind] = {k.name: k for k in (REMOTE, LOSSY, SERVER, LAB, DIRECTORY)}

# What a step's ``Call`` names: each a function of the call's arguments (plain
# data) returning what runs on the step's Context, resolved when the step runs.
ACTIONS: dict[str, Callable[..., Action | Prepare]] = {
    "target.build": build_action,
    "probe.timing": probe.timing_action,
    "probe.fsync": probe.fsync_action,
    "probe.fio": probe.fio_action,
    "relation_sizes": common.relation_sizes,
    "pgbench.prepare": tpcb.prepare_action,
    "pgbench.run": tpcb.bench_action,
    "tpcb.load": tpcb.load_action,
    "tpcb.count": tpcb.count_action,
    "custom.setup": custom.setup_action,
    "tpcc.load": tpcc.load_action,
    "tpcc.check": tpcc.check_action,
    "tpcc.prepare": tpcc.prepare_action,
    "tpcc.run": tpcc.run_action,
    "basebackup.data": basebackup.data_action,
    "basebackup.prepare": basebackup.prepare_action,
    "basebackup.backup": basebackup.backup_action,
    "durability.check": durability.check_action,
}

# What is recorded besides workloads' own kinds: the storage probes and the
# monitor's record of every measured run.
MONITOR = ResultKind("monitor", MonitorResult)
CORE_KINDS: tuple[ResultKind, ...] = (*probe.KINDS, MONITOR, *storage_kinds.KINDS)


def _add(table: dict[str, Any], name: str, item: object, what: str) -> None:
    if table.get(name, item) is not item:
        raise PgrigError(f"a {what} named {name!r} is registered already")
    table[name] = item


def _remove(table: dict[str, Any], name: str, item: object) -> None:
    if table.get(name) is item:
        del table[name]


def register(workload: Workload) -> None:
    """Add a workload at run time (a plugin, or a test's toy workload), with the
    step actions it brings."""
    _add(WORKLOADS, workload.type, workload, "workload type")
    for name, action in workload.actions.items():
        register_action(name, action)


def unregister(workload: Workload) -> None:
    _remove(WORKLOADS, workload.type, workload)
    for name, action in workload.actions.items():
        unregister_action(name, action)


def register_target_kind(kind: TargetKind) -> None:
    """Add a target kind at run time (a plugin, or a test's toy kind); it is
    chosen by ``kind = "NAME"`` in a campaign's ``[[target]]``."""
    _add(TARGET_KINDS, kind.name, kind, "target kind")


def unregister_target_kind(kind: TargetKind) -> None:
    _remove(TARGET_KINDS, kind.name, kind)


def register_action(name: str, action: Callable[..., Action | Prepare]) -> None:
    """Add an action at run time (a plugin's, or a test's toy workload's)."""
    _add(ACTIONS, name, action, "step action")


def unregister_action(name: str, action: Callable[..., Action | Prepare]) -> None:
    _remove(ACTIONS, name, action)


def resolve(call: Call) -> Any:
    """What ``call`` runs: its registered function applied to its arguments, a
    function of the step's Context and progress line."""
    made = ACTIONS.get(call.name)
    if made is None:  # a step made by a plugin that is not loaded, or a typo
        raise PgrigError(
            f"no step action named {call.name!r} is registered",
            hint="register it in pgrig.registry.ACTIONS (or with register_action)",
        )
    return made(**call.args)


def target_kind(spec: TargetSpec, power_loss: str | None = None) -> TargetKind:
    """The kind the target names (``kind = ...``), or else the first that claims
    it (``power_loss``: the workload that cuts the power, if any)."""
    if spec.kind is not None:
        return TARGET_KINDS[spec.kind]
    return next(k for k in TARGET_KINDS.values() if k.claims(spec, power_loss))


def of(spec: WorkloadSpec) -> Workload:
    """The workload a parsed spec belongs to."""
    return WORKLOADS[spec.kind]


def kinds() -> dict[str, ResultKind]:
    out = {k.name: k for k in CORE_KINDS}
    for workload in WORKLOADS.values():
        out.update({k.name: k for k in workload.kinds})
    for target_kind_ in TARGET_KINDS.values():
        out.update({k.name: k for k in target_kind_.kinds})
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
