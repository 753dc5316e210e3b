#!/usr/bin/env python3
"""Do pgrig's costs grow linearly with the work? (issue 18, item 6)

Two parts:

* **report**: from one tiny *real* study (recorded here by ``pgrig run``), build
  stores of three sizes by cloning its records - more targets (a versions-like
  comparison), scales, client counts and repeats, with tps and the monitor's
  samples scaled and jittered so that no two runs draw the same line - and time
  ``pgrig report`` on each (fresh process, median of ``--rounds``), printing the
  HTML size and the count of inline SVGs.
* **run** (``--run``): pgrig's own CPU and peak RSS per second of measured run,
  for a short and a long pgbench run (``pgrig run`` of one point, sampled from
  /proc twice a second; the peak is the kernel's VmHWM, overall and until the
  study ended, before its report): a flat memory and a constant CPU per second
  are the goal.

    .venv/bin/python bench/scale.py --source RESULTS/results.sqlite [--study ID]
    .venv/bin/python bench/scale.py --run --short 60 --long 300
    .venv/bin/python bench/scale.py --record 600 3600 7200
    .venv/bin/python bench/scale.py --report-only A/results.sqlite B/results.sqlite [--pgrig OTHER]
    .venv/bin/python bench/scale.py --stretch A/results.sqlite 60 600 1800 3600 [--pgrig OTHER]

``--record``: the recording alone, in a fresh process per length: a monitor
record of that many synthetic seconds (tests/test_monitor_spool.py's) written
by the real recorder into a real SQLite store; the growth of the peak RSS
(VmHWM) and the tracemalloc peak of the Python heap while it is written.

``--report-only``: ``pgrig report`` alone on the latest study of each store,
in a fresh process each time (its peak RSS from ``wait4``: the kernel's, per
process), ``--rounds`` times; with ``--pgrig``, alternated with that build,
and the ratio of their peaks with its spread. The growth of the peak per
extra second of monitored run is taken from each store to the longest.
``--stretch``: the same on stores made from one real study, its monitored
run's samples and pgbench progress repeated (or cut) to each length - long
runs without waiting for them.

Without ``--source``, a tiny study is recorded first (about 40 s).
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pgrig.results import Study
from pgrig.store import Store

PGRIG = Path(sys.executable).with_name("pgrig")

TINY = """\
[campaign]
name = "tiny"
repeat = 2
checkpoint = true

