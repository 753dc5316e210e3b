"""The storage lab in the report: what each target was built as (beside the
results), the system's own description of it, what the emulation leaves out,
the kernel-settings audit, and for memory-limited targets data size against
memory with the buffer and page-cache hit ratios. Pure functions of stored
records and the environment."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence

from pgrig.document import fmt
from pgrig.document.model import FAILED, SKIPPED, Row, Section, Table
from pgrig.monitor.model import MONITOR, MonitorResult, Sample
from pgrig.registry.shared import PGBENCH_INIT, PGBENCH_RUN
from pgrig.report import emulator as emulator_report
from pgrig.report import index
from pgrig.report.index import StudyIndex
from pgrig.report.samples import SampleReader, own_samples
from pgrig.results import Environment, PgbenchInit, PgbenchRun, RunRecord
from pgrig.storage.fsinfo import FilesystemInfo
from pgrig.storage.kinds import LAB, MEMORY
from pgrig.storage.memcg import MemoryUse
from pgrig.storage.model import LabInfo

BLOCK_BYTES = 8192  # PostgreSQL's default block size: blks_read counts these


def labs(records: Sequence[RunRecord]) -> dict[str, LabInfo | RunRecord]:
    """Target -> its lab as built, or the record saying why it was not."""
    out: dict[str, LabInfo | RunRecord] = {}
    study = index.read(records)
    for rec in study.kind(LAB):
        out[rec.target] = study.result(rec, LabInfo) or rec
    return out


NO_BARRIER_OPTIONS = ("nobarrier", "barrier=0")
NO_BARRIER_KERNEL = "barriers disabled"  # ext4's own line in the kernel log


def barriers_off(records: Sequence[RunRecord]) -> dict[str, str]:
    """Target -> 'barriers off (nobarrier)' for a lab filesystem mounted without
    write barriers (asked, in effect, or as the kernel said): its fdatasync
    returns before the data is on stable storage, so every number that waits
    for a flush is faster than a durable one."""
    out: dict[str, str] = {}
    for target, info in labs(records).items():
        fs = info.filesystem if isinstance(info, LabInfo) else None
        if fs is None:
            continue
        options = {*fs.mount_options.split(","), *fs.mount_options_asked}
        said = [o for o in NO_BARRIER_OPTIONS if o in options]
        if not said and any(NO_BARRIER_KERNEL in line for line in fs.kernel_messages):
            said.append(f"the kernel: {NO_BARRIER_KERNEL}")
        if said:
            out[target] = f"barriers off ({', '.join(said)})"
    return out


def flag(text: str, why: str) -> str:
    """``text`` with ``why`` said at its end: '... ⚠ barriers off (nobarrier)'."""
    return f"{text} ⚠ {why}" if why and text else text


def unsafe_note(why: Mapping[str, Sequence[str]], what: str) -> tuple[str, ...]:
    """The table's note for the ⚠ that ``flag`` put at its numbers, from each
    target's own reasons (target -> ['barriers off (nobarrier)', 'fsync=off']):
    '⚠ synchronous_commit=off (fast, slow): at every number it changes, WHAT.';
    no note when every target's numbers are durable ones."""
    said: dict[str, list[str]] = {}
    for target, reasons in why.items():
        for reason in reasons:
            if reason:
                said.setdefault(reason, []).append(target)
    if not said:
        return ()
    items = "; ".join(f"{reason} ({', '.join(ts)})" for reason, ts in said.items())
    they = "they change" if len(said) > 1 else "it changes"
    return (f"⚠ {items}: at every number {they}, {what}.",)


def _cap(info: LabInfo) -> str:
    if info.io is None:
        return "none"
    whole = info.cap()
    n = len(info.io_devices)
    if whole is None or n <= 1:
        return info.io.describe()
    return f"{info.io.describe()} on each of {n} stripes; {whole.describe()}"


def _details_tool(fs: FilesystemInfo) -> str:
    # records made before the tool was recorded were xfs or ext4
    return fs.details_tool or ("xfs_info" if fs.fstype == "xfs" else "dumpe2fs -h")


