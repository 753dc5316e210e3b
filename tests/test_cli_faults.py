"""The real ``pgrig`` command end to end, faults during a study: a missing
tool, the server killed mid-run, Ctrl-C, kill -9 - each checked by exit code,
message and what is (not) left on disk. Apart from test_cli.py so that the two
test workers share them (``--dist loadfile`` keeps a file on one)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

import faultlog
import test_history
from conftest import full_report
from pgrig import proc
from test_cli import SPAWNED, only_study, pgrig, postmaster_of, recorded, spawn, tiny, wait_for
from test_history import Done

here = test_history.pgrig  # the fixture: `pgrig` in this process (cli.main)

# -- faults during a study ---------------------------------------------------


def test_fio_missing_is_skipped_and_the_rest_runs(disk_dir: Path) -> None:
    results = disk_dir / "r"
    no_fio = tiny(skip="fsync")
    env = dict(os.environ, PATH="/nonexistent")  # no fio anywhere
    done = pgrig(
        "run",
        "--target",
        disk_dir,
        "--results",
        results,
        "--fio-runtime",
        "1",
        "--fio-size",
        "16M",
        *no_fio,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    status, runs = only_study(results)
    assert status == "finished"
    fio_status, reason = runs["local/probe/fio/randwrite"]
    assert fio_status == "skipped" and "apt-get install fio" in (reason or "")
    assert runs["local/tpcb/s1/select-only/c1/d2/r1"][0] == "ok"
    report = full_report(results, "*.md").read_text()
    assert "skipped" in report and "apt-get install fio" in report
    assert not list(disk_dir.glob("pgrig-*")), "the throwaway cluster is removed"


def test_pgbench_failing_mid_run_is_recorded_and_the_study_goes_on(disk_dir: Path) -> None:
    results = disk_dir / "r"
    # Long enough for the killer to catch the first run on a loaded machine (1 s
    # into it, as the frozen-server test below catches its 6-s run); the second
    # run's length is what the test costs.
    args = tiny(clients="1,2", duration="6")
    child = spawn("run", "--target", disk_dir, "--results", results, *args)
    killed: list[int] = []

    def kill_server_during_first_run() -> None:
        def running_bench() -> bool:
            # Only this study's pgbench: other work on the machine may run pgbench too.
            pattern = "pgbench -n -M prepared -c 1 "
            done = subprocess.run(
                ["pgrep", "-P", str(child.pid), "-f", pattern], capture_output=True, timeout=10
            )
            return done.returncode == 0

        wait_for(running_bench, what="the first pgbench run")
        time.sleep(1.0)
        found = wait_for(lambda: postmaster_of(disk_dir), what="the study's server")
        os.kill(found[1], signal.SIGKILL)
        killed.append(found[1])

    killer = threading.Thread(target=kill_server_during_first_run)
    killer.start()
    out, err = child.communicate(timeout=300)
    killer.join(timeout=10)
    assert killed, "the server was never killed"
    # Finished with a failed step: exit code 6, "partial" (docs/exit-codes.md).
    assert child.returncode == 6, err
    status, runs = only_study(results)
    assert status == "finished"
    first_status, reason = runs["local/tpcb/s1/select-only/c1/d6/r1"]
    assert first_status == "failed"
    assert "pgbench" in (reason or "") and (
        "server" in (reason or "") or "connection" in (reason or "")
    )
    assert runs["local/tpcb/s1/select-only/c2/d6/r1"][0] == "ok", (
        f"the study must go on: {runs} {err}"
    )
    assert "restarting it" in err


def test_ctrl_c_stops_everything_and_keeps_finished_results(disk_dir: Path) -> None:
    results = disk_dir / "r"
    args = tiny(clients="1,2", duration="30")
    child = spawn("run", "--target", disk_dir, "--results", results, *args)
    wait_for(lambda: recorded(results, "pgbench_init"), what="the load to be recorded")
    time.sleep(2)
    found = postmaster_of(disk_dir)
    assert found is not None
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130
    assert "interrupted" in err
    status, runs = only_study(results)
    assert status == "interrupted"
    assert runs["local/tpcb/s1/init"][0] == "ok", "what finished is kept"
    assert "local/tpcb/s1/select-only/c2/d30/r1" not in runs
    wait_for(lambda: not proc.pid_alive(found[1]), timeout=15, what="the cluster to stop")
    assert not list(disk_dir.glob("pgrig-*")), "and removed"
    assert "report:" in out, "a report of what finished is still written"


def test_kill_9_leaves_an_orphan_that_the_next_run_removes(disk_dir: Path) -> None:
    results = disk_dir / "r"
    args = tiny(duration="60")
    child = spawn("run", "--target", disk_dir, "--results", results, *args)
    try:
        data, pid = wait_for(lambda: postmaster_of(disk_dir), what="the cluster to start")
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert proc.pid_alive(pid), "kill -9 leaves the server behind"
    done = pgrig(
        "run",
        "--target",
        disk_dir,
        "--results",
        results,
        "--skip",
        "fsync,fio,tpcb",
        "--timing-seconds",
        "1",
    )
    assert done.returncode == 0, done.stderr
    assert "orphan work directory" in done.stderr
    wait_for(lambda: not proc.pid_alive(pid), timeout=30, what="the orphan's server to stop")
    assert not data.parent.exists()
    # The orphan's pgbench, found by the full path of this test's work directory
    # (its log prefix): `pkill -f pgbench.*<the directory's name>` sent SIGTERM to
    # every pgbench of a quick study begun in the same second - another test's on
    # another worker, another suite's on this machine - which failed with -15.
    for pid in proc.processes_in(data.parent):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "pgbench":
                os.kill(pid, signal.SIGKILL)


def test_a_server_that_stops_answering_fails_its_run_in_seconds(disk_dir: Path) -> None:
    """SIGSTOP of the postmaster and all its children 1 s into a run: the monitor's
    heartbeat names it, the run is stopped and failed (not "ok" at 0 tps), and,
    the server continued, the study goes on."""
    results = disk_dir / "r"
    child = spawn(
        "run", "--target", disk_dir, "--results", results, *tiny(clients="1,2", duration="6")
    )
    noticed: list[float] = []

    def first_bench() -> bool:
        pattern = "pgbench -n -M prepared -c 1 "
        found = subprocess.run(
            ["pgrep", "-P", str(child.pid), "-f", pattern], capture_output=True, timeout=10
        )
        return found.returncode == 0

    def freeze_then_thaw() -> None:
        wait_for(first_bench, what="the first pgbench run")
        time.sleep(1.0)
        _, pid = wait_for(lambda: postmaster_of(disk_dir), what="the study's server")
        # The postmaster and its children (backends, checkpointer...: none fork further).
        listed = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=10
        )
        server = [pid, *map(int, listed.stdout.split())]
        for p in server:
            os.kill(p, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            wait_for(lambda: not first_bench(), timeout=60, what="pgrig to stop the frozen run")
            noticed.append(time.monotonic() - stopped)
        finally:
            for p in server:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGCONT)

    freezer = threading.Thread(target=freeze_then_thaw)
    freezer.start()
    out, err = child.communicate(timeout=300)
    freezer.join(timeout=70)
    runs = _hang_named(noticed, child, err, results, "local/tpcb/s1/select-only/c1/d6/r1")
    assert runs["local/tpcb/s1/select-only/c2/d6/r1"][0] == "ok", f"the study goes on: {err}"


def _hang_named(
    noticed: list[float], child: subprocess.Popen[str], err: str, results: Path, key: str
) -> dict[str, tuple[str, str | None]]:
    """What every hung-server test asserts: noticed within 10 s (printed), exit
    6 (partial), the step ``key`` failed naming the hang, no traceback."""
    assert noticed, err
    print(f"time to notice: {noticed[0]:.1f} s")
    assert noticed[0] <= 10.0
    assert child.returncode == 6, err
    _, runs = only_study(results)
    status, reason = runs[key]
    assert status == "failed" and re.search(
        r"the server at .* stopped answering for \d+ s", reason or ""
    ), (runs, err)
    assert "Traceback" not in err
    return runs


def test_a_server_that_stops_answering_during_the_load_is_named_in_seconds(
    disk_dir: Path,
) -> None:
    """SIGSTOP of the postmaster and its children while ``pgbench -i`` makes the
    tables or pgrig's loader copies the rows: outside measured runs no monitor
    samples, and the load failed only at its hour-long timeout (issue 33). The
    heartbeat (monitor.Pulse) names it within seconds; the load fails, the study
    ends partial, and nothing is left behind."""
    results = disk_dir / "r"
    child = spawn("run", "--target", disk_dir, "--results", results, *tiny(scale="10"))
    noticed: list[float] = []

    def init_runs() -> bool:
        found = subprocess.run(
            ["pgrep", "-P", str(child.pid), "-f", "pgbench -i"], capture_output=True, timeout=10
        )
        return found.returncode == 0

    def freeze_then_thaw() -> None:
        # At once: pgbench -i makes the tables in a moment, pgrig's loader then
        # copies the rows for 2-3 s; a freeze after both hit the next step.
        wait_for(init_runs, what="pgbench -i")
        _, pid = wait_for(lambda: postmaster_of(disk_dir), what="the study's server")
        listed = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=10
        )
        server = [pid, *map(int, listed.stdout.split())]
        for p in server:
            with contextlib.suppress(ProcessLookupError):  # a backend that just ended
                os.kill(p, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            wait_for(lambda: "stopped answering" in "".join(said), timeout=60, what="the fault")
            noticed.append(time.monotonic() - stopped)
        finally:
            for p in server:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGCONT)

    said: list[str] = []

    def read_stderr() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            said.append(line)

    reader = threading.Thread(target=read_stderr)
    freezer = threading.Thread(target=freeze_then_thaw)
    reader.start()
    freezer.start()
    try:
        child.wait(timeout=300)
    finally:
        freezer.join(timeout=70)
        reader.join(timeout=10)
    err = "".join(said)
    _hang_named(noticed, child, err, results, "local/tpcb/s10/init")
    assert "no data; skipping its runs" in err
    assert not list(disk_dir.glob("pgrig-*")), "the throwaway cluster is removed"


def test_a_client_that_stops_progressing_fails_its_run_in_seconds(disk_dir: Path) -> None:
    """SIGSTOP of the real pgbench 2 s into an 8-s run, SIGCONT 20 s later: its
    -P lines stop while the server answers every query, so the server's
    heartbeat sees nothing; the client's watch names it within 10 s and the run
    is failed (issue 40.2: it was recorded ok at a fraction of its tps, with
    pgbench's own elapsed time far past the planned -T). The study goes on; a
    campaign file (the quick study is not resumed), so the fault suite checks
    its resume too."""
    results = disk_dir / "r"
    campaign = disk_dir / "c.toml"
    campaign.write_text(
        f'[campaign]\nname = "hung"\n'
        f'[[target]]\nname = "local"\ndirectory = "{disk_dir}"\nprofile = "stock"\n'
        'set = { fsync = "off" }\n'
        "[probes]\ntiming = 1\nfio = false\nfsync = false\n"
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [1, 2]\nduration = 8\ncount = false\n"
    )
    child = spawn("run", campaign, "--results", results)
    noticed: list[float] = []
    said: list[str] = []

    def first_bench() -> int | None:
        found = subprocess.run(
            ["pgrep", "-P", str(child.pid), "-f", "pgbench -n -M prepared -c 1 "],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return int(found.stdout.split()[0]) if found.returncode == 0 else None

    ended_while_stopped: list[bool] = []

    def freeze_then_thaw() -> None:
        pid = wait_for(first_bench, what="the first pgbench run")
        time.sleep(2.0)
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            wait_for(lambda: "stopped progressing" in "".join(said), timeout=60, what="the stall")
            noticed.append(time.monotonic() - stopped)

            # Held stopped up to 20 s, but only until pgrig has ended and reaped
            # it (its SIGCONT after the SIGTERM): the hold was a fixed 20 s, the
            # test waiting it out after pgrig was done with the client.
            def gone() -> bool:
                return not Path(f"/proc/{pid}").exists()

            with contextlib.suppress(AssertionError):
                wait_for(gone, timeout=max(0.0, 20.0 - (time.monotonic() - stopped)))
            ended_while_stopped.append(gone())
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def read_stderr() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            said.append(line)

    reader = threading.Thread(target=read_stderr)
    freezer = threading.Thread(target=freeze_then_thaw)
    reader.start()
    freezer.start()
    try:
        child.wait(timeout=300)
    finally:
        freezer.join(timeout=70)
        reader.join(timeout=10)
    err = "".join(said)
    assert noticed, err
    print(f"time to notice: {noticed[0]:.1f} s")
    assert noticed[0] <= 10.0
    assert ended_while_stopped == [True], "pgrig waited out the stop (no SIGCONT of its own)"
    assert child.returncode == 6, err
    _, runs = only_study(results)
    status, reason = runs["local/tpcb/s1/select-only/c1/d8/r1"]
    assert status == "failed", (runs, err)
    assert re.search(r"the client pgbench .* stopped progressing", reason or ""), reason
    assert runs["local/tpcb/s1/select-only/c2/d8/r1"][0] == "ok", f"the study goes on: {err}"
    assert "Traceback" not in err
    faultlog.note(
        "hung client (SIGSTOP of pgbench 2 s into an 8-s run)", named_in_s=noticed[0],
        exit_code=child.returncode, named="the client pgbench on this machine",
        resume=faultlog.in_suite() and faultlog.resume([campaign], results),
    )  # fmt: skip


def test_a_backend_killed_mid_run_is_waited_for_before_the_next_step(disk_dir: Path) -> None:
    """kill -9 of one backend (what the OOM killer does): the postmaster lives and
    runs a crash recovery, refusing every connection meanwhile; the next steps
    failed one after the other with "the database system is in recovery mode"
    (issue 40.5). pgrig waits for the recovery, bounded: the next run is ok."""
    results = disk_dir / "r"
    child = spawn(
        "run", "--target", disk_dir, "--results", results, *tiny(clients="1,2", duration="4")
    )
    killed: list[int] = []

    def kill_a_backend_during_the_first_run() -> None:
        wait_for(
            lambda: subprocess.run(
                ["pgrep", "-P", str(child.pid), "-f", "pgbench -n -M prepared -c 1 "],
                capture_output=True, timeout=10,
            ).returncode == 0,
            what="the first pgbench run",
        )  # fmt: skip
        time.sleep(1.0)
        _, pid = wait_for(lambda: postmaster_of(disk_dir), what="the study's server")
        listed = subprocess.run(["pgrep", "-P", str(pid), "-f", "pgrig"], capture_output=True,
                                text=True, timeout=10)  # fmt: skip
        backend = int(listed.stdout.split()[0])
        os.kill(backend, signal.SIGKILL)
        killed.append(backend)

    killer = threading.Thread(target=kill_a_backend_during_the_first_run)
    killer.start()
    out, err = child.communicate(timeout=300)
    killer.join(timeout=10)
    assert killed, err
    assert "Traceback" not in err
    _, runs = only_study(results)
    assert runs["local/tpcb/s1/select-only/c1/d4/r1"][0] == "failed", runs
    later = {k: v for k, v in runs.items() if "/c2/" in k and "/monitor" not in k}
    assert later and all(status == "ok" for status, _ in later.values()), (later, err)
    # the killed run's own failure may quote the server's log ("... in recovery
    # mode"); no other step failed for it
    others = {
        k: v for k, v in runs.items() if not k.startswith("local/tpcb/s1/select-only/c1/d4/r1")
    }
    assert not [k for k, (_, why) in others.items() if "recovery mode" in (why or "")], runs
    assert "restarting it" not in err, "the postmaster lived: no restart"


def test_a_target_that_turns_read_only_mid_run_is_exit_6_and_clean_works_on_it(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch, here: Callable[..., Done]
) -> None:
    """ext4 with errors=remount-ro, an error triggered 1 s into the first run (the
    kernel's own trigger_fs_error): the teardown died in an EROFS traceback, exit
    1, and `pgrig clean` tracebacked on the read-only mount (issue 40.5). Now the
    run fails with the cause, the target's remaining steps are skipped with the
    reason said once (they were tried one by one, each with a restart that could
    not work), the other target goes on, the study ends partial (exit 6), the
    work directory is left said and registered, `pgrig clean` leaves it with the
    reason while the mount is read-only, then removes it once it is writable,
    and the resume runs the skipped steps. A loop device and a mount of this
    test's own, removed after."""
    if os.geteuid() != 0:
        pytest.skip("mounts a loop device")
    image, mnt, other = disk_dir / "fs.img", disk_dir / "mnt", disk_dir / "other"
    mnt.mkdir()
    other.mkdir(mode=0o777)
    other.chmod(0o777)  # the server's OS user makes its cluster there
    subprocess.run(["truncate", "-s", "400M", image], check=True, timeout=30)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True, timeout=60)
    env = dict(os.environ, PGRIG_STATE_DIR=str(disk_dir / "state"), COLUMNS="1000")
    # `pgrig clean` runs in this process (cli.main: nothing of it needs a process
    # of its own), with the run's state directory and width
    monkeypatch.setenv("PGRIG_STATE_DIR", env["PGRIG_STATE_DIR"])
    monkeypatch.setenv("COLUMNS", env["COLUMNS"])
    campaign = disk_dir / "c.toml"
    campaign.write_text(
        f'[campaign]\nname = "ro"\nmonitor = false\n'
        f'[[target]]\nname = "ro"\ndirectory = "{mnt}"\nprofile = "stock"\n'
        f'[[target]]\nname = "ok"\ndirectory = "{other}"\nprofile = "stock"\n'
        "[probes]\ntiming = false\nfio = false\nfsync = false\n"
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [1, 2]\nduration = 4\ncount = false\n"
    )
    results = disk_dir / "r"
    run = [sys.executable, "-m", "pgrig", "run", campaign, "--results", results]

    def mount(*options: str) -> None:
        subprocess.run(["mount", "-o", ",".join(("loop", *options)), image, mnt], check=True,
                       timeout=30)  # fmt: skip
        mnt.chmod(0o755)

    mount("errors=remount-ro")
    try:
        device = next(
            line.split()[0] for line in Path("/proc/mounts").read_text().splitlines()
            if line.split()[1] == str(mnt)
        )  # fmt: skip
        trigger = Path("/sys/fs/ext4") / Path(device).name / "trigger_fs_error"
        child = subprocess.Popen(
            run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        SPAWNED.append(child)
        wait_for(
            lambda: child.poll() is not None or subprocess.run(
                ["pgrep", "-P", str(child.pid), "-f", "pgbench -n -M"], capture_output=True,
                timeout=10).returncode == 0,
            what="the first pgbench run",
        )  # fmt: skip
        assert child.poll() is None, child.communicate()
        time.sleep(1.0)
        triggered = datetime.now(UTC)
        trigger.write_text("1")
        out, err = child.communicate(timeout=300)
        assert "Traceback" not in err, err
        assert child.returncode == 6, err
        assert "cannot remove the work directory" in err and "pgrig clean" in err
        _, runs = only_study(results)
        assert runs["ro/tpcb/s1/select-only/c1/d4/r1"][0] == "failed"
        # the rest of ro skipped, said once, neither tried nor recorded; ok goes on
        assert err.count("ro: skipped: the target's filesystem is read-only") == 1, err
        assert "could not restart" not in err and "ro: select-only -s 1 -c 2" not in err, err
        assert "ro/tpcb/s1/select-only/c2/d4/r1" not in runs, runs
        assert runs["ok/tpcb/s1/select-only/c2/d4/r1"][0] == "ok", runs
        assert re.search(r"ro: 2 steps skipped, its filesystem read-only", err), err
        clean = here("clean")
        assert clean.returncode == 0 and "Traceback" not in clean.stderr, clean.stderr
        assert "Read-only file system" in clean.stderr and "again" in clean.stderr
        # what it found, not a guess: pgrig lived to say why it left it
        said = "(study ro; its run could not remove it: Read-only file system)"
        assert said in " ".join(clean.stderr.split()), clean.stderr
        assert "killed" not in clean.stdout + clean.stderr, clean.stdout + clean.stderr
        assert list(mnt.glob("pgrig-*")), "left while read-only"
        subprocess.run(["umount", mnt], check=True, timeout=60)

        # mount -o loop reuses a loop device still attached to the image (the
        # kernel clears an auto-clear device after umount, late under load), and
        # it would come back read-only: detach this test's own and wait until
        # none is left, so the checked filesystem is mounted afresh
        def attached() -> list[str]:
            listed = subprocess.run(["losetup", "-j", str(image)], capture_output=True,
                                    text=True, timeout=30).stdout  # fmt: skip
            return [line.split(":")[0] for line in listed.splitlines()]

        for device in attached():
            subprocess.run(["losetup", "-d", device], capture_output=True, timeout=30)
        wait_for(lambda: not attached(), what="the image's loop device detached")
        subprocess.run(["e2fsck", "-fy", image], capture_output=True, timeout=120)
        mount()
        clean = here("clean")
        assert re.search(
            r"removed the orphan work directory \S+ of study ro \(its run could not remove it: "
            r"Read-only file system\)", clean.stdout
        ), clean.stdout + clean.stderr  # fmt: skip
        assert "killed" not in clean.stdout, clean.stdout
        assert not list(mnt.glob("pgrig-*"))
        again = subprocess.run(run, capture_output=True, text=True, timeout=300, env=env)
        # the exit code agrees with the store: the failed run is not retried unasked,
        # so the study still holds a failure (exit 0 said otherwise)
        assert again.returncode == 6, again.stderr
        assert "1 step failed in an earlier run, not retried" in again.stderr, again.stderr
        assert "--retry-failed" in again.stderr and "Traceback" not in again.stderr
        _, runs = only_study(results)
        assert runs["ro/tpcb/s1/select-only/c2/d4/r1"][0] == "ok", runs
        assert runs["ro/tpcb/s1/sizes/after-runs"][0] == "ok", runs
        assert runs["ro/tpcb/s1/select-only/c1/d4/r1"][0] == "failed", "not retried unasked"
        faultlog.note(
            "read-only target (ext4 errors=remount-ro, 1 s into a 4-s run)",
            named_in_s=faultlog.seconds_after(results, "ro/tpcb/s1/select-only/c1/d4/r1",
                                              triggered),
            exit_code=child.returncode, named=f"cannot write ...: Read-only file system ({mnt})",
            resume=faultlog.in_suite() and faultlog.resume([campaign], results, env),
        )  # fmt: skip
    finally:
        subprocess.run(["umount", mnt], capture_output=True, timeout=60)
