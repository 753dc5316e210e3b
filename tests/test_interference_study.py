"""Issue 10's end-to-end check: a tiny study beside a CPU hog of the test's
own. Every measured run is marked disturbed and names the hog; no verdict
blames the server; the hog's runs do not count towards a confidence interval.
(The quiet-machine side lives in test_monitor_interference.py: on a shared
machine "quiet" cannot be promised, so it checks that the hog's name is absent
once the hog is gone.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import full_report
from disturbance import quiet_first
from pgrig import campaign, monitor, registry
from pgrig.store import Store
from test_cli import recorded, spawn, wait_for

# It loads the machine on purpose: alone, after the parallel part.
pytestmark = pytest.mark.exclusive

HOG = "burncpu"  # a copy of yes(1) under a name nothing else has


@pytest.fixture
def hog(tmp_path: Path) -> Iterator[Callable[[], None]]:
    """Starts the hogs when called: once the study's load is in, so that its
    initdb and load do not run at half speed beside them (only the measured
    runs are judged; the study's start took ~10 s longer beside the hogs)."""
    quiet_first()  # another session's load could outrank the hog among the named
    binary = tmp_path / HOG
    shutil.copy("/usr/bin/yes", binary)
    hogs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        hogs.extend(
            subprocess.Popen([binary], stdout=subprocess.DEVNULL)
            for _ in range(os.cpu_count() or 2)
        )

    try:
        yield start
    finally:
        for p in hogs:
            p.kill()
            p.wait(timeout=10)


def test_runs_beside_a_cpu_hog_are_disturbed_and_name_it(
    hog: Callable[[], None], disk_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "hog.toml"
    path.write_text(
        f"""
[campaign]
name = "beside-a-hog"
repeat = {{ until_ci_pct = 1000, min = 2, max = 3 }}

[[target]]
name = "a"
directory = "{disk_dir}"
profile = "stock"

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "tpcb"
scales = [1]
modes = ["select-only"]
clients = [1]
duration = 3
count = false
"""
    )
    camp = campaign.load(path)
    results = tmp_path / "results"
    # pgrig in a process of its own: the hog must not be pgrig's descendant
    # (pgrig's own processes are attributed to pgrig, not to "others").
    child = spawn("run", path, "--results", results)
    # the hogs from the end of the load: before the first measured run (its
    # CHECKPOINT and the tables' sizes come first)
    wait_for(lambda: child.poll() is not None or recorded(results, "pgbench_init"),
             timeout=300, what="the study's load")  # fmt: skip
    hog()
    stdout, stderr = child.communicate(timeout=600)
    done = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    assert done.returncode == 0, done.stderr
    assert "disturbed by other work" in done.stderr
    # The last word on the console, and the first of the report: who else ran.
    # (rich wraps the console's lines at 80 columns when it is not a terminal)
    closing = " ".join(done.stderr[done.stderr.rindex("warning:") :].split())
    assert "3 of 3 measured runs shared the machine with other work" in closing, closing
    assert HOG in closing
    md = full_report(results, "report-*.md")
    summary = md.read_text()[: md.read_text().index("## Environment")]
    assert summary.index("3 of 3 measured runs shared the machine") < summary.index("| Test")
    assert "⚠ 3 of 3 runs disturbed by other work" in summary
    with Store.open(results / "results.sqlite") as st:
        records = st.runs(camp.name)
    monitors = [registry.typed_result(r) for r in records if r.kind == "monitor"]
    runs = [r for r in records if r.kind == "pgbench_run"]
    # A 1000% interval holds after 2 runs - unless the runs do not count.
    assert len(runs) == 3, "disturbed runs do not count: the repeats ran to max"
    assert monitors and all(monitor.is_disturbed(m) for m in monitors)
    for m in monitors:
        assert HOG in [p.name for p in m.disturbed.top], m.disturbed.summary
        assert m.verdict.cause != "cpu", m.verdict.summary