def _memory(info: LabInfo) -> str:
    return fmt.size(info.memory_limit_bytes) if info.memory_limit_bytes else "the machine's"


def _storage(info: LabInfo) -> str:
    fs = info.filesystem
    if fs is None:
        return f"directory {info.directory} on {info.host or 'the host disk'}"
    raid = f" raid0 over {len(fs.stripes)} loop devices" if fs.stripes else ""
    return (
        f"{fs.fstype} {fmt.size(fs.size_bytes)}{raid}, loop-backed emulation on "
        f"{info.host or fs.host_filesystem}"
    )


def targets_table(records: Sequence[RunRecord]) -> Table | None:
    """One row per lab target: shown beside the results in the summary."""
    study = index.read(records)
    found = labs(study)
    if not found:
        return None
    rows = []
    # Targets outside the lab (seed 000's plain "local") are columns too.
    order = list(dict.fromkeys(r.target for r in study.other_than(LAB)))
    for target in [t for t in order if t not in found]:
        rows.append(Row((target, "plain directory on the host disk", "none", "the machine's")))
    for target, info in found.items():
        if isinstance(info, LabInfo):
            rows.append(Row((target, _storage(info), _cap(info), _memory(info))))
        else:
            kind = SKIPPED if info.status == "skipped" else FAILED
            rows.append(Row((target, f"not built: {info.reason or info.status}", "", ""), kind))
    return Table(
        ("Target", "Storage", "I/O cap (cgroup throttle)", "Memory for server + page cache"),
        tuple(rows),
        caption="Storage lab targets: what each column above ran on",
        notes=("Details, as the system reports them, in the Environment section.",),
    )


def environment_blocks(records: Sequence[RunRecord]) -> list[Table]:
    """Per lab target: the filesystem as xfs_info / dumpe2fs -h and mountinfo
    show it, the caps and limits, and what the emulation does not capture."""
    out: list[Table] = []
    study = index.read(records)
    ends = emulator_report.at_end(study)
    for target, info in labs(study).items():
        if not isinstance(info, LabInfo):
            continue
        rows = [("Built as", info.description)]
        if (end := ends.get(target)) is not None:  # beside the build's calibration
            rows.append(("Emulation at the end", end.describe()))
        fs = info.filesystem
        if fs is not None:
            log = f", external log/journal on {fs.log_device}" if fs.log_device else ""
            rows += [
                ("Emulation", f"loop-backed emulation on {info.host or fs.host_filesystem}"),
                (
                    "Filesystem",
                    f"{fs.fstype} on {fs.device} ({fs.major_minor}), {fmt.size(fs.size_bytes)}, "
                    f"backing file {fs.backing_file}"
                    f"{' (loop O_DIRECT)' if fs.direct_io else ''}{log}",
                ),
                ("mkfs as run", " ".join(fs.mkfs_argv)),
                ("Mount options asked", ",".join(fs.mount_options_asked) or "defaults"),
                ("Mount options in effect", fs.mount_options),
            ]
            if fs.options_not_shown:
                rows.append(("Asked, not shown by the kernel", ", ".join(fs.options_not_shown)))
            rows.append(("/proc/self/mountinfo", fs.mountinfo_line))
            tool = _details_tool(fs)
            rows += [(f"{tool}: {k}", v) for k, v in fs.facts.items()]
            rows += [("Kernel said", line) for line in fs.kernel_messages]
        else:
            rows.append(("Directory", f"{info.directory} on {info.host or 'unknown'}"))
        if info.io is not None:
            where = "devices" if len(info.io_devices) > 1 else "device"
            rows.append(("I/O cap", f"{_cap(info)} on {where} {info.io_device}"))
        if info.memory_limit_bytes:
            rows.append(("Memory limit", _memory(info)))
        if info.cgroup:
            rows.append(("cgroups", info.cgroup))
        out.append(
            Table(
                ("Item", "Value"),
                tuple(Row(r) for r in rows),
                caption=f"Storage lab target {target}",
                notes=tuple(f"Not captured: {n}." for n in info.not_captured),
            )
        )
        if fs is not None and fs.details.strip():
            tool = _details_tool(fs)
            out.append(
                Table(
                    (tool,),
                    tuple(Row((line,)) for line in fs.details.splitlines() if line.strip()),
                    caption=f"{target}: {tool}, verbatim",
                    collapsed=True,
                )
            )
    return out