[[target]]
name = "local"
directory = "{directory}"
profile = "oltp"

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "tpcb"
scales = [1]
modes = ["read-write"]
clients = [1, 4]
duration = {duration}
count = false
"""

# (targets, scales, clients, repeats): 1 + 2 * clients * repeats records per
# target and scale (a load, then a run and its monitor record per repeat).
# 33 is the quick study's size, 296 seed 004's versions campaign, 1040 beyond.
SIZES = {
    "small": (1, 1, (1, 2, 4, 8), 4),
    "seed004": (4, 2, (1, 2, 4, 8, 16, 32), 3),
    "large": (4, 4, (1, 2, 4, 8, 16, 32, 64, 128), 4),
}


def record_tiny(work: Path, duration: int = 4) -> Path:
    campaign = work / "tiny.toml"
    campaign.write_text(TINY.format(directory=work, duration=duration))
    results = work / "tiny-results"
    argv = [str(PGRIG), "run", str(campaign), "--results", str(results)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=900)
    return results / "results.sqlite"


def _jitter(value: Any, factor: float) -> Any:
    """Scale every tps-like number of a result (a dict tree) by ``factor``."""
    if isinstance(value, dict):
        return {
            k: (
                v * factor
                if k in ("tps", "commits_s") and isinstance(v, float)
                else _jitter(v, factor)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_jitter(v, factor) for v in value]
    return value


def synthesize(
    source: Store, study: Study, dest: Path, size: str, seed: int = 4
) -> tuple[str, int]:
    """A study of ``size`` (see SIZES) in a new store at ``dest``, cloned from ``study``."""
    n_targets, n_scales, clients, repeats = SIZES[size]
    rng = random.Random(seed)
    records = source.runs(study.id)
    init = next(r for r in records if r.kind == "pgbench_init")
    run = next(r for r in records if r.kind == "pgbench_run")
    watch = next(r for r in records if r.kind == "monitor")
    declared = study.params["targets"][0]
    names = [f"pg{v}" for v in ("9.5", "9.6", "15", "18", "17", "16")[:n_targets]]
    params = copy.deepcopy(study.params)
    params["targets"] = [{**declared, "name": n} for n in names]
    params["baseline"] = names[0]
    new_id = f"{size}-{len(names)}x{n_scales}x{len(clients)}x{repeats}"
    dest.unlink(missing_ok=True)
    with Store.open(dest) as out:
        out.begin_study(replace(study, id=new_id, name=new_id, params=params))
        if study.environment is not None:
            out.set_environment(new_id, study.environment)
        for t, name in enumerate(names):
            for s in range(n_scales):
                scale = 10**s
                prefix = f"{name}/tpcb/s{scale}"
                ip = {**init.params, "scale": scale}
                out.record(
                    replace(init, study=new_id, key=f"{prefix}/init", target=name, params=ip)
                )
                for c in clients:
                    for r in range(1, repeats + 1):
                        # A realistic shape: tps grows with clients up to the cores, then
                        # flattens; versions and scales differ; repeats scatter by ~5%.
                        factor = (1 + 0.15 * t) * min(c, 2) ** 0.8 / (1 + 0.1 * s)
                        factor *= rng.gauss(1, 0.05)
                        key = f"{prefix}/read-write/c{c}/d{run.params['duration_s']}/r{r}"
                        rp = {**run.params, "scale": scale, "clients": c, "repeat": r}
                        result = _jitter(run.result, factor)
                        result["clients"] = c
                        result["scale"] = scale
                        out.record(
                            replace(
                                run, study=new_id, key=key, target=name, params=rp, result=result
                            )
                        )
                        mon = _jitter(watch.result, factor * rng.gauss(1, 0.03))
                        mp = {**rp, "run": key}
                        out.record(
                            replace(
                                watch,
                                study=new_id,
                                key=f"{key}/monitor",
                                target=name,
                                params=mp,
                                result=mon,
                            )
                        )
        out.finish_study(new_id, "finished", study.finished_at or study.started_at)
        count = len(out.runs(new_id))
    return new_id, count


def time_report(store: Path, study: str, out: Path) -> tuple[float, float, int, int]:
    """Wall and CPU seconds of ``pgrig report`` in a fresh process, the HTML's
    bytes and inline SVGs. On a shared machine the wall time is mostly waiting
    for a CPU: the CPU time is what a quiet machine's wall time would be."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    argv = [str(PGRIG), "report", study, "--store", str(store), "--out", str(out)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=3600)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    html = next(out.glob("*.html")).read_text(encoding="utf-8")
    return elapsed, cpu, len(html.encode()), html.count("<svg")


def report_part(args: argparse.Namespace, work: Path) -> None:
    source_path = args.source or record_tiny(work)
    with Store.open(source_path) as source:
        study = source.study(args.study) if args.study else source.latest_study()
        if study is None:
            sys.exit(f"{source_path} holds no study")
        print(f"source: {study.id} in {source_path}")
        print(
            f"{'size':<8} {'records':>7} {'wall s (min-max)':>18} {'CPU s (min-max)':>17} "
            f"{'HTML MB':>8} {'SVGs':>5}"
        )
        for size in args.sizes:
            dest = work / f"{size}.sqlite"
            sid, count = synthesize(source, study, dest, size)
            walls, cpus = [], []
            for i in range(args.rounds):
                wall, cpu, html_bytes, svgs = time_report(dest, sid, work / f"report-{size}-{i}")
                walls.append(wall)
                cpus.append(cpu)
            print(
                f"{size:<8} {count:>7} {_spread(walls):>18} {_spread(cpus):>17} "
                f"{html_bytes / 1e6:>8.2f} {svgs:>5}",
                flush=True,
            )


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def _proc_sample(pid: int) -> tuple[float, int, int] | None:
    """CPU seconds (user + system), RSS bytes and the kernel's high-water mark of
    RSS (VmHWM: the peak however short, which a poll twice a second can miss) of
    one process, from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    cpu = (int(stat[11]) + int(stat[12])) / tick
    kib = {
        line.split(":")[0]: int(line.split()[1]) * 1024
        for line in status.splitlines()
        if line.startswith(("VmRSS:", "VmHWM:"))
    }
    if len(kib) < 2:  # exiting: no memory left to count
        return None
    return cpu, kib["VmRSS"], kib["VmHWM"]


@dataclass(frozen=True)
class RunCost:
    """pgrig's own CPU and memory over a whole study of one measured run."""

    cpu_s: float  # the whole study
    peak_mib: float  # the whole study: the run, recording it and the report (VmHWM)
    recorded_peak_mib: float  # the same until the study ended, before its report
    run_start_mib: float  # resident memory when the measured run began
    run_end_mib: float  # and when it ended (before its result was built)
    run_cpu_s: float  # CPU seconds inside the measured run


