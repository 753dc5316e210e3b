"""The lossy FUSE filesystem, on real FUSE mounts: what survives a power loss."""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_disk_dir
from pgrig import lossyfs
from pgrig.lossyfs import LossyFsError, LossyMount

REASON = lossyfs.available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no FUSE here: {REASON}")


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    base = make_disk_dir("pgrig-test-lossyfs-")
    backing = base / "backing"
    backing.mkdir()
    try:
        yield backing, base / "mnt"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def fs(dirs: tuple[Path, Path]) -> Iterator[LossyMount]:
    mount = LossyMount(*dirs, seed=7)
    mount.start()
    try:
        yield mount
    finally:
        mount.unmount()
        assert not mount.mounted


def write(path: Path, data: bytes, *, sync: bool = False, flags: int = 0) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def crash(fs: LossyMount, mode: lossyfs.Mode = "drop", **kw: object) -> lossyfs.PowerLossReport:
    report = fs.power_loss(mode, **kw)  # type: ignore[arg-type]
    assert not fs.mounted
    fs.remount()
    return report


def test_unsynced_data_is_lost_synced_data_survives(fs: LossyMount) -> None:
    root = fs.mountpoint
    write(root / "synced", b"s" * 10000, sync=True)
    write(root / "unsynced", b"u" * 10000)
    fsync_dir(root)  # both names are durable; only one file's data is
    write(root / "nameless", b"n" * 100, sync=True)  # data synced, name not
    assert (root / "unsynced").read_bytes() == b"u" * 10000  # read-your-writes
    report = crash(fs)
    assert (root / "synced").read_bytes() == b"s" * 10000
    assert (root / "unsynced").read_bytes() == b""
    assert not (root / "nameless").exists()
    assert report.unsynced_pages == 3 and report.persisted_pages == 0
    assert report.lost_files == 0 and report.unsynced_dirs == 1


def test_unsynced_overwrite_reverts_to_the_synced_version(fs: LossyMount) -> None:
    path = fs.mountpoint / "f"
    write(path, b"a" * 5000, sync=True)
    fsync_dir(fs.mountpoint)
    with open(path, "r+b") as f:
        f.seek(4000)
        f.write(b"b" * 3000)  # straddles a page boundary and extends the file
    assert path.read_bytes() == b"a" * 4000 + b"b" * 3000
    crash(fs)
    assert path.read_bytes() == b"a" * 5000


def test_directory_entries_are_volatile_until_the_directory_is_fsynced(fs: LossyMount) -> None:
    root = fs.mountpoint
    (root / "d").mkdir()
    write(root / "d" / "kept", b"k", sync=True)
    write(root / "gone", b"g", sync=True)
    fsync_dir(root / "d")
    fsync_dir(root)
    (root / "d" / "kept").unlink()  # an unsynced unlink comes back
    write(root / "d" / "new", b"n", sync=True)  # an unsynced create vanishes
    (root / "d2").mkdir()
    os.link(root / "gone", root / "d" / "hardlink")
    fsync_dir(root / "d")  # persists: kept removed, new + hardlink added
    (root / "gone").unlink()  # root not fsynced again: gone comes back, d2 vanishes
    crash(fs)
    assert sorted(os.listdir(root)) == ["d", "gone"]
    assert sorted(os.listdir(root / "d")) == ["hardlink", "new"]
    assert os.stat(root / "gone").st_ino == os.stat(root / "d" / "hardlink").st_ino
    assert (root / "d" / "hardlink").read_bytes() == b"g"


def test_rename_after_power_loss_is_old_or_new_never_torn(fs: LossyMount) -> None:
    """PostgreSQL's durable_rename: write temp, fsync it, rename, fsync the directory."""
    root = fs.mountpoint
    write(root / "target", b"old", sync=True)
    fsync_dir(root)

    write(root / "target.tmp", b"new", sync=True)
    os.rename(root / "target.tmp", root / "target")
    crash(fs)  # before the directory fsync: the old state
    assert sorted(os.listdir(root)) == ["target"]
    assert (root / "target").read_bytes() == b"old"

    write(root / "target.tmp", b"new", sync=True)
    os.rename(root / "target.tmp", root / "target")
    fsync_dir(root)
    crash(fs)  # after it: the new state
    assert sorted(os.listdir(root)) == ["target"]
    assert (root / "target").read_bytes() == b"new"


