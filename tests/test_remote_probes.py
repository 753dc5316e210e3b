"""A remote host measured like a local one: the storage probes run on the server's
host beside its data directory, the profile is rendered for the host, and
--keep leaves the server running for `pgrig clean --inventory` to remove.

The namespace host shares this machine's filesystem, CPUs and memory (see
tests/hosts_fixture.py): the probe's directory would be readable from here
either way, so the test checks where the process ran - pg_test_fsync in h1's
network namespace, its file under the server's directory there - and that the
probe directory is the one beside the data directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from hosts_fixture import Lab, netns_lab, owned_by  # noqa: F401  (the fixture)
from pgrig.cluster import profiles
from pgrig.errors import WorkdirError
from pgrig.hosts import owner, preflight
from pgrig.hosts.cli import clean_lines
from pgrig.hosts.inventory import load as load_inventory
from pgrig.pgsource import binaries
from pgrig.results import FioResult, FsyncResult, TimingResult, typed
from pgrig.store import Store
from pgrig.tools import fio, pg_test_fsync, pg_test_timing
from pgrig.tools.fio import FioJob
from test_cli import pgrig, spawn, wait_for

pytestmark = [pytest.mark.netns_hosts(1), pytest.mark.cluster, pytest.mark.slow]

STUDY = "remote-probes"
# Sized to the host: a small share of its memory, a multiple of its CPUs.
PROFILE = "shared_buffers = {ram * 0.002}\nwork_mem = 8MB\nmax_worker_processes = {cpus * 3}\n"


def write_campaign(tmp_path: Path, inventory: Path, conf: Path) -> Path:
    path = tmp_path / "probes.toml"
    path.write_text(
        f'[campaign]\nname = "{STUDY}"\ninventory = "{inventory}"\n'
        f'[[target]]\nname = "db"\nhost = "h1"\nprofile = "{conf}"\n'
        '[target.set]\nwork_mem = "5MB"\nfsync = "off"\n'
        "[probes]\ntiming = 1\nfsync = 1\n"
        '[probes.fio]\npatterns = ["randwrite"]\nsize = "16M"\nruntime = 1\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [1]\nthreads = 1\nduration = [2]\ncount = false\n"
    )
    return path


def server_dirs(pid: int) -> list[Path]:
    """The directories this run's pgrig made on the host (/tmp is shared here)."""
    return [d for d in Path("/tmp").glob("pgrig-server-*") if owned_by(d, pid)]


