"""Filesystem targets on real loop devices: built, used as the server's user, removed.

Every test checks that nothing is left: no loop device backed by our files, no
mount, no directory, no registry record.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_disk_dir
from pgrig import proc
from pgrig.errors import BinaryNotFound, DiskSpaceError
from pgrig.storage import OptionRefused, clean, devices, state
from pgrig.storage.fsinfo import FilesystemInfo
from pgrig.storage.loopfs import FsSpec, LoopFilesystem, loop_filesystem
from pgrig.tools import fio

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and mounts need root")


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_disk_dir("pgrig-test-lab-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def ours(base: Path) -> dict[str, str]:
    """Loop devices whose backing file is under ``base``."""
    prefix = str(base.resolve()) + "/"
    return {d: f for d, f in devices.loop_backing_files().items() if f.startswith(prefix)}


def assert_nothing_left(base: Path, mountpoint: str | None = None) -> None:
    assert ours(base) == {}
    if mountpoint is not None:
        assert devices.mount_at(mountpoint) is None
    assert devices.mounts_under(str(base.resolve())) == []
    assert list(base.iterdir()) == []
    assert [r for r in state.load_all() if r.directory and r.directory.startswith(str(base))] == []


def use_as_postgres(info: FilesystemInfo) -> None:
    user = proc.OsUser.lookup("postgres")
    data = Path(info.data_dir)
    assert data.stat().st_uid == user.uid
    target = data / "written-by-postgres"
    argv = ["/usr/bin/dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=4", "oflag=direct"]
    proc.run(argv, timeout=60, user=user)
    assert target.stat().st_uid == user.uid and target.stat().st_size == 4 * 2**20
    result, _ = fio.run(fio.FioJob(directory=data, pattern="randwrite", size="16M", runtime_s=1))
    assert result.iops > 0


@pytest.mark.parametrize(
    ("fstype", "mkfs", "mount", "log", "fact", "effective"),
    [
        ("xfs", "-d su=64k,sw=2", "noatime,nodiratime,logbufs=8,inode64", "64M", "log", "logdev="),
        (
            "ext4",
            "-E stride=2,stripe-width=6",
            "noatime,nodiratime,data=writeback,nobarrier",
            "32M",
            "log",
            "nobarrier",
        ),
        ("xfs", "", "noatime", None, "allocation groups", "noatime"),
    ],
    ids=["xfs-external-log", "ext4-external-journal", "xfs-internal-log"],
)
def test_target_is_built_used_and_removed(
    base: Path,
    fstype: str,
    mkfs: str,
    mount: str,
    log: str | None,
    fact: str,
    effective: str,
) -> None:
    spec = FsSpec.parse(fstype, "320M", mkfs=mkfs, mount=mount, external_log=log)
    with loop_filesystem(base, spec) as info:
        assert info.fstype == fstype and info.loop_backed
        assert info.device in ours(base)
        assert info.major_minor.startswith("7:")  # the loop driver's major
        assert effective in info.mount_options
        assert fact in info.facts
        assert info.options_not_shown == ()
        assert info.mountinfo_line.split(" - ")[1].startswith(fstype)
        assert info.host_filesystem.split()[0] in ("ext4", "xfs", "btrfs", "tmpfs", "overlay")
        if log:
            assert info.log_device in ours(base)
            assert info.log_device in " ".join(info.mkfs_argv)
        if mkfs.startswith("-E"):
            assert info.facts["stride (blocks)"] == "2"
            assert info.facts["stripe width (blocks)"] == "6"
        if mkfs.startswith("-d"):
            assert info.facts["stripe unit (blocks)"] == "16"
        use_as_postgres(info)
    assert_nothing_left(base, info.mountpoint)


def test_larger_than_free_space_is_refused_before_anything_is_made(base: Path) -> None:
    vfs = os.statvfs(base)
    free = vfs.f_bavail * vfs.f_frsize
    before = devices.loop_backing_files()
    with pytest.raises(DiskSpaceError, match="does not fit"):
        LoopFilesystem(base, FsSpec("xfs", free + 2**30)).create()
    assert devices.loop_backing_files() == before
    assert list(base.iterdir()) == []
    assert state.load_all() == [] or all(r.directory is None for r in state.load_all())


@pytest.mark.parametrize(
    ("fstype", "mkfs", "named"),
    [
        ("xfs", "-d foo=1", "-d foo=1"),
        ("ext4", "-E bogus=1", "bogus"),
        ("ext4", "-O nofeat", "nofeat"),
    ],
)
def test_bad_mkfs_option_is_named(base: Path, fstype: str, mkfs: str, named: str) -> None:
    with pytest.raises(OptionRefused) as caught:
        LoopFilesystem(base, FsSpec.parse(fstype, "320M", mkfs=mkfs)).create()
    assert caught.value.options[0] == named
    assert named in str(caught.value)
    assert caught.value.exit_code == 2
    assert_nothing_left(base)


def test_nobarrier_on_xfs_is_reported_with_the_kernels_message(base: Path) -> None:
    spec = FsSpec.parse("xfs", "320M", mount="noatime,nobarrier")
    with pytest.raises(OptionRefused) as caught:
        LoopFilesystem(base, spec).create()
    err = caught.value
    assert err.options == ("nobarrier",)
    assert any("nobarrier" in line for line in err.kernel_messages), err.kernel_messages
    assert "nobarrier" in str(err) and err.hint and "nobarrier" in err.hint
    assert_nothing_left(base)


def test_unknown_mount_option_is_named(base: Path) -> None:
    with pytest.raises(OptionRefused) as caught:
        LoopFilesystem(base, FsSpec.parse("ext4", "64M", mount="noatime,bogusopt")).create()
    assert caught.value.options == ("bogusopt",)
    assert_nothing_left(base)


def test_busy_mount_is_retried_then_reported_with_how_to_remove_it(base: Path) -> None:
    target = LoopFilesystem(base, FsSpec.parse("ext4", "64M"), umount_attempts=2)
    info = target.create()
    holder = subprocess.Popen(["sleep", "60"], cwd=info.data_dir)
    try:
        left = target.destroy()
        assert left.mounts == (info.mountpoint,)
        assert any(f"pid {holder.pid}" in h for h in left.holders)
        commands = left.commands()
        assert f"umount {info.mountpoint}" in commands
        assert any(c.startswith("losetup -d /dev/loop") for c in commands)
        assert devices.mount_at(info.mountpoint) is not None  # nothing forced
    finally:
        holder.kill()
        holder.wait()
    assert not target.destroy()
    assert_nothing_left(base, info.mountpoint)


def test_a_mount_namespace_that_copied_the_filesystem_is_named_as_what_holds_it(
    base: Path,
) -> None:
    """A namespace made while the filesystem was mounted (``unshare -m`` here, as
    ``ip netns exec``, systemd's PrivateTmp or a container make one) keeps its
    copy of the mount: / is private on this machine, so the unmount here does not
    reach it, and ``losetup -d`` only marks the device to go when the namespace's
    last process ends (ci45: a test host's sshd held two lab devices this way).
    The leftover names that process; once it ends, the device is gone."""
    target = LoopFilesystem(base, FsSpec.parse("ext4", "64M"))
    info = target.create()
    (device,) = ours(base)
    holder = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{holder.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
            assert time.monotonic() < deadline, "unshare made no mount namespace"
            time.sleep(0.02)
        left = target.destroy()
        assert left.mounts == () and left.loop_devices == (device,), left
        assert any(
            f"pid {holder.pid} (sleep): mounted at {info.mountpoint}" in h for h in left.holders
        ), left.holders
        assert devices.mount_at(info.mountpoint) is None  # unmounted here all the same
    finally:
        holder.kill()
        holder.wait()
    assert not target.destroy()
    assert_nothing_left(base, info.mountpoint)


CHILD = """
import sys, time
from pathlib import Path
from pgrig.storage import FsSpec, LoopFilesystem, cgroups
info = LoopFilesystem(Path(sys.argv[1]), FsSpec.parse("xfs", "320M", external_log="64M")).create()
cg = cgroups.create(("io", "memory"), purpose="orphan test")
print(info.mountpoint, *sorted(str(d) for d in cg.dirs.values()), flush=True)
time.sleep(300)
"""


def test_orphans_of_a_killed_pgrig_are_cleaned(base: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(base)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        mountpoint, *cgroup_dirs = child.stdout.readline().split()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert devices.mount_at(mountpoint) is not None and len(ours(base)) == 2
    assert all(Path(d).is_dir() for d in cgroup_dirs)
    deadline = time.monotonic() + 10
    while proc.pid_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = clean()
    assert any("removed filesystem target" in line for line in lines), lines
    assert sum("removed cgroup" in line for line in lines) == len(cgroup_dirs)
    assert not any(Path(d).exists() for d in cgroup_dirs)
    assert_nothing_left(base, mountpoint)
    assert clean() == []


def test_missing_mkfs_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    # Uninstalling xfsprogs is not an option on a shared machine: hide it instead.
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(devices, "SBIN", ())
    with pytest.raises(BinaryNotFound) as caught:
        devices.tool("mkfs.xfs")
    assert caught.value.hint is not None and "xfsprogs" in caught.value.hint
