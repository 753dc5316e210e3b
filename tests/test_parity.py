"""One body, two hosts: every case runs against a local target (a cluster in a
directory of this machine) and a remote one (a server on h1, a network
namespace reached over SSH, tests/hosts_fixture.py), through `pgrig run`.
Issue 29's "Done when": the server's lifecycle is written once
(``pgrig.cluster``) and what works here works there.

The namespace host shares this machine's filesystem and PIDs, so a directory
given to the remote target is a directory here too; the checks go through the
server host's own executor all the same (``Side.ex``: ``LocalExecutor`` or the
SSH one): the postmaster is killed by ``kill -9`` run on its host, the kept data
directory is looked for there.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import make_disk_dir
from hosts_fixture import Lab, netns_lab, owned_by  # noqa: F401  (the fixture)
from pgrig import cli
from pgrig.hosts import preflight
from pgrig.hosts.executor import Executor
from pgrig.hosts.inventory import load as load_inventory
from pgrig.hosts.local import LocalExecutor
from pgrig.results import RunRecord
from pgrig.store import Store
from test_cli import pgrig, recorded, spawn, wait_for

pytestmark = [pytest.mark.netns_hosts(1), pytest.mark.cluster, pytest.mark.slow]

TPCB = (
    '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
    "clients = [{clients}]\nthreads = 1\nduration = [{duration}]\ncount = false\n"
)
NO_PROBES = "[probes]\ntiming = false\nfsync = false\nfio = false\n"


@dataclass
class Side:
    """Where the target's server runs, and its host's executor."""

    name: str  # "local" or "remote"
    ex: Executor
    disk: Path  # the local target's directory; the remote one's load-log directory
    inventory: Path | None

    def campaign(
        self, tmp_path: Path, study: str, *, keys: str = "", tables: str = "", rest: str = ""
    ) -> Path:
        """A campaign of one target ``db`` on this side: ``keys`` are the target's
        own, ``tables`` its sub-tables ([target.initdb]), ``rest`` what follows."""
        head = f'[campaign]\nname = "{study}-{self.name}"\n'
        if self.inventory is not None:
            head += f'inventory = "{self.inventory}"\n'
            where = 'host = "h1"\n'
        else:
            where = ""
        path = tmp_path / f"{study}.toml"
        path.write_text(
            head
            + rest.split("[[", 1)[0]  # campaign keys (reset = ...) before the first table
            + f'[[target]]\nname = "db"\n{where}directory = "{self.disk}"\nprofile = "stock"\n'
            + keys
            + '[target.set]\nfsync = "off"\n'
            + tables
            + ("[[" + rest.split("[[", 1)[1] if "[[" in rest else "")
        )
        return path

    def study(self, study: str) -> str:
        return f"{study}-{self.name}"

    def postmaster(self, pgrig_pid: int) -> tuple[str, int] | None:
        """The running server's data directory and postmaster PID, read on its host."""
        if self.inventory is None:
            datadirs = [f"{self.disk}/{d}/data" for d in self.ex.listdir(str(self.disk))]
        else:
            datadirs = [
                f"/tmp/{d}/data"
                for d in self.ex.listdir("/tmp")
                if d.startswith("pgrig-server-") and owned_by(Path("/tmp", d), pgrig_pid)
            ]
        for datadir in datadirs:
            if self.ex.exists(f"{datadir}/postmaster.pid"):
                first = self.ex.read_text(f"{datadir}/postmaster.pid").split("\n", 1)[0]
                if first.strip().isdigit():
                    return datadir, int(first)
        return None


@contextlib.contextmanager
def make_side(name: str, lab: Lab) -> Iterator[Side]:
    """A side with a directory of its own: one study's server never shows in
    another's (``Side.postmaster`` reads every data directory in it)."""
    disk = make_disk_dir("pgrig-parity-")
    try:
        if name == "local":
            yield Side("local", LocalExecutor(), disk, None)
        else:
            inventory = lab.write_inventory()
            (h1,) = load_inventory(inventory).resolve(["h1"])
            ex = preflight.connect(h1)
            try:
                yield Side("remote", ex, disk, inventory)
                # What a --keep left on h1 (a running server): gone with it. In
                # this process (cli.main): a pgrig start is ~1.2 s of CPU, and
                # nothing here reads what it says.
                with contextlib.suppress(SystemExit):
                    cli.main(["clean", "--inventory", str(inventory)])
            finally:
                ex.close()
    finally:
        shutil.rmtree(disk, ignore_errors=True)


