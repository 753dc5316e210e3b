"""The monitor's "why" on the first screen for workloads that are not pgbench
curves (issue 42.1): TPC-C's verdicts per target, as Bottlenecks has them."""

from __future__ import annotations

from pgrig.monitor.model import MonitorResult, Verdict
from pgrig.report.evidence import Evidence
from pgrig.report.why import why_rule
from pgrig.results import RunRecord
from test_report_views import rec, tpcc_records


def verdict(run: RunRecord, label: str) -> RunRecord:
    mon = MonitorResult(
        interval_s=1.0, ncpu=2, started_at=0.0, client_started_at=None, devices=(),
        samples=(), verdict=Verdict("x", label, f"{label}: ..."),
    )  # fmt: skip
    return rec(run.target, run.key.split("/", 1)[1] + "/monitor", "monitor", mon)


def test_each_targets_verdict_is_said_per_test_case() -> None:
    records = tpcc_records()
    labels = {"ext4": ["WAL / fsync bound", "WAL / fsync bound"],
              "xfs": ["starved by other processes", "WAL / fsync bound"]}  # fmt: skip
    watched = []
    for r in records:
        if r.kind == "tpcc_run":
            watched.append(verdict(r, labels[r.target].pop(0)))
    ev = Evidence(tuple(records + watched), ("ext4", "xfs"), "ext4")
    (said,) = why_rule(ev)
    assert said.rule == "why"
    assert said.text.startswith(
        "TPC-C server-side: ext4 WAL / fsync bound (2 of 2 runs); "
        "xfs starved by other processes (1 of 2 runs)"
    )
    # pgbench's points have their own rules; unwatched runs say nothing
    assert why_rule(Evidence(tuple(records), ("ext4", "xfs"), "ext4")) == []