def measure_run(work: Path, duration: int, pgrig: Path) -> RunCost:
    """pgrig's own CPU seconds and resident memory over a whole study of one
    monitored pgbench run of ``duration`` seconds (cluster, load, run, report),
    and inside the measured run alone (its start and end from the store)."""
    campaign = work / f"run{duration}.toml"
    text = TINY.format(directory=work, duration=duration)
    campaign.write_text(text.replace("repeat = 2", "repeat = 1").replace("[1, 4]", "[2]"))
    results = work / f"r{duration}-{pgrig.parent.parent.parent.name}"
    argv = [str(pgrig), "run", str(campaign), "--results", str(results)]
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    series: list[tuple[float, float, int, int]] = []  # (epoch s, CPU s, RSS, VmHWM bytes)
    while child.poll() is None:
        sample = _proc_sample(child.pid)
        if sample is not None:
            series.append((time.time(), *sample))
        time.sleep(0.5)
    if child.wait(timeout=60) != 0:
        sys.exit(f"pgrig run failed ({child.returncode})")
    with Store.open(results / "results.sqlite") as store:
        (study,) = store.studies()
        run = next(r for r in store.runs(study.id) if r.kind == "pgbench_run")
    # Stamped to the second, rounded down: the readings before it are the
    # study's (the run, its recording, stopping the server), not its report's.
    ended = datetime.fromisoformat(study.finished_at or run.finished_at).timestamp()
    # The run's record is stamped to the second: keep well inside it.
    begin = datetime.fromisoformat(run.started_at).timestamp() + 2
    end = datetime.fromisoformat(run.finished_at).timestamp() - 2
    inside = [s for s in series if begin <= s[0] <= end]
    return RunCost(
        cpu_s=series[-1][1],
        peak_mib=max(s[3] for s in series) / 2**20,
        recorded_peak_mib=max(s[3] for s in series if s[0] < ended) / 2**20,
        run_start_mib=inside[0][2] / 2**20,
        run_end_mib=inside[-1][2] / 2**20,
        run_cpu_s=inside[-1][1] - inside[0][1],
    )


def run_part(args: argparse.Namespace, work: Path) -> None:
    """The difference of the two studies is what the longer measured run cost:
    CPU per extra second and memory growth; and, inside each run, how much its
    memory grew from its start to its end."""
    pgrig = args.pgrig or PGRIG
    short = measure_run(work, args.short, pgrig)
    long_ = measure_run(work, args.long, pgrig)
    print(f"pgrig: {pgrig}; load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(
        f"{'run s':>6} {'pgrig CPU s':>12} {'peak RSS MiB':>13} {'before report':>14} "
        f"{'RSS at run start':>17} {'at run end':>11} {'CPU in run, % of a CPU':>23}"
    )
    for duration, c in ((args.short, short), (args.long, long_)):
        inside = duration - 4
        print(
            f"{duration:>6} {c.cpu_s:>12.2f} {c.peak_mib:>13.1f} {c.recorded_peak_mib:>14.1f} "
            f"{c.run_start_mib:>17.1f} {c.run_end_mib:>11.1f} {c.run_cpu_s / inside * 100:>23.2f}"
        )
        print(
            f"{'':>6} inside the {duration} s run: "
            f"{(c.run_end_mib - c.run_start_mib) / inside * 1024:.1f} KiB of RSS per second"
        )
    extra = args.long - args.short
    print(
        f"per extra second of measured run: {(long_.cpu_s - short.cpu_s) / extra * 100:.2f}% "
        f"of a CPU, {(long_.peak_mib - short.peak_mib) / extra * 1024:.1f} KiB of peak RSS, "
        f"{(long_.recorded_peak_mib - short.recorded_peak_mib) / extra * 1024:.1f} KiB of it "
        "before the report"
    )


