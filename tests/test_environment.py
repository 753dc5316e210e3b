"""Environment capture: readers on /proc and /sys files copied from a real machine
(tests/data/env/root, see tests/data/env/README.md), then capture() on this machine
and against a throwaway PostgreSQL server."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgrig import environment as env
from pgrig import proc, units
from pgrig.environment.storage import PathStat
from pgrig.errors import ToolError
from pgrig.results import Cpu, Disk, Environment, from_dict, to_dict

DATA = Path(__file__).parent / "data" / "env"
ROOT = DATA / "root"
CAPTURED = env.read_files(ROOT, env.FILES)  # the captured machine's files, read in one pass
PG_BIN = Path("/usr/lib/postgresql/15/bin")
GiB = 1024**3


# --------------------------------------------------------------------------
# format_bytes and small parsers


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (24 * GiB, "24.0 GiB"),
        (25276510208, "23.5 GiB"),  # MemTotal of the captured machine
        (1024 * 1024 - 1, "1.0 MiB"),  # not "1024.0 KiB"
        (274877906944, "256.0 GiB"),
        (3 * 1024**4, "3.0 TiB"),
        (1024**6, "1.0 EiB"),
        (-2048, "-2.0 KiB"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert units.format_bytes(n) == text


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("always [madvise] never\n", "madvise"),
        ("none [mq-deadline] kyber bfq \n", "mq-deadline"),
        ("[none] mq-deadline kyber bfq \n", "none"),
        ("none\n", "none"),
        ("always madvise never\n", None),
    ],
)
def test_bracketed(text: str, choice: str | None) -> None:
    assert env.bracketed(text) == choice


def test_first_line_of_version_outputs() -> None:
    fio = (DATA / "fio_version.stdout.txt").read_text()
    postgres = (DATA / "postgres_version.stdout.txt").read_text()
    assert env.first_line(fio) == "fio-3.33"
    assert env.first_line(postgres) == "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    assert env.first_line("\n\n") is None


# --------------------------------------------------------------------------
# Readers on the captured tree


def test_os_release_and_kernel() -> None:
    assert env.parse_os_release(CAPTURED) == "Debian GNU/Linux 12 (bookworm)"
    assert env.parse_kernel(CAPTURED) == "6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0"


def test_memory() -> None:
    assert env.parse_memory_bytes(CAPTURED) == 24684092 * 1024


def test_parse_cpuinfo() -> None:
    blocks = env.parse_cpuinfo((ROOT / "proc/cpuinfo").read_text())
    assert [b["processor"] for b in blocks] == ["0", "1"]
    assert blocks[1]["core id"] == "1"
    assert blocks[0]["cpu MHz"] == "2596.120"
    assert "hypervisor" in blocks[0]["flags"].split()


def test_parse_lscpu() -> None:
    fields = env.parse_lscpu((DATA / "lscpu.txt").read_text())
    assert fields["Model name"] == "AMD EPYC"
    assert fields["Hypervisor vendor"] == "KVM"
    assert fields["Socket(s)"] == "1"
    assert fields["Core(s) per socket"] == "2"


def test_cpu_from_proc_and_sys_without_lscpu() -> None:
    assert env.parse_cpu(CAPTURED) == Cpu(
        model="AMD EPYC",
        sockets=1,
        cores_per_socket=2,
        threads_per_core=1,
        logical_cpus=2,
        mhz=2596.12,
        hypervisor="KVM",  # from the kvm-clock clocksource
    )


def test_cpu_agrees_with_lscpu() -> None:
    fields = env.parse_lscpu((DATA / "lscpu.txt").read_text())
    cpu = env.parse_cpu(CAPTURED, lscpu=fields)
    assert cpu.model == fields["Model name"]
    assert cpu.sockets == int(fields["Socket(s)"])
    assert cpu.cores_per_socket == int(fields["Core(s) per socket"])
    assert cpu.threads_per_core == int(fields["Thread(s) per core"])
    assert cpu.logical_cpus == int(fields["CPU(s)"])
    assert cpu.hypervisor == fields["Hypervisor vendor"]


def test_hypervisor_sources() -> None:
    assert env.detect_hypervisor(CAPTURED, cpu_flags=["fpu"]) is None  # bare metal
    assert env.detect_hypervisor(CAPTURED, cpu_flags=["hypervisor"]) == "KVM"
    lscpu = {"Hypervisor vendor": "Microsoft"}
    assert env.detect_hypervisor(CAPTURED, cpu_flags=["hypervisor"], lscpu=lscpu) == "Microsoft"


def test_topology_counts_cores_by_thread_siblings() -> None:
    topo = env.parse_topology(CAPTURED)
    assert topo is not None
    assert (topo.sockets, topo.cores, topo.logical) == (1, 2, 2)


def test_disks_skip_empty_devices_and_keep_backed_loops() -> None:
    # loop0 (64 MiB image with two partitions) and loop1 were attached when the
    # tree was captured; loop2-7 and zram0 had size 0.
    assert env.parse_disks(CAPTURED) == (
        Disk(name="loop0", size_bytes=64 * 1024**2, rotational=True, scheduler="none"),
        Disk(name="loop1", size_bytes=32 * 1024**2, rotational=True, scheduler="none"),
        Disk(name="vda", size_bytes=256 * GiB, rotational=True, scheduler="mq-deadline"),
    )


def test_parse_mountinfo() -> None:
    mounts = env.parse_mountinfo((ROOT / "proc/self/mountinfo").read_text())
    assert len(mounts) == 22
    root = next(m for m in mounts if m.mountpoint == "/")
    assert (root.major_minor, root.fstype, root.source) == ("254:0", "ext4", "/dev/vda")
    assert root.options == "rw,relatime,discard,resv_strict,resuid=65534,resgid=65534"
    spaced = mounts[-1]
    assert spaced.mountpoint == "/tmp/envcap/mnt space"  # \040 unescaped
    assert (spaced.major_minor, spaced.source, spaced.options) == (
        "7:1",
        "/dev/loop1",
        "rw,relatime",
    )


def test_parse_mountinfo_optional_fields_and_garbage() -> None:
    text = (
        "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue\n"
        "not a mountinfo line\n"
    )
    [mount] = env.parse_mountinfo(text)
    assert (mount.root, mount.mountpoint, mount.fstype, mount.source) == (
        "/mnt1",
        "/mnt2",
        "ext3",
        "/dev/root",
    )
    assert mount.options == "rw,noatime,errors=continue"


def test_find_mount() -> None:
    mounts = env.parse_mountinfo((ROOT / "proc/self/mountinfo").read_text())

    def point(path: str, dev: str | None = None) -> tuple[str, str] | None:
        found = env.find_mount(mounts, path, dev=dev)
        return (found.mountpoint, found.major_minor) if found else None

    assert point("/work/main") == ("/", "254:0")
    assert point("/tmp/envcap/mnt1") == ("/tmp/envcap/mnt1", "259:0")
    assert point("/tmp/envcap/mnt1/data/base") == ("/tmp/envcap/mnt1", "259:0")
    assert point("/tmp/envcap/mnt10") == ("/", "254:0")  # a prefix, not a parent
    assert point("/tmp/envcap/mnt space/x") == ("/tmp/envcap/mnt space", "7:1")
    # /dev/shm is mounted twice; the later mount is the one on top.
    assert point("/dev/shm/PostgreSQL.1") == ("/dev/shm", "0:27")
    assert point("/dev/shm/PostgreSQL.1", dev="0:23") == ("/dev/shm", "0:23")


def test_block_device_for() -> None:
    assert env.block_device_for(ROOT, "254:0") == "vda"
    assert env.block_device_for(ROOT, "7:1") == "loop1"
    assert env.block_device_for(ROOT, "259:0") == "loop0"  # loop0p1 -> its disk
    assert env.block_device_for(ROOT, "259:1") == "loop0"
    assert env.block_device_for(ROOT, "0:27") is None  # tmpfs


def test_filesystem_from_another_hosts_files() -> None:
    # What remote.snapshot hands over: the mount table, the paths' stat, and where
    # /sys/dev/block/M:m leads (a partition's directory sits in its disk's).
    files = env.Files(
        texts={"/proc/self/mountinfo": CAPTURED.texts["/proc/self/mountinfo"]},
        links={"/sys/dev/block/259:0": ("/sys/devices/virtual/block/loop0/loop0p1", True)},
    )
    st = PathStat("/tmp/envcap/mnt1/data", "259:0", size_bytes=100, free_bytes=40)
    fs = env.parse_filesystem(files, "/tmp/envcap/mnt1/data/x", st)
    assert fs is not None
    assert (fs.path, fs.mountpoint, fs.device, fs.fstype, fs.block_device) == (
        "/tmp/envcap/mnt1/data/x", "/tmp/envcap/mnt1", "/dev/loop0p1", "ext4", "loop0",
    )  # fmt: skip
    assert (fs.size_bytes, fs.free_bytes, fs.options) == (100, 40, "rw,noatime")
    on_vda = env.parse_filesystem(files, "/work", PathStat("/work", "254:0"))
    assert on_vda is not None and (on_vda.mountpoint, on_vda.block_device) == ("/", None)
    assert env.parse_filesystem(env.Files({}), "/work", PathStat("/work", "254:0")) is None


def test_sysctls() -> None:
    values = env.parse_sysctls(CAPTURED)
    assert values["kernel.sem"] == "32000 1024000000 500 32000"  # tabs in the file
    assert values["vm.lowmem_reserve_ratio"] == "256 256 32 0 0"
    assert values["net.ipv4.ip_local_port_range"] == "32768 60999"
    assert values["vm.dirty_ratio"] == "20"
    assert values["vm.swappiness"] == "60"
    assert values["fs.aio-max-nr"] == "65536"
    # Gone from this kernel: skipped, not an error.
    assert "net.ipv4.tcp_tw_recycle" not in values
    assert "vm.extra_free_kbytes" not in values
    assert list(values) == [n for n in env.SYSCTLS if n in values]
    assert len(values) == len(env.SYSCTLS) - 2


def test_hugepages_and_clocksource() -> None:
    assert env.parse_transparent_hugepages(CAPTURED) == "madvise"
    assert env.parse_clocksource(CAPTURED) == ("tsc", "tsc kvm-clock")


def test_readers_on_an_empty_root_return_nothing(tmp_path: Path) -> None:
    empty = env.read_files(tmp_path, env.FILES)
    assert empty.texts == {}
    assert env.parse_os_release(empty) is None
    assert env.parse_kernel(empty) is None
    assert env.parse_memory_bytes(empty) is None
    assert env.parse_disks(empty) == ()
    assert env.parse_sysctls(empty) == {}
    assert env.parse_transparent_hugepages(empty) is None
    assert env.parse_clocksource(empty) == (None, None)
    assert env.parse_topology(empty) is None
    assert env.block_device_for(tmp_path, "8:0") is None
    assert env.describe_filesystem(Path("/tmp"), root=tmp_path) is None
    cpu = env.parse_cpu(empty)
    assert cpu.model == "unknown" and cpu.logical_cpus >= 1


def test_unreadable_file_is_skipped(tmp_path: Path) -> None:
    # A directory where a file should be: reading it raises IsADirectoryError.
    (tmp_path / "proc/sys/vm/swappiness").mkdir(parents=True)
    (tmp_path / "proc/sys/vm/dirty_ratio").write_text("20\n")
    assert env.parse_sysctls(env.read_files(tmp_path, env.FILES)) == {"vm.dirty_ratio": "20"}


# --------------------------------------------------------------------------
# This machine


def _proc_self_limits() -> dict[str, str]:
    """Soft/hard limits as the kernel reports them: an independent check of getrlimit."""
    names = {
        "Max open files": "nofile",
        "Max processes": "nproc",
        "Max core file size": "core",
        "Max locked memory": "memlock",
    }
    limits = {}
    for line in Path("/proc/self/limits").read_text().splitlines():
        match = re.match(r"(.+?)\s{2,}(\S+)\s+(\S+)", line)
        if match and match.group(1) in names:
            limits[names[match.group(1)]] = f"{match.group(2)}/{match.group(3)}"
    return limits


def test_limits_match_proc_self_limits() -> None:
    assert env.read_limits() == _proc_self_limits()


def test_capture_this_machine() -> None:
    captured = env.capture([Path("/tmp"), Path("/work"), Path("/work/no/such/dir/yet")])
    assert isinstance(captured, Environment)
    assert captured.hostname
    assert captured.os_release and captured.os_release != "unknown"
    assert captured.kernel.startswith(os.uname().release)
    assert captured.memory_bytes > GiB
    assert 1 <= captured.cpu.logical_cpus <= (os.cpu_count() or 1)
    assert captured.cpu.sockets * captured.cpu.cores_per_socket * captured.cpu.threads_per_core == (
        captured.cpu.logical_cpus
    )
    assert captured.disks and all(d.size_bytes > 0 for d in captured.disks)
    assert captured.sysctls["vm.dirty_ratio"].isdigit()
    assert set(captured.limits) == {"nofile", "nproc", "core", "memlock"}
    assert captured.postgres is None
    assert captured.tools["python"] and captured.tools["pgrig"]

    by_path = {fs.path: fs for fs in captured.filesystems}
    assert set(by_path) == {"/tmp", "/work", "/work/no/such/dir/yet"}
    work = by_path["/work"]
    assert work.fstype and work.mountpoint and work.device
    assert 0 < work.free_bytes <= work.size_bytes
    assert by_path["/work/no/such/dir/yet"].mountpoint == work.mountpoint
    if work.block_device is not None:
        assert work.block_device in {d.name for d in captured.disks}

    # The record survives the store's JSON round trip.
    assert from_dict(Environment, to_dict(captured)) == captured


def test_filesystem_matches_stat() -> None:
    fs = env.describe_filesystem(Path("/work"))
    assert fs is not None
    st = os.stat("/work")
    mounts = env.parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    mount = next(m for m in reversed(mounts) if m.mountpoint == fs.mountpoint)
    assert mount.major_minor == f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    vfs = os.statvfs("/work")
    assert fs.size_bytes == vfs.f_blocks * vfs.f_frsize


def test_tool_versions_from_bin_dir() -> None:
    if not (PG_BIN / "pgbench").exists():
        pytest.skip(f"PostgreSQL binaries not in {PG_BIN}")
    tools = env.tool_versions(PG_BIN)
    assert tools["pgbench"].startswith("pgbench (PostgreSQL) 15")
    assert tools["pg_test_fsync"].startswith("pg_test_fsync (PostgreSQL) 15")
    assert tools["psql"].startswith("psql (PostgreSQL) 15")
    if shutil.which("fio"):
        assert tools["fio"].startswith("fio-")


def test_tool_versions_missing_bin_dir_is_absent(tmp_path: Path) -> None:
    tools = env.tool_versions(tmp_path)
    assert not set(env.PG_TOOLS) & set(tools)
    assert "python" in tools


@pytest.fixture
def loop_mount() -> Iterator[Path]:
    """A 16 MiB ext4 image loop-mounted under /tmp, as a study on a test filesystem uses."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root and mkfs.ext4 to loop-mount a filesystem")
    work = Path(tempfile.mkdtemp(prefix="pgrig-env-loop-", dir="/tmp"))
    image, mountpoint = work / "fs.img", work / "mnt"
    mountpoint.mkdir()
    with open(image, "wb") as f:
        f.truncate(16 * 1024**2)
    try:
        proc.run(["mkfs.ext4", "-q", str(image)], timeout=30)
        proc.run(["mount", "-o", "loop,noatime", str(image), str(mountpoint)], timeout=30)
    except ToolError as exc:
        shutil.rmtree(work)
        pytest.skip(f"cannot loop-mount here: {exc}")
    try:
        yield mountpoint
    finally:
        # The loop device is detached by umount (mount -o loop sets autoclear).
        proc.run(["umount", str(mountpoint)], timeout=30, check=False)
        shutil.rmtree(work)


