"""Report section: the durability check (``pgrig durability``)."""

from __future__ import annotations

from collections.abc import Sequence

from pgrig.durability.model import METHOD_TEXT, SETTINGS, Check, DurabilityResult
from pgrig.report import fmt
from pgrig.report.model import FAILED, HEADLINE, NORMAL, Row, Section, Table
from pgrig.results import RunRecord, Study, typed

KIND = "durability"
NOTES = (
    "Acknowledged: the server answered the commit; the client wrote it to its ledger "
    "before starting its next transaction. In doubt: the connection broke before the "
    "answer came - such a commit may or may not have happened, and counts as neither "
    "lost nor acknowledged.",
    "Loss window: from the earliest lost acknowledgement to the last acknowledgement "
    "the server gave before it went down.",
    "Recovery: from the restart (pg_ctl start, or the postmaster's own crash restart "
    "after a killed backend) to the first accepted connection; down: from the crash "
    "signal to the same moment.",
    "These crashes kill processes, not the machine: WAL the server had handed to the "
    "kernel survives without fsync. fsync = off and full_page_writes = off are only "
    "tested by a power loss or a VM reset, which this check does not simulate.",
)


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """None until there are records of this kind."""
    mine = [r for r in records if r.kind == KIND]
    if not mine:
        return None
    paragraphs: list[str] = []
    blocks: list[Table] = []
    for rec in mine:
        res = typed(rec, DurabilityResult)
        if res is None:
            paragraphs.append(f"Not completed - {rec.status}: {rec.reason or 'no reason'}")
            continue
        paragraphs.append(_verdict(res))
        paragraphs.extend(f"- {failure}" for failure in res.failures)
        if res.kept_datadir:
            paragraphs.append(f"Data directory kept in {res.kept_datadir}, log {res.kept_log}.")
        blocks.append(_crashes(res))
        blocks.append(_verifications(res))
        blocks.append(_settings(res))
    return Section("Durability check", "durability", tuple(paragraphs), tuple(blocks))


def _verdict(res: DurabilityResult) -> str:
    how = METHOD_TEXT.get(res.method, res.method)
    what = (
        f"{len(res.crashes)} crash{'es' if len(res.crashes) != 1 else ''} by {how} under "
        f"{res.clients} clients; {res.acknowledged:,} commits acknowledged in "
        f"{res.load_s:,.1f} s of load ({fmt.rate(res.tps)} tps), {res.in_doubt:,} in doubt "
        f"({res.in_doubt_committed:,} of them committed)"
    )
    if res.rejected:
        what += f", {res.rejected:,} rejected by the server"
    settings = ", ".join(
        f"{k} = {res.settings[k]}"
        for k in ("synchronous_commit", "fsync", "full_page_writes")
        if k in res.settings
    )
    untested = (
        f" NOT TESTED by this {res.crash_model} crash: " + "; ".join(res.untested) + "."
        if res.untested
        else ""
    )
    if res.ok:
        return (
            f"PASSED: {what}. No acknowledged commit was lost, no id is present twice, "
            f"the invariants hold and pg_amcheck found no corruption ({settings}).{untested}"
        )
    return f"FAILED: {what}; lost acknowledged commits: {res.lost:,} ({settings}).{untested} Why:"


def _crashes(res: DurabilityResult) -> Table:
    rows = []
    for c in res.crashes:
        loss = c.loss
        lost = fmt.integer(loss.count) if loss else "0"
        window = f"{loss.window_ms:,.0f} ms" if loss else ""
        if loss and loss.after_signal:
            window += f" ({loss.after_signal:,} answered after the signal)"
        rows.append(
            Row(
                (
                    str(c.number),
                    c.at,
                    f"{c.load_s:.1f}",
                    fmt.integer(c.acknowledged),
                    fmt.integer(c.in_doubt),
                    f"{c.recovery_s:.2f}",
                    f"{c.downtime_s:.2f}",
                    lost,
                    window,
                ),
                FAILED if loss else NORMAL,
            )
        )
    if res.final_loss is not None:
        loss = res.final_loss
        cells = (
            "end",
            "",
            "",
            "",
            "",
            "",
            "",
            fmt.integer(loss.count),
            f"{loss.window_ms:,.0f} ms",
        )
        rows.append(Row(cells, FAILED))
    recov = [c.recovery_s for c in res.crashes]
    total = (
        "total",
        "",
        f"{res.load_s:.1f}",
        fmt.integer(res.acknowledged),
        fmt.integer(res.in_doubt),
        f"max {max(recov):.2f}" if recov else "",
        "",
        fmt.integer(res.lost),
        "",
    )
    rows.append(Row(total, FAILED if res.lost else HEADLINE))
    return Table(
        (
            "Crash",
            "At (UTC)",
            "Load before (s)",
            "Acknowledged",
            "In doubt",
            "Recovery (s)",
            "Down (s)",
            "Lost acknowledged",
            "Loss window",
        ),
        tuple(rows),
        caption=f"Crashes ({res.clients} clients, seed {res.seed}, PostgreSQL "
        f"{res.server_version})",
        notes=NOTES,
        numeric=(False, False, True, True, True, True, True, True, False),
    )


def _verifications(res: DurabilityResult) -> Table:
    names = [c.name for c in res.checks]
    rows = []
    for crash in res.crashes:
        rows.append(_check_row(f"after crash {crash.number}", crash.checks, names))
    rows.append(_check_row("final", res.checks, names))
    final = [f"{c.name}: {c.detail}" for c in res.checks]
    return Table(
        ("Verification", *names),
        tuple(rows),
        caption="Checks after every recovery and at the end",
        notes=tuple(final),
    )


def _check_row(label: str, checks: Sequence[Check], names: list[str]) -> Row:
    by_name = {c.name: c for c in checks}
    cells = []
    failed = False
    for name in names:
        check = by_name.get(name)
        if check is None or check.ok is None:
            cells.append("not run")
        elif check.ok:
            cells.append("pass")
        else:
            cells.append("FAIL")
            failed = True
    return Row((label, *cells), FAILED if failed else NORMAL)


def _settings(res: DurabilityResult) -> Table:
    keys = [k for k in SETTINGS if k in res.settings]
    keys += sorted(k for k in res.settings if k not in SETTINGS)
    return Table(
        ("Setting", "Value"),
        tuple(Row((k, res.settings[k])) for k in keys),
        caption="Settings in force during the check",
    )