def test_a_remote_target_probes_its_host_and_runs_the_profile_sized_to_it(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    inventory = netns_lab.write_inventory()
    conf = tmp_path / "tiny.conf"
    conf.write_text(PROFILE)
    results = tmp_path / "results"
    path = write_campaign(tmp_path, inventory, conf)
    planned = pgrig("plan", path)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "db/probe/pg_test_fsync" in planned.stdout, "the plan counts the host's probes"
    running = spawn("run", path, "--results", results, "--keep")
    try:
        check(netns_lab, running, inventory, conf, results)
    finally:  # the kept server, whatever failed: its pgrig is gone by now
        running.kill()
        running.wait(timeout=30)
        clean_lines(inventory, dry_run=False)


def check(
    netns_lab: Lab,  # noqa: F811
    running: subprocess.Popen[str],
    inventory: Path,
    conf: Path,
    results: Path,
) -> None:

    # While pg_test_fsync runs: in h1's namespace, its test file in the probes'
    # directory of the server's directory this pgrig made there.
    seen_in: dict[str, list[int]] = {}
    fsync_file: list[Path] = []
    deadline = time.monotonic() + 300
    while running.poll() is None and time.monotonic() < deadline and not fsync_file:
        seen_in = netns_lab.processes("pg_test_fsync")
        if seen_in:
            fsync_file = [
                d / "probes" / pg_test_fsync.FILE_NAME
                for d in server_dirs(running.pid)
                if (d / "probes" / pg_test_fsync.FILE_NAME).exists()
            ]
        time.sleep(0.2)
    out, err = running.communicate(timeout=600)
    assert running.returncode == 0, out[-3000:] + err[-3000:]
    said = " ".join((out + err).split())  # the console wraps long lines
    assert "db: profile tiny:" in said, "the host's profile said before the run"
    assert "db: kept (--keep), running on h1" in said
    assert "pgrig clean --inventory" in said
    assert list(seen_in) == ["h1"], "pg_test_fsync ran in h1's namespace"
    assert fsync_file, "its test file was under the server's directory on h1"

    with Store.open(results / "results.sqlite") as st:
        study = st.study(STUDY)
        records = {r.key: r for r in st.runs(STUDY)}
    env = study.environment
    assert env is not None and env.host == "h1" and env.postgres is not None
    datadir = env.postgres.data_directory
    assert datadir is not None and datadir.startswith("/tmp/pgrig-server-")
    home = Path(datadir).parent
    assert fsync_file[0].parent == home / "probes", "beside the data directory"

    timing = records["db/probe/pg_test_timing"]
    assert timing.status == "ok", timing.reason
    assert (result := typed(timing, TimingResult)) is not None and result.per_loop_ns > 0
    fsync = records["db/probe/pg_test_fsync"]
    assert fsync.status == "ok", fsync.reason
    assert fsync.params["directory"] == str(home / "probes")
    rows = typed(fsync, FsyncResult)
    assert rows is not None and pg_test_fsync.fdatasync_8k(rows) is not None
    fio = records["db/probe/fio/randwrite"]
    assert fio.status == "ok", fio.reason
    assert fio.params["directory"] == str(home / "probes")
    assert (measured := typed(fio, FioResult)) is not None and measured.iops > 0
    # The probes' files and directory are gone; the kept server's directory stays.
    assert not (home / "probes").exists()
    assert {".pgrig-owner.json", "data", "log", "password"} <= {p.name for p in home.iterdir()}

    # The profile as rendered for the host (its memory and CPUs: this machine's
    # here), set.* over it, on the running server.
    rendered = profiles.load(str(conf), machine=profiles.Machine.this()).settings
    password = (home / "password").read_text().strip()
    address = netns_lab.hosts[0].address
    with psycopg.connect(
        host=address, port=5432, user="postgres", dbname="postgres", password=password,
        connect_timeout=10,
    ) as db:  # fmt: skip
        db.execute("SET statement_timeout = '10s'")

        def show(name: str) -> str:
            row = db.execute(f"SHOW {name}").fetchone()
            assert row is not None  # bytes: initdb's SQL_ASCII in the namespace's C locale
            return row[0].decode() if isinstance(row[0], bytes) else str(row[0])

        assert show("shared_buffers") == rendered["shared_buffers"] != "128MB"
        assert show("max_worker_processes") == rendered["max_worker_processes"]
        assert show("work_mem") == "5MB", "set.* wins over the profile"
        assert show("config_file") == f"{datadir}/postgresql.conf"
    assert (Path(datadir) / "pgrig.conf").read_text().startswith("# profile: tiny")

    report = (results / f"report-{STUDY}.md").read_text()
    assert f"target db: remote host h1, data directory {datadir}," in report
    assert "storage lab" not in report

    # The next run of the study leaves a kept server; `pgrig clean --inventory` removes it.
    host = load_inventory(inventory).resolve(["h1"], "host")
    with preflight.opened(host) as (ex,):
        left = {x.directory: x.action for x in owner.clean(ex, study=STUDY)}
    assert left[str(home)].startswith("left: kept with --keep"), left
    # (`pgrig clean --inventory` also cleans this shared machine: its host part only)
    lines = clean_lines(inventory, dry_run=False)
    # The lab's hosts share this machine's /tmp, and `clean --inventory` removes a
    # kept server: another worker's clean may have removed this one first (ci31).
    assert f"h1: {home}: removed" in lines or str(home) not in " ".join(lines), lines
    assert not home.exists()
    assert not netns_lab.processes("postgres"), "the kept server is stopped"


def test_probes_through_a_sudo_user_in_a_root_only_directory(
    netns_lab: Lab,  # noqa: F811
) -> None:
    """A user with passwordless sudo, not root: the probe's files are made, read
    and removed as root in a directory only root may enter (what `mktemp -d`
    makes), and a file already there is refused, untouched."""
    if not netns_lab.sudo_user:
        pytest.skip("sudo is not installed")
    host = load_inventory(netns_lab.write_inventory(user=netns_lab.sudo_user)).resolve(
        ["h1"], "host"
    )
    with preflight.opened(host) as (ex,):
        assert getattr(ex, "sudo", False), "the preflight chose sudo"
        directory = ex.make_tempdir("pgrig-probe-test-")
        try:
            assert ex.run(["stat", "-c", "%a %U", directory], timeout=30).stdout.split() == [
                "700", "root",
            ]  # fmt: skip
            probes = f"{directory}/probes"  # as a remote target's: inside it
            ex.run(["mkdir", probes], timeout=30)
            timing, _ = pg_test_timing.run(binaries.find().bin_dir, duration_s=1, host=ex)
            assert timing.per_loop_ns > 0
            job = FioJob(Path(probes), "randwrite", size="16M", runtime_s=1)
            result, raw = fio.run(job, host=ex)
            assert result.iops > 0 and '"jobs"' in raw
            assert ex.listdir(probes) == [], "the test file and the JSON are removed"
            ex.write_bytes(f"{probes}/{fio.FILE_NAME}", b"someone's data")
            with pytest.raises(WorkdirError, match="already exists on h1"):
                fio.run(job, host=ex)
            assert ex.read_bytes(f"{probes}/{fio.FILE_NAME}") == b"someone's data"
        finally:
            ex.remove_tree(directory)


def test_a_probe_left_by_a_killed_pgrig_is_stopped_by_clean(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    """pgrig killed (-9) while pg_test_fsync runs on the host: the tool would
    run on to its own end; its PID is in the owner record, so `pgrig clean
    --inventory` stops it before removing the directory."""
    inventory = netns_lab.write_inventory()
    path = tmp_path / "killed.toml"
    path.write_text(
        f'[campaign]\nname = "{STUDY}-killed"\ninventory = "{inventory}"\n'
        '[[target]]\nname = "db"\nhost = "h1"\nprofile = "stock"\n'
        "[probes]\ntiming = false\nfsync = 5\nfio = false\n"
    )
    running = spawn("run", path, "--results", tmp_path / "results")
    try:

        def recorded() -> list[Path]:
            """The server's directory once the probe runs and its record names
            it: pgrig writes the PID just after the start, and a kill in
            between is not what this test is about."""
            if not netns_lab.processes("pg_test_fsync"):
                return []
            return [d for d in server_dirs(running.pid) if json.loads(
                (d / owner.OWNER_FILE).read_text())["pids"]]  # fmt: skip

        (home,) = wait_for(recorded, timeout=120, what="pg_test_fsync, its PID recorded")
        # Stopped first: pg_test_fsync prints a line every 5 s, and the first
        # after pgrig's SSH channel closed would meet SIGPIPE (CI's stop 47: it
        # was gone before the check). A stopped probe outlives its pgrig until
        # clean signals it and continues it; nothing else would ever end it.
        ((probe,),) = netns_lab.processes("pg_test_fsync").values()
        os.kill(probe, signal.SIGSTOP)
        running.kill()
        running.communicate(timeout=30)
        assert netns_lab.processes("pg_test_fsync"), "it runs on without its pgrig"
        record = owner.Owner(**json.loads((home / owner.OWNER_FILE).read_text()))
        assert record.pids, "the probe's PID is in the owner record"
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate(timeout=30)
        lines = clean_lines(inventory, dry_run=False)
    # The lab's hosts share this machine's /tmp: another worker's `pgrig clean
    # --inventory` may remove the dead run's directory (and stop its probe) first;
    # then this clean has nothing of it to say (seen at -n 6).
    assert f"h1: {home}: removed" in lines or str(home) not in " ".join(lines), lines
    assert not netns_lab.processes("pg_test_fsync"), "clean stopped it"
    assert not home.exists()


def test_a_remote_base_backup_by_default_copies_to_this_machine(
    netns_lab: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Issue 40.9: a remote target's basebackup without ``to`` ended, after the
    whole study, in FileNotFoundError .../probes (the probes' directory on the
    host, gone by then). pg_basebackup runs here: its copy lands here, under the
    target's ``directory``, and is removed after the run."""
    logs = tmp_path / "logs"
    path = tmp_path / "bb.toml"
    path.write_text(
        f'[campaign]\nname = "{STUDY}-bb"\ninventory = "{netns_lab.write_inventory()}"\n'
        f'[[target]]\nname = "db"\nhost = "h1"\nprofile = "stock"\ndirectory = "{logs}"\n'
        "[probes]\ntiming = false\nfsync = false\nfio = false\n"
        '[[workload]]\ntype = "basebackup"\nscale = 1\nrepeat = 1\n'
    )
    results = tmp_path / "results"
    done = pgrig("run", path, "--results", results, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    with Store.open(results / "results.sqlite") as st:
        runs = [r for r in st.runs(f"{STUDY}-bb") if r.kind == "basebackup"]
    assert [r.status for r in runs] == ["ok"], [(r.key, r.reason) for r in runs]
    assert runs[0].result is not None
    assert runs[0].result["destination"].startswith(f"this machine ({logs}")
    assert runs[0].result["copy_bytes"] > 0
    assert not list(logs.glob("pgrig-basebackup-*")), "the copy is removed after the run"
