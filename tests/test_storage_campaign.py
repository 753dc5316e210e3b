"""The storage lab as a campaign target kind, end to end through ``pgrig run``:
filesystems built, used by a tiny pgbench and removed; probes under the I/O
cap; and the faults of issue 12 ("Bad input and faults"), each checked by exit
code, message, what was recorded and what is (not) left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import faultlog
import test_history
from conftest import full_report, make_disk_dir
from pgrig import campaign, lifecycle, proc, registry, storage
from pgrig.cluster import workdir
from pgrig.errors import DiskSpaceError, UsageError
from pgrig.registry.target import Demands
from pgrig.runner import run_campaign
from pgrig.storage import devices, loopfs, state
from pgrig.storage.errors import OptionRefused, StorageError
from pgrig.storage.nativefs import Caps
from pgrig.store import Store
from pgrig.ui import Ui
from test_history import Done

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and cgroups need root")

TINY_TPCB = """
[[workload]]
type = "tpcb"
scales = [1]
modes = ["select-only"]
clients = [1]
duration = 2
count = false
"""
STOCK = 'profile = "stock"\n[target.set]\nfsync = "off"\n'
NO_PROBES = "[probes]\ntiming = false\nfio = false\nfsync = false\n"


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_disk_dir("pgrig-test-labcamp-")
    yield path
    # Leftovers are a failure the test itself reports; then undo what a failed
    # test left - from this session's own registry (conftest isolates it), so
    # nothing of anyone else's is touched.
    workdir.clean_orphans()
    storage.clean()
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def write(base: Path, body: str) -> Path:
    path = base / "c.toml"
    path.write_text(textwrap.dedent(body))
    return path


_in_process = test_history.pgrig  # the fixture: `pgrig` in this process (cli.main)


@pytest.fixture
def here(_in_process: Callable[..., Done], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Done]:
    """`pgrig` in this process where the test needs no process of its own (a
    refusal, `pgrig clean`): a start costs ~1.2 s of CPU. As wide as ``pgrig``."""
    monkeypatch.setenv("COLUMNS", "1000")
    return _in_process


def pgrig(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgrig", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, COLUMNS="1000"),  # one message, one line: no wrapped paths
    )


def runs(results: Path) -> dict[str, tuple[str, str | None, dict[str, object] | None]]:
    with Store.open(results / "results.sqlite") as store:
        (study,) = store.studies()
        return {r.key: (r.status, r.reason, r.result) for r in store.runs(study.id)}


def assert_nothing_left(base: Path, keep: tuple[str, ...] = ("c.toml", "r")) -> None:
    where = str(base.resolve())
    assert devices.mounts_under(where) == [], "a mount is left"
    loops = {d: f for d, f in devices.loop_backing_files().items() if f.startswith(where)}
    assert loops == {}, f"loop devices left: {loops}"
    assert sorted(p.name for p in base.iterdir() if p.name not in keep) == []
    assert state.orphans() == [] and state.load_all() == []


@dataclass(frozen=True)
class Built:
    """One finished study of several lab targets that the tests below only read."""

    base: Path
    done: subprocess.CompletedProcess[str]
    recorded: dict[str, tuple[str, str | None, dict[str, object] | None]]
    report: str


# 1-s runs in the shared study: its tests read records, mounts and the memory
# cgroup's figures, not a rate (four targets: 4 s less than TINY_TPCB's 2 s)
BUILT_TPCB = TINY_TPCB.replace("duration = 2", "duration = 1")


@pytest.fixture(scope="module")
def built() -> Iterator[Built]:
    """Four targets in one study, each test reading its own: an XFS and an ext4
    with their mkfs and mount options; a plain data directory with its tables and
    indexes on an XFS and an ext4 the lab builds (seed 004's two tablespace
    disks); and a 64 MiB memory cgroup. Each was a study of its own (three
    `pgrig run`s), and none changes what another target records. The 64 MiB
    target asks shared_buffers=16MB: the stock 128MB, as `pgbench -i` touches
    it, is shared memory its cgroup cannot reclaim (no swap), and beside a
    heavier neighbour's I/O, where the page cache is slow to write back, the
    kernel OOM-killed the load (a fresh clone at six workers, ci10)."""
    base = make_disk_dir("pgrig-test-labcamp-")
    data = base / "d"
    data.mkdir(mode=0o755)
    try:
        path = write(
            base,
            f"""
            [campaign]
            name = "fs"
            monitor = false

            [[target]]
            name = "xfs"
            fs = "xfs"
            size = "320MiB"
            base = "{base}"
            mkfs = ["-d", "agcount=4"]
            mount = "noatime,nodiratime"
            log_size = "64MiB"
            {STOCK}
            [[target]]
            name = "ext4"
            fs = "ext4"
            size = "320MiB"
            base = "{base}"
            mkfs = ["-E", "stride=2,stripe-width=6"]
            mount = "noatime,data=writeback"
            {STOCK}
            [[target]]
            name = "pg"
            directory = "{data}"
            tablespace = {{ fs = "xfs", size = "320MiB", base = "{base}", mount = "noatime" }}
            index_tablespace = {{ fs = "ext4", size = "320MiB", base = "{base}" }}
            {STOCK}
            [[target]]
            name = "small"
            directory = "{base}"
            memory = "64MiB"
            {STOCK}shared_buffers = "16MB"
            {NO_PROBES}
            {BUILT_TPCB}
            """,
        )
        done = pgrig("run", path, "--results", base / "r")
        assert done.returncode == 0, done.stderr
        yield Built(base, done, runs(base / "r"), full_report(base / "r").read_text())
    finally:
        workdir.clean_orphans()
        storage.clean()
        subprocess.run(["rm", "-rf", "--one-file-system", str(base)], check=False)


def test_xfs_and_ext4_targets_are_built_used_and_removed(built: Built) -> None:
    recorded = built.recorded
    for name, fstype in (("xfs", "xfs"), ("ext4", "ext4")):
        status, reason, result = recorded[f"{name}/lab"]
        assert status == "ok", reason
        assert result is not None and result["filesystem"]["fstype"] == fstype
        assert recorded[f"{name}/tpcb/s1/select-only/c1/d1/r1"][0] == "ok"
    xfs_fs = recorded["xfs/lab"][2]["filesystem"]  # type: ignore[index]
    assert xfs_fs["log_device"] and "agcount=4" in xfs_fs["mkfs_argv"]
    assert "data=writeback" in recorded["ext4/lab"][2]["filesystem"]["mount_options"]  # type: ignore[index]
    shown = (
        "loop-backed emulation on",
        "Mount options in effect",
        "/proc/self/mountinfo",
        "xfs_info: ",
        "dumpe2fs -h: ",
        "Not captured: a loop device",
        "pgrig audit: ",
    )
    for text in shown:
        assert text in built.report, text
    assert_nothing_left(built.base, keep=("c.toml", "r", "d"))


def test_pgrig_run_fs_builds_the_quick_studys_target(base: Path) -> None:
    done = pgrig(
        "run", "--fs", "ext4", "--fs-size", "320MiB", "--mount", "noatime", "--target", base,
        "--results", base / "r", "--skip", "timing,fio", "--fsync-seconds", "1", "--fsync-repeat",
        "1", "--repeat", "1", "--scale", "1",
        "--clients", "1", "--duration", "2", "--modes", "select-only", "--no-count",
        "--profile", "stock", "--no-monitor",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    recorded = runs(base / "r")
    assert recorded["local/lab"][0] == "ok"
    assert recorded["local/probe/pg_test_fsync"][0] == "ok"
    with Store.open(base / "r" / "results.sqlite") as store:
        (study,) = store.studies()
        (fsync,) = [r for r in store.runs(study.id) if r.kind == "pg_test_fsync"]
    assert str(fsync.params["directory"]).endswith("/mnt/pgrig-data"), "on the new filesystem"
    assert recorded["local/tpcb/s1/select-only/c1/d2/r1"][0] == "ok"
    assert_nothing_left(base, keep=("r",))


def test_keep_keeps_the_filesystem_mounted_and_says_how_to_remove_it(
    base: Path, here: Callable[..., Done]
) -> None:
    done = pgrig(
        "run", "--fs", "ext4", "--fs-size", "320MiB", "--target", base, "--results", base / "r",
        "--skip", "timing,fsync,fio,tpcb", "--keep",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    where = str(base.resolve())
    (mountpoint,) = devices.mounts_under(where)
    assert f"kept the filesystem target {mountpoint}; remove it with: umount {mountpoint}" in (
        done.stderr
    )
    assert state.load_all() == [], "kept: out of the registry, so no pgrig clean removes it"
    assert here("clean").returncode == 0 and devices.mounts_under(where) == [mountpoint]
    # the user removes it with the commands pgrig printed
    line = done.stderr[done.stderr.index("remove it with: ") :].splitlines()[0]
    for command in line.removeprefix("remove it with: ").split("; "):
        subprocess.run(command.split(), check=True, timeout=60)
    assert_nothing_left(base, keep=("r",))


def test_lab_options_need_fs(here: Callable[..., Done]) -> None:
    done = here("run", "--mkfs", "-K", "--target", "/var/tmp")
    assert done.returncode == UsageError.exit_code
    assert "--mkfs needs --fs" in done.stderr


def test_probes_run_under_the_cap(base: Path) -> None:
    path = write(
        base,
        f"""
        [campaign]
        name = "cap"
        [[target]]
        name = "capped"
        directory = "{base}"
        iops = 400
        [probes]
        timing = false
        fsync = false
        fio = {{ patterns = ["randread"], size = "32M", runtime = 3 }}
        """,
    )
    done = pgrig("run", path, "--results", base / "r")
    assert done.returncode == 0, done.stderr
    recorded = runs(base / "r")
    status, _, result = recorded["capped/probe/fio/randread"]
    assert status == "ok" and result is not None
    # This disk does tens of thousands uncapped: at most the cap shows fio ran in
    # the target's cgroup. How close it gets from below depends on the machine's
    # load (other suites share it); test_storage_throttle holds the caps to 10%.
    assert 0 < result["iops"] <= 400 * 1.1, result["iops"]
    assert "400 IOPS" in full_report(base / "r").read_text()
    assert_nothing_left(base)


def test_size_larger_than_the_base_is_refused_before_anything_is_created(
    base: Path, here: Callable[..., Done]
) -> None:
    path = write(
        base,
        f"""
        [campaign]
        name = "big"
        [[target]]
        name = "huge"
        fs = "xfs"
        size = "100TiB"
        base = "{base}"
        """,
    )
    done = here("run", path, "--results", base / "r")
    assert done.returncode == DiskSpaceError.exit_code, done.stderr
    assert f"not enough free disk in {base}" in done.stderr
    assert "filesystem target(s) huge" in done.stderr and "hint: lower the size" in done.stderr
    assert_nothing_left(base, keep=("c.toml",))


def test_missing_tools_skip_that_target_and_the_rest_runs(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Uninstalling xfsprogs or util-linux is not an option on a shared machine:
    # hide every system tool instead (pgrig looks in PATH, then in SBIN).
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(devices, "SBIN", ())
    camp = campaign.parse(
        textwrap.dedent(
            f"""
            [campaign]
            name = "tools"
            [[target]]
            name = "xfs"
            fs = "xfs"
            size = "320MiB"
            base = "{base}"
            [[target]]
            name = "plain"
            directory = "{base}"
            [probes]
            timing = 1
            fsync = false
            fio = false
            """
        ),
        source="c.toml",
        base=base,
    )
    run_campaign(camp, Ui(quiet=True), results=base / "r", store=base / "r" / "results.sqlite",
                 yes=False, keep=False)  # fmt: skip
    recorded = runs(base / "r")
    status, reason, _ = recorded["xfs/lab"]
    assert status == "skipped" and "is not installed" in (reason or "")
    assert "apt-get install" in (reason or "")
    assert recorded["plain/probe/pg_test_timing"][0] == "ok"
    assert "xfs/probe/pg_test_timing" not in recorded
    report = full_report(base / "r").read_text()
    assert "not built: " in report and "apt-get install" in report
    assert_nothing_left(base)


def test_no_target_left_is_an_error_not_a_traceback(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no mkfs: the only target cannot be built
    monkeypatch.setattr(devices, "SBIN", ())
    camp = campaign.parse(
        f'[campaign]\nname = "none"\n[[target]]\nname = "xfs"\nfs = "xfs"\nsize = "320MiB"\n'
        f'base = "{base}"\n[probes]\ntiming = 1\nfsync = false\nfio = false\n',
        source="c.toml",
        base=base,
    )
    with pytest.raises(StorageError, match="no target is left to study"):
        run_campaign(camp, Ui(quiet=True), results=base / "r",
                     store=base / "r" / "results.sqlite", yes=False, keep=False)  # fmt: skip
    assert runs(base / "r")["xfs/lab"][0] == "skipped"
    assert_nothing_left(base)


def test_dsn_with_lab_options_is_refused(base: Path, here: Callable[..., Done]) -> None:
    done = here("run", "--dsn", "host=/nonexistent", "--memory", "512MiB", "--target", base)
    assert done.returncode == 2 and "--dsn with --fs/--disk/--memory" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def refused_xfs(base: Path, more: str = "") -> str:
    """A campaign whose XFS target asks for nobarrier (gone from XFS since 4.19)."""
    return (
        f'[campaign]\nname = "refused"\n[[target]]\nname = "xfs"\nfs = "xfs"\n'
        f'size = "320MiB"\nbase = "{base}"\nmount = "noatime,nobarrier"\n{more}'
        "[probes]\ntiming = 1\nfsync = false\nfio = false\n"
    )


def test_refused_mount_option_is_refused_before_anything_is_created(
    base: Path, here: Callable[..., Done]
) -> None:
    """Issue 19.12: the kernel's refusal is found on a scratch filesystem during
    validation, so no target of the study (not even the plain one) runs."""
    plain = f'[[target]]\nname = "plain"\ndirectory = "{base}"\n'
    path = write(base, refused_xfs(base, plain))
    done = here("run", path, "--results", base / "r")
    assert done.returncode == 2, done.stderr
    assert "refused to mount xfs" in done.stderr and "nobarrier" in done.stderr
    assert not (base / "r" / "results.sqlite").exists()
    assert_nothing_left(base)


def test_killed_while_mounted_then_pgrig_clean_removes_only_ours(
    base: Path, here: Callable[..., Done]
) -> None:
    path = write(
        base,
        f"""
        [campaign]
        name = "killed"
        monitor = false
        [[target]]
        name = "ext4"
        fs = "ext4"
        size = "320MiB"
        base = "{base}"
        {STOCK}
        [probes]
        timing = false
        fsync = false
        fio = false
        {TINY_TPCB.replace("duration = 2", "duration = 120")}
        """,
    )
    # Something of the user's beside our target: a directory without our marker.
    (base / "pgrig-fs-not-ours").mkdir()
    child = subprocess.Popen(
        [sys.executable, "-m", "pgrig", "run", str(path), "--results", str(base / "r")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(3000):
            pid = server_running(base)
            if pid is not None:
                break
            assert child.poll() is None, "pgrig ended before the cluster started"
            time.sleep(0.1)
        else:
            raise AssertionError("the filesystem target and its cluster did not come up")
        time.sleep(2)  # into the load or the run: the mount is busy
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert proc.pid_alive(pid) and devices.mounts_under(str(base.resolve()))
    done = here("clean")
    assert done.returncode == 0, done.stderr
    assert "removed filesystem target" in done.stdout, done.stdout
    assert not proc.pid_alive(pid)
    assert (base / "pgrig-fs-not-ours").is_dir(), "a directory without our marker is left alone"
    (base / "pgrig-fs-not-ours").rmdir()
    assert_nothing_left(base)


def server_running(base: Path) -> int | None:
    """The postmaster of the cluster in the lab's filesystem, once it accepts connections."""
    for data in base.glob("pgrig-fs-*/mnt/pgrig-data/pgrig-*/data"):
        log = data.parent / "server.log"
        pid = workdir.postmaster_pid(data)
        if pid is not None and log.exists() and "ready to accept" in log.read_text():
            return pid
    return None


