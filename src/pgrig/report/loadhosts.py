"""The report's "Load hosts" section: a remote target's runs from several load
hosts, per host and merged (``pgrig.targets.loadhosts`` records them)."""

from __future__ import annotations

from collections.abc import Sequence

from pgrig.document.model import HEADLINE, Row, Section, Table
from pgrig.hosts import facts
from pgrig.registry.shared import LOAD_HOSTS, LoadHost, LoadHostsRun
from pgrig.report import index
from pgrig.results import RunRecord, Study


def _fmt(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.3f}"


def _other_pgbench(r: LoadHostsRun) -> str | None:
    """The load hosts whose pgbench is of another major than the server (said:
    pgbench's own cost per transaction may differ); None: none, or not recorded."""
    server = facts.major(r.server_version) if r.server_version else None
    other = [
        f"{h.host} {h.pgbench}"
        for h in r.hosts
        if server and h.pgbench and facts.major(h.pgbench) not in (None, server)
    ]
    if not other:
        return None
    return f"pgbench of another major than the server's PostgreSQL {server}: " + ", ".join(other)


def _client(h: LoadHost) -> str:
    """A host's pgbench, CPUs and -j (issue 40.16: in the export only); '-' in
    records made before they were read."""
    if h.pgbench is None:
        return "-"
    version = facts.major(h.pgbench) and h.pgbench.rsplit(" ", 1)[-1]
    return f"{version or h.pgbench} ({h.cpus} CPUs, -j {h.threads})"


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """The report's Load hosts section: per host and merged, run by run."""
    runs = index.read(records).ok(LOAD_HOSTS, LoadHostsRun)
    if not runs:
        return None
    rows: list[Row] = []
    notes: list[str] = []
    # A workload's own figure (TPC-C's tpmC) gets a column when a run has one.
    figures = sorted({res.figure_name for _, res in runs if res.figure_name})

    def figure(value: float | None) -> tuple[str, ...]:
        return (f"{value:,.0f}" if value is not None else "-",) if figures else ()

    for rec, res in runs:
        run = str(rec.params.get("run", rec.key))
        for h in res.hosts:
            rows.append(Row((
                run, h.host, f"{h.tps:,.0f}", *figure(h.figure), _fmt(h.p50_ms),
                _fmt(h.p99_ms), f"{h.started_ms:+.2f}",
                f"{h.offset_ms:+.3f} ± {h.offset_uncertainty_ms:.3f}", _client(h),
            )))  # fmt: skip
        rows.append(Row((
            run, f"all {len(res.hosts)} (sum; pooled logs)", f"{res.tps:,.0f}",
            *figure(res.figure), _fmt(res.p50_ms), _fmt(res.p99_ms),
            f"spread {res.start_spread_ms:.2f} ± {res.start_spread_uncertainty_ms:.2f}", "",
            f"{sum(h.threads or 0 for h in res.hosts)} threads" if all(
                h.threads for h in res.hosts) else "",
        ), kind=HEADLINE))  # fmt: skip
        if res.client_bound:
            notes.append(f"{run}: client-bound - {res.client_bound}")
        if mismatch := _other_pgbench(res):
            notes.append(f"{run}: {mismatch}")
        if res.imbalance:
            notes.append(f"{run}: disturbed - {res.imbalance}")
    extra = (" / ".join(figures),) if figures else ()
    table = Table(
        ("run", "load host", "tps", *extra, "p50 ms", "p99 ms", "started ms",
         "clock offset ms", "pgbench (CPUs, -j)"),
        tuple(rows),
        caption="Per load host and merged: tps"
        + (f" and {extra[0]}" if extra else "")
        + " summed; p50/p99 from every host's "
        "per-transaction log pooled (nearest rank, within 0.1%: HdrHistograms added), "
        "each host's from its own; "
        "'started' after the common start on this machine's clock; clock offsets "
        "NTP-style, ± half the best round trip; each host's pgbench as read there, its "
        "logical CPUs and the -j it ran with.",
        notes=tuple(notes),
        numeric=(False, False, True, *(True for _ in extra), True, True, False, False, False),
    )  # fmt: skip
    return Section("Load hosts", "load-hosts", blocks=(table,))
