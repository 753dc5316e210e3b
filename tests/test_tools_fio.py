from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgrig import proc
from pgrig.errors import BinaryNotFound, ParseError, ToolError, UsageError, WorkdirError
from pgrig.results import FioResult, from_dict, to_dict
from pgrig.tools import fio
from pgrig.tools.fio import FioJob

DATA = Path(__file__).parent / "data"
HAVE_FIO = shutil.which("fio") is not None


def fixture_job(pattern: str) -> FioJob:
    """The job the fixtures were captured with."""
    return FioJob(
        Path("/var/tmp/pgrig_cap"), pattern, numjobs=2, iodepth=4, size="64M", runtime_s=2
    )


def read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture
def var_tmp_dir() -> Iterator[Path]:
    # /tmp may be tmpfs elsewhere; /var/tmp is on a disk on Debian.
    path = Path(os.environ.get("PGRIG_TEST_DISK_DIR", "/var/tmp")) / f"pgrig-test-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.mark.parametrize(
    ("pattern", "iops", "runtime_s", "mean_us", "p50_us", "p99_us", "p999_us"),
    [
        ("randwrite", 64894.052974, 2.001, 114.479979546, 103.936, 244.736, 1581.056),
        ("randread", 40520.47952, 2.002, 190.429146791, 179.2, 272.384, 3522.56),
        ("write", 63051.474263, 2.001, 118.289181071, 110.08, 254.976, 692.224),
        ("read", 39554.222889, 2.001, 194.753669493, 189.44, 342.016, 978.944),
    ],
)
def test_parse_captured_json(
    pattern: str,
    iops: float,
    runtime_s: float,
    mean_us: float,
    p50_us: float,
    p99_us: float,
    p999_us: float,
) -> None:
    result = fio.parse(read(f"fio_{pattern}.json"), fixture_job(pattern))
    assert result.pattern == pattern
    assert result.iops == pytest.approx(iops)
    assert result.runtime_s == pytest.approx(runtime_s)
    assert result.clat_mean_us == pytest.approx(mean_us)
    assert result.clat_p50_us == pytest.approx(p50_us)
    assert result.clat_p99_us == pytest.approx(p99_us)
    assert result.clat_p999_us == pytest.approx(p999_us)
    assert result.fio_version == "fio-3.33"
    assert (result.block_size, result.ioengine, result.direct) == ("8k", "libaio", True)
    assert (result.numjobs, result.iodepth, result.size) == (2, 4, "64M")
    assert from_dict(FioResult, to_dict(result)) == result


def test_parse_bandwidth_in_mib() -> None:
    result = fio.parse(read("fio_randwrite.json"), fixture_job("randwrite"))
    assert result.bandwidth_mib_s == pytest.approx(531612081 / 2**20)
    # 8k blocks: bandwidth and IOPS must agree.
    assert result.bandwidth_mib_s == pytest.approx(result.iops * 8 / 1024, rel=0.001)


def test_parse_keeps_fios_own_iops_samples() -> None:
    """fio samples IOPS every 500 ms: their range and deviation say how steady the
    device was, the report's spread for a figure measured once."""
    result = fio.parse(read("fio_randwrite.json"), fixture_job("randwrite"))
    assert (result.iops_samples, result.iops_min, result.iops_max) == (6, 58046.0, 70010.0)
    assert result.iops_stddev == pytest.approx(2990.720404)
    # An older fio (or one sample): no spread rather than a made-up one.
    data = json.loads(read("fio_randwrite.json"))
    data["jobs"][0]["write"]["iops_samples"] = 1
    one = fio.parse(json.dumps(data), fixture_job("randwrite"))
    assert (one.iops_samples, one.iops_min, one.iops_stddev) == (None, None, None)


def test_parse_tolerates_warnings_before_json() -> None:
    text = "fio: some warning fio printed first\n" + read("fio_read.json")
    assert fio.parse(text, fixture_job("read")).iops == pytest.approx(39554.222889)


def test_parse_refuses_output_of_another_pattern() -> None:
    with pytest.raises(ParseError, match="rw=randwrite, expected rw=randread"):
        fio.parse(read("fio_randwrite.json"), fixture_job("randread"))


