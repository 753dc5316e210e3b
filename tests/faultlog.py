"""What a fault test tells the fault suite (bench/faults.py), which runs it with
``PGRIG_FAULT_LOG`` naming a file: how long pgrig took to name the fault, its
exit code, what it named, that the store held nothing false (the test's own
assertions, passed when ``note`` is reached), and - the suite only, as it costs
a pgrig run more - whether a resume ran exactly what the fault cost.

Outside the suite ``note`` does nothing and ``resume`` is not run: the tests
stay as fast as they were.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path

from pgrig.store import Store

LOG_VAR = "PGRIG_FAULT_LOG"


def in_suite() -> bool:
    return bool(os.environ.get(LOG_VAR))


def note(
    fault: str, *, named_in_s: float | None, exit_code: int, named: str, **more: object
) -> None:
    """One line of the suite's table (a no-op outside the suite)."""
    path = os.environ.get(LOG_VAR)
    if not path:
        return
    row = {"fault": fault, "named_in_s": named_in_s, "exit": exit_code, "named": named, **more}
    with Path(path).open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def _records(results: Path) -> dict[str, tuple[str, str]]:
    """Every record of the store's one study: key -> (status, finished_at)."""
    with Store.open(results / "results.sqlite") as st:
        (study,) = st.studies()
        return {r.key: (r.status, r.finished_at) for r in st.runs(study.id)}


def resume(
    args: list[str | Path], results: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> str:
    """``pgrig run ARGS --retry-failed`` after a fault: exact when every record
    the fault left is kept as it was (none run again but the failed ones), each
    failed step ran once more (its failure kept as ``KEY/failed-1``) and nothing
    else was recorded but what belongs to those steps (their monitor, a skipped
    step's runs). Returns 'exact (N failed step(s) run again: M ok)'; raises
    AssertionError naming what was not."""
    import subprocess

    before = _records(results)
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "run", *map(str, args), "--results", str(results),
         "--retry-failed"],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    if "the quick study is not resumed" in done.stderr:  # a study without a campaign file
        assert done.returncode == 2 and _records(results) == before, done.stderr
        return "n/a: the quick study is not resumed (refused, exit 2, nothing recorded)"
    after = _records(results)
    failed = [k for k, (status, _) in before.items() if status == "failed"]
    for key, (status, finished) in before.items():
        # a failed step and what is below it move aside (resume.set_aside); a
        # step skipped for the failed one may run now
        if status == "skipped" or any(key == f or key.startswith(f"{f}/") for f in failed):
            continue
        assert after.get(key) == (status, finished), f"{key} recorded again on resume"
    for key in failed:
        if "/failed-" in key:
            continue
        assert key in after and f"{key}/failed-1" in after, (
            f"{key} not run once more: {done.stderr[-2000:]}"
        )
        assert f"{key}/failed-2" not in after, f"{key} run twice on resume"
    grown = set(after) - set(before)
    stray = [
        k for k in grown
        if not any(k.startswith(f) for f in failed)
        and not any(k.startswith(s) for s, (st, _) in before.items() if st == "skipped")
    ]  # fmt: skip
    assert not stray, f"recorded on resume but not a failed step's: {stray}"
    ok = sum(1 for k in failed if "/failed-" not in k and after[k][0] == "ok")
    retried = len([k for k in failed if "/failed-" not in k])
    return f"exact ({retried} failed step(s) run again: {ok} ok; exit {done.returncode})"


def seconds_after(results: Path, key: str, moment: datetime | None = None) -> float:
    """When the record ``key`` was written, in seconds after ``moment`` (aware,
    UTC; None: the step's own start): how long pgrig took to name a fault that
    failed that step (records keep whole seconds: up to 1 s early)."""
    with Store.open(results / "results.sqlite") as st:
        (study,) = st.studies()
        (rec,) = [r for r in st.runs(study.id) if r.key == key]
    since = moment or datetime.fromisoformat(rec.started_at)
    return (datetime.fromisoformat(rec.finished_at) - since).total_seconds()