def stretch(source: Store, study: Study, dest: Path, seconds: int) -> None:
    """A copy of ``study`` at ``dest`` whose watched run lasts ``seconds``: the
    in-run samples and the ``-P`` points repeated end to end (or cut), their
    clocks moved on by the source run's length at each repetition."""
    dest.unlink(missing_ok=True)
    with Store.open(dest) as out:
        out.begin_study(study)
        if study.environment is not None:
            out.set_environment(study.id, study.environment)
        for rec in source.runs(study.id, without_samples=("monitor",)):
            samples = None
            result = copy.deepcopy(rec.result)
            if rec.kind == "monitor" and rec.id is not None:
                inside = [s for s in source.samples(rec.id) if s["in_run"]]
                samples = _tiled(inside, seconds, ("t_s", "wall"))
            if rec.kind == "pgbench_run" and isinstance(result, dict):
                result["progress"] = list(_tiled(result["progress"], seconds, ("t_s",)))
            params = {**rec.params, "duration_s": seconds} if "duration_s" in rec.params else None
            key = rec.key.replace(f"/d{rec.params.get('duration_s')}/", f"/d{seconds}/")
            out.record(
                replace(rec, id=None, key=key, params=params or rec.params, result=result),
                samples,
            )
        out.finish_study(study.id, study.status, study.finished_at or study.started_at)


def _tiled(rows: list[dict[str, Any]], n: int, clocks: tuple[str, ...]) -> Any:
    """``n`` rows: ``rows`` repeated, each clock moved on by their span per lap."""
    if not rows:
        return
    span = {c: rows[-1][c] - rows[0][c] + (rows[1][c] - rows[0][c]) for c in clocks}
    for i in range(n):
        row = dict(rows[i % len(rows)])
        for c in clocks:
            row[c] += span[c] * (i // len(rows))
        yield row


@dataclass(frozen=True)
class ReportCost:
    peak_mib: float  # the process's peak RSS (ru_maxrss)
    cpu_s: float
    html_kb: float


def report_once(pgrig: Path, store: Path, out: Path, timeout: float = 1800) -> ReportCost:
    """``pgrig report`` of the store's latest study in a fresh process."""
    with Store.open(store) as db:
        study = db.latest_study()
    if study is None:
        sys.exit(f"{store} holds no study")
    argv = [str(pgrig), "report", study.id, "--store", str(store), "--out", str(out)]
    log = out.with_name(f"{out.name}.stderr")  # its warnings, kept out of the table
    with log.open("wb") as err:
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + timeout
    while True:  # wait4: this child's own rusage (RUSAGE_CHILDREN keeps the max of all)
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            child.kill()
            child.wait(timeout=30)
            sys.exit(f"pgrig report of {store} took more than {timeout:.0f} s")
        time.sleep(0.05)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"pgrig report of {store} failed ({child.returncode}): see {log}")
    html = next(out.glob("*.html"))
    return ReportCost(
        usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, html.stat().st_size / 1e3
    )


def run_seconds(store: Path) -> int:
    """The most per-second samples of one watched run of the latest study."""
    with Store.open(store) as db:
        study = db.latest_study()
        watched = [r for r in db.runs(study.id, without_samples=("monitor",))] if study else []
        return max(
            (sum(1 for _ in db.samples(r.id)) for r in watched if r.kind == "monitor" and r.id),
            default=0,
        )


def report_only_part(args: argparse.Namespace, stores: list[Path], work: Path) -> None:
    """Peak RSS, CPU and HTML of ``pgrig report`` on each store, this build and
    ``--pgrig`` alternated; the peak's growth per extra second of run."""
    builds = {"this": PGRIG, **({"other": args.pgrig} if args.pgrig else {})}
    seconds = {s: run_seconds(s) for s in stores}
    costs: dict[tuple[str, Path], list[ReportCost]] = {}
    for i in range(args.rounds):
        for store in stores:
            for name, pgrig in builds.items():
                out = work / f"report-{name}-{store.stem}-{i}"
                costs.setdefault((name, store), []).append(report_once(pgrig, store, out))
    print(f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, pgrig in builds.items():
        print(f"{name}: {pgrig}")
    head = f"{'store':<24} {'run s':>6}"
    for name in builds:
        head += f" {name + ' peak RSS MiB (min-max)':>30} {'CPU s':>5} {'HTML kB':>8}"
    if len(builds) > 1:
        head += f" {'peak this/other (min-max)':>26}"
    print(head)
    for store in stores:
        name = store.parent.name if store.stem == "results" else store.stem  # pgrig run's
        line = f"{name[:24]:<24} {seconds[store]:>6}"
        for name in builds:
            c = costs[(name, store)]
            peaks = [x.peak_mib for x in c]
            cpu = statistics.median(x.cpu_s for x in c)
            line += f" {_spread(peaks):>30} {cpu:>5.1f} {c[0].html_kb:>8.0f}"
        if len(builds) > 1:
            ratios = [
                a.peak_mib / b.peak_mib
                for a, b in zip(costs[("this", store)], costs[("other", store)], strict=True)
            ]
            line += f" {_ratio(ratios):>26}"
        print(line, flush=True)
    # From each shorter store to the longest: the slope from 20 minutes on
    # (beyond decimate.LIMIT points a line) is what a long run adds.
    long_ = max(stores, key=seconds.get)
    for short in sorted(stores, key=seconds.get):
        extra = seconds[long_] - seconds[short]
        if extra <= 0:
            continue
        for name in builds:
            grew = statistics.median(x.peak_mib for x in costs[(name, long_)]) - statistics.median(
                x.peak_mib for x in costs[(name, short)]
            )
            print(
                f"{name}: {grew * 1024 / extra:.2f} KiB of peak RSS per extra second of run "
                f"({seconds[short]} -> {seconds[long_]} s: {grew:+.1f} MiB)"
            )


def stretch_part(args: argparse.Namespace, work: Path) -> None:
    source_path, *lengths = args.stretch
    stores = []
    with Store.open(Path(source_path)) as source:
        study = source.latest_study()
        if study is None:
            sys.exit(f"{source_path} holds no study")
        for seconds in map(int, lengths):
            dest = work / f"run{seconds:05d}s.sqlite"
            stretch(source, study, dest, seconds)
            stores.append(dest)
    report_only_part(args, stores, work)


def _ratio(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def _vm_hwm_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))


