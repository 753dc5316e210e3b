"""Faults found in the harness itself (issue 11, part 2), each a test that failed
before its fix: interrupted steps run again on resume, SIGTERM is Ctrl-C,
dead studies are not "running", passwords stay off command lines and out of
messages, bad values are refused before initdb, and exit codes follow
docs/exit-codes.md."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import full_report
from pgrig import proc
from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.files import write_atomically
from pgrig.results import Study
from pgrig.store import Store
from pgrig.tools import pgbench
from test_cli import TINY, only_study, pgrig, postmaster_of, recorded, spawn, tiny, wait_for
from test_signals import _child_argv


def campaign_file(tmp_path: Path, target: Path, duration: int) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f"""
[campaign]
name = "faults"
monitor = false

[[target]]
name = "a"
directory = "{target}"
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
duration = {duration}
count = false
"""
    )
    return path


def test_an_interrupted_step_runs_again_on_resume(disk_dir: Path, tmp_path: Path) -> None:
    results = tmp_path / "r"
    # Interrupted as soon as its pgbench runs (4 s: the signal lands well inside);
    # the resume runs the step again whole.
    camp = campaign_file(tmp_path, disk_dir, 4)
    child = spawn("run", camp, "--results", results)
    wait_for(lambda: recorded(results, "pgbench_init"), what="the load")
    wait_for(_child_argv("pgbench", "-T"), what="the measured run")
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    status, runs = only_study(results)
    assert status == "interrupted"
    key = "a/tpcb/s1/select-only/c1/d4/r1"
    assert key not in runs, "an interrupted step leaves no record, so resume runs it"

    done = pgrig("run", camp, "--results", results, timeout=300)
    assert done.returncode == 0, done.stderr
    status, runs = only_study(results)
    assert status == "finished" and runs[key][0] == "ok"


def test_sigterm_stops_everything_like_ctrl_c(disk_dir: Path) -> None:
    results = disk_dir / "r"
    args = tiny(duration="30")
    child = spawn("run", "--target", disk_dir, "--results", results, *args)
    wait_for(lambda: recorded(results, "pgbench_init"), what="the load")
    wait_for(_child_argv("pgbench", "-T"), what="the measured run")
    found = postmaster_of(disk_dir)
    assert found is not None
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 143, err
    assert "interrupted" in err and "Traceback" not in err
    status, _ = only_study(results)
    assert status == "interrupted"
    wait_for(lambda: not proc.pid_alive(found[1]), timeout=15, what="the cluster to stop")
    assert not list(disk_dir.glob("pgrig-*")), "the throwaway cluster is removed"


def test_a_study_whose_pgrig_died_is_listed_as_interrupted(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    with Store.open(tmp_path / "results.sqlite") as st:
        for sid, pid in (("dead", gone.pid), ("alive", proc.os.getpid())):
            st.begin_study(
                Study(
                    id=sid,
                    name=sid,
                    target="x",
                    started_at="2026-11-23T00:00:00+00:00",
                    status="running",
                    params={"pid": pid},
                )
            )
    done = pgrig("list", "--results", tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split("\t")[:2] == ["study", "status"], "a header"
    assert {ln.split("\t")[0]: ln.split("\t")[1] for ln in lines[1:]} == {
        "dead": "interrupted",
        "alive": "running",
    }


def test_a_one_target_remote_study_whose_pgrig_died_is_interrupted_not_live(
    tmp_path: Path,
) -> None:
    """A one-target remote study takes its server host's environment; its
    hostname was read as the machine pgrig ran on, so a study whose pgrig died
    here stayed "running" for ever and its resume was refused ("is being run by
    pgrig process N"). The lab's hosts share this machine's hostname (network
    namespaces only), so the host's name is given to a real capture here; the
    study is begun as an older pgrig did (no controller in its params) and as
    pgrig does now."""
    from dataclasses import replace

    from pgrig import environment, resume

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    on_db1 = replace(environment.capture([tmp_path]), hostname="db1", host="db1")
    with Store.open(tmp_path / "results.sqlite") as st:
        for sid, more in (("older", {}), ("newer", {"controller": os.uname().nodename})):
            st.begin_study(
                Study(id=sid, name=sid, target="host db1", started_at="2026-11-23T00:00:00+00:00",
                      status="running", params={"pid": gone.pid, **more})
            )  # fmt: skip
            st.set_environment(sid, on_db1)
            assert not resume.study_live(st.study(sid)), sid
        # run from another machine (a shared store): never judged from here
        st.begin_study(
            Study(id="theirs", name="theirs", target="host db1", status="running",
                  started_at="2026-11-23T00:00:00+00:00",
                  params={"pid": gone.pid, "controller": "another-machine"})
        )  # fmt: skip
        assert resume.study_live(st.study("theirs"))
    done = pgrig("list", "--results", tmp_path)
    assert done.returncode == 0, done.stderr
    status = {ln.split("\t")[0]: ln.split("\t")[1] for ln in done.stdout.splitlines()[1:]}
    assert status == {"older": "interrupted", "newer": "interrupted", "theirs": "running"}


def test_passwords_stay_off_command_lines_and_out_of_messages(tmp_path: Path) -> None:
    conn = Conn.from_user("postgresql://bench:s3cret-pw@127.0.0.1:1/db")
    argv = pgbench.run_argv("/usr/bin", conn, pgbench.RunOptions(duration_s=1), None)
    assert not any("s3cret-pw" in str(a) for a in argv), argv
    # Only what the connection adds: an executor adds it to its host's environment
    # (this machine's PATH and HOME are no business of a load host's).
    assert conn.env() == {"PGPASSWORD": "s3cret-pw"}
    assert "password" not in " ".join(conn.args())
    # a store that cannot be reached is bad input (exit 2), as a directory given as one
    with pytest.raises(UsageError) as err:
        Store.open("postgresql://bench:s3cret-pw@127.0.0.1:1/db")
    assert "s3cret-pw" not in f"{err.value} {err.value.hint}"


def test_bad_set_values_are_refused_before_anything_is_created(disk_dir: Path) -> None:
    results = disk_dir / "r"
    done = pgrig(
        "run", "--target", disk_dir, "--results", results, *TINY,
        "--set", "shared_buffers=banana", "--set", "synchronous_commit=maybe",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert 'invalid value for parameter "shared_buffers": "banana"' in done.stderr
    assert "Available values: local, remote_write, remote_apply, on, off" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(disk_dir.iterdir()) == [], "refused before initdb"


def test_exit_codes_for_missing_things_are_usage_errors(tmp_path: Path) -> None:
    missing = pgrig("run", "--target", tmp_path / "nope", "--results", tmp_path, *TINY)
    assert missing.returncode == 2 and "target directory" in missing.stderr
    ts = pgrig(
        "run", "--target", tmp_path, "--results", tmp_path, *TINY,
        "--tablespace", tmp_path / "no-ts",
    )  # fmt: skip
    assert ts.returncode == 2, ts.stderr
    assert "tablespace directory" in ts.stderr and "--tablespace" in ts.stderr
    Store.open(tmp_path / "results.sqlite").close()
    study = pgrig("report", "no-such-study", "--results", tmp_path)
    assert study.returncode == 2 and "no study 'no-such-study'" in study.stderr


def test_state_files_are_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "pgrig.conf"
    write_atomically(target, "a = 1\n", mode=0o600)
    write_atomically(target, "a = 2\n", mode=0o600)
    assert target.read_text() == "a = 2\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["pgrig.conf"], "no temporary file left"


def test_a_finished_durability_check_is_recorded_even_if_cleanup_fails(
    disk_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cleanup that fails cannot be provoked for real without breaking the
    # machine: Cluster.destroy is replaced by one that raises (after the
    # real stop), and put back to remove the cluster at the end.
    from pgrig.cluster.server import Cluster
    from pgrig.commands.durability_study import Options, execute
    from pgrig.durability.driver import DurabilityPlan
    from pgrig.errors import ClusterError
    from pgrig.ui import Ui

    real_destroy = Cluster.destroy
    left: list[Cluster] = []

    def failing_destroy(self: Cluster, said: Callable[[str], None] | None = None) -> None:
        self.stop(said=said)
        left.append(self)
        raise ClusterError("cannot remove the work directory: device busy (simulated)")

    monkeypatch.setattr(Cluster, "destroy", failing_destroy)
    opts = Options(
        plan=DurabilityPlan(method="immediate", crashes=1, clients=2, interval_s=0.5),
        target=disk_dir,
        profile="stock",
    )
    try:
        with Store.open(tmp_path / "results.sqlite") as st, pytest.raises(ClusterError):
            execute(opts, Ui(quiet=True), st, tmp_path)
        with Store.open(tmp_path / "results.sqlite") as st:
            (study,) = st.studies()
            (record,) = st.runs(study.id)
        assert record.kind == "durability" and record.status == "ok"
        assert study.status != "running"
        assert full_report(tmp_path, "report-durability-*.md"), "the report is written"
    finally:
        for cluster in left:
            real_destroy(cluster)


def test_retry_failed_runs_a_failed_step_once_and_keeps_its_failure(
    disk_dir: Path, tmp_path: Path
) -> None:
    results = tmp_path / "r"
    camp = campaign_file(tmp_path, disk_dir, 3)
    child = spawn("run", camp, "--results", results)

    def measured_pgbench() -> list[int]:
        found = subprocess.run(
            ["pgrep", "-P", str(child.pid), "-f", "pgbench -n .* -T "],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return [int(p) for p in found.stdout.split()]

    for pid in wait_for(measured_pgbench, what="the measured run"):
        os.kill(pid, signal.SIGKILL)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 6, err
    key = "a/tpcb/s1/select-only/c1/d3/r1"
    _, runs = only_study(results)
    assert runs[key][0] == "failed"
    failure = runs[key][1]

    again = pgrig("run", camp, "--results", results, timeout=300)
    assert again.returncode == 6, "the study still holds a failure: " + again.stderr
    assert "1 step failed in an earlier run, not retried" in again.stderr
    assert "1 failed step of faults is not retried" in again.stderr
    assert f"`pgrig run {camp} --results {results} --retry-failed` runs it once more" in (
        " ".join(again.stderr.split())
    )
    assert only_study(results)[1][key][0] == "failed", "a plain resume leaves it"

    retried = pgrig("run", camp, "--results", results, "--retry-failed", timeout=300)
    assert retried.returncode == 0, retried.stderr
    _, runs = only_study(results)
    assert runs[key][0] == "ok", "run once more, recorded once"
    assert runs[f"{key}/failed-1"] == ("failed", failure), "its earlier failure kept"
    assert sorted(runs) == sorted([*runs_before_retry(runs, key), key, f"{key}/failed-1"])

    twice = pgrig("run", camp, "--results", results, "--retry-failed", timeout=300)
    assert twice.returncode == 0 and "nothing to do" in twice.stderr, twice.stderr
    assert only_study(results)[1] == runs, "nothing failed: nothing run again"


def runs_before_retry(runs: dict[str, tuple[str, str | None]], key: str) -> list[str]:
    return [k for k in runs if not k.startswith(key)]
