"""Memory cgroups: page cache kept under the limit; a real PostgreSQL server started
inside the lab's cgroups with everything it forks."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_disk_dir
from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.hosts.local import HERE
from pgrig.pgsource import binaries
from pgrig.storage import IoLimits, limited, memcg, memory_limited
from pgrig.storage.throttle import device_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
MiB = 2**20


@pytest.fixture
def big_file() -> Iterator[Path]:
    """192 MiB written with O_DIRECT, so none of it is in the page cache yet."""
    base = make_disk_dir("pgrig-test-memcg-")
    path = base / "big"
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=192", "oflag=direct"],
        check=True,
        capture_output=True,
    )
    yield path
    shutil.rmtree(base, ignore_errors=True)


def test_page_cache_of_a_reader_stays_under_the_limit(big_file: Path) -> None:
    limit = 64 * MiB
    with memory_limited(limit) as cg:
        before = memcg.stats(cg)
        assert before.limit_bytes == limit and before.usage_bytes < limit
        subprocess.run(
            ["dd", f"if={big_file}", "of=/dev/null", "bs=1M"],
            check=True,
            capture_output=True,
            preexec_fn=cg.preexec(),
        )
        after = memcg.stats(cg)
    # It read 3x the limit through the page cache, which was charged here and
    # reclaimed within the cgroup: never above the limit, and the limit was hit.
    assert after.peak_bytes is not None and after.peak_bytes <= limit
    assert after.cache_bytes <= limit
    assert after.cache_bytes > limit // 4, after.describe()
    assert after.failcnt > 0, after.describe()
    assert after.oom_kills == 0
    assert "limit 64 MiB" in after.describe()


def test_server_and_all_it_forks_run_inside_the_lab_cgroups(tmp_path: Path) -> None:
    try:
        bins = binaries.find()
    except Exception as exc:  # pragma: no cover - make test installs PostgreSQL
        pytest.skip(f"no PostgreSQL binaries: {exc}")
    base = make_disk_dir("pgrig-test-memcg-pg-")
    cluster = Cluster.create(bins, base / "work", study="test", os_user=server_os_user())
    limits = IoLimits.generic(iops=2000, label="test")
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("stock").with_overrides({"shared_buffers": "32MB"}))
        with limited(io=limits, device=device_of(base), memory_bytes=256 * MiB) as cg:
            cluster.start(cgroups=tuple(str(path) for path in cg.procs_files))
            conn = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
            with conn.connect() as db:
                backend = db.execute("SELECT pg_backend_pid()").fetchone()
                db.execute("CREATE TABLE t AS SELECT g FROM generate_series(1, 10000) g")
                server = HERE.processes_using(str(cluster.datadir))
                assert backend is not None and backend[0] in server
                inside = set(cg.pids())
                # postmaster, checkpointer, walwriter, ... and this connection's backend
                assert set(server) <= inside, (server, inside)
                stats = memcg.stats(cg)
                assert stats.shmem_bytes > 0 or stats.cache_bytes > 0, stats.describe()
            cluster.stop()
            assert cg.pids() == []
    finally:
        cluster.destroy()
        shutil.rmtree(base, ignore_errors=True)