def test_memory_limit_sizes_shared_buffers(base: Path) -> None:
    camp = campaign.parse(
        textwrap.dedent(
            f"""
            [campaign]
            name = "mem"
            [[target]]
            name = "small"
            directory = "{base}"
            memory = "512MiB"
            """
        ),
        source="c.toml",
        base=base,
    )
    t = lifecycle.check_target(camp.targets[0], registry.target_kind(camp.targets[0]), Demands())
    assert t.profile is not None and t.profile.settings["shared_buffers"] == "128MB"
    assert t.profile.settings["effective_cache_size"] == "256MB"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ('fs = "xfs"\nsize = "1GiB"\ndirectory = "/var/tmp"', "builds its own filesystem"),
        ('dsn = "host=/tmp"\nmemory = "1GiB"', "the storage lab applies only to a cluster"),
        ('base = "/var/tmp"\ndirectory = "/var/tmp"', "c.toml:5: target\\[0\\].base: a filesystem"),
        ('fs = "zfs"\nsize = "1GiB"', "'zfs' is not one of xfs, ext4, btrfs"),
        ('fs = "ext4"\nsize = "1GiB"\nstripes = 2', "c.toml:7: target\\[0\\].stripes: 2 with"),
        ('fs = "xfs"\nsize = "1GiB"\nlog_sise = "1G"', "did you mean 'log_size'"),
        # the instance's cap (issue 44): shared by emulated disks, so it needs one
        (
            'directory = "/var/tmp"\ninstance_iops = 2000',
            "c.toml:6: target\\[0\\].instance_iops: an instance cap is shared by the target's "
            "emulated disks, and it has none.*latency = ",
        ),
        ('latency = "essd-pl3"\ninstance_iops = 0', "target\\[0\\].instance_iops: 0: must be more"),
        ('latency = "essd-pl3"\ninstance_mbps = "fast"', "target\\[0\\].instance_mbps"),
        (
            'latency = "essd-pl3"\ntablespace = { latency = "essd-pl1", instance_iops = 9 }',
            "target\\[0\\].tablespace.instance_iops: unknown key",
        ),
        (
            'tablespace = { latency = "essd-pl1", iops = 900 }',
            "tablespace.latency: cannot be combined with an I/O cap",
        ),
        ("tablespace = {}", "a tablespace disk needs fs and size, or latency"),
    ],
)
def test_bad_lab_keys_name_file_line_and_key(target: str, message: str) -> None:
    text = f'[campaign]\nname = "x"\n[[target]]\nname = "t"\n{target}\n'
    with pytest.raises(UsageError) as caught:
        campaign.parse(text, source="c.toml", base=Path("/var/tmp"))
    assert re.search(message, f"{caught.value} (hint: {caught.value.hint})")