def audit_table(env: Environment | None) -> Table | None:
    """``pgrig audit``'s findings: the kernel settings seeds 000 and 002 tune."""
    if env is None or not env.audit:
        return None
    order = {"differs": 0, "ok": 1}
    findings = sorted(env.audit, key=lambda f: order.get(f.status, 2))
    differing = sum(f.status == "differs" for f in findings)
    return Table(
        ("Setting", "This machine", "Seeds", "Status", "Why it matters"),
        tuple(
            Row((f.name, f.current or "unreadable", f.recommended, f.status, f.why))
            for f in findings
        ),
        caption=f"pgrig audit: {differing} of {len(findings)} kernel settings differ from "
        "what seeds 000 and 002 set",
        notes=("`pgrig audit -v` says how to set each; `--apply` sets the run-time ones.",),
        collapsed=True,
    )


def _ratios(samples: Iterable[Sample]) -> tuple[float | None, float | None]:
    """(buffer hit ratio, page-cache hit ratio) over the run: blocks found in
    shared_buffers, and of the blocks read from the OS, those the page cache
    had (the server's /proc/<pid>/io read_bytes reached the disk)."""
    hit = read = disk = 0.0
    for s in samples:
        if not s.in_run or s.pg is None:
            continue
        hit += s.pg.blks_hit_s * s.interval_s
        read += s.pg.blks_read_s * s.interval_s
        if s.io is not None and s.io.server_read_mib_s is not None:
            disk += s.io.server_read_mib_s * s.interval_s * 2**20
    buffer = hit / (hit + read) if hit + read else None
    cache = None
    if read:
        cache = min(1.0, max(0.0, 1.0 - disk / (read * BLOCK_BYTES)))
    return buffer, cache


# The FUSE process of a latency (or lossy) layer, by its command name (comm).
LAYER_PROCESSES = ("pgrig-latency", "pgrig-lossyfs")
NOT_SEEN = "not seen through the layer"
# Where each calibration's description begins in ``LabInfo.latency`` (the layer's
# ``describe``: "ESSD PL3 fdatasync: ... . ESSD PL3 read: ..."), and its miss.
_PART = re.compile(r"(?:^|\. )[^.;:]*? (fdatasync|read): ")
_MISS = re.compile(r"; ([\d.]+)x over the (?:target|aim)")


def layered(records: Sequence[RunRecord]) -> dict[str, LabInfo]:
    """The targets behind a latency layer (a FUSE process serves their I/O): the
    kernel counts no read_bytes for what it serves, so the server's own I/O and
    page-cache figures are not seen through it."""
    return {t: i for t, i in labs(records).items() if isinstance(i, LabInfo) and i.latency}


def calibration_misses(info: LabInfo) -> list[str]:
    """'fdatasync 3.9x over the target' for each kind of I/O the layer's calibration
    achieved well over the class's latency (``pgrig.storage.latency.OVER``)."""
    text = info.latency or ""
    starts = list(_PART.finditer(text))
    out = []
    for i, part in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        if miss := _MISS.search(text, part.end(), end):
            out.append(f"{part[1]} {miss[1]}x over the target")
    return out


def _cpu(
    study: StudyIndex, target: str, samples: SampleReader
) -> tuple[list[float], list[float], list[float]]:  # noqa: E501
    """Per monitored run of ``target``, means over its in-run samples (% of the
    machine): pgrig's own processes (its children, a FUSE layer's process among
    them), the server's, and other processes named as a layer's."""
    ours: list[float] = []
    server: list[float] = []
    named: list[float] = []
    for rec, mon in study.target(target).ok(MONITOR, MonitorResult):
        inside = [x for x in samples(rec) if x.in_run]
        mine = [x.cpu.pgrig for x in inside if x.cpu.pgrig is not None]
        theirs = [x.cpu.server for x in inside if x.cpu.server is not None]
        if mine:
            ours.append(statistics.fmean(mine))
        if theirs:
            server.append(statistics.fmean(theirs))
        if mon.others is not None:
            named.append(sum(p.cpu_pct for p in mon.others.top
                             if p.name.startswith(LAYER_PROCESSES)))  # fmt: skip
    return ours, server, named