def test_filesystem_on_loop_device(loop_mount: Path) -> None:
    fs = env.describe_filesystem(loop_mount / "pgdata")
    assert fs is not None
    assert fs.mountpoint == str(loop_mount)
    assert fs.fstype == "ext4"
    assert "noatime" in fs.options.split(",")
    assert fs.device.startswith("/dev/loop")
    assert fs.block_device == Path(fs.device).name
    assert 8 * 1024**2 < fs.size_bytes <= 16 * 1024**2
    disk = next(
        d for d in env.parse_disks(env.read_files(env.ROOT, env.FILES)) if d.name == fs.block_device
    )
    assert disk.size_bytes == 16 * 1024**2


# --------------------------------------------------------------------------
# A throwaway PostgreSQL server


@pytest.fixture(scope="module")
def pg_server() -> Iterator[dict[str, str]]:
    """A throwaway server: Unix socket only, work_mem=7MB given on the command line."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL binaries not in {PG_BIN}")
    user = proc.OsUser.lookup("postgres") if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="pgrig-env-pg-", dir="/tmp"))
    if user is not None:
        os.chown(base, user.uid, user.gid)
    data = base / "data"
    pg_ctl = [str(PG_BIN / "pg_ctl"), "-D", str(data)]
    started = False
    try:
        proc.run(
            [PG_BIN / "initdb", "-D", data, "--auth=trust", "-U", "postgres", "--no-sync"],
            timeout=120,
            user=user,
        )
        options = f"-c listen_addresses='' -c unix_socket_directories={base} -c work_mem=7MB"
        proc.run(
            [*pg_ctl, "-w", "-t", "60", "-l", str(base / "log"), "-o", options, "start"],
            timeout=90,
            user=user,
        )
        started = True
        yield {"host": str(base), "dbname": "postgres", "user": "postgres"}
    finally:
        if started:
            proc.run([*pg_ctl, "-m", "fast", "-w", "stop"], timeout=60, user=user, check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.cluster
def test_postgres_settings(pg_server: dict[str, str]) -> None:
    info = env.read_postgres(pg_server, bin_dir=PG_BIN)
    assert info is not None
    assert info.version_num >= 150000
    assert info.version.startswith(str(info.version_num // 10000))
    assert info.bin_dir == str(PG_BIN)
    assert info.data_directory == str(Path(pg_server["host"]) / "data")
    assert info.settings["work_mem"] == "7MB"  # command line
    assert info.settings["unix_socket_directories"] == pg_server["host"]
    assert info.settings["shared_buffers"] == "128MB"  # postgresql.conf from initdb
    # Fixed at initdb, recorded even at their usual values.
    assert info.settings["wal_segment_size"] == "16MB"
    assert info.settings["block_size"] == "8192"
    assert info.settings["data_checksums"] == "off"
    # Our connection, not the server.
    assert "client_encoding" not in info.settings
    assert "transaction_isolation" not in info.settings
    assert "shared_preload_libraries" not in info.settings  # still at its default


@pytest.mark.cluster
def test_capture_with_postgres_conninfo_string(pg_server: dict[str, str]) -> None:
    dsn = f"host={pg_server['host']} dbname=postgres user=postgres"
    captured = env.capture([Path(pg_server["host"])], pg_conninfo=dsn, bin_dir=PG_BIN)
    assert captured.postgres is not None
    assert captured.postgres.settings["work_mem"] == "7MB"
    assert captured.tools["pgbench"].startswith("pgbench (PostgreSQL)")
    assert captured.filesystems[0].path == pg_server["host"]


def test_unreachable_postgres_is_recorded_as_absent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No server listens on a socket in an empty directory.
    conninfo = {"host": str(tmp_path), "port": "1", "dbname": "x"}
    assert env.read_postgres(conninfo) is None
    assert "cannot read PostgreSQL settings" in caplog.text
    captured = env.capture([tmp_path], pg_conninfo=conninfo)
    assert captured.postgres is None
    assert captured.filesystems[0].path == str(tmp_path)
