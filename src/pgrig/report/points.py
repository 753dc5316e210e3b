"""pgbench runs grouped into points (one mode at one client count, all its
repeats), and how much each point's tps can be trusted: the spread of its
repeats, the per-second noise of its runs (``pgrig.monitor.noise``), and the warnings
that say what to do about them.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from pgrig import stats
from pgrig.document import fmt
from pgrig.document.model import FAILED, SKIPPED
from pgrig.monitor import interference, noise
from pgrig.monitor.model import MONITOR, Noise
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report import index
from pgrig.report.progress import Progress
from pgrig.results import PgbenchInit, PgbenchRun, RunRecord

MODE_ORDER = ("select-only", "read-write")


@dataclass(frozen=True)
class Point:
    """All runs of one mode at one client count."""

    mode: str
    clients: int
    ok: tuple[tuple[RunRecord, PgbenchRun], ...]
    not_ok: tuple[RunRecord, ...]  # failed or skipped repeats
    disturbed: int = 0  # runs of ``ok`` that the monitor saw disturbed by other work
    # the runs' -P points, read when asked (the records may come without them)
    progress: Progress = field(default_factory=Progress, compare=False, repr=False)

    @property
    def tps(self) -> fmt.Spread | None:
        return fmt.spread([r.tps for _, r in self.ok]) if self.ok else None

    @property
    def qps(self) -> fmt.Spread | None:
        return fmt.spread([r.qps for _, r in self.ok]) if self.ok else None

    @property
    def detectable(self) -> float | None:
        """The minimum detectable difference of this point's tps (%): the smallest
        change against another set of as many repeats with this spread that
        the decision procedure would show with 80% power (``stats.detectable_pct``)."""
        values = [r.tps for _, r in self.ok]
        return stats.detectable_pct(values, values)

    def runs_needed(self, diff_pct: float = 5.0) -> int | None:
        """Repeats a side this point would need for ``diff_pct`` % to be found."""
        values = [r.tps for _, r in self.ok]
        return stats.runs_needed(values, values, diff_pct)

    @property
    def label(self) -> str:
        return f"{self.mode}, {self.clients} client{'s' if self.clients != 1 else ''}"

    def per_second(self) -> list[tuple[RunRecord, Noise]]:
        """Each run's per-second noise (runs without -P progress have none)."""
        out = []
        for rec, _ in self.ok:
            found = self.progress.noise(rec)
            if found is not None:
                out.append((rec, found))
        return out

    @property
    def worst_second(self) -> Noise | None:
        """The least steady run's per-second noise."""
        return noise.worst([n for _, n in self.per_second()])

    def disturbed_text(self) -> str:
        """'3 of 3 runs disturbed by other work' ('' when none was)."""
        if not self.disturbed:
            return ""
        return f"{self.disturbed} of {len(self.ok)} run{'s' if len(self.ok) != 1 else ''} " + (
            "disturbed by other work"
        )

    @property
    def noisy(self) -> bool:
        return (self.tps is not None and self.tps.noisy) or noise.is_noisy(self.worst_second)


def mode_key(mode: str) -> tuple[int, str]:
    return (MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER), mode)


def points(records: Sequence[RunRecord], progress: Progress | None = None) -> list[Point]:
    """``progress``: where the runs' -P points are (default: in the records)."""
    progress = progress or Progress()
    ok: dict[tuple[str, int], list[tuple[RunRecord, PgbenchRun]]] = {}
    not_ok: dict[tuple[str, int], list[RunRecord]] = {}
    study = index.read(records)
    for rec in study.kind(PGBENCH_RUN):
        res = study.result(rec, PgbenchRun)
        # The campaign's name for the mode (a custom workload's name) over pgbench's "custom".
        mode = str(rec.params.get("mode") or (res.mode if res is not None else "unknown"))
        clients = res.clients if res is not None else int(rec.params.get("clients", 0))
        key = (mode, clients)
        ok.setdefault(key, [])
        not_ok.setdefault(key, [])
        if res is None:
            not_ok[key].append(rec)
        else:
            ok[key].append((rec, res))
    keys = sorted(ok, key=lambda k: (mode_key(k[0]), k[1]))
    disturbed = interference.disturbed_run_keys(study.kind(MONITOR))
    return [
        Point(
            m,
            c,
            tuple(ok[(m, c)]),
            tuple(not_ok[(m, c)]),
            sum(rec.key in disturbed for rec, _ in ok[(m, c)]),
            progress,
        )
        for m, c in keys
    ]


