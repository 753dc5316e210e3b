#!/usr/bin/env python3
"""What does a power loss do to a cluster running with fsync=off? (issue 11 experiment)

Each try: a fresh cluster on a lossy mount (journal metadata model); the table
and amcheck are created with fsync=on and a CHECKPOINT (durable), then fsync is
turned off (reload), N rows are committed one per transaction with
synchronous_commit=on, a CHECKPOINT runs (which syncs nothing now), N more rows,
``pg_ctl stop -m immediate``, a power loss in the given mode with the try's seed,
remount, start. Prints per try: did the server start, how many of the 2N
committed rows are there, does amcheck (heap and primary key) pass.

    .venv/bin/python bench/lossyfs_fsync_off.py [--tries 5] [--mode random-subset] [--rows 200]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from pgrig import lossyfs, proc
from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.errors import PgrigError
from pgrig.lossyfs import LossyMount
from pgrig.pgsource import binaries


def why_not(cluster: Cluster) -> str:
    """The last PANIC or FATAL line of the server log (the reason it would not start)."""
    try:
        lines = cluster.logfile.read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    bad = [line for line in lines if "PANIC:" in line or "FATAL:" in line]
    return (bad[-1] if bad else lines[-1] if lines else "(empty log)").split("UTC ", 1)[-1][:300]


def one_try(bins: binaries.PgBinaries, base: Path, seed: int, mode: str, rows: int) -> str:
    (base / "backing").mkdir()
    mount = LossyMount(base / "backing", base / "mnt", metadata="journal")
    mount.start()
    cluster = Cluster.create(
        bins, mount.mountpoint / "work", study="fsync-off", os_user=server_os_user()
    )
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("stock").with_overrides({"synchronous_commit": "on"}))
        lossyfs.sync_tree(cluster.workdir)
        cluster.start()
        conn = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
        with conn.connect() as db:
            db.execute("CREATE EXTENSION amcheck")
            db.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
            db.execute("CHECKPOINT")
            db.execute("ALTER SYSTEM SET fsync = off")
            db.execute("SELECT pg_reload_conf()")
        with conn.connect() as db:
            for i in range(rows):
                db.execute("INSERT INTO t VALUES (%s, repeat('x', 300))", (i,))
            db.execute("CHECKPOINT")
            for i in range(rows, 2 * rows):
                db.execute("INSERT INTO t VALUES (%s, repeat('y', 300))", (i,))
        proc.run(
            [bins.path("pg_ctl"), "stop", "-D", cluster.datadir, "-m", "immediate", "-w"],
            timeout=90,
            user=cluster.os_user,
        )
        report = mount.power_loss(mode, seed=seed)  # type: ignore[arg-type]
        mount.remount()
        kept = f"{report.persisted_pages}/{report.unsynced_pages} unsynced pages kept"
        try:
            cluster.restart_after_crash(timeout=120)
        except PgrigError:
            return f"{kept}; server did not start: {why_not(cluster)}"
        try:
            with conn.connect() as db:
                count = db.execute("SELECT count(*) FROM t").fetchone()
                db.execute("SELECT verify_heapam('t')").fetchall()
                heap = db.execute("SELECT count(*) FROM verify_heapam('t')").fetchone()
                db.execute("SELECT bt_index_check('t_pkey', true)")
            assert count is not None and heap is not None
            return f"{kept}; started; rows {count[0]}/{2 * rows}; heap problems {heap[0]}; index ok"
        except Exception as exc:  # report whatever PostgreSQL says, that is the result
            return f"{kept}; started; query failed: {str(exc).splitlines()[0][:300]}"
    finally:
        cluster.stop()
        mount.unmount()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=5)
    ap.add_argument("--mode", choices=lossyfs.MODES, default="random-subset")
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"))
    opts = ap.parse_args()
    reason = lossyfs.available()
    if reason:
        raise SystemExit(f"cannot run: {reason}")
    bins = binaries.find()
    for seed in range(1, opts.tries + 1):
        base = Path(tempfile.mkdtemp(prefix="pgrig-bench-fsyncoff-", dir=opts.dir))
        base.chmod(0o755)
        try:
            outcome = one_try(bins, base, seed, opts.mode, opts.rows)
            print(f"try {seed} ({opts.mode}, seed {seed}): {outcome}", flush=True)
        finally:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