def test_rename_across_directories_persists_with_either_side(fs: LossyMount) -> None:
    root = fs.mountpoint
    (root / "a").mkdir()
    (root / "b").mkdir()
    write(root / "a" / "f", b"data", sync=True)
    fsync_dir(root / "a")
    fsync_dir(root)
    os.rename(root / "a" / "f", root / "b" / "g")
    fsync_dir(root / "a")  # only the source directory: the rename persists whole
    crash(fs)
    assert os.listdir(root / "a") == []
    assert (root / "b" / "g").read_bytes() == b"data"


def test_o_dsync_and_o_direct(fs: LossyMount) -> None:
    root = fs.mountpoint
    for name in ("dsync", "direct", "direct_dsync"):
        write(root / name, b"")
    fsync_dir(root)
    write(root / "dsync", b"d" * 8192, flags=os.O_DSYNC)
    buf = mmap.mmap(-1, 8192)  # O_DIRECT needs an aligned buffer
    buf.write(b"x" * 8192)
    for name, flags in (("direct", os.O_DIRECT), ("direct_dsync", os.O_DIRECT | os.O_DSYNC)):
        fd = os.open(root / name, os.O_WRONLY | flags)
        try:
            assert os.write(fd, buf) == 8192
        finally:
            os.close(fd)
    assert (root / "direct").read_bytes() == b"x" * 8192
    crash(fs)
    assert (root / "dsync").read_bytes() == b"d" * 8192
    assert (root / "direct").read_bytes() == b""  # O_DIRECT alone is not durable
    assert (root / "direct_dsync").read_bytes() == b"x" * 8192


def test_truncate(fs: LossyMount) -> None:
    path = fs.mountpoint / "t"
    write(path, b"1" * 12288, sync=True)
    fsync_dir(fs.mountpoint)
    os.truncate(path, 100)
    os.truncate(path, 9000)  # the cut-off bytes must read as zeros, not the old data
    assert path.read_bytes() == b"1" * 100 + bytes(8900)
    crash(fs)
    assert path.read_bytes() == b"1" * 12288  # the truncate was not synced
    os.truncate(path, 100)
    fd = os.open(path, os.O_RDWR)
    os.fsync(fd)
    os.close(fd)
    crash(fs)
    assert path.read_bytes() == b"1" * 100


def test_torn_mode_persists_a_prefix_of_one_page(dirs: tuple[Path, Path]) -> None:
    with LossyMount(*dirs, page_size=8192) as fs:
        path = fs.mountpoint / "heap"
        write(path, b"A" * 8192, sync=True)
        fsync_dir(fs.mountpoint)
        with open(path, "r+b") as f:
            f.write(b"B" * 8192)
        report = crash(fs, "torn", torn_bytes=4096)
        assert report.torn == ("heap", 0, 4096)
        assert path.read_bytes() == b"B" * 4096 + b"A" * 4096


def test_a_tear_changes_the_disk_and_prefers_what_is_asked(dirs: tuple[Path, Path]) -> None:
    """Defect 19.17: a page rewritten with the bytes it had is never the torn one
    (tearing it changes nothing), and ``prefer`` (a data file) wins over the rest."""
    with LossyMount(*dirs, page_size=4096) as fs:
        (fs.mountpoint / "base").mkdir()
        same, other, data = (fs.mountpoint / n for n in ("same", "other", "base/1"))
        for path in (same, other, data):
            write(path, b"A" * 8192, sync=True)
        fsync_dir(fs.mountpoint)
        fsync_dir(fs.mountpoint / "base")
        write(same, b"A" * 8192)  # dirty, but as on disk
        report = crash(fs, "torn", seed=1)
        assert report.torn is not None and report.torn[0] == "same" and report.torn_changed == 0
    with LossyMount(*dirs, page_size=4096) as fs:
        write(same, b"A" * 8192)
        write(other, b"B" + b"A" * 8191)  # one byte of page 0 differs
        write(data, b"C" * 8192)
        for seed in range(3):
            report = crash(fs, "torn", seed=seed, prefer=r"^base/")
            assert report.torn is not None and report.torn[0] == "base/1", report
            assert report.torn_changed == 2048 and report.torn_digest
            write(data, b"D" * 8192)  # dirty again for the next power loss
        # The preferred file's tear would change nothing: a tear elsewhere that does.
        write(data, data.read_bytes())
        write(other, b"B" + b"A" * 8191)
        report = crash(fs, "torn", seed=0, prefer=r"^base/")
        assert report.torn == ("other", 0, 2048) and report.torn_changed == 1


