"""``cpus = N``: the server and its clients on the first N CPUs (a cpuset cgroup
each), seed 000's 26 against 52 cores as 1 against 2 here."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from disturbance import ATTEMPTS, study_disturbance, undisturbed
from pgrig.storage import cpuset
from pgrig.store import Store

needs_two = pytest.mark.skipif(
    os.geteuid() != 0 or len(cpuset.available()) < 2, reason="needs root and 2 CPUs"
)


@needs_two
@pytest.mark.exclusive  # it judges CPU shares: alone, after the parallel part
def test_a_one_cpu_target_runs_cpu_bound_select_only_at_most_0_6x_the_two_cpu_one(
    disk_dir: Path,
) -> None:
    """Judged only on a study whose runs pgrig's monitor saw undisturbed: beside
    another process's CPU load the ratio was 1.04 (issue 41), alone 0.52."""
    camp = disk_dir / "cpus.toml"
    camp.write_text(
        f'[campaign]\nname = "cpus"\nrepeat = 3\nmonitor = true\n'
        "[probes]\ntiming = false\nfsync = false\nfio = false\n"
        f'[[target]]\nname = "two"\ndirectory = "{disk_dir}"\n'
        f'[[target]]\nname = "one"\ndirectory = "{disk_dir}"\ncpus = 1\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [2]\nduration = 3\n"
    )
    # 3-s runs: at 2 s (session 17) a quiet fresh clone (ci24) took 77 s over
    # repeated attempts where 3-s runs had taken 31 s in one - a second of
    # another process's work is half of a 2-s run, and one run of six marked
    # disturbed repeats the study.
    attempts = iter(range(ATTEMPTS))

    def study() -> Path:
        out = disk_dir / f"r{next(attempts)}"
        done = subprocess.run(
            [sys.executable, "-m", "pgrig", "run", str(camp), "--results", str(out)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return out / "results.sqlite"

    results = undisturbed(study, study_disturbance)
    with Store.open(results) as store:
        (study_,) = store.studies()
        runs = [r for r in store.runs(study_.id) if r.kind == "pgbench_run"]
    tps = {
        t: statistics.median(r.result["tps"] for r in runs if r.target == t and r.status == "ok")
        for t in ("one", "two")
    }
    print(f"select-only, 2 clients: 1 CPU {tps['one']:,.0f} tps, 2 CPUs {tps['two']:,.0f} tps, "
          f"ratio {tps['one'] / tps['two']:.2f}")  # fmt: skip
    assert tps["one"] <= 0.6 * tps["two"], tps
    report = (results.parent / "report-cpus.md").read_text()
    assert "1 CPU (cpuset: the server and its clients)" in report


def test_cpus_beyond_the_machine_are_refused_before_anything_runs(tmp_path: Path) -> None:
    camp = tmp_path / "c.toml"
    camp.write_text(
        f'[campaign]\nname = "c"\n[[target]]\nname = "t"\ndirectory = "{tmp_path}"\n'
        f"cpus = {len(cpuset.available()) + 1}\n"
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nclients = [1]\nduration = 1\n'
    )
    done = subprocess.run([sys.executable, "-m", "pgrig", "plan", str(camp)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "gives pgrig" in done.stderr and "cpus = 1 to" in done.stderr
    assert "Traceback" not in done.stderr
