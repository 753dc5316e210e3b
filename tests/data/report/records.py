"""Report fixtures: typed results with values from real runs on the dev VM.

Captured on 2026-11-22 on the pgrig dev VM (Debian 12, 2-core AMD EPYC KVM guest,
ext4 on /dev/vda), with /tmp/rcap as the target directory:

* pg_test_timing -d 1 and pg_test_fsync -s 1 (PostgreSQL 15.18);
* fio-3.33, 8k, libaio, direct=1, numjobs=1, iodepth=16, size=64M, 2 s time_based;
* a throwaway PostgreSQL 15.18 cluster (shared_buffers=256MB), pgbench -i -s 5,
  EXPLAIN ANALYZE count(*) forced to an index-only and a seq scan, then
  pgbench -M prepared -T 5 -P 1 -r -l at 1, 2 and 4 clients (2 clients repeated
  3 times) for select-only (-S) and read-write. Latency percentiles were
  computed from the -l transaction logs (nearest rank); statements per
  transaction as the seeds count them (TPC-B: 5, BEGIN and END not counted).

The tool outputs are kept verbatim in ``captured/``. Two records did not come
from a run: a failed and a skipped one, built the way the study runner records
them, so the report has to show both; the skipped reason holds a "|" on
purpose, to check that Markdown table cells are escaped.
"""

# ruff: noqa: E501

from __future__ import annotations

from pgrig.results import (
    CountResult,
    Cpu,
    Disk,
    Environment,
    Filesystem,
    FioResult,
    FsyncResult,
    FsyncRow,
    LatencySummary,
    PgbenchInit,
    PgbenchRun,
    PostgresInfo,
    ProgressPoint,
    RunRecord,
    StatementLatency,
    Study,
    TimingBucket,
    TimingResult,
    to_dict,
)

STUDY_ID = "quick-20261122-041500"
TARGET = "/tmp/rcap (ext4 on vda)"
PG_VERSION = "15.18 (Debian 15.18-0+deb12u1)"
TOOLS = {
    "pg_test_fsync": PG_VERSION,
    "pg_test_timing": PG_VERSION,
    "pgbench": PG_VERSION,
    "fio": "fio-3.33",
}

ENVIRONMENT = Environment(
    captured_at="2026-11-22T04:15:00+00:00",
    hostname="vm",
    os_release="Debian GNU/Linux 12 (bookworm)",
    kernel="6.18.44-fc-v657",
    cpu=Cpu(
        model="AMD EPYC",
        sockets=1,
        cores_per_socket=2,
        threads_per_core=1,
        logical_cpus=2,
        mhz=None,
        hypervisor="KVM",
    ),
    memory_bytes=24684092 * 1024,
    disks=(Disk("vda", 536870912 * 512, rotational=True, scheduler="mq-deadline"),),
    filesystems=(
        Filesystem(
            path="/tmp/rcap",
            device="/dev/vda",
            mountpoint="/",
            fstype="ext4",
            options="rw,relatime,discard,resv_strict,resuid=65534,resgid=65534",
            size_bytes=270553174016,
            free_bytes=84359188480,
            block_device="vda",
        ),
    ),
    sysctls={
        "fs.aio-max-nr": "65536",
        "fs.file-max": "2466177",
        "kernel.sem": "32000 1024000000 500 32000",
        "kernel.shmall": "18446744073692774399",
        "kernel.shmmax": "18446744073692774399",
        "kernel.shmmni": "4096",
        "net.core.somaxconn": "4096",
        "vm.dirty_background_bytes": "0",
        "vm.dirty_background_ratio": "10",
        "vm.dirty_expire_centisecs": "3000",
        "vm.dirty_ratio": "20",
        "vm.dirty_writeback_centisecs": "500",
        "vm.swappiness": "60",
        "vm.overcommit_memory": "0",
        "vm.overcommit_ratio": "50",
        "vm.nr_hugepages": "0",
        "vm.min_free_kbytes": "67584",
        "vm.zone_reclaim_mode": "0",
    },
    limits={
        "nofile": "20000/20000",
        "nproc": "96365/96365",
        "core": "0/unlimited",
        "memlock": "8388608/8388608",
    },
    transparent_hugepages="madvise",
    clocksource="tsc",
    available_clocksources="tsc kvm-clock",
    postgres=PostgresInfo(
        version=PG_VERSION,
        version_num=150018,
        bin_dir="/usr/lib/postgresql/15/bin",
        data_directory="/tmp/rcap/pg/data",
        settings={
            "DateStyle": "ISO, MDY",
            "TimeZone": "Etc/UTC",
            "dynamic_shared_memory_type": "posix",
            "lc_messages": "C.UTF-8",
            "listen_addresses": "",
            "log_timezone": "Etc/UTC",
            "max_connections": "50",
            "max_wal_size": "1GB",
            "min_wal_size": "80MB",
            "shared_buffers": "256MB",
            "unix_socket_directories": "/tmp/rcap/pg",
        },
    ),
    tools=TOOLS,
)

