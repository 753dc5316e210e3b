"""The seed profiles: each seed's own settings, kept where this machine holds them
and scaled - and named - where it cannot; checked by the real server's parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgrig.clients import OneHost
from pgrig.cluster import profiles
from pgrig.cluster.server import server_os_user
from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.pgsource import binaries
from pgrig.step import Context
from pgrig.ui import Ui
from pgrig.workloads.tpcb import steps

BIG = profiles.Machine(ram_bytes=1024 * 2**30, cpus=64)  # larger than any seed's machine
HERE = profiles.Machine(ram_bytes=24 * 2**30, cpus=2)
LAB = profiles.Machine(ram_bytes=256 * 2**20, cpus=2)  # a 256 MiB memory cgroup
SEEDS = ("seed000", "seed001", "seed002", "seed004")


@pytest.mark.parametrize("name", SEEDS)
def test_a_machine_that_holds_the_seed_gets_its_values_unscaled(name: str) -> None:
    profile = profiles.load(name, machine=BIG)
    assert profile.scaled == ()
    assert "{" not in "".join(profile.settings.values())


def test_seed_values_are_the_seeds_own() -> None:
    s0 = profiles.load("seed000", machine=BIG).settings
    assert (s0["shared_buffers"], s0["max_wal_size"], s0["min_wal_size"]) == (
        "32GB",
        "128GB",
        "16GB",
    )
    assert (s0["checkpoint_completion_target"], s0["max_connections"]) == ("0.2", "1000")
    assert s0["archive_mode"] == "on"
    s1 = profiles.load("seed001", machine=BIG).settings
    assert (s1["wal_sync_method"], s1["synchronous_commit"]) == ("open_datasync", "on")
    assert s1["max_connections"] == "8000"
    s4 = profiles.load("seed004", machine=BIG).settings
    assert s4["wal_writer_flush_after"] == "0"  # its 9.6 command line (issue 31)


def test_values_this_machine_cannot_hold_are_scaled_and_named() -> None:
    here = profiles.load("seed000", machine=HERE)
    assert here.settings["shared_buffers"] == "6144MB"  # 32GB > 24 GiB: a quarter of it
    assert here.settings["maintenance_work_mem"] == "2GB"  # fits: kept
    assert "shared_buffers 32GB -> 6144MB (ram * 0.25 of 24.0 GiB RAM)" in here.scaled
    lab = profiles.load("seed001", machine=LAB)
    assert lab.settings["max_connections"] == "87"  # shared memory per slot: a share of 256 MiB
    assert any(s.startswith("max_connections 8000 -> 87") for s in lab.scaled)
    # a --set of a scaled value replaces it, and its scaling line goes with it
    mine = here.with_overrides({"shared_buffers": "2GB"})
    assert not any(s.startswith("shared_buffers") for s in mine.scaled)


@pytest.mark.parametrize("name", SEEDS)
def test_seed_profiles_pass_the_servers_own_parser(name: str, bins: binaries.PgBinaries) -> None:
    adapted = profiles.validate(profiles.load(name, machine=HERE), bins, server_os_user(None))
    if name == "seed001":  # 9.x's checkpoint_segments, translated for this major, said so
        assert any("checkpoint_segments" in n for n in adapted.notes)


def test_a_broken_fit_expression_is_refused_with_the_forms(tmp_path: Path) -> None:
    conf = tmp_path / "mine.conf"
    conf.write_text("shared_buffers = {min(32GB ram)}\n")
    with pytest.raises(UsageError, match="mine.conf:1: cannot understand") as err:
        profiles.load(str(conf), machine=HERE)
    assert "min(32GB, ram * 0.25)" in (err.value.hint or "")


def test_seed000s_parallel_count_uses_its_workers(
    bins: binaries.PgBinaries, conn: Conn, tmp_path: Path
) -> None:
    """Seed 000 ran count(*) with max_parallel_workers_per_gather = 16 in its
    session; here at most the CPUs, and the plan shows the workers."""
    with conn.connect() as db:
        db.execute("CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, pad text)")
        db.execute("INSERT INTO pgbench_accounts SELECT g, 'x' FROM generate_series(1, 20000) g")
        db.execute("ANALYZE pgbench_accounts")
        # a small table: parallelism must be free for the planner to choose it
        db.execute("ALTER DATABASE postgres SET parallel_setup_cost = 0")
        db.execute("ALTER DATABASE postgres SET min_parallel_table_scan_size = 0")
    try:
        workers = steps.count_workers(16)
        assert workers == min(16, os.cpu_count() or 1)
        ctx = Context(
            clients=OneHost(bins.client_bin_dir),
            bins=bins,
            target=tmp_path,
            scratch=tmp_path,
            conn=conn,
        )
        line = Ui(quiet=True).step("count").__enter__()
        result, _raw = steps.count_action("seq scan", workers)(ctx, line)
        gather = steps._find_node(json.loads(result.plan)[0]["Plan"], "Gather")
        assert gather is not None, result.plan
        assert gather["Workers Planned"] == workers
        one, _ = steps.count_action("seq scan", 1)(ctx, line)  # not the stock server's own 2
        gather_one = steps._find_node(json.loads(one.plan)[0]["Plan"], "Gather")
        assert gather_one is not None and gather_one["Workers Planned"] == 1
        # every row, not one loop's: EXPLAIN's rows are per loop (per worker here),
        # rounded, so a split of 20,000 over 3 loops may read 20,001
        for counted in (result, one):
            assert abs(counted.rows - 20_000) <= 1, counted.plan
    finally:
        with conn.connect() as db:
            db.execute("ALTER DATABASE postgres RESET ALL")
            db.execute("DROP TABLE pgbench_accounts")


def test_pgrig_plan_names_each_scaled_value_once(disk_dir: Path) -> None:
    """The target's check says what the profile scaled; `pgrig plan` printed it
    a second time from its own copy of the profile loading."""
    camp = disk_dir / "c.toml"
    camp.write_text(
        f'[campaign]\nname = "c"\n[[target]]\nname = "t"\ndirectory = "{disk_dir}"\n'
        'profile = "seed000"\n[[workload]]\ntype = "tpcb"\nscales = [1]\n'
        'modes = ["select-only"]\nclients = [1]\nduration = 1\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "plan", str(camp)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if "scaled:" in line]
    assert said, done.stdout + done.stderr  # 128GB of effective_cache_size: scaled here
    values = [line.split("scaled: ", 1)[1] for line in said]
    assert len(values) == len(set(values)), said