def test_parse_refuses_side_without_io() -> None:
    data = json.loads(read("fio_randwrite.json"))
    del data["jobs"][0]["job options"]["rw"]
    with pytest.raises(ParseError, match="no read I/O"):
        fio.parse(json.dumps(data), fixture_job("randread"))


def test_parse_job_error_is_a_tool_error() -> None:
    # Captured on ramfs, which refuses O_DIRECT: fio still writes JSON, with error 22.
    job = FioJob(Path("/tmp/captest/ramfs"), "randwrite", iodepth=4, size="16M", runtime_s=1)
    with pytest.raises(ToolError, match="error 22"):
        fio.parse(read("fio_odirect_ramfs.json"), job)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "no JSON document"),
        ("fio: engine libaio not loadable\n", "first line: 'fio: engine libaio not loadable'"),
        ('{"fio version": "fio-3.33", "jobs": [', "invalid JSON at line 1"),
        ('{"fio version": "fio-3.33"}', "missing or malformed field 'jobs'"),
        ('{"jobs": []}', "expected one job group"),
        ("[1, 2]", "no JSON document"),
    ],
)
def test_parse_garbage_raises(text: str, expected: str) -> None:
    with pytest.raises(ParseError) as info:
        fio.parse(text, fixture_job("randwrite"))
    assert str(info.value).startswith("fio: ")
    assert expected in str(info.value)


def test_parse_without_percentiles_raises() -> None:
    data = json.loads(read("fio_write.json"))
    del data["jobs"][0]["write"]["clat_ns"]["percentile"]
    with pytest.raises(ParseError, match="percentiles"):
        fio.parse(json.dumps(data), fixture_job("write"))


def test_parse_status_lines() -> None:
    # fio's real status output, split on \r as proc.stream does.
    lines = read("fio_status_randwrite.stdout.txt").replace("\r", "\n").splitlines()
    statuses = [s for s in map(fio.parse_status, lines) if s is not None]
    assert statuses[0] == (0.5, 3.0)
    assert statuses[1] == (0.6, 2.0)
    assert statuses[-1] == (1.0, 0.0)
    assert fio.parse_status("Jobs: 1 (f=1)") is None
    assert fio.parse_status("Jobs: 1 (f=1): [w(1)][-.-%][w=344MiB/s][eta 00m:00s]") is None
    hours = "Jobs: 32 (f=32): [w(32)][2.5%][w=1GiB/s][w=131k IOPS][eta 01h:02m:03s]"
    assert fio.parse_status(hours) == (0.025, 3723.0)
    unknown = "Jobs: 1 (f=1): [f(1)][0.0%][eta 1158050441d:06h:58m:03s]"
    assert fio.parse_status(unknown) == (0.0, None)


def test_odirect_refused_detects_fio_message() -> None:
    assert fio.odirect_refused(read("fio_odirect_ramfs.stderr.txt"))
    assert not fio.odirect_refused("fio: pid=1, err=28/file:io_u.c:1845, error=No space left")


def test_argv_matches_seed_job() -> None:
    job = FioJob(Path("/data01"), "randwrite", numjobs=32, iodepth=8, size="16G", runtime_s=60)
    args = fio.argv(job, "/usr/bin/fio")
    assert args == [
        "/usr/bin/fio",
        "--name=pgrig",
        "--filename=/data01/pgrig_fio.tmp",
        "--ioengine=libaio",
        "--direct=1",
        "--bs=8k",
        "--rw=randwrite",
        "--numjobs=32",
        "--iodepth=8",
        "--size=16G",
        "--runtime=60",
        "--time_based",
        "--group_reporting",
        "--output-format=json",
    ]
    with_output = fio.argv(job, "fio", Path("/tmp/x/fio.json"))
    assert with_output[-3:] == ["--output=/tmp/x/fio.json", "--eta=always", "--eta-newline=1"]
    assert "--direct=0" in fio.argv(FioJob(Path("/d"), "read", direct=False))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pattern": "randrw"},
        {"pattern": "read", "numjobs": 0},
        {"pattern": "read", "size": "lots"},
        {"pattern": "read", "block_size": "8k --rw=trim"},
    ],
)
def test_job_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        FioJob(Path("/var/tmp"), **kwargs)  # type: ignore[arg-type]