def _random_subset_outcome(dirs: tuple[Path, Path], seed: int) -> tuple[bytes, int]:
    backing, mnt = dirs
    for child in backing.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    with LossyMount(backing, mnt) as fs:
        path = fs.mountpoint / "wal"
        write(path, bytes(64 * 4096), sync=True)
        fsync_dir(fs.mountpoint)
        with open(path, "r+b") as f:
            f.write(b"W" * 64 * 4096)
        report = crash(fs, "random-subset", seed=seed, keep_fraction=0.5)
        data = path.read_bytes()
    kept = sum(1 for i in range(64) if data[i * 4096] == ord("W"))
    assert kept == report.persisted_pages
    return data, kept


def test_random_subset_is_reproducible_with_a_seed(dirs: tuple[Path, Path]) -> None:
    first, kept = _random_subset_outcome(dirs, seed=42)
    again, _ = _random_subset_outcome(dirs, seed=42)
    other, _ = _random_subset_outcome(dirs, seed=43)
    assert 0 < kept < 64
    assert first == again
    assert first != other


def test_journal_model_commits_entries_with_any_fsync(dirs: tuple[Path, Path]) -> None:
    with LossyMount(*dirs, metadata="journal") as fs:
        (fs.mountpoint / "sub").mkdir()
        write(fs.mountpoint / "sub" / "f", b"x", sync=True)  # no directory fsync at all
        crash(fs)
        assert (fs.mountpoint / "sub" / "f").read_bytes() == b"x"


def test_power_loss_makes_the_mount_unusable_and_unmount_writes_back(fs: LossyMount) -> None:
    fd = os.open(fs.mountpoint / "open", os.O_RDWR | os.O_CREAT)
    try:
        fs.power_loss()
        with pytest.raises(OSError):
            os.write(fd, b"after the power is gone")
            os.fsync(fd)
    finally:
        with contextlib.suppress(OSError):  # ENOTCONN: the connection is gone
            os.close(fd)
    with pytest.raises(LossyFsError, match="not mounted"):
        fs.power_loss()
    fs.remount()
    write(fs.mountpoint / "clean", b"c")  # never fsynced, but the unmount is orderly
    stats = fs.stats()
    assert stats["dirty_files"] == 1 and stats["dirty_dirs"] == 1
    fs.unmount()
    assert (fs.backing / "clean").read_bytes() == b"c"
    fs.start()  # the fixture unmounts


def test_refuses_a_non_empty_mountpoint(dirs: tuple[Path, Path]) -> None:
    backing, mnt = dirs
    mnt.mkdir()
    (mnt / "someone's file").write_text("keep")
    with pytest.raises(LossyFsError, match="not an empty directory"):
        LossyMount(backing, mnt).start()
    assert (mnt / "someone's file").read_text() == "keep"