def record_one(seconds: int) -> None:
    """Write the monitor record of a ``seconds``-long synthetic run, as the
    recorder does; print what it cost (a process of its own: VmHWM only grows)."""
    import tracemalloc

    tests = Path(__file__).resolve().parent.parent / "tests"
    sys.path.insert(0, str(tests))
    from pgrig.recorder import Recorder
    from pgrig.ui import Ui
    from test_monitor_spool import _watched_run  # the test's synthetic spool
    from test_recorder import _step, _target
    from test_store import study

    def record(work: Path, traced: bool) -> tuple[float, float]:
        """CPU seconds, and MiB of VmHWM growth (untraced) or heap peak (traced)."""
        with Store.open(work / f"{traced}.sqlite") as store:
            store.begin_study(study())
            recorder = Recorder(store, study(), Ui(quiet=True))
            watch, run = _watched_run(seconds)
            getattr(watch, "summary", watch.result)(run)  # the imports and caches, once
            before = _vm_hwm_kib()
            if traced:
                tracemalloc.start()
            t0 = time.process_time()
            recorder._record_monitor(_step(1), _target("t"), "t0", watch, run)
            cpu = time.process_time() - t0
            if not traced:
                return cpu, (_vm_hwm_kib() - before) / 1024
            heap = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            return cpu, heap / 2**20

    with tempfile.TemporaryDirectory() as work:
        # untraced first: tracemalloc's own bookkeeping would count in the RSS
        cpu, grew = record(Path(work), traced=False)
        _, heap = record(Path(work), traced=True)
    print(f"{seconds:>8} {grew:>15.1f} {heap:>17.1f} {cpu:>8.2f}", flush=True)


def record_part(args: argparse.Namespace) -> None:
    print(f"{'seconds':>8} {'VmHWM grew MiB':>15} {'heap peak MiB':>17} {'CPU s':>8}")
    for seconds in args.record:
        argv = [sys.executable, __file__, "--record-one", str(seconds)]
        subprocess.run(argv, check=True, timeout=3600)
    print(f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, help="a store holding a small real TPC-B study")
    ap.add_argument("--study", help="its id (default: the latest)")
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--run", action="store_true", help="measure pgrig during runs instead")
    ap.add_argument("--short", type=int, default=60)
    ap.add_argument("--long", type=int, default=300)
    ap.add_argument("--pgrig", type=Path, help="the pgrig to measure (default: this venv's)")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp"))
    ap.add_argument("--record", type=int, nargs="+", help="measure recording runs this long")
    ap.add_argument("--record-one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--report-only", type=Path, nargs="+", help="measure pgrig report on stores")
    ap.add_argument(
        "--stretch", nargs="+", metavar="STORE SECONDS", help="a store, then run lengths to make"
    )
    args = ap.parse_args()
    if args.record_one:
        record_one(args.record_one)
        return
    if args.record:
        record_part(args)
        return
    work = Path(tempfile.mkdtemp(prefix="pgrig-scale-", dir=args.work))
    work.chmod(0o755)
    if args.report_only:
        report_only_part(args, args.report_only, work)
    elif args.stretch:
        stretch_part(args, work)
    elif args.run:
        run_part(args, work)
    else:
        report_part(args, work)
    print(f"(work directory: {work})")


if __name__ == "__main__":
    main()