def test_size_bytes() -> None:
    assert fio.size_bytes("64M") == 64 * 2**20
    assert fio.size_bytes("16g") == 16 * 2**30
    assert fio.size_bytes("4096") == 4096


def test_find_fio_missing(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFound) as info:
        fio.find_fio(str(tmp_path))
    assert info.value.hint == "apt-get install fio"


def test_run_without_fio_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BinaryNotFound, match="fio not found") as info:
        fio.run(FioJob(tmp_path, "randwrite", size="32M", runtime_s=1))
    assert info.value.hint == "apt-get install fio"
    assert list(tmp_path.iterdir()) == []


def test_run_refuses_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "pgrig_fio.tmp"
    target.write_text("someone's data")
    with pytest.raises(WorkdirError, match="already exists"):
        fio.run(FioJob(tmp_path, "randwrite", size="32M", runtime_s=1), fio="/bin/false")
    assert target.read_text() == "someone's data"


@pytest.mark.skipif(not HAVE_FIO, reason="fio not installed")
def test_run_real_fio(var_tmp_dir: Path) -> None:
    progress: list[tuple[float, float | None]] = []
    job = FioJob(var_tmp_dir, "randwrite", numjobs=1, iodepth=4, size="32M", runtime_s=2)
    result, raw = fio.run(job, on_progress=lambda f, r: progress.append((f, r)), timeout=60)
    assert result.pattern == "randwrite"
    assert result.iops > 0 and result.bandwidth_mib_s > 0
    assert 0 < result.clat_p50_us <= result.clat_p99_us <= result.clat_p999_us
    assert 1.5 <= result.runtime_s <= 3.0
    assert json.loads(raw)["jobs"][0]["job options"]["rw"] == "randwrite"
    assert all(0.0 <= done <= 1.0 for done, _ in progress)
    assert list(var_tmp_dir.iterdir()) == []


@pytest.fixture
def ramfs_dir(tmp_path: Path) -> Iterator[Path]:
    """A ramfs mount: a real filesystem that refuses O_DIRECT (tmpfs accepts it since 6.6)."""
    mountpoint = tmp_path / "ramfs"
    mountpoint.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting ramfs needs root")
    mounted = proc.run(["mount", "-t", "ramfs", "ramfs", mountpoint], timeout=10, check=False)
    if not mounted.ok:
        pytest.skip(f"cannot mount ramfs here: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        proc.run(["umount", mountpoint], timeout=30)


@pytest.mark.skipif(not HAVE_FIO, reason="fio not installed")
def test_run_on_filesystem_without_odirect(ramfs_dir: Path) -> None:
    job = FioJob(ramfs_dir, "randwrite", iodepth=4, size="16M", runtime_s=1)
    with pytest.raises(ToolError) as info:
        fio.run(job, timeout=60)
    assert f"the filesystem of {ramfs_dir} does not support O_DIRECT" in str(info.value)
    assert info.value.hint is not None and "--fio-direct 0" in info.value.hint
    assert list(ramfs_dir.iterdir()) == []


@pytest.mark.skipif(not HAVE_FIO, reason="fio not installed")
def test_pinned_jobs_run_on_their_cpus_one_each(var_tmp_dir: Path) -> None:
    """Seed 000's fio: --cpus_allowed with --cpus_allowed_policy=split, a CPU per job."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    listed = ",".join(map(str, cpus))
    job = FioJob(var_tmp_dir, "randread", numjobs=len(cpus), iodepth=4, size="16M",
                 runtime_s=1, cpus_allowed=listed)  # fmt: skip
    args = fio.argv(job)
    assert f"--cpus_allowed={listed}" in args and "--cpus_allowed_policy=split" in args
    result, raw = fio.run(job, timeout=60)
    assert result.cpus_allowed == listed and result.iops > 0
    options = json.loads(raw)["jobs"][0]["job options"]
    assert options["cpus_allowed"] == listed and options["cpus_allowed_policy"] == "split"
    assert from_dict(FioResult, to_dict(result)) == result
