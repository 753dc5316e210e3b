"""Parity, continued (tests/test_parity.py): --keep, ``reset = "restore"``,
basebackup and the storage probes, each against a local target and one on an
SSH namespace host. A file of its own so that the two halves run on two of the
suite's workers (it distributes by file)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import make_disk_dir
from hosts_fixture import netns_lab  # noqa: F401  (the fixture)
from test_parity import (  # noqa: F401  (side: the fixture)
    NO_PROBES,
    TPCB,
    Side,
    all_ok,
    kept_datadir,
    run_ok,
    runs,
    side,
)

pytestmark = [pytest.mark.netns_hosts(1), pytest.mark.cluster, pytest.mark.slow]


def test_keep_leaves_the_data_directory_on_the_servers_host(side: Side, tmp_path: Path) -> None:  # noqa: F811
    path = side.campaign(tmp_path, "keep", rest=NO_PROBES + TPCB.format(clients=1, duration=2))
    results = tmp_path / "results"
    done = run_ok(side, path, results, "--keep")
    datadir = kept_datadir(done)
    assert side.ex.exists(f"{datadir}/PG_VERSION"), f"{datadir} on {side.ex.name}"
    if side.inventory is None:
        assert datadir.startswith(str(side.disk))
    else:
        assert datadir.startswith("/tmp/pgrig-server-")


def test_reset_restore(side: Side, tmp_path: Path) -> None:  # noqa: F811
    """reset = "restore": a pristine copy after the load, restored before every run."""
    path = side.campaign(
        tmp_path,
        "restore",
        rest='reset = "restore"\nrepeat = 2\n' + NO_PROBES + TPCB.format(clients=1, duration=2),
    )
    results = tmp_path / "results"
    run_ok(side, path, results)
    records = runs(results, side.study("restore"))
    all_ok(records)
    assert "db/tpcb/s1/select-only/c1/d2/r2" in records


def test_basebackup(side: Side, tmp_path: Path) -> None:  # noqa: F811
    """pg_basebackup from this machine, the copy into a directory here."""
    to = make_disk_dir("pgrig-parity-bb-")
    try:
        path = side.campaign(
            tmp_path,
            "bb",
            rest=NO_PROBES + f'[[workload]]\ntype = "basebackup"\nscale = 1\nto = "{to}"\n',
        )
        results = tmp_path / "results"
        run_ok(side, path, results)
        records = runs(results, side.study("bb"))
        all_ok(records)
        assert any(r.kind == "basebackup" for r in records.values()), list(records)
        assert list(to.iterdir()) == [], "the copy is removed after"
    finally:
        shutil.rmtree(to, ignore_errors=True)


def test_storage_probes(side: Side, tmp_path: Path) -> None:  # noqa: F811
    path = side.campaign(
        tmp_path,
        "probes",
        rest="[probes]\ntiming = 1\nfsync = 1\n"
        '[probes.fio]\npatterns = ["randwrite"]\nsize = "16M"\nruntime = 1\n'
        + TPCB.format(clients=1, duration=2),
    )
    results = tmp_path / "results"
    run_ok(side, path, results)
    records = runs(results, side.study("probes"))
    all_ok(records)
    kinds = {r.kind for k, r in records.items() if "/probe/" in k}
    assert {"pg_test_timing", "pg_test_fsync", "fio"} <= kinds, kinds