def test_clean_orphans_unmounts_what_a_killed_pgrig_left(dirs: tuple[Path, Path]) -> None:
    backing, mnt = dirs
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from pgrig.lossyfs import LossyMount
        LossyMount(Path({str(backing)!r}), Path({str(mnt)!r})).start()
        print("mounted", flush=True)
        time.sleep(600)
        """
    )
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE) as owner:
        try:
            assert owner.stdout is not None
            assert owner.stdout.readline().strip() == b"mounted"
            write(mnt / "left", b"behind")
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait(timeout=30)
    assert lossyfs.clean_orphans() == [str(mnt)]
    deadline = time.monotonic() + 10
    while os.path.ismount(mnt) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.ismount(mnt)
    assert (backing / "left").read_bytes() == b"behind"  # SIGTERM: an orderly unmount
    assert lossyfs.clean_orphans() == []


def test_removed_trees(fs: LossyMount) -> None:
    root = fs.mountpoint
    (root / "tree" / "sub").mkdir(parents=True)
    write(root / "tree" / "sub" / "f", b"f", sync=True)
    write(root / "tree" / "keep", b"k", sync=True)
    for d in (root / "tree" / "sub", root / "tree", root):
        fsync_dir(d)
    os.rename(root / "tree" / "keep", root / "kept")  # moved out, then the tree goes
    shutil.rmtree(root / "tree")
    fsync_dir(root)
    crash(fs)
    assert sorted(os.listdir(root)) == ["kept"]
    assert (root / "kept").read_bytes() == b"k"
    (root / "again" / "sub").mkdir(parents=True)
    write(root / "again" / "sub" / "f", b"x", sync=True)
    fsync_dir(root / "again" / "sub")
    fsync_dir(root / "again")
    fsync_dir(root)
    shutil.rmtree(root / "again")  # removed, never synced: the orderly unmount persists it
    fs.unmount()
    assert sorted(os.listdir(fs.backing)) == [".lossyfs-staging", "kept"]
    fs.start()


def test_open_unlinked_files_symlinks_and_the_only_filter(fs: LossyMount) -> None:
    root = fs.mountpoint
    write(root / "a", b"a" * 4096, sync=True)
    write(root / "b", b"b" * 4096, sync=True)
    os.symlink("a", root / "link")
    fsync_dir(root)
    fd = os.open(root / "a", os.O_RDWR)
    try:
        os.unlink(root / "a")
        fsync_dir(root)  # the unlink is durable; the open file lives on, nameless
        os.pwrite(fd, b"A" * 10, 0)
        os.fsync(fd)
        assert os.pread(fd, 12, 0) == b"A" * 10 + b"aa"
    finally:
        os.close(fd)
    with open(root / "b", "r+b") as f:
        f.write(b"B" * 4096)
    report = crash(fs, "random-subset", keep_fraction=1.0, only="nomatch*")
    assert report.unsynced_pages == 1 and report.persisted_pages == 0
    assert (root / "b").read_bytes() == b"b" * 4096
    assert os.readlink(root / "link") == "a" and not (root / "a").exists()


def test_rejects_bad_arguments(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(LossyFsError, match="page size"):
        LossyMount(*dirs, page_size=3000)
    with pytest.raises(LossyFsError, match="metadata model"):
        LossyMount(*dirs, metadata="eventual")  # type: ignore[arg-type]
    mount = LossyMount(*dirs)
    with pytest.raises(LossyFsError, match="unknown"):
        mount.power_loss("meteor")  # type: ignore[arg-type]
    with pytest.raises(LossyFsError, match="keep_fraction"):
        mount.power_loss("random-subset", keep_fraction=2)
    with pytest.raises(LossyFsError, match="torn_bytes"):
        mount.power_loss("torn", torn_bytes=4096)
    with pytest.raises(LossyFsError, match="not mounted"):
        mount.power_loss()


def test_an_exception_inside_the_context_stops_without_writing_back(
    dirs: tuple[Path, Path],
) -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeError), LossyMount(*dirs, timeout=20) as fs:
        write(fs.mountpoint / "f", b"never synced")
        raise RuntimeError("the caller failed")
    assert time.monotonic() - started < 15  # killed at once, not after the timeout
    assert not fs.mounted
    assert not (fs.backing / "f").exists()


def test_a_signal_during_the_unmount_still_removes_the_run_directory(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal as fusermount3 ran skipped the rest of the teardown: the mount
    record and the run directory in /tmp (its marker and fs.log) were left, and a
    test session's state directory took the record away with it. Here a real
    SIGINT arrives as the unmount's fusermount3 call begins."""
    from pgrig.lossyfs import mount as mount_module
    from pgrig.lossyfs import registry

    real = mount_module.lazy_unmount

    def signalled(mountpoint: str, fsname: str) -> None:
        signal.raise_signal(signal.SIGINT)  # to this thread: handled at the next bytecode
        real(mountpoint, fsname)

    monkeypatch.setattr(mount_module, "lazy_unmount", signalled)
    # Python's own Ctrl-C handler, whatever this process inherited: started in the
    # background (`make test &`, a CI runner without job control) SIGINT is ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    fs = LossyMount(*dirs)
    fs.start()
    assert fs.record is not None
    run_dir, fsname = Path(fs.record.run_dir), fs.record.fsname
    try:
        with pytest.raises(KeyboardInterrupt):
            fs.unmount()  # the signal is held until the teardown is done, then raised
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not run_dir.exists()
    assert not (registry.registry_dir() / f"{fsname}.json").exists()
    assert not lossyfs.is_mounted(str(dirs[1]), fsname)