def layer_cpu(
    records: Sequence[RunRecord], target: str, samples: SampleReader = own_samples
) -> tuple[float, float | None, float | None] | None:
    """The layer's CPU during ``target``'s monitored runs, % of the machine (means
    over the runs): pgrig's own processes there, which hold the FUSE process pgrig
    started (with the layer's process if it ran as another's, by name); pgrig's
    own on the targets without a layer, for the part that is not the layer's; and
    the server's. None: no monitored run."""
    study = index.read(records)
    ours, server, named = _cpu(study, target, samples)
    if not ours and not any(named):
        return None
    behind = layered(study)
    plain = [v for t in study.of_target if t not in behind for v in _cpu(study, t, samples)[0]]
    layer = (statistics.fmean(ours) if ours else 0.0) + (statistics.fmean(named) if named else 0.0)
    return (
        layer,
        statistics.fmean(plain) if plain else None,
        statistics.fmean(server) if server else None,
    )


def layer_lines(records: Sequence[RunRecord], samples: SampleReader = own_samples) -> list[str]:
    """For the first screen, per target behind a layer: its calibration misses, and
    the layer's CPU beside the server's (on a small machine, CPU the server did
    not have: part of any difference, subtracted from nothing) - from the layer's
    own per-run records where the study has them, else estimated from the
    monitor's samples (studies stored before them)."""
    out = []
    study = index.read(records)
    recorded = emulator_report.lines(study)  # the layer's own record of each run
    for target, info in layered(study).items():
        said = []
        if misses := calibration_misses(info):
            said.append(f"its latency layer missed the calibration ({'; '.join(misses)})")
        if target in recorded:
            pass  # its own line, below: the layer's process measured, not estimated
        elif (cpu := layer_cpu(study, target, samples)) is not None:
            layer, plain, server = cpu
            without = f" ({plain:.1f}% on the targets without a layer)" if plain is not None else ""
            beside = f", the server {server:.1f}%" if server is not None else ""
            said.append(
                f"pgrig's processes with the layer's FUSE process took {layer:.1f}% of the "
                f"machine's CPU during its runs{without}{beside}: CPU the server did not "
                "have, part of every difference measured on it (subtracted from nothing)"
            )
        if said:
            out.append(f"⚠ {target}: " + "; ".join(said) + ".")
        if target in recorded:
            out.append(recorded[target])
    return out


