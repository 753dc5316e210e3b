"""TPC-B as a campaign workload: per scale, load (and count) on every target,
then every (duration, mode, clients) point interleaved and repeated."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pgrig.policy import RunPolicy
from pgrig.registry.shared import COUNT, PGBENCH_INIT, PGBENCH_RUN, RELATION_SIZES
from pgrig.registry.workload import Needs, Phase, Series, Workload
from pgrig.schema import Checked, Table
from pgrig.tools import pgbench
from pgrig.units import GB, MB
from pgrig.workloads.common import prepare_action, relation_sizes
from pgrig.workloads.pgbench_report import PGBENCH_REPORT
from pgrig.workloads.tpcb import spec as tpcb_spec
from pgrig.workloads.tpcb import steps
from pgrig.workloads.tpcb.spec import TpcbSpec

BYTES_PER_SCALE = pgbench.BYTES_PER_SCALE
CLUSTER_BASE_BYTES = 64 * MB


def data_bytes(scale: int, *, unlogged: bool = False, copies: int = 1) -> int:
    """Disk a TPC-B cluster needs at its peak during the load (``copies`` > 1
    when a pristine copy is kept for reset = "restore")."""
    return peak_bytes(scale * BYTES_PER_SCALE, unlogged=unlogged, copies=copies)


def peak_bytes(data: int, *, unlogged: bool = False, copies: int = 1) -> int:
    """Disk a cluster needs at its peak while ``data`` bytes of tables and indexes
    are loaded: the data, the WAL the load writes (up to 4 GB kept), the cluster."""
    wal = 0 if unlogged else min(data, 4 * GB) + 64 * MB
    return CLUSTER_BASE_BYTES + data * copies + wal


# What its steps run (``Call(name, ...)``); a custom workload runs pgbench too.
ACTIONS: dict[str, Callable[..., Any]] = {
    "pgbench.prepare": prepare_action,
    "pgbench.run": steps.bench_action,
    "tpcb.load": steps.load_action,
    "tpcb.count": steps.count_action,
    "common.relation_sizes": relation_sizes,
}


class TpcbWorkload(Workload):
    type = "tpcb"
    title = "TPC-B"
    order = 10
    schema = tpcb_spec.SCHEMA
    kinds = (PGBENCH_INIT, COUNT, PGBENCH_RUN, RELATION_SIZES)
    runs_report = PGBENCH_REPORT  # its sections, summary rows and sweep figure
    actions = ACTIONS
    from_load_hosts = True
    needs = Needs(destructive="pgbench -i drops and recreates the pgbench_* tables")

    def parse(self, table: Table, read: Checked) -> TpcbSpec:
        return tpcb_spec.parse(table, read)

    def phases(self, spec: TpcbSpec, policy: RunPolicy) -> list[Phase]:
        # The steps are made by tpcb.steps itself (partials, not closures here):
        # what a plan or a schedule asks of a phase goes straight to the maker.
        copies = 2 if policy.reset == "restore" else 1
        return [
            Phase(
                data=partial(steps.load_steps, spec, scale),
                series=[
                    *(
                        Series(partial(steps.bench_step, spec, scale, point, policy))
                        for point in steps.points(spec)
                    ),
                    # once per target after all its runs of this scale: how the data grew
                    Series(partial(steps.sizes_after_runs, spec, scale), repeated=False),
                ],
                disk_bytes=data_bytes(scale, unlogged=spec.unlogged, copies=copies),
                label=f"scale {scale}",
            )
            for scale in spec.scales
        ]


WORKLOAD = TpcbWorkload()
