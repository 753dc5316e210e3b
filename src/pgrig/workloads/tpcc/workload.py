"""TPC-C as a campaign workload: load and check on every target, then each
mode's runs interleaved across targets, each run followed by the consistency
check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgrig.document import fmt
from pgrig.document.model import Section
from pgrig.policy import RunPolicy
from pgrig.registry.shared import RELATION_SIZES
from pgrig.registry.workload import Needs, Phase, Series, TargetView, Workload
from pgrig.results import ResultKind, RunRecord, Study
from pgrig.schema import Checked, Table
from pgrig.step import Step, StepKey
from pgrig.units import MB
from pgrig.workloads.common import relation_sizes, sizes_step
from pgrig.workloads.tpcc import report, steps
from pgrig.workloads.tpcc import spec as tpcc_spec
from pgrig.workloads.tpcc.model import TpccCheck, TpccLoad, TpccRun
from pgrig.workloads.tpcc.spec import TpccSpec

# TPC-C tables and indexes take about 110 MB per warehouse; the load writes as much WAL.
BYTES_PER_WAREHOUSE = 250 * MB
CLUSTER_BASE_BYTES = 64 * MB


def point(params: dict[str, Any]) -> str:
    """A run's point in the comparison: its mode and active warehouses (clients
    are one count per workload)."""
    mode, active, warehouses = (params.get(k) for k in ("mode", "active", "warehouses"))
    parts = [f"{mode}-side" if mode else ""]
    if active and warehouses:  # both recorded by every run step since TPC-C ran in campaigns
        parts.append(f"{active} of {warehouses} warehouses active")
    return ", ".join(p for p in parts if p)


def point_note(runs: Sequence[TpccRun]) -> str:
    """': 52 MB of 105 MB': the active data beside its point (the first run that knew it)."""
    known = next((r for r in runs if r.active_bytes is not None), None)
    if known is None or known.loaded_bytes is None or known.active_bytes is None:
        return ""
    return f": {fmt.size(known.active_bytes)} of {fmt.size(known.loaded_bytes)}"


def new_order_latency(r: TpccRun) -> dict[int, float | None]:
    """New-Order's percentiles: the transaction tpmC counts (clause 5.2.5.4 holds
    its response time to a 90th percentile)."""
    no = r.stats("new_order")
    return {p: getattr(no, f"p{p}_ms", None) if no is not None else None for p in (50, 90, 95, 99)}


def case(params: Mapping[str, object]) -> str:
    """'TPC-C server-side, 1 of 4 warehouses active': the report's name of a run's
    point before its connections, offered rate and duration (a workload named
    otherwise than its type by its own name; all warehouses active: unsaid)."""
    name = str(params.get("workload", TpccWorkload.type))
    name = TpccWorkload.title if name == TpccWorkload.type else name
    said = f"{name} {params['mode']}-side" if "mode" in params else name
    active, warehouses = params.get("active"), params.get("warehouses")
    return said + (
        f", {active} of {warehouses} warehouses active" if active not in (None, warehouses) else ""
    )


def load_again(params: Mapping[str, object], r: TpccLoad) -> list[str]:
    """The load as ``pgrig tpcc load`` makes it (its parallel connections when known)."""
    argv = ["pgrig", "tpcc", "load", "--warehouses", str(params.get("warehouses", 1))]
    return argv + (["--jobs", str(r.jobs)] if r.jobs else [])


TPCC_RUN = ResultKind(
    "tpcc_run",
    TpccRun,
    headline=lambda r: f": tpmC {r.tpmc:,.0f}" + (f", {r.qps:,.0f} qps" if r.qps else ""),
    columns=lambda r: {
        "tpmc": r.tpmc,
        "tpm_total": r.tpm_total,
        "tps": r.tps,
        "qps": r.qps,
        "latency_avg_ms": r.latency_avg_ms,
        "failed": r.failed,
        "warehouses": r.warehouses,
        "active": r.active,
        "active_bytes": r.active_bytes,
        "loaded_bytes": r.loaded_bytes,
    },
    metric=lambda r: float(r.tpmc),
    summary="TPC-C tpmC",  # a row of the comparison of targets, per point
    unit="tpmC",
    point=point,
    point_note=point_note,
    commits=True,
    latency=new_order_latency,
    latency_label="New-Order latency",
    case=case,
)


class TpccWorkload(Workload):
    type = "tpcc"
    title = "TPC-C"
    order = 30
    schema = tpcc_spec.SCHEMA
    actions = {
        "tpcc.load": steps.load_action,
        "tpcc.check": steps.check_action,
        "tpcc.prepare": steps.prepare_action,
        "tpcc.run": steps.run_action,
        "common.relation_sizes": relation_sizes,
    }
    from_load_hosts = True
    kinds = (
        ResultKind(
            "tpcc_load",
            TpccLoad,
            headline=lambda r: (
                f": {r.elapsed_s:.1f} s, {r.rows_per_s:,.0f} rows/s"
                + (f", at wal_level={r.wal_level}" if r.wal_level else "")
            ),
            columns=lambda r: {"elapsed_s": r.elapsed_s},
            rerun=load_again,
        ),
        ResultKind(
            "tpcc_check",
            TpccCheck,
            headline=lambda r: ": all conditions hold" if r.passed else ": FAILED",
        ),
        TPCC_RUN,
        RELATION_SIZES,
    )
    needs = Needs(destructive="the TPC-C load replaces the tpcc schema")

    def parse(self, table: Table, read: Checked) -> TpccSpec:
        return tpcc_spec.parse(table, read)

    def phases(self, spec: TpccSpec, policy: RunPolicy) -> list[Phase]:
        tp = steps.TpccPlan.of(spec, repeat=policy.repeat).validate()

        def sizes(t: TargetView, when: str) -> Step:
            return sizes_step(StepKey(t.name, spec.name), when, {"workload": spec.name})

        def data(t: TargetView) -> list[Step]:
            return [
                steps.load_step(tp, spec.name, t),
                steps.load_check_step(spec.name, t, tp.warehouses),
                sizes(t, "after load"),
            ]

        points = tp.points()

        def series(point: steps.Point) -> Series:
            def make(t: TargetView, rep: int) -> Step:
                return steps.run_step(tp, point, rep, spec.name, t, policy)

            def after(t: TargetView, run: Step) -> Sequence[Step]:
                last = point == points[-1] and (run.key.repeat or 1) >= policy.repeat
                if spec.check == "each" or (spec.check == "end" and last):
                    return [steps.run_check_step(run, spec.name, t, tp.warehouses)]
                return []

            return Series(make, after)

        # reset = "restore" keeps a pristine copy of the loaded data beside it.
        copies = 2 if policy.reset == "restore" else 1
        return [
            Phase(
                data=data,
                series=[
                    *(series(point) for point in points),
                    Series(lambda t, _rep: sizes(t, "after runs"), repeated=False),
                ],
                disk_bytes=CLUSTER_BASE_BYTES + copies * spec.warehouses * BYTES_PER_WAREHOUSE,
            )
        ]

    def section(self, study: Study, records: Sequence[RunRecord]) -> Section | None:
        return report.section(study, records)


WORKLOAD = TpccWorkload()
