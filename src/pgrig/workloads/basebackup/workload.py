"""pg_basebackup as a campaign workload: the TPC-B data on every target, then
timed copies - to the same target, another target or a directory - interleaved
and repeated like any measured run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pgrig.policy import RunPolicy
from pgrig.registry.workload import Needs, Phase, Series, Workload
from pgrig.results import ResultKind
from pgrig.schema import Checked, Table
from pgrig.workloads.basebackup import report, steps
from pgrig.workloads.basebackup import spec as bb_spec
from pgrig.workloads.basebackup.model import MB, BasebackupData, BasebackupResult
from pgrig.workloads.basebackup.spec import BasebackupSpec
from pgrig.workloads.tpcb.workload import data_bytes

if TYPE_CHECKING:  # report types only appear in signatures
    from pgrig.document.model import Section
    from pgrig.results import RunRecord, Study


def _columns(r: BasebackupResult) -> dict[str, Any]:
    """The CSV export's headline columns (the JSON export holds every field)."""
    return {"mb_per_s": round(r.mb_per_s, 3), "elapsed_s": r.wall_s}


BASEBACKUP = ResultKind(
    "basebackup",
    BasebackupResult,
    headline=lambda r: (
        f": {r.mb_per_s:,.1f} MB/s ({r.data_bytes / MB:,.0f} MB in {r.wall_s:.1f} s)"
    ),
    columns=_columns,
    metric=lambda r: float(r.mb_per_s),
    summary="pg_basebackup",
    unit="MB/s",
)
DATA = ResultKind(
    "basebackup_data",
    BasebackupData,
    headline=lambda r: (
        f": {r.cluster_bytes / MB:,.0f} MB to copy"
        + (f", loaded in {r.load_s:.1f} s" if r.loaded and r.load_s else ", reused")
    ),
    columns=lambda r: {"elapsed_s": r.load_s},
    # the TPC-B data it loaded (data found loaded: no command made it here)
    rerun=lambda p, r: ["pgbench", "-i", "-s", str(p.get("scale", 1))] if r.loaded else None,
)


class BasebackupWorkload(Workload):
    type = "basebackup"
    order = 50
    schema = bb_spec.SCHEMA
    kinds = (DATA, BASEBACKUP)
    from_here = True  # pg_basebackup copies the server's data to ``to``, a directory here
    actions = {
        "basebackup.data": steps.data_action,
        "basebackup.prepare": steps.prepare_action,
        "basebackup.backup": steps.backup_action,
    }
    needs = Needs(
        destructive="pgbench -i drops and recreates the pgbench_* tables when they are not "
        "loaded at the workload's scale",
        tools=("pg_basebackup",),
    )

    def parse(self, table: Table, read: Checked) -> BasebackupSpec:
        return bb_spec.parse(table, read)

    def phases(self, spec: BasebackupSpec, policy: RunPolicy) -> list[Phase]:
        copies = 2 if policy.reset == "restore" else 1
        # Each target holds its own cluster and, one run at a time, one copy: its
        # own (the default) or another target's (to = "name"), about as large.
        need = data_bytes(spec.scale, copies=copies) + bb_spec.copy_bytes(spec.scale) * copies
        if spec.to_directory is not None:  # that directory was checked when parsed
            need = data_bytes(spec.scale, copies=copies)
        return [
            Phase(
                data=lambda t: steps.data_steps(spec, t),
                series=self._series(spec, policy),
                disk_bytes=need,
                label=f"pg_basebackup, scale {spec.scale}",
            )
        ]

    @staticmethod
    def _series(spec: BasebackupSpec, policy: RunPolicy) -> Sequence[Series]:
        if spec.repeat is None:  # the campaign's policy: repeat, until_ci_pct
            return [Series(lambda t, rep: steps.backup_step(spec, policy, t, rep))]

        # A repeat of its own: one single-run series per repeat, targets interleaved.
        def once(k: int) -> Series:
            return Series(lambda t, _rep: steps.backup_step(spec, policy, t, k), repeated=False)

        return [once(k) for k in range(1, spec.repeat + 1)]

    def section(self, study: Study, records: Sequence[RunRecord]) -> Section | None:
        return report.section(study, records)


WORKLOAD = BasebackupWorkload()