def test_the_campaigns_instance_cap_is_each_emulated_targets_unless_its_own() -> None:
    text = textwrap.dedent(
        """
        [campaign]
        name = "x"
        instance_iops = 106000
        instance_mbps = 2000
        [[target]]
        name = "local"
        directory = "/var/tmp"
        [[target]]
        name = "pl3"
        directory = "/var/tmp"
        latency = "essd-pl3"
        [[target]]
        name = "pl1"
        directory = "/var/tmp"
        tablespace = { latency = "essd-pl1" }
        instance_iops = 20000
        """
    )
    local, pl3, pl1 = campaign.parse(text, source="c.toml", base=Path("/var/tmp")).targets
    assert local.lab is None  # no emulated disk: nothing to share
    assert pl3.lab is not None and pl3.lab.instance == Caps(iops=106000, mbps=2000.0)
    assert pl1.lab is not None and pl1.lab.instance == Caps(iops=20000)  # its own wins
    assert "an instance cap of 106,000 IOPS and 2,000 MB/s" in pl3.lab.describe()
    # a campaign whose targets emulate no disk: the key is refused by name
    plain = text.split('[[target]]\nname = "pl3"')[0]
    with pytest.raises(UsageError, match=r"c.toml:4: campaign.instance_iops: no target has an "
                                         r"emulated disk"):  # fmt: skip
        campaign.parse(plain, source="c.toml", base=Path("/var/tmp"))