def status(rec: RunRecord) -> str:
    return f"{rec.status}: {rec.reason or 'no reason recorded'}"


def not_ok_kind(recs: Sequence[RunRecord]) -> str:
    return SKIPPED if all(r.status == "skipped" for r in recs) else FAILED


def per_second_text(point: Point) -> str:
    """'CV 4.2%, 11,020–12,310' for one run; the least steady run's when repeated."""
    worst = point.worst_second
    if worst is None:
        return "n/a"
    text = f"CV {100 * worst.cv:.1f}%, {fmt.rate(worst.min)}–{fmt.rate(worst.max)}"
    if len(point.ok) > 1:
        text = f"{text} (least steady of {len(point.ok)})"
    return text + (" ⚠" if noise.is_noisy(worst) else "")


def _seconds_text(point: Point) -> str | None:
    """'tps varied 975–2,309 per second (CV 27%) over 10 s in run 3 of 3' (the
    least steady run), or None when every run was steady."""
    per_second = point.per_second()
    if not per_second:
        return None
    rec, n = max(per_second, key=lambda pair: pair[1].cv)
    if not noise.is_noisy(n):
        return None
    repeat = rec.params.get("repeat")
    several = len(point.ok) > 1 and repeat is not None
    which = f" in run {repeat} of {len(point.ok)}" if several else ""
    return (
        f"tps varied {fmt.rate(n.min)}–{fmt.rate(n.max)} per second "
        f"(CV {100 * n.cv:.0f}%) over {n.n} s{which}"
    )


def _advice(points: Sequence[Point]) -> str:
    short = any(noise.is_short(n) for p in points for _, n in p.per_second())
    repeats_disagree = any(p.tps is not None and p.tps.noisy for p in points)
    advice = (
        "raise the duration (30 s or more) or repeat"
        if short
        else "repeat and check for background load"
    )
    if repeats_disagree:
        advice = f"treat differences smaller than that range as noise; {advice}"
    return f"{advice}; see TPS over time"


def noise_notes(noisy: Sequence[Point], measured: int) -> list[str]:
    """Warnings with advice for points whose seconds or repeats disagree: one per
    point, or - when most are noisy, as on a busy machine - one for them all."""
    if len(noisy) > 2:
        cvs = [100 * w.cv for p in noisy if (w := p.worst_second) is not None]
        ranges = [p.tps.range_pct for p in noisy if p.tps is not None and p.tps.n > 1]
        found = []
        if cvs:
            found.append(f"per-second tps varied with a CV of {min(cvs):.0f}–{max(cvs):.0f}%")
        if ranges:
            found.append(f"repeats ranged {min(ranges):.0f}–{max(ranges):.0f}%")
        return [
            f"⚠ {len(noisy)} of {measured} points are noisy: {' and '.join(found)} "
            f"(each in its row): {_advice(noisy)}; on a busy machine, also run when it is quiet."
        ]
    notes = []
    for point in noisy:
        found = [text] if (text := _seconds_text(point)) is not None else []
        tps = point.tps
        if tps is not None and tps.noisy:
            found.append(
                f"the {tps.n} repeats ranged {tps.range_pct:.1f}% ({fmt.rate(tps.low)}–"
                f"{fmt.rate(tps.high)}, more than {fmt.NOISE_THRESHOLD_PCT:g}%)"
            )
        notes.append(f"⚠ {point.label}: {' and '.join(found)}: {_advice([point])}.")
    return notes


