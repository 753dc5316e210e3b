"""Parity, continued (tests/test_parity.py): --keep and a WAL directory,
basebackup and the storage probes, each against a local target and one on an
SSH namespace host. A file of its own so that the two
halves run on two of the suite's workers (it distributes by file)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import make_disk_dir
from hosts_fixture import Lab, netns_lab  # noqa: F401  (the fixture)
from pgrig.results import RunRecord
from test_parity import (
    NO_PROBES,
    TPCB,
    Finished,
    Side,
    all_ok,
    kept_datadir,
    make_side,
    run_ok,
    runs,
)

pytestmark = [pytest.mark.netns_hosts(1), pytest.mark.cluster, pytest.mark.slow]


@dataclass(frozen=True)
class Kept:
    """What a study run with --keep left on the server's host, read there."""

    side: Side
    datadir: str
    pg_version: bool  # the data directory's PG_VERSION exists
    wal: Path  # the target's wal_directory
    pg_wal: str  # where the data directory's pg_wal points
    segments: list[str]  # the names in it
    records: dict[str, RunRecord]


@pytest.fixture(scope="module", params=["local", "remote"])
def kept(
    request: pytest.FixtureRequest,
    netns_lab: Lab,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Kept]:
    """One study per side run with --keep and its WAL in a directory of its own
    (initdb --waldir). What the two tests below check is read on the host at
    once: the kept server on h1 is then removed (`pgrig clean`), as it holds
    h1's port that the next remote study's server needs."""
    tmp_path = tmp_path_factory.mktemp(f"kept-{request.param}")
    wal = make_disk_dir("pgrig-parity-wal-")
    try:
        # make_side's end runs `pgrig clean` on h1 first: the kept server writes in wal
        with make_side(request.param, netns_lab) as side:
            path = side.campaign(
                tmp_path,
                "keep",
                keys=f'wal_directory = "{wal}"\n',
                rest=NO_PROBES + TPCB.format(clients=1, duration=1),
            )
            results = tmp_path / "results"
            done = run_ok(side, path, results, "--keep")
            datadir = kept_datadir(done)
            link = side.ex.run(["readlink", f"{datadir}/pg_wal"], timeout=30).stdout.strip()
            found = Kept(
                side,
                datadir,
                side.ex.exists(f"{datadir}/PG_VERSION"),
                wal,
                link,
                side.ex.listdir(link) if link else [],
                runs(results, side.study("keep")),
            )
        yield found
    finally:
        shutil.rmtree(wal, ignore_errors=True)


def test_keep_leaves_the_data_directory_on_the_servers_host(kept: Kept) -> None:
    on = kept.side
    assert kept.pg_version, f"{kept.datadir} on {on.ex.name}"
    if on.inventory is None:
        assert kept.datadir.startswith(str(on.disk))
    else:
        assert kept.datadir.startswith("/tmp/pgrig-server-")


def test_wal_directory(kept: Kept) -> None:
    """initdb --waldir in a directory on the server's host: pg_wal points there."""
    all_ok(kept.records)
    assert kept.pg_wal.startswith(f"{kept.wal}/"), kept.pg_wal
    assert any(len(n) == 24 for n in kept.segments), "WAL segments are there"


@pytest.fixture(scope="module", params=["local", "remote"])
def probed(
    request: pytest.FixtureRequest,
    netns_lab: Lab,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Finished]:
    """One study per side with the storage probes and a basebackup workload beside
    the tpcb one: the two tests below only read what it recorded."""
    tmp_path = tmp_path_factory.mktemp(f"probed-{request.param}")
    to = make_disk_dir("pgrig-parity-bb-")
    try:
        with make_side(request.param, netns_lab) as side:
            path = side.campaign(
                tmp_path,
                "probes",
                rest="[probes]\ntiming = 1\nfsync = 1\n"
                '[probes.fio]\npatterns = ["randwrite"]\nsize = "16M"\nruntime = 1\n'
                + TPCB.format(clients=1, duration=1)
                + f'[[workload]]\ntype = "basebackup"\nscale = 1\nto = "{to}"\n',
            )
            results = tmp_path / "results"
            done = run_ok(side, path, results)
            yield Finished(side, done, results, runs(results, side.study("probes")), {"to": to})
    finally:
        shutil.rmtree(to, ignore_errors=True)


def test_basebackup(probed: Finished) -> None:
    """pg_basebackup from this machine, the copy into a directory here."""
    all_ok(probed.records)
    assert any(r.kind == "basebackup" for r in probed.records.values()), list(probed.records)
    assert list(probed.dirs["to"].iterdir()) == [], "the copy is removed after"


def test_storage_probes(probed: Finished) -> None:
    all_ok(probed.records)
    kinds = {r.kind for k, r in probed.records.items() if "/probe/" in k}
    assert {"pg_test_timing", "pg_test_fsync", "fio"} <= kinds, kinds
