"""`pgrig durability --power-loss`: the cluster on the lossy filesystem loses what it
did not fsync after every crash. fsync = on loses nothing over several power
losses; fsync = off is caught at every one; synchronous_commit = off loses a
window of acknowledged commits, which is measured. Bad input is refused before
anything is created, and `pgrig clean` unmounts only pgrig's orphan mounts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import full_report, make_disk_dir
from pgrig import cli, lossyfs, proc
from pgrig.campaign import parse
from pgrig.durability import verifier
from pgrig.durability.model import POWER_LOSS
from pgrig.errors import UsageError
from pgrig.lossyfs import LossyMount, registry
from pgrig.runner import CampaignRunner
from pgrig.ui import Ui
from test_durability import leftovers, pgrig, stored_result

REASON = lossyfs.available()
needs_fuse = pytest.mark.skipif(REASON is not None, reason=f"no FUSE here: {REASON}")
QUICK = ["--interval", "0.6", "--clients", "3", "--profile", "stock", "--power-loss"]


def our_mounts(directory: Path) -> list[str]:
    text = Path("/proc/self/mountinfo").read_text()
    return [line for line in text.splitlines() if str(directory) in line]


# -- the real thing ------------------------------------------------------------------


@needs_fuse
def test_fsync_on_loses_nothing_over_power_losses(disk_dir: Path, tmp_path: Path) -> None:
    done = pgrig(
        "--target", disk_dir, "--results", tmp_path, *QUICK, "--cycles", "3",
        "--power-loss-mode", "random-subset", "--set", "synchronous_commit=on", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "3 power-loss cycles (random-subset" in said and "none lost" in said
    res = stored_result(tmp_path)
    assert res.crash_model == POWER_LOSS and res.power_loss_mode == "random-subset"
    assert len(res.crashes) == 3 and res.lost == 0 and res.ok and res.untested == ()
    # The power losses really cut something: pages written and not fsynced, of which
    # a random part was dropped and the rest written (a disk's cache in any order).
    cuts = [c.power_loss for c in res.crashes]
    assert all(cut is not None and cut.unsynced_pages > 0 for cut in cuts)
    assert sum(cut.persisted_pages for cut in cuts if cut) > 0
    final = {c.name: c.ok for c in res.checks}
    assert final[verifier.AMCHECK] is True and final[verifier.CHECKSUMS] is True
    report = full_report(tmp_path, "report-durability-*.md").read_text()
    assert "each followed by a power loss (random-subset)" in report
    assert "Unsynced pages dropped" in report
    assert leftovers(disk_dir) == [] and our_mounts(disk_dir) == []


@needs_fuse
def test_fsync_off_is_caught_at_every_power_loss(disk_dir: Path, tmp_path: Path) -> None:
    done = pgrig(
        "--target", disk_dir, "--results", tmp_path, *QUICK, "--cycles", "3",
        "--set", "fsync=off", "--set", "synchronous_commit=on", timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    if "did not come back" in done.stderr:  # also a detection: the cluster is unrecoverable
        kept = [p for p in disk_dir.glob("*-lossy/backing/*/server.log")]
        assert kept and str(kept[0]) in done.stderr
        return
    said = " ".join(done.stderr.split())
    assert "error: the durability check failed" in said and "lost per crash" in said
    res = stored_result(tmp_path)
    assert not res.ok and res.crash_model == POWER_LOSS and res.untested == ()
    # Every power loss took acknowledged commits (or the tables with them).
    assert len(res.crashes) >= 1
    assert all(c.loss is not None and c.loss.count > 0 for c in res.crashes)
    assert leftovers(disk_dir) == [] and our_mounts(disk_dir) == []


@needs_fuse
def test_a_torn_run_tears_a_data_page_full_page_writes_off_loses(
    disk_dir: Path, tmp_path: Path
) -> None:
    """Defect 19.17: with the profile's shared_buffers every dirty data page stayed in
    memory, only the WAL could tear, and full_page_writes = off PASSED. A torn run
    now gets the smallest shared_buffers (backends write data pages between
    checkpoints) and tears a data page: replay reads it half-written (the server
    stays down) or leaves it so (the checksum check reads it)."""
    done = pgrig(
        "--target", disk_dir, "--results", tmp_path, *QUICK, "--power-loss-mode", "torn",
        "--cycles", "2", "--set", "full_page_writes=off", "--set", "synchronous_commit=on",
        timeout=300,
    )  # fmt: skip
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, said
    assert "shared_buffers = 128kB" in said
    if "did not come back" in said:  # replay or every connection read the torn page
        torn = ("WAL redo", "invalid page", "checksum", "could not read block")
        assert any(word in said for word in torn), said
        return
    res = stored_result(tmp_path)
    assert not res.ok and res.untested == ()
    assert any(c.power_loss is not None and c.power_loss.tore_data for c in res.crashes)
    assert leftovers(disk_dir) == [] and our_mounts(disk_dir) == []


@needs_fuse
def test_synchronous_commit_off_window_is_measured(disk_dir: Path, tmp_path: Path) -> None:
    done = pgrig(
        "--target", disk_dir, "--results", tmp_path, *QUICK, "--cycles", "2",
        "--set", "synchronous_commit=off", timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    said = " ".join(done.stderr.split())
    assert "lost per crash" in said and "ms before a crash" in said
    res = stored_result(tmp_path)
    losses = [c.loss for c in res.crashes if c.loss is not None]
    assert losses, "WAL not yet flushed by the WAL writer is gone after a power loss"
    assert res.lost == sum(x.count for x in losses) + (
        res.final_loss.count if res.final_loss else 0
    )
    assert 0 < res.lost_window_ms < 10_000
    final = {c.name: c.ok for c in res.checks}
    # Losing the tail of the WAL is not corruption: what survived is consistent.
    assert final[verifier.INVARIANTS] and final[verifier.AMCHECK] and final[verifier.CHECKSUMS]


@needs_fuse
def test_clean_unmounts_only_pgrig_orphan_mounts(capsys: pytest.CaptureFixture[str]) -> None:
    base = make_disk_dir("pgrig-test-clean-lossy-")
    for name in ("backing", "backing2", "stranger"):
        (base / name).mkdir()
    orphan = LossyMount(base / "backing", base / "mnt")
    alive = LossyMount(base / "backing2", base / "mnt2")  # its pgrig (this test) still runs
    stranger = base / "stranger"  # a mount pgrig did not record
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", stranger], check=True)
    try:
        orphan.start()
        alive.start()
        with subprocess.Popen(["true"]) as gone:
            gone.wait(timeout=30)
        assert orphan.record is not None
        registry.write_record(replace(orphan.record, owner_pid=gone.pid))  # as if pgrig died
        cli.main(["clean"])
        out = capsys.readouterr().out
        assert f"unmounted the lossy filesystem on {orphan.mountpoint}" in out
        assert str(alive.mountpoint) not in out
        assert not orphan.mounted and alive.mounted and our_mounts(stranger) != []
    finally:
        orphan.unmount()
        alive.unmount()
        subprocess.run(["umount", stranger], check=False)
        subprocess.run(["rm", "-rf", base], check=False)


# A pgrig that mounted a lossy filesystem, then is killed (SIGKILL: no cleanup).
KILLED_PGRIG = """
import sys, time
from pathlib import Path
from pgrig.lossyfs import LossyMount
mount = LossyMount(Path(sys.argv[1]), Path(sys.argv[2]))
mount.start()
assert mount.record is not None
print(mount.record.run_dir, mount.record.fs_pid, mount.record.fsname, flush=True)
time.sleep(600)
"""


def serving(pid: int, fsname: str) -> Callable[[], bool]:
    """Whether ``pid`` is still the filesystem process of ``fsname``: a signal by a
    bare PID after its process is gone hits whoever took the number since."""

    def check() -> bool:
        try:
            return f"--fsname={fsname}".encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    return check


@needs_fuse
def test_clean_removes_a_lossy_run_directory_left_without_its_mount(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run directory in /tmp (marker, fs.log) whose mount record is gone - a killed
    pgrig's state directory removed with its test session, or another state
    directory: `pgrig clean` said "nothing to clean". It is left while the filesystem
    is mounted and its process runs, removed once they are gone; a look-alike
    without pgrig's marker is never touched."""
    base = make_disk_dir("pgrig-test-clean-rundir-")
    (base / "backing").mkdir()
    # The run directory in a temporary directory of this test's (TMPDIR, and this
    # process's ``tempfile``): a neighbour's run cleans the dead ones in /tmp at
    # its start, and once took this one between its filesystem's end and the check.
    private = Path(tempfile.mkdtemp(prefix="lossy-clean-test-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    lookalike = Path(tempfile.mkdtemp(prefix=registry.RUN_PREFIX))
    (lookalike / "fs.log").write_text("not pgrig's\n")
    lost_state = tmp_path / "lost-state"
    argv = [sys.executable, "-c", KILLED_PGRIG, str(base / "backing"), str(base / "mnt")]
    env = {**os.environ, "PGRIG_STATE_DIR": str(lost_state), "TMPDIR": str(private)}
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    fs_pid, fsname, mountpoint = 0, "", str(base / "mnt")
    try:
        assert child.stdout is not None
        run_dir_text, pid_text, fsname = child.stdout.readline().split()
        run_dir, fs_pid = Path(run_dir_text), int(pid_text)
        assert run_dir.parent == private  # out of the neighbours' cleans' way
        child.kill()
        child.wait(timeout=30)
        shutil.rmtree(lost_state)  # the mount's record goes with it
        assert sorted(p.name for p in run_dir.iterdir()) == [
            ".pgrig-lossyfs",
            ".pgrig-owner",
            "control.sock",
            "fs.log",
        ]
        cli.main(["clean"])
        assert str(run_dir) not in capsys.readouterr().out
        assert run_dir.is_dir(), "removed while mounted, its filesystem process running"
        proc.escalate(
            fs_pid, (signal.SIGTERM, signal.SIGKILL), grace=10, ours=serving(fs_pid, fsname)
        )
        assert not lossyfs.is_mounted(mountpoint, fsname)
        assert sorted(p.name for p in run_dir.iterdir()) == [
            ".pgrig-lossyfs",
            ".pgrig-owner",
            "fs.log",
        ]
        cli.main(["clean"])
        out = capsys.readouterr().out
        assert f"removed the lossy filesystem's run directory {run_dir}" in out
        assert not run_dir.exists()
        assert (lookalike / "fs.log").read_text() == "not pgrig's\n"
        assert str(lookalike) not in out
    finally:
        child.kill()
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
        if fs_pid:  # by then its PID may be another's (a neighbour test's pgbench)
            proc.escalate(
                fs_pid, (signal.SIGTERM, signal.SIGKILL), grace=10, ours=serving(fs_pid, fsname)
            )
            registry.lazy_unmount(mountpoint, fsname)
        shutil.rmtree(lookalike, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)


# -- refused before anything is created -------------------------------------------------


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    return int(exit_.value.code or 0), capsys.readouterr().err


def test_power_loss_without_fuse_is_refused(
    disk_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Simulated: /dev/fuse works on this machine, so its absence is mocked here.
    monkeypatch.setattr(
        lossyfs.mount, "available", lambda **_: "cannot open /dev/fuse: No such file (simulated)"
    )
    code, err = run_cli(
        ["durability", "--target", str(disk_dir), "--results", str(tmp_path), "--power-loss"],
        capsys,
    )
    assert code == 3
    assert "error: --power-loss needs the lossy filesystem" in err and "/dev/fuse" in err
    assert "hint:" in err and "fuse3" in err
    assert list(disk_dir.iterdir()) == [] and not (tmp_path / "results.sqlite").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--power-loss", "--crash", "kill-backend"], "--crash kill-backend with --power-loss"),
        (["--power-loss", "--dsn", "host=/tmp dbname=x", "--yes"], "--power-loss with --dsn"),
        (["--power-loss-mode", "sideways"], "'sideways' is not one of"),
    ],
)
def test_bad_power_loss_options_are_named(
    args: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_cli(["durability", "--results", str(tmp_path), *args], capsys)
    assert code == 2 and words in err, err


CAMPAIGN = """
[campaign]
name = "pl"
[[target]]
name = "t"
directory = "{dir}"
{target_extra}
[[workload]]
type = "durability"
power_loss = "{mode}"
{workload_extra}
"""


def test_campaign_key_power_loss(disk_dir: Path) -> None:
    def camp(mode: str = "torn", target_extra: str = "", workload_extra: str = "") -> str:
        return CAMPAIGN.format(
            dir=disk_dir, mode=mode, target_extra=target_extra, workload_extra=workload_extra
        )

    spec = parse(camp(), source="c.toml", base=disk_dir).workloads[0]
    assert spec.power_loss == "torn"  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="'sideways' is not one of drop, random-subset, torn"):
        parse(camp("sideways"), source="c.toml", base=disk_dir)
    mixed = camp(workload_extra='[[workload]]\ntype = "tpcb"\nname = "speed"')
    with pytest.raises(UsageError, match="where speed would be measured"):
        CampaignRunner(parse(mixed, source="c.toml", base=disk_dir), Ui(quiet=True)).preflight()
    wal = camp(target_extra=f'wal_directory = "{disk_dir}"')
    with pytest.raises(UsageError, match="cannot cover wal_directory"):
        CampaignRunner(parse(wal, source="c.toml", base=disk_dir), Ui(quiet=True)).preflight()
    # The FUSE daemon's I/O would escape a lab target's cgroup: refused, not ignored.
    capped = camp(target_extra='memory = "512MiB"')
    with pytest.raises(UsageError, match="cannot cover memory"):
        CampaignRunner(parse(capped, source="c.toml", base=disk_dir), Ui(quiet=True)).preflight()
    # The command line's checks apply to the campaign key, at parse, named by file and key.
    backend = camp(workload_extra='method = "kill-backend"')
    with pytest.raises(UsageError, match=r"c\.toml:\d+: .*power_loss.*kill-backend"):
        parse(backend, source="c.toml", base=disk_dir)


# -- the report, from a stored result --------------------------------------------------


def test_report_names_model_mode_cycles_and_losses() -> None:
    from pgrig.durability import report
    from pgrig.durability.model import Crash, Cut, DurabilityResult, Loss
    from pgrig.results import RunRecord, Study, to_dict

    def crash(n: int, lost: int) -> Crash:
        loss = (
            Loss(count=lost, window_ms=80.0 + n, acknowledged_in_window=lost + 5) if lost else None
        )
        cut = Cut(mode="drop", unsynced_pages=100 * n, persisted_pages=0, lost_files=0)
        return Crash(n, "immediate", "t", 1.0, 500, 3, 2.0, 1.5, loss=loss, power_loss=cut)

    res = DurabilityResult(
        method="immediate", clients=3, crashes_planned=3, interval_s=1.0, seed=1,
        server_version="15", settings={"synchronous_commit": "off"},
        crashes=(crash(1, 288), crash(2, 0), crash(3, 523)), acknowledged=1500, lost=811,
        failures=("lost",), crash_model=POWER_LOSS, power_loss_mode="drop",
    )  # fmt: skip
    assert res.lost_window_ms == 83.0
    record = RunRecord("s", "local/durability", "durability", "local", {}, "ok", "", "",
                       result=to_dict(res))  # fmt: skip
    section = report.section(Study("s", "durability", "/x", "", "finished"), [record])
    assert section is not None
    verdict = section.paragraphs[0]
    assert verdict.startswith("FAILED: 3 crashes by pg_ctl stop -m immediate, each followed by")
    assert "a power loss (drop)" in verdict
    assert "per crash: 288, 0, 523, each time within the last 83 ms" in verdict
    table = section.blocks[0]
    assert table.caption.startswith("Power-loss cycles")
    assert [r.cells[-1] for r in table.rows] == ["100", "200", "300", "600"]
    assert any("lossy filesystem" in note for note in table.notes)
