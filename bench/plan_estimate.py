#!/usr/bin/env python3
"""`pgrig plan`'s estimate against the real time of the seed examples (issue 21.7).

For each seed example, the plan is made exactly as ``pgrig plan`` makes it
(``plan.steps``, with the machine's calibration as it stands), kept with a copy
of that calibration, then ``pgrig run`` runs the example as a user would. The
real time of each step comes from the store: the recorded start and end of its
record (whole seconds), plus, for a measured run, the gap before it, where the
runner ran its ``prepare`` (CHECKPOINT, reset, warm-up). The rest of the wall
time - servers made and removed, the environment captured, the report written -
is "setup/teardown". Printed per step kind and in total: the estimate, the real
time and their ratio, flagged past 25%, with the load average sampled during
the run (the machine is shared: real times are inflated by the others' work).

``--replan`` adds the estimate this code makes now from the calibration as it
was before the run (the copy), so that a fixed estimate can be read against the
same real times without running again.

    .venv/bin/python bench/plan_estimate.py [--only seed002 ...] [--results DIR] [--replan]
        [--calibrate-from EARLIER_DIR]

Seed examples run one after another, never two at once (they would share the
two cores and distort each other's real times). ``--results DIR`` keeps each
run in DIR/NAME; a run already there is read, not run again.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from pgrig import calibration, campaign, plan, registry
from pgrig.durability.model import DurabilityResult
from pgrig.durability.workload import DurabilitySpec
from pgrig.durability.workload import calibration_kind as durability_kind
from pgrig.ownership import state_dir
from pgrig.results import PgbenchInit, SetupResult
from pgrig.step import Step
from pgrig.storage.model import LabInfo
from pgrig.store import Store
from pgrig.units import MB
from pgrig.workloads.basebackup.model import BasebackupResult
from pgrig.workloads.basebackup.spec import BasebackupSpec, copy_bytes
from pgrig.workloads.basebackup.steps import calibration_kind
from pgrig.workloads.custom import datasize
from pgrig.workloads.custom.spec import CustomSpec
from pgrig.workloads.custom.workload import SETUP_KIND
from pgrig.workloads.tpcb.spec import TpcbSpec
from pgrig.workloads.tpcb.steps import load_kind, load_seconds

ROOT = Path(__file__).resolve().parent.parent
SEEDS = {
    "seed000-cloud": ROOT / "examples" / "seed000-cloud.toml",
    "seed000-reads": ROOT / "examples" / "seed000-reads.toml",
    "seed001-login": ROOT / "examples" / "seed001-login.toml",
    "seed002-filesystems": ROOT / "examples" / "seed002-filesystems.toml",
    "seed003-tpcc": ROOT / "examples" / "seed003-tpcc.toml",
}
KINDS = ("setup/teardown", "probes", "loads", "data steps", "measured runs")
LOAD_KINDS = {"pgbench_init", "tpcc_load", "sql_setup"}
OFF = 0.25  # the goal: within 25%
SLACK_S = 5.0  # and more than this: the store's timings are whole seconds
SETUP = "setup/teardown"


def kind_of(step: Step) -> str:
    if step.key.workload == "probe":
        return "probes"
    if step.kind == "storage_lab":
        return SETUP
    if step.monitored or step.kind == "durability":
        return "measured runs"
    if step.kind in LOAD_KINDS:
        return "loads"
    return "data steps"  # sizes, counts, checks, a base backup's data


def planned(path: Path) -> dict[str, Any]:
    """The plan as `pgrig plan` makes it: every step's key, kind and estimate,
    and the setup/teardown the plan adds beside its steps."""
    camp = campaign.load(path)
    steps = [
        {
            "key": step.id,
            "kind": kind_of(step),
            "seconds": step.estimate_s,
            "prepared": bool(step.prepare),
        }
        for _, step in plan.steps(camp)
    ]
    exp = plan.expand(camp)
    return {"steps": steps, "overhead_s": exp.overhead_s, "total_s": exp.total_s}


@contextmanager
def calibration_of(snapshot: dict[str, Any]) -> Iterator[None]:
    """The plan made against a copy of the calibration (a private state directory)."""
    old = os.environ.get("PGRIG_STATE_DIR")
    with tempfile.TemporaryDirectory(prefix="pgrig-bench-plan-") as tmp:
        os.environ["PGRIG_STATE_DIR"] = tmp
        (Path(tmp) / calibration.FILE).write_text(json.dumps(snapshot))
        try:
            yield
        finally:
            if old is None:
                del os.environ["PGRIG_STATE_DIR"]
            else:
                os.environ["PGRIG_STATE_DIR"] = old


def learn(name: str, where: Path) -> list[str]:
    """Record the loads, setups and copies of an earlier run (DIR/NAME's store)
    under their storage, as the runner records them since per-storage calibration
    exists: for a run made before it (``--calibrate-from``)."""
    camp = campaign.load(SEEDS[name])
    storage = {
        t.name: plan.PlannedTarget.of(t, registry.target_kind(t)).storage for t in camp.targets
    }
    setups = {s.name: s for s in camp.workloads if isinstance(s, CustomSpec) and s.setup}
    crashes = {s.name: s for s in camp.workloads if isinstance(s, DurabilitySpec)}
    learned = []
    with Store.open(where / "results.sqlite") as store:
        records = store.runs(store.studies()[-1].id)
    for rec in records:
        res = registry.typed_result(rec)
        on = storage.get(rec.target, "")
        if res is None or not on:
            continue
        if isinstance(res, PgbenchInit) and not res.reused:
            kind = load_kind(TpcbSpec(generate=str(rec.params.get("generate", "client"))))
            size, seconds = float(res.scale), load_seconds(res)
        elif isinstance(res, SetupResult) and (spec := setups.get(str(rec.params["workload"]))):
            kind, size = SETUP_KIND, datasize.of_files(spec.setup) / MB
            seconds = res.elapsed_s
        elif isinstance(res, DurabilityResult) and (d := crashes.get(str(rec.params["workload"]))):
            kind, size = durability_kind(d), float(d.crashes)
            seconds = _at(rec.finished_at) - _at(rec.started_at) - d.crashes * d.interval_s
        elif isinstance(res, LabInfo):
            kind, size = "lab-build", 1.0
            seconds = max(0.01, _at(rec.finished_at) - _at(rec.started_at))
        elif isinstance(res, BasebackupResult):
            bb = BasebackupSpec(scale=int(rec.params["scale"]), format=res.format,
                                compress=res.compress)  # fmt: skip
            kind, size = calibration_kind(bb), copy_bytes(bb.scale) / MB
            seconds = _at(rec.finished_at) - _at(rec.started_at)
        else:
            continue
        calibration.record(f"{kind}@{on}", size, seconds)
        learned.append(f"{rec.target} {kind} {size:g}: {seconds:.1f} s")
    # What the run spent besides its steps, as the bench counts it (wall time less
    # each step's recorded span and prepare), under the study's name.
    saved = json.loads((where / "plan.json").read_text())
    prepared = {s["key"] for s in saved["plan"]["steps"] if s["prepared"]}
    spans, _ = real_times(where, prepared)
    steps = {s["key"] for s in saved["plan"]["steps"]}
    besides = json.loads((where / "run.json").read_text())["wall_s"] - sum(
        v for k, v in spans.items() if k in steps
    )
    calibration.record(f"{plan.OVERHEAD_KIND}@{camp.name}", len(camp.targets), besides)
    learned.append(f"{plan.OVERHEAD_KIND} {len(camp.targets)}: {besides:.1f} s")
    return learned


def _calibration_now() -> dict[str, Any]:
    try:
        data = json.loads((state_dir() / calibration.FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(snapshot: dict[str, Any]) -> str:
    if not snapshot:
        return "none (the defaults)"
    sizes = {kind: ", ".join(f"{p['size']:g}" for p in points) for kind, points in snapshot.items()}
    return "; ".join(f"{kind} at {at}" for kind, at in sizes.items())


class LoadSampler(threading.Thread):
    """The 1-minute load average every 10 s while the run runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(10.0):
            self.samples.append(os.getloadavg()[0])


def run(name: str, path: Path, where: Path) -> dict[str, Any]:
    """`pgrig run` on the example, as a user runs it; its wall time and load."""
    where.mkdir(parents=True, exist_ok=True)
    snapshot = _calibration_now()
    plan_now = planned(path)
    (where / "plan.json").write_text(
        json.dumps({"calibration": snapshot, "plan": plan_now}, indent=1) + "\n"
    )
    print(f"{name}: running (planned {plan_now['total_s'] / 60:.1f} min) ...", flush=True)
    sampler = LoadSampler()
    sampler.start()
    before = os.getloadavg()[0]
    t0 = time.monotonic()
    with (where / "run.log").open("w") as log:
        done = subprocess.run(
            [sys.executable, "-m", "pgrig", "run", str(path), "--results", str(where)],
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=3 * 3600,
            env=dict(os.environ, COLUMNS="160"),
            check=False,
        )
    wall = time.monotonic() - t0
    sampler.done.set()
    sampler.join()
    loads = [before, *sampler.samples, os.getloadavg()[0]]
    facts = {"wall_s": wall, "exit": done.returncode, "load": loads, "cpus": os.cpu_count()}
    (where / "run.json").write_text(json.dumps(facts, indent=1) + "\n")
    return facts


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def real_times(where: Path, prepared: set[str]) -> tuple[dict[str, float], float]:
    """Each step's seconds from the store, and the study's own span."""
    with Store.open(where / "results.sqlite") as store:
        study = store.studies()[-1]
        records = sorted(store.runs(study.id), key=lambda r: (_at(r.finished_at), r.id or 0))
    seconds: dict[str, float] = {}
    last_end = _at(study.started_at)
    for rec in records:
        start, end = _at(rec.started_at), _at(rec.finished_at)
        if rec.key in prepared:
            start = min(start, max(last_end, _at(study.started_at)))  # its prepare, before
        seconds[rec.key] = end - start
        last_end = max(last_end, end)
    span = _at(study.finished_at) - _at(study.started_at) if study.finished_at else 0.0
    return seconds, span


def _ratio(estimate: float, real: float) -> str:
    if real <= 0:
        return "   -  "
    r = estimate / real
    off = abs(r - 1) > OFF and abs(estimate - real) > SLACK_S
    return f"{r:5.2f}{' *' if off else '  '}"


def report(name: str, where: Path, replan: bool) -> None:
    saved = json.loads((where / "plan.json").read_text())
    facts = json.loads((where / "run.json").read_text())
    columns = [("planned", saved["plan"])]
    if replan:
        with calibration_of(saved["calibration"]):
            columns.append(("planned now", planned(SEEDS[name])))
    kinds = {s["key"]: s["kind"] for s in saved["plan"]["steps"]}
    prepared = {s["key"] for s in saved["plan"]["steps"] if s["prepared"]}
    seconds, _span = real_times(where, prepared)
    real = dict.fromkeys(KINDS, 0.0)
    for key, kind in kinds.items():
        real[kind] += seconds.get(key, 0.0)
    real[SETUP] += facts["wall_s"] - sum(real.values())
    missing = [k for k in kinds if k not in seconds]
    loads = facts["load"]
    print(
        f"\n{name}: pgrig run exit {facts['exit']}, wall {facts['wall_s'] / 60:.1f} min; "
        f"load average (1 min) {min(loads):.1f}-{max(loads):.1f}, mean "
        f"{sum(loads) / len(loads):.1f} on {facts['cpus']} CPUs"
    )
    print(f"  calibration the plan used: {_describe(saved['calibration'])}")
    head = "".join(f"{label:>13} {'ratio':>7}" for label, _ in columns)
    print(f"  {'':<16}{'real':>9} {head}")
    for kind in (*KINDS, "total"):
        got = facts["wall_s"] if kind == "total" else real[kind]
        cells = []
        for _, p in columns:
            if kind == "total":
                est = p["total_s"]
            else:
                est = sum(s["seconds"] for s in p["steps"] if s["kind"] == kind)
                est += p["overhead_s"] if kind == SETUP else 0.0
            cells.append(f"{est:11.0f} s {_ratio(est, got)}")
        print(f"  {kind:<16}{got:7.0f} s {''.join(cells)}")
    worst = sorted(
        (
            (s["seconds"], seconds[s["key"]], s["key"])
            for s in columns[-1][1]["steps"]
            if s["key"] in seconds and abs(s["seconds"] - seconds[s["key"]]) >= 5
        ),
        key=lambda t: -abs(t[0] - t[1]),
    )[:6]
    for est, got, key in worst:
        print(f"    {key}: estimate {est:.0f} s, real {got:.0f} s")
    if missing:
        print(f"    {len(missing)} planned step(s) not recorded: {', '.join(missing[:4])}")
    print("  (* off by more than 25% and 5 s; real times are whole seconds from the store)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="seed000, seed001, seed002, seed003")
    ap.add_argument("--results", type=Path, help="runs kept (and reused) in DIR/NAME")
    ap.add_argument("--replan", action="store_true", help="also this code's estimate now")
    ap.add_argument(
        "--calibrate-from",
        type=Path,
        metavar="DIR",
        help="first record DIR/NAME's loads, setups and copies per storage (a run made "
        "before per-storage calibration existed)",
    )
    args = ap.parse_args()
    names = [n for n in SEEDS if not args.only or any(n.startswith(o) for o in args.only)]
    base = args.results or Path(tempfile.mkdtemp(prefix="pgrig-bench-seeds-", dir="/var/tmp"))
    print(f"runs kept in {base}; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    for name in names:
        where = base / name
        earlier = args.calibrate_from / name if args.calibrate_from else None
        if earlier is not None and not (where / "run.json").exists():
            for line in learn(name, earlier):
                print(f"  calibrated from {earlier}: {line}", flush=True)
        if not (where / "run.json").exists():
            run(name, SEEDS[name], where)
        report(name, where, args.replan)
    if args.results is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