TIMING = TimingResult(
    duration_s=1.0,
    per_loop_ns=26.14,
    histogram=(
        TimingBucket(lt_us=1, percent=97.44461, count=37274432),
        TimingBucket(lt_us=2, percent=2.55321, count=976650),
        TimingBucket(lt_us=4, percent=0.00096, count=368),
        TimingBucket(lt_us=8, percent=2e-05, count=7),
        TimingBucket(lt_us=16, percent=0.0002, count=77),
        TimingBucket(lt_us=32, percent=0.0008, count=307),
        TimingBucket(lt_us=64, percent=0.00014, count=54),
        TimingBucket(lt_us=128, percent=2e-05, count=9),
        TimingBucket(lt_us=256, percent=0.0, count=1),
        TimingBucket(lt_us=512, percent=1e-05, count=2),
        TimingBucket(lt_us=1024, percent=1e-05, count=3),
        TimingBucket(lt_us=2048, percent=1e-05, count=5),
        TimingBucket(lt_us=4096, percent=0.0, count=1),
    ),
)
FSYNC = FsyncResult(
    seconds_per_test=1.0,
    rows=(
        FsyncRow(
            section="one 8kB write",
            method="open_datasync",
            ops_per_sec=8804.375,
            usecs_per_op=114.0,
        ),
        FsyncRow(
            section="one 8kB write", method="fdatasync", ops_per_sec=9255.519, usecs_per_op=108.0
        ),
        FsyncRow(section="one 8kB write", method="fsync", ops_per_sec=9120.705, usecs_per_op=110.0),
        FsyncRow(
            section="one 8kB write",
            method="fsync_writethrough",
            ops_per_sec=None,
            usecs_per_op=None,
        ),
        FsyncRow(
            section="one 8kB write", method="open_sync", ops_per_sec=8914.679, usecs_per_op=112.0
        ),
        FsyncRow(
            section="two 8kB writes",
            method="open_datasync",
            ops_per_sec=4360.564,
            usecs_per_op=229.0,
        ),
        FsyncRow(
            section="two 8kB writes", method="fdatasync", ops_per_sec=7970.068, usecs_per_op=125.0
        ),
        FsyncRow(
            section="two 8kB writes", method="fsync", ops_per_sec=8590.562, usecs_per_op=116.0
        ),
        FsyncRow(
            section="two 8kB writes",
            method="fsync_writethrough",
            ops_per_sec=None,
            usecs_per_op=None,
        ),
        FsyncRow(
            section="two 8kB writes", method="open_sync", ops_per_sec=4138.044, usecs_per_op=242.0
        ),
        FsyncRow(
            section="open_sync sizes",
            method="1 * 16kB open_sync write",
            ops_per_sec=8541.513,
            usecs_per_op=117.0,
        ),
        FsyncRow(
            section="open_sync sizes",
            method="2 * 8kB open_sync writes",
            ops_per_sec=4847.137,
            usecs_per_op=206.0,
        ),
        FsyncRow(
            section="open_sync sizes",
            method="4 * 4kB open_sync writes",
            ops_per_sec=2144.347,
            usecs_per_op=466.0,
        ),
        FsyncRow(
            section="open_sync sizes",
            method="8 * 2kB open_sync writes",
            ops_per_sec=853.511,
            usecs_per_op=1172.0,
        ),
        FsyncRow(
            section="open_sync sizes",
            method="16 * 1kB open_sync writes",
            ops_per_sec=401.106,
            usecs_per_op=2493.0,
        ),
        FsyncRow(
            section="fsync on non-write descriptor",
            method="write, fsync, close",
            ops_per_sec=6279.146,
            usecs_per_op=159.0,
        ),
        FsyncRow(
            section="fsync on non-write descriptor",
            method="write, close, fsync",
            ops_per_sec=7873.378,
            usecs_per_op=127.0,
        ),
        FsyncRow(
            section="non-synced 8kB writes",
            method="write",
            ops_per_sec=1524547.641,
            usecs_per_op=1.0,
        ),
    ),
)
FIO_RANDWRITE = FioResult(
    pattern="randwrite",
    block_size="8k",
    ioengine="libaio",
    direct=True,
    numjobs=1,
    iodepth=16,
    size="64M",
    runtime_s=2.0,
    iops=78000.5,
    bandwidth_mib_s=609.378,
    clat_mean_us=198.718,
    clat_p50_us=199.68,
    clat_p99_us=407.552,
    clat_p999_us=1044.48,
    fio_version="fio-3.33",
    iops_samples=3,
    iops_min=63370.0,
    iops_max=104184.0,
    iops_stddev=21410.649905,
)
FIO_RANDREAD = FioResult(
    pattern="randread",
    block_size="8k",
    ioengine="libaio",
    direct=True,
    numjobs=1,
    iodepth=16,
    size="64M",
    runtime_s=2.0,
    iops=46520.24,
    bandwidth_mib_s=363.438,
    clat_mean_us=337.503,
    clat_p50_us=317.44,
    clat_p99_us=518.144,
    clat_p999_us=3358.72,
    fio_version="fio-3.33",
    iops_samples=3,
    iops_min=44546.0,
    iops_max=48250.0,
    iops_stddev=1895.337789,
)
FIO_WRITE = FioResult(
    pattern="write",
    block_size="8k",
    ioengine="libaio",
    direct=True,
    numjobs=1,
    iodepth=16,
    size="64M",
    runtime_s=2.0,
    iops=107417.791,
    bandwidth_mib_s=839.201,
    clat_mean_us=142.814,
    clat_p50_us=136.192,
    clat_p99_us=544.768,
    clat_p999_us=798.72,
    fio_version="fio-3.33",
    iops_samples=3,
    iops_min=73626.0,
    iops_max=131124.0,
    iops_stddev=31206.204148,
)
FIO_READ = FioResult(
    pattern="read",
    block_size="8k",
    ioengine="libaio",
    direct=True,
    numjobs=1,
    iodepth=16,
    size="64M",
    runtime_s=2.0,
    iops=47230.885,
    bandwidth_mib_s=368.991,
    clat_mean_us=332.912,
    clat_p50_us=301.056,
    clat_p99_us=847.872,
    clat_p999_us=4079.616,
    fio_version="fio-3.33",
    iops_samples=3,
    iops_min=40958.0,
    iops_max=58962.0,
    iops_stddev=10353.865816,
)
INIT = PgbenchInit(
    scale=5,
    rows=500000,
    elapsed_s=1.08,
    rows_per_s=462963.0,
    steps={
        "drop tables": 0.0,
        "create tables": 0.0,
        "client-side generate": 0.71,
        "vacuum": 0.13,
        "primary keys": 0.23,
    },
    generate="client",
    partitions=0,
    unlogged=False,
    tablespace=None,
    index_tablespace=None,
    database_bytes=88472935,
)
COUNT_IOS = CountResult(
    method="index-only scan",
    rows=500000,
    execution_ms=47.89,
    plan="Finalize Aggregate  (cost=11600.80..11600.81 rows=1 width=8) (actual time=45.711..47.758 rows=1 loops=1)\n  ->  Gather  (cost=11600.59..11600.80 rows=2 width=8) (actual time=43.771..47.747 rows=3 loops=1)\n        Workers Planned: 2\n        Workers Launched: 2\n        ->  Partial Aggregate  (cost=10600.59..10600.60 rows=1 width=8) (actual time=39.555..39.557 rows=1 loops=3)\n              ->  Parallel Index Only Scan using pgbench_accounts_pkey on pgbench_accounts  (cost=0.42..10079.76 rows=208333 width=0) (actual time=0.069..33.605 rows=166667 loops=3)\n                    Heap Fetches: 0\nPlanning Time: 0.408 ms\nExecution Time: 47.890 ms",
)
COUNT_SEQ = CountResult(
    method="seq scan",
    rows=500000,
    execution_ms=46.6,
    plan="Aggregate  (cost=14447.00..14447.01 rows=1 width=8) (actual time=46.540..46.542 rows=1 loops=1)\n  ->  Seq Scan on pgbench_accounts  (cost=0.00..13197.00 rows=500000 width=0) (actual time=0.032..30.888 rows=500000 loops=1)\nPlanning Time: 0.258 ms\nExecution Time: 46.600 ms",
)
RUNS = {
    ("select-only", 1, 0): PgbenchRun(
        mode="select-only",
        transaction_type="<builtin: select only>",
        scale=5,
        query_mode="prepared",
        clients=1,
        threads=1,
        duration_s=5.0,
        transactions=151167,
        failed=0,
        tps=30238.189729,
        latency_avg_ms=0.031,
        latency_stddev_ms=0.041,
        initial_connection_ms=2.909,
        statements_per_txn=1,
        statements=(
            StatementLatency(
                latency_ms=0.0, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(
                latency_ms=0.031,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=10888.8, latency_ms=0.09, stddev_ms=0.061, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=14225.1, latency_ms=0.069, stddev_ms=0.053, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=29191.3, latency_ms=0.03, stddev_ms=0.042, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=50451.4, latency_ms=0.019, stddev_ms=0.023, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=5.0, tps=46311.3, latency_ms=0.02, stddev_ms=0.018, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=151167, sampling_rate=1.0, p50_ms=0.02, p95_ms=0.092, p99_ms=0.127, max_ms=3.863
        ),
    ),
    ("select-only", 2, 0): PgbenchRun(
        mode="select-only",
        transaction_type="<builtin: select only>",
        scale=5,
        query_mode="prepared",
        clients=2,
        threads=2,
        duration_s=5.0,
        transactions=414244,
        failed=0,
        tps=82958.803373,
        latency_avg_ms=0.018,
        latency_stddev_ms=0.027,
        initial_connection_ms=7.708,
        statements_per_txn=1,
        statements=(
            StatementLatency(
                latency_ms=0.0, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(
                latency_ms=0.018,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=55158.9, latency_ms=0.028, stddev_ms=0.046, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=44711.8, latency_ms=0.037, stddev_ms=0.046, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=96344.4, latency_ms=0.015, stddev_ms=0.02, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=108588.2, latency_ms=0.011, stddev_ms=0.011, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=414244, sampling_rate=1.0, p50_ms=0.017, p95_ms=0.052, p99_ms=0.09, max_ms=7.926
        ),
    ),
    ("select-only", 2, 1): PgbenchRun(
        mode="select-only",
        transaction_type="<builtin: select only>",
        scale=5,
        query_mode="prepared",
        clients=2,
        threads=2,
        duration_s=5.0,
        transactions=502212,
        failed=0,
        tps=100583.659692,
        latency_avg_ms=0.014,
        latency_stddev_ms=0.03,
        initial_connection_ms=9.938,
        statements_per_txn=1,
        statements=(
            StatementLatency(
                latency_ms=0.0, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(
                latency_ms=0.014,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=97702.9, latency_ms=0.015, stddev_ms=0.019, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=108416.0, latency_ms=0.011, stddev_ms=0.01, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=107141.1, latency_ms=0.013, stddev_ms=0.028, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=107160.4, latency_ms=0.014, stddev_ms=0.018, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=502212, sampling_rate=1.0, p50_ms=0.017, p95_ms=0.022, p99_ms=0.057, max_ms=7.83
        ),
    ),
    ("select-only", 2, 2): PgbenchRun(
        mode="select-only",
        transaction_type="<builtin: select only>",
        scale=5,
        query_mode="prepared",
        clients=2,
        threads=2,
        duration_s=5.0,
        transactions=329704,
        failed=0,
        tps=65985.973998,
        latency_avg_ms=0.024,
        latency_stddev_ms=0.058,
        initial_connection_ms=4.434,
        statements_per_txn=1,
        statements=(
            StatementLatency(
                latency_ms=0.0, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(
                latency_ms=0.024,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=47071.4, latency_ms=0.035, stddev_ms=0.033, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=60459.0, latency_ms=0.027, stddev_ms=0.082, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=78971.1, latency_ms=0.02, stddev_ms=0.037, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=72613.7, latency_ms=0.021, stddev_ms=0.039, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=329704,
            sampling_rate=1.0,
            p50_ms=0.018,
            p95_ms=0.075,
            p99_ms=0.106,
            max_ms=7.835,
        ),
    ),
    ("select-only", 4, 0): PgbenchRun(
        mode="select-only",
        transaction_type="<builtin: select only>",
        scale=5,
        query_mode="prepared",
        clients=4,
        threads=2,
        duration_s=5.0,
        transactions=284816,
        failed=0,
        tps=57024.410002,
        latency_avg_ms=0.054,
        latency_stddev_ms=0.106,
        initial_connection_ms=10.819,
        statements_per_txn=1,
        statements=(
            StatementLatency(
                latency_ms=0.0, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(
                latency_ms=0.054,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=35310.1, latency_ms=0.092, stddev_ms=0.1, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=59013.2, latency_ms=0.05, stddev_ms=0.163, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=54491.9, latency_ms=0.06, stddev_ms=0.065, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=57427.7, latency_ms=0.055, stddev_ms=0.078, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=5.0, tps=78545.0, latency_ms=0.036, stddev_ms=0.085, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=284816,
            sampling_rate=1.0,
            p50_ms=0.042,
            p95_ms=0.155,
            p99_ms=0.233,
            max_ms=29.489,
        ),
    ),
    ("read-write", 1, 0): PgbenchRun(
        mode="read-write",
        transaction_type="<builtin: TPC-B (sort of)>",
        scale=5,
        query_mode="prepared",
        clients=1,
        threads=1,
        duration_s=5.0,
        transactions=7850,
        failed=0,
        tps=1570.60594,
        latency_avg_ms=0.634,
        latency_stddev_ms=0.395,
        initial_connection_ms=2.654,
        statements_per_txn=5,
        statements=(
            StatementLatency(
                latency_ms=0.001, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set bid random(1, 1 * :scale)", failures=0),
            StatementLatency(
                latency_ms=0.0, command="\\set tid random(1, 10 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set delta random(-5000, 5000)", failures=0),
            StatementLatency(latency_ms=0.051, command="BEGIN;", failures=0),
            StatementLatency(
                latency_ms=0.072,
                command="UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.077,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.067,
                command="UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.06,
                command="UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.059,
                command="INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);",
                failures=0,
            ),
            StatementLatency(latency_ms=0.247, command="END;", failures=0),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=1526.0, latency_ms=0.651, stddev_ms=0.268, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=1143.0, latency_ms=0.872, stddev_ms=0.369, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=987.9, latency_ms=1.009, stddev_ms=0.246, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=1382.1, latency_ms=0.721, stddev_ms=0.411, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=5.0, tps=2810.1, latency_ms=0.354, stddev_ms=0.287, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=7850, sampling_rate=1.0, p50_ms=0.631, p95_ms=1.129, p99_ms=1.316, max_ms=10.588
        ),
    ),
    ("read-write", 2, 0): PgbenchRun(
        mode="read-write",
        transaction_type="<builtin: TPC-B (sort of)>",
        scale=5,
        query_mode="prepared",
        clients=2,
        threads=2,
        duration_s=5.0,
        transactions=12134,
        failed=0,
        tps=2428.452805,
        latency_avg_ms=0.82,
        latency_stddev_ms=0.775,
        initial_connection_ms=6.278,
        statements_per_txn=5,
        statements=(
            StatementLatency(
                latency_ms=0.001, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set bid random(1, 1 * :scale)", failures=0),
            StatementLatency(
                latency_ms=0.0, command="\\set tid random(1, 10 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set delta random(-5000, 5000)", failures=0),
            StatementLatency(latency_ms=0.067, command="BEGIN;", failures=0),
            StatementLatency(
                latency_ms=0.102,
                command="UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.087,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.088,
                command="UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.102,
                command="UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.074,
                command="INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);",
                failures=0,
            ),
            StatementLatency(latency_ms=0.299, command="END;", failures=0),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=2537.7, latency_ms=0.782, stddev_ms=0.745, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=2550.2, latency_ms=0.782, stddev_ms=0.563, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=2544.9, latency_ms=0.783, stddev_ms=0.212, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=2215.7, latency_ms=0.899, stddev_ms=1.442, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=5.0, tps=2284.3, latency_ms=0.87, stddev_ms=0.372, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=12134, sampling_rate=1.0, p50_ms=0.76, p95_ms=1.135, p99_ms=3.061, max_ms=48.305
        ),
    ),
    ("read-write", 2, 1): PgbenchRun(
        mode="read-write",
        transaction_type="<builtin: TPC-B (sort of)>",
        scale=5,
        query_mode="prepared",
        clients=2,
        threads=2,
        duration_s=5.0,
        transactions=14154,
        failed=0,
        tps=2830.693,
        latency_avg_ms=0.704,
        latency_stddev_ms=0.356,
        initial_connection_ms=3.892,
        statements_per_txn=5,
        statements=(
            StatementLatency(
                latency_ms=0.0, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set bid random(1, 1 * :scale)", failures=0),
            StatementLatency(
                latency_ms=0.0, command="\\set tid random(1, 10 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set delta random(-5000, 5000)", failures=0),
            StatementLatency(latency_ms=0.058, command="BEGIN;", failures=0),
            StatementLatency(
                latency_ms=0.088,
                command="UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.076,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.082,
                command="UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.085,
                command="UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.067,
                command="INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);",
                failures=0,
            ),
            StatementLatency(latency_ms=0.247, command="END;", failures=0),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=2959.9, latency_ms=0.672, stddev_ms=0.189, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=2684.1, latency_ms=0.743, stddev_ms=0.43, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=2663.6, latency_ms=0.747, stddev_ms=0.216, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=2935.5, latency_ms=0.68, stddev_ms=0.55, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=5.0, tps=2909.8, latency_ms=0.684, stddev_ms=0.225, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=14154,
            sampling_rate=1.0,
            p50_ms=0.676,
            p95_ms=0.963,
            p99_ms=1.283,
            max_ms=14.323,
        ),
    ),
    ("read-write", 2, 2): PgbenchRun(
        mode="read-write",
        transaction_type="<builtin: TPC-B (sort of)>",
        scale=5,
        query_mode="prepared",
        clients=2,
        threads=2,
        duration_s=5.0,
        transactions=17927,
        failed=0,
        tps=3582.255496,
        latency_avg_ms=0.555,
        latency_stddev_ms=0.35,
        initial_connection_ms=4.552,
        statements_per_txn=5,
        statements=(
            StatementLatency(
                latency_ms=0.0, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set bid random(1, 1 * :scale)", failures=0),
            StatementLatency(
                latency_ms=0.0, command="\\set tid random(1, 10 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set delta random(-5000, 5000)", failures=0),
            StatementLatency(latency_ms=0.036, command="BEGIN;", failures=0),
            StatementLatency(
                latency_ms=0.059,
                command="UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.071,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.054,
                command="UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.071,
                command="UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.047,
                command="INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);",
                failures=0,
            ),
            StatementLatency(latency_ms=0.216, command="END;", failures=0),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=2630.3, latency_ms=0.753, stddev_ms=0.58, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=4086.1, latency_ms=0.489, stddev_ms=0.158, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=3914.2, latency_ms=0.509, stddev_ms=0.286, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=3841.0, latency_ms=0.518, stddev_ms=0.38, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=17927,
            sampling_rate=1.0,
            p50_ms=0.497,
            p95_ms=0.793,
            p99_ms=1.472,
            max_ms=12.578,
        ),
    ),
    ("read-write", 4, 0): PgbenchRun(
        mode="read-write",
        transaction_type="<builtin: TPC-B (sort of)>",
        scale=5,
        query_mode="prepared",
        clients=4,
        threads=2,
        duration_s=5.0,
        transactions=20281,
        failed=0,
        tps=4059.358181,
        latency_avg_ms=0.978,
        latency_stddev_ms=0.763,
        initial_connection_ms=13.33,
        statements_per_txn=5,
        statements=(
            StatementLatency(
                latency_ms=0.0, command="\\set aid random(1, 100000 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set bid random(1, 1 * :scale)", failures=0),
            StatementLatency(
                latency_ms=0.0, command="\\set tid random(1, 10 * :scale)", failures=0
            ),
            StatementLatency(latency_ms=0.0, command="\\set delta random(-5000, 5000)", failures=0),
            StatementLatency(latency_ms=0.069, command="BEGIN;", failures=0),
            StatementLatency(
                latency_ms=0.088,
                command="UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.102,
                command="SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.1,
                command="UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.184,
                command="UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
                failures=0,
            ),
            StatementLatency(
                latency_ms=0.077,
                command="INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);",
                failures=0,
            ),
            StatementLatency(latency_ms=0.357, command="END;", failures=0),
        ),
        progress=(
            ProgressPoint(
                t_s=1.0, tps=2405.6, latency_ms=1.636, stddev_ms=1.388, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=2.0, tps=3357.1, latency_ms=1.185, stddev_ms=0.941, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=3.0, tps=4541.5, latency_ms=0.874, stddev_ms=0.361, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=4.0, tps=5259.0, latency_ms=0.755, stddev_ms=0.349, failed=0, lag_ms=None
            ),
            ProgressPoint(
                t_s=5.0, tps=4715.4, latency_ms=0.842, stddev_ms=0.527, failed=0, lag_ms=None
            ),
        ),
        latency=LatencySummary(
            samples=20281, sampling_rate=1.0, p50_ms=0.835, p95_ms=1.755, p99_ms=4.47, max_ms=15.119
        ),
    ),
}


def study(**changes: object) -> Study:
    fields: dict[str, object] = {
        "id": STUDY_ID,
        "name": "quick",
        "target": TARGET,
        "started_at": "2026-11-22T04:15:00+00:00",
        "finished_at": "2026-11-22T04:17:41+00:00",
        "status": "finished",
        "params": {
            "profile": "default",
            "scale": 5,
            "clients": [1, 2, 4],
            "duration_s": 5,
            "repeats": {"2": 3},
            "fio_size": "64M",
        },
        "pgrig_version": "0.1.0",
        "environment": ENVIRONMENT,
    }
    fields.update(changes)
    return Study(**fields)  # type: ignore[arg-type]


def _ok(n: int, key: str, kind: str, params: dict[str, object], result: object) -> RunRecord:
    tool = {"pg_test_timing": "pg_test_timing", "pg_test_fsync": "pg_test_fsync", "fio": "fio"}
    name = tool.get(kind, "pgbench")
    return RunRecord(
        study=STUDY_ID,
        key=key,
        kind=kind,
        target=TARGET,
        params=dict(params),
        status="ok",
        started_at=f"2026-11-22T04:{15 + n // 10:02d}:{(n % 10) * 6:02d}+00:00",
        finished_at=f"2026-11-22T04:{15 + n // 10:02d}:{(n % 10) * 6 + 5:02d}+00:00",
        result=to_dict(result),
        tool_versions={name: TOOLS[name]},
        id=n,
    )


FAILED_REASON = (
    "pgbench exited with code 2: connection to server on socket "
    '"/tmp/rcap/pg/.s.PGSQL.5432" failed: FATAL:  sorry, too many clients already'
)
SKIPPED_REASON = "64 clients exceed max_connections=50 | raise it in the profile"


def records() -> list[RunRecord]:
    """Every record of the study, in the order the runner wrote them."""
    out = [
        _ok(1, "probe/pg_test_timing", "pg_test_timing", {"duration_s": 1}, TIMING),
        _ok(2, "probe/pg_test_fsync", "pg_test_fsync", {"secs_per_test": 1}, FSYNC),
    ]
    fio = (FIO_RANDWRITE, FIO_RANDREAD, FIO_WRITE, FIO_READ)
    for i, res in enumerate(fio):
        out.append(_ok(3 + i, f"fio/{res.pattern}", "fio", {"pattern": res.pattern}, res))
    out.append(_ok(7, "tpcb/init", "pgbench_init", {"scale": 5}, INIT))
    out.append(_ok(8, "tpcb/count/index-only", "count", {"method": "index-only scan"}, COUNT_IOS))
    out.append(_ok(9, "tpcb/count/seq", "count", {"method": "seq scan"}, COUNT_SEQ))
    n = 10
    for (mode, clients, repeat), run in RUNS.items():
        params = {
            "mode": mode,
            "clients": clients,
            "threads": run.threads,
            "duration_s": 5,
            "repeat": repeat,
        }
        out.append(_ok(n, f"tpcb/run/{mode}/c{clients}/r{repeat}", "pgbench_run", params, run))
        n += 1
    params = {"mode": "read-write", "clients": 64, "threads": 2, "duration_s": 5, "repeat": 0}
    out.append(
        RunRecord(
            study=STUDY_ID,
            key="tpcb/run/read-write/c64/r0",
            kind="pgbench_run",
            target=TARGET,
            params=params,
            status="failed",
            started_at="2026-11-22T04:17:30+00:00",
            finished_at="2026-11-22T04:17:31+00:00",
            reason=FAILED_REASON,
            id=n,
        )
    )
    out.append(
        RunRecord(
            study=STUDY_ID,
            key="tpcb/run/select-only/c64/r0",
            kind="pgbench_run",
            target=TARGET,
            params={**params, "mode": "select-only"},
            status="skipped",
            started_at="2026-11-22T04:17:31+00:00",
            finished_at="2026-11-22T04:17:31+00:00",
            reason=SKIPPED_REASON,
            id=n + 1,
        )
    )
    return out