def _pct(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{100 * sum(values) / len(values):.1f}%"


def memory_section(
    records: Sequence[RunRecord], env: Environment | None, samples: SampleReader = own_samples
) -> Section | None:
    """Data size against memory and the hit ratios, when a target has a memory limit."""
    study = index.read(records)
    found = {t: i for t, i in labs(study).items() if isinstance(i, LabInfo)}
    if not any(i.memory_limit_bytes for i in found.values()):
        return None
    data: dict[str, int] = {}
    for rec, init in study.ok(PGBENCH_INIT, PgbenchInit):
        if init.database_bytes:
            data[rec.target] = init.database_bytes
    per: dict[tuple[str, str], tuple[list[float], list[float], list[float]]] = {}
    for rec, run in study.ok(PGBENCH_RUN, PgbenchRun):
        buf, cache, tps = per.setdefault((rec.target, run.mode), ([], [], []))
        tps.append(run.tps)
        mon_rec = study.watching.get(rec.key)
        if mon_rec is not None and mon_rec.status == "ok":
            b, c = _ratios(samples(mon_rec))
            if b is not None:
                buf.append(b)
            if c is not None:
                cache.append(c)
    machine = env.memory_bytes if env is not None else 0
    behind = layered(study)
    rows = []
    for (target, mode), (buf, cache, tps) in per.items():
        info = found.get(target)
        limit = info.memory_limit_bytes if info is not None else None
        memory = limit or machine
        size = data.get(target)
        ratio = f"{size / memory:.2f}x" if size and memory else "-"
        rows.append(
            Row(
                (
                    target,
                    mode,
                    fmt.size(limit) if limit else f"machine ({fmt.size(machine)})",
                    fmt.size(size) if size else "-",
                    ratio,
                    _pct(buf),
                    NOT_SEEN if target in behind else _pct(cache),
                    fmt.with_spread(fmt.spread(tps)) if tps else "-",
                )
            )
        )
    table = Table(
        ("Target", "Mode", "Memory", "Data", "Data / memory", "Buffer hits", "Page-cache hits",
         "tps"),
        tuple(rows),
        caption="Data larger than memory: where the blocks came from",
        notes=(
            "Memory: the memory cgroup holding the server's processes and their page cache "
            "(shared_buffers sized to it by the profile), or the whole machine.",
            "Data: pg_database_size after pgbench -i. Buffer hits: blks_hit / (blks_hit + "
            "blks_read) of pg_stat_database during the runs. Page-cache hits: of the blocks "
            "read from the OS, the share that did not reach the disk (the server processes' "
            "read_bytes in /proc/<pid>/io against blks_read x 8 kB); needs the monitor. "
            f"{NOT_SEEN}: a target behind a latency layer, whose FUSE process serves the "
            "server's reads: the kernel counts no read_bytes for them.",
        ),
        numeric=(False, False, True, True, True, True, True, True),
    )  # fmt: skip
    cgroup = cgroup_table(study)
    return Section("Memory", "memory", blocks=(table,) if cgroup is None else (table, cgroup))


def _counts(values: Sequence[int]) -> str:
    """'1,204 (980–1,530)': the median of counts over runs and their range."""
    text = fmt.integer(statistics.median(values))
    if len(values) > 1:
        text += f" ({fmt.integer(min(values))}–{fmt.integer(max(values))})"
    return text


def cgroup_table(study: StudyIndex) -> Table | None:
    """What the memory cgroup itself counted during the runs: how often the
    limit was hit, the peak, OOM kills (seed 003's box swapped; here the kernel
    reclaims the cgroup's page cache or kills)."""
    per: dict[tuple[str, str], list[MemoryUse]] = {}
    for rec, use in study.ok(MEMORY, MemoryUse):
        mode = str(rec.params.get("mode") or rec.params.get("workload") or "")
        per.setdefault((rec.target, mode), []).append(use)
    if not per:
        return None
    rows = []
    for (target, mode), uses in per.items():
        last = uses[-1].after
        peaks = [u.after.peak_bytes for u in uses if u.after.peak_bytes is not None]
        rows.append(
            Row(
                (
                    target,
                    mode,
                    str(len(uses)),
                    _counts([u.limit_hits for u in uses]),
                    fmt.integer(sum(u.oom_kills for u in uses)),
                    fmt.size(max(peaks)) if peaks else "not kept",
                    fmt.size(last.limit_bytes),
                    f"{fmt.size(last.cache_bytes)} / {fmt.size(last.rss_bytes)}",
                )
            )
        )
    return Table(
        ("Target", "Mode", "Runs", "Limit hits per run", "OOM kills", "Peak", "Limit",
         "Cache / RSS at end"),
        tuple(rows),
        caption="The memory cgroup during the runs",
        notes=(
            "Limit hits: how often the cgroup's usage reached its limit during a run (v1 "
            "memory.failcnt, v2 memory.events max; each forces the kernel to reclaim, mostly "
            "the cgroup's page cache), the median over the runs and their range. OOM kills: "
            "processes the kernel killed for the limit during the runs.",
            "Peak: the most the cgroup held since the target was built, the load included (v1 "
            "max_usage_in_bytes, v2 memory.peak). Cache / RSS: page cache (shared_buffers "
            "included) and anonymous memory at the end of the last run.",
        ),
        numeric=(False, False, True, True, True, True, True, True),
    )  # fmt: skip
