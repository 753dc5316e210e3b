"""A workload's step asks ``Context.clients`` and never where they run: the same
TPC-B step (warm-up and measured run) on this machine's clients (``OneHost``)
and on a toy implementation that records what it was asked (two "hosts"); and
the load hosts' warm-up (``load.warm_up``) stopping every host at once. Real
pgbench against a real throwaway cluster; the two hosts of ``warm_up`` are two
executors of this machine (the SSH ones are the parity and remote-target tests')."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import pytest

from hosts_fixture import owned_by
from pgrig import load
from pgrig.clients import OneHost
from pgrig.conninfo import Conn
from pgrig.hosts.local import LocalExecutor
from pgrig.pgsource.binaries import PgBinaries
from pgrig.policy import RunPolicy
from pgrig.results import PgbenchRun, ProgressPoint
from pgrig.step import Context
from pgrig.tools import pgbench
from pgrig.ui import Ui
from pgrig.workloads import common
from pgrig.workloads.common import Steady
from pgrig.workloads.tpcb import steps
from recording_clients import Recording


@pytest.fixture(scope="module")
def scale1(bins: PgBinaries, cluster) -> Conn:  # type: ignore[no-untyped-def]
    conn = Conn.socket(str(cluster.socket_dir), cluster.port, "postgres", "postgres")
    pgbench.run_init(bins.client_bin_dir, conn, pgbench.InitOptions(scale=1))
    return conn


@pytest.mark.cluster
def test_a_tpcb_step_runs_unchanged_with_either_clients(
    bins: PgBinaries, scale1: Conn, disk_dir: Path
) -> None:
    opts = pgbench.RunOptions(mode="select-only", clients=2, threads=1, duration_s=2)
    policy = RunPolicy(warmup=1, checkpoint=False)
    here = OneHost(bins.client_bin_dir)
    toy = Recording(OneHost(bins.client_bin_dir))
    runs = {}
    for name, clients in (("here", here), ("toy", toy)):
        ctx = Context(bins=bins, target=disk_dir, scratch=disk_dir, clients=clients, conn=scale1)
        with Ui(quiet=True).step(name) as line:
            common.prepare_action(opts, policy, auto_threads=True)(ctx, line)
            result, raw = steps.bench_action(opts, 1000.0, auto_threads=True)(ctx, line)
        assert isinstance(result, PgbenchRun)
        assert result.transactions > 0 and result.latency is not None, raw
        assert result.statements, "per-statement latencies (-r) kept"
        assert "tps = " in raw and raw.count("progress: ") >= 1
        assert ctx.running.observed["select-only"] == result.tps
        runs[name] = result
    # The same pgbench, asked the same way (each run's log has a name of its own).
    same = [[a for a in r.argv if not a.startswith("--log-prefix=")] for r in runs.values()]
    assert same[0] == same[1]
    # What the step asked of its clients: a quiet warm-up, then the logged run.
    assert [what for what, _ in toy.asked] == ["warm", "bench"]
    (_, warm), (_, bench) = toy.asked
    assert warm.opts.duration_s == 1 and not warm.opts.transaction_log
    assert not warm.opts.statement_latencies
    assert bench.opts.transaction_log and bench.opts.statement_latencies
    assert bench.conn == scale1 and bench.log_root == disk_dir and bench.auto_threads
    assert bench.on_progress is not None and warm.on_progress is None


@pytest.mark.cluster
def test_load_hosts_warm_up_stops_every_host_when_one_settles(
    bins: PgBinaries, scale1: Conn
) -> None:
    heard: list[ProgressPoint] = []
    seen: set[str] = set()

    def settled(point: ProgressPoint) -> None:
        heard.append(point)
        seen.update(_ours())
        if len(heard) == 2:
            raise Steady

    opts = pgbench.RunOptions(mode="select-only", clients=1, threads=1, duration_s=60)
    started = time.monotonic()
    with pytest.raises(Steady):
        hosts = (LocalExecutor(), LocalExecutor())
        load.warm_up(
            load.LoadRequest(hosts, str(bins.client_bin_dir), scale1, opts, on_progress=settled)
        )
    # Both stopped at their next -P point, long before -T 60; their directories gone.
    assert time.monotonic() - started < 20
    assert len(heard) == 2
    assert len(seen) == 2, "each host's load directory, seen while it ran"
    assert not _ours() and not any(Path(d).exists() for d in seen)


def _ours() -> set[str]:
    """This process's load directories in /tmp, by their owner records: the other
    workers' tests make and remove theirs there meanwhile (seen at -n 4 and 6)."""
    return {d for d in glob.glob("/tmp/pgrig-load-*") if owned_by(Path(d), os.getpid())}
