"""Report section: the durability check (``pgrig durability``)."""

from __future__ import annotations

from collections.abc import Sequence

from pgrig.document import fmt
from pgrig.document.model import FAILED, HEADLINE, NORMAL, Row, Section, Table
from pgrig.durability.model import (
    METHOD_TEXT,
    POWER_LOSS,
    SETTINGS,
    Check,
    Crash,
    DurabilityResult,
)
from pgrig.registry.report import Conclusion, Findings
from pgrig.report import index
from pgrig.results import RunRecord, Study

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
)
PROCESS_NOTE = (
    "These crashes kill processes, not the machine: WAL the server had handed to the "
    "kernel survives without fsync. fsync = off and full_page_writes = off are only "
    "tested by a power loss (`pgrig durability --power-loss`)."
)
POWER_NOTE = (
    "Power loss: the cluster (data and WAL) ran on pgrig's lossy filesystem; after each "
    "crash, every write it had not fsynced was thrown away ({mode}) before the restart. "
    "Dropped: the unsynced pages the power loss took. See docs/lossyfs.md for what it "
    "does not emulate."
)
MODE_TEXT = {
    "drop": "drop: nothing unsynced kept",
    "random-subset": "random-subset: a random half of the unsynced pages written anyway",
    "torn": "torn: half of one unsynced page written",
}


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """None until there are records of this kind."""
    study_index = index.read(records)
    mine = study_index.of_kind.get(KIND, ())
    if not mine:
        return None
    paragraphs: list[str] = []
    blocks: list[Table] = []
    for rec in mine:
        res = study_index.result(rec, DurabilityResult)
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
    if res.crash_model == POWER_LOSS:
        how += f", each followed by a power loss ({res.power_loss_mode})"
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
    if res.lost:
        what += (
            f"; lost acknowledged commits per crash: {_per_crash(res)}, each time within the "
            f"last {res.lost_window_ms:,.0f} ms (at most) before the crash"
        )
    if res.ok:
        return (
            f"PASSED: {what}. No acknowledged commit was lost, no id is present twice, "
            f"the invariants hold and pg_amcheck found no corruption ({settings}).{untested}"
        )
    return f"FAILED: {what}; lost acknowledged commits: {res.lost:,} ({settings}).{untested} Why:"


def _per_crash(res: DurabilityResult) -> str:
    counts = [f"{c.loss.count if c.loss else 0:,}" for c in res.crashes]
    if res.final_loss is not None:
        counts.append(f"{res.final_loss.count:,} at the end")
    return ", ".join(counts)


def _dropped(c: Crash) -> str:
    cut = c.power_loss
    if cut is None:
        return ""
    text = fmt.integer(cut.unsynced_pages - cut.persisted_pages)
    if cut.torn:
        text += " + 1 torn"
    return text


def _torn(res: DurabilityResult) -> tuple[str, ...]:
    """Where each torn page was and what became of it: a tear of a page recovery
    never needed tests nothing, and the reader must see which it was."""
    cuts = [(c.number, c.power_loss) for c in res.crashes if c.power_loss and c.power_loss.torn]
    if not cuts:
        return ()
    data = [cut for _, cut in cuts if cut.tore_data]
    rewritten = sum(1 for cut in data if cut.torn_rewritten)
    left = sum(1 for cut in data if cut.torn_rewritten is False)
    head = (
        f"Torn pages: {len(data)} of {len(cuts)} were data pages the tear changed "
        f"({rewritten} rewritten by recovery, {left} left as torn)"
    )
    each = "; ".join(f"crash {n}: {cut.torn} ({cut.torn_fate()})" for n, cut in cuts)
    return (f"{head}. {each}.",)


def _crashes(res: DurabilityResult) -> Table:
    power = res.crash_model == POWER_LOSS
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
                    *((_dropped(c),) if power else ()),
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
            *(("",) if power else ()),
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
        f"max {res.lost_window_ms:,.0f} ms" if res.lost else "",
        *((fmt.integer(sum(_pages(c) for c in res.crashes)),) if power else ()),
    )
    rows.append(Row(total, FAILED if res.lost else HEADLINE))
    mode = MODE_TEXT.get(res.power_loss_mode or "", str(res.power_loss_mode))
    notes = (*NOTES, POWER_NOTE.format(mode=mode) if power else PROCESS_NOTE, *_torn(res))
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
            *(("Unsynced pages dropped",) if power else ()),
        ),
        tuple(rows),
        caption=f"{'Power-loss cycles' if power else 'Crashes'} ({res.clients} clients, "
        f"seed {res.seed}, PostgreSQL {res.server_version})",
        notes=notes,
        numeric=(False, False, True, True, True, True, True, True, False, *((True,) * power)),
    )


def _pages(c: Crash) -> int:
    return c.power_loss.unsynced_pages - c.power_loss.persisted_pages if c.power_loss else 0


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


def durable(ev: Findings) -> list[Conclusion]:
    """A crash check's outcome (seed 001 crashed its login workload and looked for
    lost rows and duplicate keys): what was acknowledged, what was lost, whether
    every check held after every recovery."""
    out = []
    study = index.read(ev.records)
    for rec in study.of_kind.get(KIND, ()):
        res = study.result(rec, DurabilityResult)
        if res is None:
            continue
        checks = sorted({c.name for crash in res.crashes for c in crash.checks} | {
            c.name for c in res.checks
        })  # fmt: skip
        slowest = max((c.recovery_s for c in res.crashes), default=0.0)
        text = (
            f"{rec.target}: {rec.params.get('workload', 'durability')}, {len(res.crashes)} x "
            f"{res.method}: {res.acknowledged:,} commits acknowledged, {res.lost:,} lost"
        )
        if res.ok:
            held = "its check" if len(checks) == 1 else f"all {len(checks)} checks"
            text += f"; {held} held after every recovery"
        else:
            text += f"; FAILED: {res.failures[0]}"
        text += f" (the slowest recovery {slowest:.1f} s)."
        if res.untested:  # a pass says nothing of these: the first screen keeps the flag
            text += f" NOT TESTED by this {res.crash_model} crash: {'; '.join(res.untested)}."
        out.append(Conclusion("durable", text, "one crash run"))
    return out