def test_hit_ratios_from_the_monitors_samples() -> None:
    from pgrig.monitor.model import CpuSample, IoSample, PgSample, Sample
    from pgrig.report.storage import _ratios

    def second(hit: float, read: float, disk_mib: float, in_run: bool = True) -> Sample:
        return Sample(
            t_s=0,
            wall=0,
            interval_s=1.0,
            cpu=CpuSample(0, 0, 0, 0, 0, 100),
            pg=PgSample(blks_hit_s=hit, blks_read_s=read),
            io=IoSample(device=None, server_read_mib_s=disk_mib),
            in_run=in_run,
        )

    # 900 hits and 100 reads of 8 kB a second; 0.2 MiB/s of them reached the disk
    samples = (second(900, 100, 0.2), second(900, 100, 0.2), second(0, 1000, 99, in_run=False))
    buffer, cache = _ratios(samples)
    assert buffer == pytest.approx(0.9)
    assert cache == pytest.approx(1 - 0.2 * 2**20 / (100 * 8192))


def test_tablespaces_on_lab_filesystems(built: Built) -> None:
    """Seed 004: tbs1 (tables) and tbs2 (indexes) on two disks of their own; here
    an XFS and an ext4 the lab builds, the data directory on a plain directory."""
    made = re.findall(r"tablespace (pgrig_\w+) in (\S+)", built.done.stderr)
    assert [name for name, _ in made] == ["pgrig_tables", "pgrig_indexes"], built.done.stderr
    assert all(where.startswith(f"{built.base.resolve()}/pgrig-fs-") for _, where in made)
    assert built.recorded["pg/lab"][0] == "ok"
    assert built.recorded["pg/tpcb/s1/select-only/c1/d1/r1"][0] == "ok"
    assert_nothing_left(built.base, keep=("c.toml", "r", "d"))