@pytest.fixture(params=["local", "remote"])
def side(request: pytest.FixtureRequest, netns_lab: Lab) -> Iterator[Side]:  # noqa: F811
    with make_side(request.param, netns_lab) as made:
        yield made


@dataclass(frozen=True)
class Finished:
    """One finished `pgrig run` that several tests only read."""

    side: Side
    done: subprocess.CompletedProcess[str]
    results: Path
    records: dict[str, RunRecord]
    dirs: dict[str, Path]  # directories the campaign named, by role


def runs(results: Path, study: str) -> dict[str, RunRecord]:
    with Store.open(results / "results.sqlite") as st:
        return {r.key: r for r in st.runs(study)}


def run_ok(side: Side, path: Path, results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Wide lines: a path the output would wrap stays whole (kept_datadir reads it).
    env = {**os.environ, "COLUMNS": "1000"}
    done = pgrig("run", path, "--results", results, *args, env=env, timeout=600)
    assert done.returncode == 0, f"{side.name}: " + done.stdout[-3000:] + done.stderr[-3000:]
    return done


def all_ok(records: dict[str, RunRecord]) -> None:
    failed = {k: r.reason for k, r in records.items() if r.status != "ok"}
    assert not failed, failed


CHECK_SQL = (
    "DO $$ BEGIN\n"
    "  IF current_setting('data_checksums') <> 'on' THEN\n"
    "    RAISE EXCEPTION 'data_checksums is %', current_setting('data_checksums'); END IF;\n"
    "  IF current_setting('wal_segment_size') <> '32MB' THEN\n"
    "    RAISE EXCEPTION 'wal_segment_size is %', current_setting('wal_segment_size');\n"
    "  END IF;\n"
    "  IF current_setting('server_encoding') <> 'UTF8' THEN\n"
    "    RAISE EXCEPTION 'server_encoding is %', current_setting('server_encoding'); END IF;\n"
    "  IF (SELECT datcollate FROM pg_database WHERE datname = current_database())\n"
    "     <> 'C.UTF-8' THEN RAISE EXCEPTION 'the locale is not C.UTF-8'; END IF;\n"
    "END $$;\n"
    "DROP TABLE IF EXISTS facts;\n"
    "CREATE TABLE facts AS SELECT current_setting('server_encoding') AS enc;\n"
)


@pytest.fixture(scope="module", params=["local", "remote"])
def built(
    request: pytest.FixtureRequest,
    netns_lab: Lab,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Finished]:
    """One study per side that the three tests below only read: [target.initdb]
    options, tables and indexes in two tablespace directories, and pgrig's
    parallel loader at ``load_wal = "minimal"``. Each asked its own study
    before (about 20 s each, twice); none changes what another checks."""
    tmp_path = tmp_path_factory.mktemp(f"built-{request.param}")
    tables, indexes = make_disk_dir("pgrig-parity-ts-"), make_disk_dir("pgrig-parity-ix-")
    check = tmp_path / "check.sql"
    check.write_text(CHECK_SQL)
    (tmp_path / "q.sql").write_text("SELECT enc FROM facts;\n")
    try:
        with make_side(request.param, netns_lab) as side:
            path = side.campaign(
                tmp_path,
                "built",
                keys=f'tablespace = "{tables}"\nindex_tablespace = "{indexes}"\n',
                tables="[target.initdb]\ndata_checksums = true\nwal_segsize = 32\n"
                'encoding = "UTF8"\nlocale = "C.UTF-8"\n',
                rest=NO_PROBES
                + f'[[workload]]\ntype = "custom"\nname = "facts"\nsetup = ["{check}"]\n'
                f'scripts = ["{tmp_path / "q.sql"}"]\nclients = [1]\nthreads = 1\n'
                "duration = [1]\n"
                + TPCB.format(clients=1, duration=1)
                + 'generate = "parallel"\nload_wal = "minimal"\n',
            )
            results = tmp_path / "results"
            done = run_ok(side, path, results)
            records = runs(results, side.study("built"))
            yield Finished(side, done, results, records, {"tables": tables, "indexes": indexes})
    finally:
        shutil.rmtree(tables, ignore_errors=True)
        shutil.rmtree(indexes, ignore_errors=True)


def test_initdb_options(built: Finished) -> None:
    """[target.initdb]: checksums, a 32MB WAL segment, UTF8 in C.UTF-8 - asked of
    the server itself with SQL (a custom workload's setup fails otherwise)."""
    all_ok(built.records)
    assert built.records["db/facts/setup"].status == "ok", list(built.records)
    with Store.open(built.results / "results.sqlite") as st:
        study = st.study(built.side.study("built"))
    env = study.target_environments.get("db") or study.environment  # one target: the study's
    assert env is not None and env.postgres is not None
    assert env.postgres.settings["data_checksums"] == "on"
    assert env.postgres.settings["server_encoding"] == "UTF8"
    assert env.postgres.settings["wal_segment_size"] == "32MB"


def test_a_server_killed_mid_study_is_revived_and_the_study_goes_on(
    side: Side, tmp_path: Path
) -> None:
    path = side.campaign(
        tmp_path, "crash", rest=NO_PROBES + TPCB.format(clients="1, 2", duration=4)
    )
    results = tmp_path / "results"
    child = spawn("run", path, "--results", results)
    wait_for(lambda: recorded(results, "pgbench_init"), timeout=300, what="the load")
    time.sleep(1.5)  # into the first measured run (after its checkpoint)
    found = wait_for(lambda: side.postmaster(child.pid), what="the study's server")
    datadir, pid = found
    # kill -9 of the postmaster, on its host.
    side.ex.run(["kill", "-9", str(pid)], timeout=30, what="kill")
    killed = time.monotonic()
    back = wait_for(
        lambda: (p := side.postmaster(child.pid)) is not None and p[1] != pid and p,
        timeout=120,
        what="the server to be revived",
    )
    revived_s = time.monotonic() - killed
    out, err = child.communicate(timeout=600)
    assert child.returncode in (0, 6), err[-3000:]  # 6: the run it cut short failed
    assert "the server is down" in err and "restarting it" in err, err[-3000:]
    assert back[0] == datadir, "the same data directory"
    records = runs(results, side.study("crash"))
    last = records["db/tpcb/s1/select-only/c2/d4/r1"]
    assert last.status == "ok", f"the study goes on after the revive: {last.reason}"
    print(f"{side.name}: revived in {revived_s:.1f} s")


def test_tablespaces(built: Finished) -> None:
    """Tables and indexes in two tablespace directories on the server's host: made
    there, used by pgbench -i, removed after."""
    all_ok(built.records)
    tables, indexes = built.dirs["tables"], built.dirs["indexes"]
    shown = built.done.stdout + built.done.stderr
    assert f"tablespace pgrig_tables in {tables}" in shown
    assert f"tablespace pgrig_indexes in {indexes}" in shown
    ex = built.side.ex
    assert ex.listdir(str(tables)) == [] and ex.listdir(str(indexes)) == []


def kept_datadir(done: subprocess.CompletedProcess[str]) -> str:
    m = re.search(r"kept \(--keep\).*?data directory (\S+), log", done.stdout + done.stderr)
    assert m, done.stdout[-2000:] + done.stderr[-2000:]
    return m.group(1)


def test_a_load_restarts_the_server_at_minimal_wal_and_back(built: Finished) -> None:
    """The settings a restart is given (``load_wal = "minimal"``): pgrig's parallel
    loader runs with the server restarted at wal_level=minimal, and the measured
    run after it with the profile's settings again - on either host."""
    all_ok(built.records)
    init = built.records["db/tpcb/s1/init"].result
    assert init is not None and init["wal_level"] == "minimal", init
    restarts = {"restart at wal_level=minimal", "restart at the profile's settings"}
    assert restarts <= set(init["steps"]), init["steps"]  # and back: the run after is ok
    assert built.records["db/tpcb/s1/select-only/c1/d1/r1"].status == "ok"


def test_reset_restore(side: Side, tmp_path: Path) -> None:
    """reset = "restore": a pristine copy after the load, restored before every run."""
    path = side.campaign(
        tmp_path,
        "restore",
        rest='reset = "restore"\nrepeat = 2\n' + NO_PROBES + TPCB.format(clients=1, duration=1),
    )
    results = tmp_path / "results"
    run_ok(side, path, results)
    records = runs(results, side.study("restore"))
    all_ok(records)
    assert "db/tpcb/s1/select-only/c1/d1/r2" in records
