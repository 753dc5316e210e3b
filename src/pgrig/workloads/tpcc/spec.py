"""The ``type = "tpcc"`` campaign table (docs/tpcc.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pgrig.schema import Checked, Schema, Table, choice, choices, integer, integers, text
from pgrig.workloads.tpcb.spec import RATES, THREADS, check_pgbench
from pgrig.workloads.tpcc.model import ISOLATIONS, MODES

CHECKS = ("each", "end", "none")


@dataclass(frozen=True)
class TpccSpec:
    """TPC-C (docs/tpcc.md): load W warehouses, check, then each mode's timed runs
    with a consistency check after each."""

    name: str = "tpcc"
    warehouses: int = 4
    jobs: int = 0  # loader connections; 0: the CPU count
    load_wal: str = "profile"  # "minimal": restart pgrig's server at wal_level=minimal to load
    connections: int = 4
    threads: int | None = None
    duration_s: int = 60
    modes: tuple[str, ...] = MODES
    # Each value confines a set of runs to the first K warehouses, all on one load
    # (seed 003's "12 TB total, 1.2 TB active"); None: every warehouse.
    active: tuple[int, ...] | None = None
    isolation: str = "read committed"
    max_tries: int = 10
    check: str = "each"  # the consistency check: after each run, at the end, none
    rates: tuple[float, ...] = ()  # a sweep of offered rates (pgbench -R), one run each

    kind: ClassVar[str] = "tpcc"


SCHEMA = Schema(
    'type = "tpcc"',
    text("name", "tpcc", "the workload's name in step keys and the report"),
    integer("warehouses", 4, "warehouses to load (about 100 MB each)"),
    integer("jobs", 0, "loader connections; `0`: one per CPU", minimum=0),
    choice("load_wal", ("profile", "minimal"), "profile",
           "on a cluster pgrig creates, `minimal` restarts it at `wal_level = minimal` for "
           "the copies and index builds (no WAL for a table copied whole) and back to the "
           "profile's settings before anything is measured; `profile`: load at the profile's "
           "settings - faster here: at 4 warehouses the minimal-WAL load took 7.1 s against "
           "5.7 s (docs/tpcc.md). A server pgrig did not create (`dsn`) is never restarted"),
    integer("connections", 4, "terminals: pgbench clients"),
    THREADS,
    integer("duration", 60, "seconds per run", field="duration_s"),
    choices("modes", MODES, MODES, "`server`: one PL/pgSQL call per transaction; `client`: "
            "one round trip per statement"),
    integers("active", None, "confine the runs to the first K warehouses; a list runs every "
             "mode at each K on the same load (seed 003's 1.2 TB of 12 TB active)",
             shown_default="all"),
    choice("isolation", ISOLATIONS, "read committed", "transaction isolation level"),
    integer("max_tries", 10, "tries of a transaction hit by a serialization failure or deadlock"),
    choice("check", CHECKS, "each",
           "the consistency check (a full scan of the tables: about 1 s per warehouse on a "
           "2-core VM) after `each` measured run, once at the `end` (after the last run), "
           "or `none`; the check after the load always runs"),
    RATES,
    also=("type",),
)  # fmt: skip


def parse(t: Table, read: Checked) -> TpccSpec:
    spec = TpccSpec(**(read.values | {k.attr: k.read(t, k.name, v) for k, v in read.owned}))
    for k in spec.active or ():
        if k > spec.warehouses:
            raise t.error(
                "active", f"{k}: between 1 and the {spec.warehouses} warehouses loaded",
                hint=f"raise warehouses to {k}, or drop {k} from active",
            )  # fmt: skip
    check_pgbench(t, (spec.connections,), spec.threads, None, None)
    return spec