def test_a_tablespace_filesystem_needs_fs_and_size(base: Path) -> None:
    text = f'[campaign]\nname = "t"\n[[target]]\nname = "a"\ndirectory = "{base}"\n'
    with pytest.raises(UsageError, match="tablespace.mount: a filesystem option without fs"):
        campaign.parse(text + 'tablespace = { mount = "noatime" }\n', source="c.toml", base=base)
    with pytest.raises(
        UsageError, match="index_tablespace: a tablespace disk needs fs and size, or latency"
    ):
        campaign.parse(text + "index_tablespace = {}\n", source="c.toml", base=base)


def test_a_refused_mount_option_with_no_target_left_exits_2(
    base: Path, here: Callable[..., Done]
) -> None:
    done = here("run", write(base, refused_xfs(base)), "--results", base / "r")
    assert done.returncode == 2, done.stderr  # docs/storage-lab.md: OptionRefused exits 2
    assert "nobarrier" in done.stderr and "Traceback" not in done.stderr
    assert_nothing_left(base)


def test_options_a_small_filesystem_cannot_take_are_checked_at_the_targets_size(
    base: Path,
) -> None:
    """seed002's XFS asks for 32 allocation groups of its 4 GiB; the option check
    built a 300 MiB scratch filesystem instead, where 32 groups are below XFS's
    16 MiB minimum, and refused the example before it ran."""
    spec = storage.FsSpec.parse(
        "xfs", "4GiB", mkfs="-b size=4096 -l size=64m,sunit=16 -d agcount=32,sunit=16,swidth=48"
    )
    loopfs.check_options(spec, base, what="target xfs")  # no OptionRefused
    assert_nothing_left(base, keep=())
    too_many = storage.FsSpec.parse("xfs", "4GiB", mkfs="-d agcount=512")  # 8 MiB groups
    with pytest.raises(OptionRefused, match="agcount=512"):
        loopfs.check_options(too_many, base, what="target xfs")
    assert_nothing_left(base, keep=())