def detectable_note(points: Sequence[Point], diff_pct: float = 5.0) -> str | None:
    """What the repeats can tell, under a table of points: the smallest tps change
    another study of as many repeats could be told apart from (the minimum
    detectable difference) and the repeats a ``diff_pct`` % change would need.
    None when no point was repeated with spread."""
    found = [(p, d) for p in points if (d := p.detectable) is not None]
    if not found:
        return None
    repeats = sorted({len(p.ok) for p, _ in found})
    n = "/".join(map(str, repeats))
    (best, low), (worst, high) = min(found, key=lambda f: f[1]), max(found, key=lambda f: f[1])
    if round(low) == round(high):
        span = (
            f"{low:.0f}% ({best.label})"
            if len(found) == 1
            else (f"{low:.0f}% (each of the {len(found)} repeated points)")
        )
    else:
        span = f"{low:.0f}% ({best.label}) to {high:.0f}% ({worst.label})"
    needed = [x for p, _ in found if (x := p.runs_needed(diff_pct)) is not None]
    text = (
        f"What {n} repeats can tell: against another study of as many repeats, a tps change "
        f"smaller than {span} would not be decided - the minimum detectable difference "
        f"(the decision procedure at p < {stats.ALPHA:g} with {stats.POWER:.0%} power, from each "
        "point's spread)"
    )
    if needed and high > diff_pct:
        lo, hi = min(needed), max(needed)
        top = f"over {stats.NEEDED_LIMIT:,}" if hi >= stats.NEEDED_LIMIT else str(hi)
        runs = top if lo == hi else f"{lo} to {top}" if hi >= stats.NEEDED_LIMIT else f"{lo}–{hi}"
        text += f"; a {diff_pct:g}% change would need {runs} repeats a point"
    return text + "."


def load_text(init: PgbenchInit) -> str:
    """'7.96 s in all; generating the rows 3.44 s (290,698 rows/s)': the rate is
    over the generate step, the time the whole load (with vacuum and keys)."""
    total = f"{fmt.seconds(init.elapsed_s)} in all"
    if init.reused:
        total = f"reused: loaded earlier in {total}"
    generate = init.generate_s
    if generate is None:
        rate = init.rows / max(init.elapsed_s, 0.01)
        return f"{total} ({fmt.rate(rate)} rows/s over the whole load)" + wal_text(init.wal_level)
    # pgbench prints hundredths: a step shown as 0.00 s took less than 0.01 s.
    rate = init.rows / max(generate, 0.01)
    text = f"{total}; generating the rows {fmt.seconds(generate)} ({fmt.rate(rate)} rows/s)"
    return text + wal_text(init.wal_level)


def wal_text(wal_level: str | None) -> str:
    """How a load wrote its WAL, when pgrig changed it for the load."""
    if wal_level is None:
        return ""
    return f"; loaded at wal_level={wal_level}, the server restarted around the load"


def statement_medians(runs: Sequence[PgbenchRun]) -> list[tuple[str, float, int | None]]:
    """Each statement of pgbench -r (every script's, in order): its command, its
    median latency over the runs and the failures summed. Runs that printed a
    different list of statements (another script) are left out."""
    with_stmts = [r for r in runs if r.statements]
    if not with_stmts:
        return []
    commands = [s.command for s in with_stmts[0].statements]
    same = [r for r in with_stmts if [s.command for s in r.statements] == commands]
    out = []
    for i, command in enumerate(commands):
        failures = [r.statements[i].failures for r in same]
        known = [f for f in failures if f is not None]
        out.append(
            (
                command,
                statistics.median(r.statements[i].latency_ms for r in same),
                sum(known) if known else None,
            )
        )
    return out
