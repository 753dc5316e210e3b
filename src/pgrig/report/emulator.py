"""The latency layer's own record of each run (kind "emulator", issue 44 item 4):
the CPU the emulator took beside the server's, and how close each run's delayed
I/Os came to the calibrated aim. On the first screen per target (beside the
verdicts the layer touches), and run by run in a section of its own. A target
whose emulator took more than ``emulator.MAX_SHARE`` of the machine is named:
its figures are the emulator's, not the disk's. Pure functions of stored
records."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pgrig.document import fmt
from pgrig.document.model import Row, Section, Table
from pgrig.monitor.model import MonitorResult
from pgrig.report import index
from pgrig.report.index import StudyIndex
from pgrig.results import RunRecord, Study
from pgrig.storage.emulator import MAX_SHARE, EmulationAtEnd, EmulatorUse
from pgrig.storage.kinds import EMULATOR, EMULATOR_END

SUFFIX = "/emulator"


@dataclass(frozen=True)
class EmulatedRun:
    """One measured run behind a layer: the emulator's record and the server's
    CPU share over the same run (its monitor record; None: not monitored)."""

    key: str  # the run's key
    use: EmulatorUse
    server_share: float | None


def emulated_runs(study: StudyIndex) -> dict[str, list[EmulatedRun]]:
    """Target -> its runs with an emulator record, in the order they ran."""
    out: dict[str, list[EmulatedRun]] = {}
    for rec, use in study.ok(EMULATOR, EmulatorUse):
        run_key = rec.key.removesuffix(SUFFIX)
        out.setdefault(rec.target, []).append(
            EmulatedRun(run_key, use, _server_share(study.monitors.get(run_key)))
        )
    return out


def _server_share(mon: MonitorResult | None) -> float | None:
    """The server's processes' CPU over the run's timed window, as a share of the
    machine (the monitor's totals)."""
    if mon is None or mon.totals is None:
        return None
    totals = mon.totals
    if totals.server_cpu_s is None or totals.seconds <= 0 or mon.ncpu <= 0:
        return None
    return totals.server_cpu_s / (totals.seconds * mon.ncpu)


def _median_range(values: Sequence[float]) -> str:
    text = f"{statistics.median(values):.1%}"
    if len(values) > 1:
        text += f" ({min(values):.1%}–{max(values):.1%})"
    return text


def _in_layer(runs: Sequence[EmulatedRun]) -> str:
    """'a delayed read spent 412 us in the layer against the aim 200 (+106%)':
    the runs' median, where the layer counted delayed reads."""
    seen = [(r.use.read_in_layer_us, r.use.read_aim_us) for r in runs
            if r.use.read_in_layer_us is not None and r.use.read_aim_us]  # fmt: skip
    if not seen:
        return ""
    got = statistics.median(g for g, _ in seen if g is not None)
    aim = statistics.median(a for _, a in seen)
    return (
        f"; a delayed read spent {got:,.0f} us in the layer against the calibrated "
        f"{aim:,.0f} us ({got / aim - 1:+.0%})"
    )


_MODE = {
    "deadline": "on a deadline",
    "proportion": "in proportion to the disk's own",
    "added": "a delay after the disk's own",
}


def _syncs_in_layer(runs: Sequence[EmulatedRun]) -> str:
    """'; a sync 640 us against the aim 600 (+7%, on a deadline)': the runs'
    median, where the record says how the layer held its syncs (newer records)."""
    seen = [u for u in (r.use for r in runs)
            if u.sync_in_layer_us is not None and u.sync_aim_us and u.sync_mode]  # fmt: skip
    if not seen:
        return ""
    got = statistics.median(u.sync_in_layer_us or 0.0 for u in seen)
    aim = statistics.median(u.sync_aim_us for u in seen)
    mode = _MODE.get(seen[-1].sync_mode, seen[-1].sync_mode)
    return f"; a sync {got:,.0f} us against the aim {aim:,.0f} ({got / aim - 1:+.0%}, {mode})"


def line(target: str, runs: Sequence[EmulatedRun]) -> str:
    """The first screen's words for one target: the emulator's CPU beside the
    server's, and - over the stated share - whose figures these are."""
    shares = [r.use.share_of_machine for r in runs]
    servers = [r.server_share for r in runs if r.server_share is not None]
    server = f"; the server had {_median_range(servers)}" if servers else ""
    many = f"median of {len(runs)} runs" if len(runs) > 1 else "its run"
    text = (
        f"{target}: the emulator took {_median_range(shares)} of the CPU{server} ({many}, "
        "the latency layer's own process)"
    )
    text += _in_layer(runs) + _syncs_in_layer(runs)
    over = [r for r in runs if r.use.dominates]
    if over:
        text = (
            f"⚠ {text}. Over {MAX_SHARE:.0%} of the machine in {len(over)} of {len(runs)} "
            f"runs: {target}'s figures are the emulator's, not the disk's"
        )
    return text + "."


def at_end(study: StudyIndex) -> dict[str, EmulationAtEnd]:
    """Target -> its emulated disks measured again at the end of the study."""
    out: dict[str, EmulationAtEnd] = {}
    for rec, end in study.ok(EMULATOR_END, EmulationAtEnd):
        out[rec.target] = end
    return out


def lines(records: Sequence[RunRecord]) -> dict[str, str]:
    """Target -> its first-screen line, for the targets with emulator records;
    with how close its emulation was at the end of the study, where measured."""
    study = index.read(records)
    ends = at_end(study)
    out = {}
    for target, runs in emulated_runs(study).items():
        text = line(target, runs)
        if (end := ends.get(target)) is not None:
            off = f" - outside the calibration's ±{end.tolerance:.0%}" if end.outside else ""
            text += f" At the end of the study, fio through the layer: {end.short()}{off}."
        out[target] = text
    return out


def _aim_cell(got: float | None, aim: float) -> str:
    if got is None:
        return "-"
    if not aim:
        return f"{got:,.0f} us"
    return f"{got:,.0f} / {aim:,.0f} us ({got / aim - 1:+.0%})"


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """Run by run: what the emulator took and did, and how close it came."""
    found = emulated_runs(index.read(records))
    if not found:
        return None
    rows = []
    for runs in found.values():
        for r in runs:
            u = r.use
            rows.append(
                Row(
                    (
                        r.key,
                        u.layer,
                        ("⚠ " if u.dominates else "") + f"{u.share_of_machine:.1%}",
                        f"{r.server_share:.1%}" if r.server_share is not None else "-",
                        f"{u.cpu_us_per_io:,.0f} us" if u.cpu_us_per_io is not None else "-",
                        fmt.integer(u.ios),
                        _aim_cell(u.read_in_layer_us, u.read_aim_us),
                        _aim_cell(u.sync_in_layer_us, u.sync_aim_us)
                        + (f", {_MODE.get(u.sync_mode, u.sync_mode)}" if u.sync_mode else ""),
                        fmt.integer(u.throttled),
                    )
                )
            )
    table = Table(
        ("Run", "Layer", "Emulator CPU", "Server CPU", "CPU per I/O", "I/Os",
         "Read in the layer / aim", "Sync in the layer / aim", "Held by the caps"),
        tuple(rows),
        caption="The latency layer, run by run",
        notes=(
            "Emulator CPU: the layer's process (all its threads, /proc/PID/stat) over the run "
            "as a share of the machine's CPUs; Server CPU: the server's processes over the "
            "run's timed window (the monitor). On a small machine the emulator's CPU is CPU "
            f"the server did not have; over {MAX_SHARE:.0%} (⚠) the run's figures are "
            "the emulator's, not the disk's.",
            "Read / sync in the layer: the mean time a delayed read (from admission) or a "
            "sync (from arrival) spent in the layer during the run, against the delay the "
            "build step's calibration aimed at; a sync on a deadline lasts the longer of the "
            "disk's own and the delay from its arrival, one in proportion to the disk's own "
            "the calibration's multiple of the disk's sync of that moment. I/Os: reads, "
            "writes and syncs through the layer; held by the caps: I/Os the class's (or the "
            "instance's) IOPS and MB/s buckets made wait.",
        ),
        numeric=(False, False, True, True, True, True, True, True, True),
    )  # fmt: skip
    return Section("The emulator", "emulator", blocks=(table,))