def test_log_options_are_checked_on_the_external_log_they_size(base: Path) -> None:
    """seed002 shrunk to 1 GiB: `-l size=64m` sizes the 64 MiB external log, but
    the option check made no log device, so mkfs.xfs took 64m as an internal log
    larger than a 32 MiB group and refused a target it builds."""
    asked = "-b size=4096 -l size=64m,sunit=16 -d agcount=32,sunit=16,swidth=48"
    spec = storage.FsSpec.parse("xfs", "1GiB", mkfs=asked, external_log="64MiB")
    loopfs.check_options(spec, base, what="target xfs")  # no OptionRefused
    assert_nothing_left(base, keep=())
    too_small = storage.FsSpec.parse(
        "xfs", "1GiB", mkfs="-l size=32m", external_log="64MiB"
    )  # XFS's log minimum is 64 MB
    with pytest.raises(OptionRefused, match="size=32m"):
        loopfs.check_options(too_small, base, what="target xfs")
    assert_nothing_left(base, keep=())


def test_a_step_the_memory_cgroup_oom_kills_says_so(base: Path) -> None:
    """seed000-cloud shrunk to a 128 MiB target: pgbench -i's VACUUM was OOM-killed
    in the cgroup, and the step failed as "server closed the connection
    unexpectedly" without naming the kernel's kill or the fix."""
    (base / "hog.sql").write_text("SELECT length(repeat('x', 300000000));\n")
    (base / "one.sql").write_text("SELECT 1;\n")
    path = write(
        base,
        f"""
        [campaign]
        name = "oom"
        monitor = false
        [[target]]
        name = "small"
        directory = "{base}"
        memory = "64MiB"
        {STOCK}
        {NO_PROBES}
        [[workload]]
        type = "custom"
        name = "hog"
        setup = ["hog.sql"]
        scripts = ["one.sql"]
        clients = [1]
        duration = 1
        """,
    )
    began = time.monotonic()
    done = pgrig("run", path, "--results", base / "r")
    print(f"the OOM run took {time.monotonic() - began:.1f} s")
    assert done.returncode == 6, done.stderr
    status, reason, _ = runs(base / "r")["small/hog/setup"]
    assert status == "failed", reason
    assert "OOM-killed" in (reason or "") and "(64 MiB)" in (reason or ""), reason
    # The cluster stopped while it recovered from the kill: at once, never after
    # a fast shutdown's 30 s (issue 40.5: 2 of 22 runs waited them out).
    assert "did not shut down" not in done.stderr, done.stderr
    assert_nothing_left(base, keep=("c.toml", "r", "hog.sql", "one.sql"))
    # The resume runs the setup again for its new cluster (now with memory to
    # spare) without recording it: its line says the store keeps the failure.
    (base / "hog.sql").write_text("SELECT 1;\n")
    again = pgrig("run", path, "--results", base / "r")
    # the store keeps the setup's failure: partial, as its exit code says
    assert again.returncode == 6, again.stderr
    line = next(ln for ln in again.stderr.splitlines() if "hog setup" in ln)
    assert line.startswith("✓ small: hog setup (") and line.endswith(
        " - again for this resume, not recorded: the store keeps its earlier failure "
        "(--retry-failed records a new try)"
    ), line
    found = runs(base / "r")
    assert found["small/hog/setup"][0] == "failed"
    assert found["small/hog/c1/d1/r1"][0] == "ok", sorted(found)
    assert_nothing_left(base, keep=("c.toml", "r", "hog.sql", "one.sql"))
    faultlog.note(
        "OOM kill in the target's memory cgroup (64 MiB; a setup's query)",
        named_in_s=faultlog.seconds_after(base / "r", "small/hog/setup"),
        exit_code=done.returncode, named="OOM-killed ... in the target's memory cgroup (64 MiB)",
        since="the step's start (the kill ends it)",
        resume=faultlog.in_suite() and faultlog.resume([path], base / "r"),
    )  # fmt: skip


def test_memory_limited_runs_record_the_cgroups_limit_hits_peak_and_oom_kills(
    built: Built,
) -> None:
    # 64 MiB for the server and its page cache: the load (16 MB of heap, its WAL
    # and indexes through the page cache) pushes against the limit.
    found = built.recorded
    assert "small/tpcb/s1/select-only/c1/d1/r1/memory" in found, list(found)
    status, reason, result = found["small/tpcb/s1/select-only/c1/d1/r1/memory"]
    assert status == "ok" and result is not None, reason
    after = result["after"]
    assert after["limit_bytes"] == 64 * 2**20
    assert 0 < after["peak_bytes"] <= after["limit_bytes"]
    assert after["failcnt"] > 0 and result["oom_kills"] == 0, after
    assert 0 <= result["limit_hits"] <= after["failcnt"]
    assert "The memory cgroup during the runs" in built.report
    assert re.search(
        r"\| small \| select-only \| 1 \| [\d,]+ \| 0 \| [\d.]+ MiB \| 64\.0 MiB \|", built.report
    )
    assert "xfs/tpcb/s1/select-only/c1/d1/r1/memory" not in found, "only the capped target's"
    assert_nothing_left(built.base, keep=("c.toml", "r", "d"))
