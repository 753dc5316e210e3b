"""Host facts read on the host they describe: load hosts' pgbench versions and
CPUs, their mismatches refused or said (issue 29, item 1), without a network:
the checks read what a host's survey found (``facts.Survey``, made here), and
the survey itself runs on this machine through its executor."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pgrig.errors import UsageError
from pgrig.hosts import facts
from pgrig.hosts.local import LocalExecutor
from pgrig.pgsource.binaries import PgBinaries
from pgrig.proc import Completed
from pgrig.registry.shared import LoadHost, LoadHostsRun
from pgrig.registry.target import TargetSpec
from pgrig.report.loadhosts import section
from pgrig.results import RunRecord, Study, to_dict
from pgrig.targets import remote
from pgrig.workloads.tpcb.steps import threads_for


def surveyed(name: str, version: str, cpus: int = 2) -> facts.Survey:
    """What the survey of a host whose PostgreSQL and pgbench in /bin say
    ``version`` (after "(PostgreSQL) ") and which has ``cpus`` found."""
    said = {f"/bin/{tool}": f"{tool} (PostgreSQL) {version}\n" for tool in ("postgres", "pgbench")}
    return facts.Survey(name, True, frozenset(said), said, cpus)


BINS = PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15.18", 15)
SPEC = TargetSpec(name="db")


def test_majors_are_named_as_postgresql_names_them() -> None:
    assert facts.major("pgbench (PostgreSQL) 15.18") == "15"
    assert facts.major("postgres (PostgreSQL) 9.6.24") == "9.6"
    assert facts.major("16devel") is None


def test_each_load_host_is_read_on_itself() -> None:
    notes: list[str] = []
    found = remote._versions(
        SPEC, BINS, surveyed("h1", "15.18"),
        [surveyed("h2", "15.18", cpus=4), surveyed("h3", "15.10", cpus=8)],
        "/bin", notes,
    )  # fmt: skip
    assert [(f.host, f.cpus, f.major) for f in found] == [("h2", 4, "15"), ("h3", 8, "15")]
    assert notes == []


def test_load_hosts_of_differing_pgbench_majors_are_refused() -> None:
    with pytest.raises(UsageError) as err:
        remote._versions(
            SPEC, BINS, surveyed("h1", "15.18"),
            [surveyed("h2", "15.18"), surveyed("h3", "16.4")],
            "/bin", [],
        )  # fmt: skip
    message = err.value.message
    assert (
        "h2: pgbench (PostgreSQL) 15.18" in message and "h3: pgbench (PostgreSQL) 16.4" in message
    )
    assert "pgrig hosts provision --major 15" in (err.value.hint or "")


def test_a_load_hosts_pgbench_of_another_major_than_the_server_is_said() -> None:
    notes: list[str] = []
    remote._versions(
        SPEC, BINS, surveyed("h1", "15.18"),
        [surveyed("h2", "16.4")], "/bin", notes,
    )  # fmt: skip
    assert notes == [
        "target db: pgbench on load host h2 is pgbench (PostgreSQL) 16.4, the server on h1 "
        "is PostgreSQL 15"
    ]


def _host(name: str, pgbench: str | None) -> LoadHost:
    return LoadHost(name, 100.0, 300, 1.0, 2.0, 0.0, 0.0, 0.1, None, (), pgbench=pgbench)


def test_the_report_says_a_pgbench_of_another_major_only_when_recorded() -> None:
    def record(run: LoadHostsRun) -> RunRecord:
        return RunRecord(
            "s", "db/tpcb/r1/hosts", "load_hosts", "db", {"run": "db/tpcb/r1"}, "ok", "", "",
            result=to_dict(run),
        )  # fmt: skip

    def notes(*hosts: LoadHost, server: str | None) -> tuple[str, ...]:
        run = LoadHostsRun("h1", hosts, 200.0, 1.0, 2.0, 600, 0.1, 0.1, server_version=server)
        study = Study(
            id="s", name="s", target="db", started_at="2026-01-01T00:00:00", status="done"
        )
        found = section(study, [record(run)])
        assert found is not None
        return found.blocks[0].notes  # type: ignore[attr-defined,no-any-return]

    assert notes(_host("h2", None), server=None) == ()  # an older record
    assert notes(_host("h2", "pgbench (PostgreSQL) 15.18"), server="15.18 (Debian)") == ()
    assert notes(_host("h2", "pgbench (PostgreSQL) 16.4"), server="15.18 (Debian)") == (
        "db/tpcb/r1: pgbench of another major than the server's PostgreSQL 15: "
        "h2 pgbench (PostgreSQL) 16.4",
    )


def test_threads_come_from_the_cpus_of_the_host_that_runs_pgbench() -> None:
    assert threads_for(None, 8, cpus=4) == 4
    assert threads_for(None, 2, cpus=16) == 2
    assert threads_for(3, 8, cpus=1) == 3, "asked: as asked"


def test_a_survey_reads_the_host_in_one_command(tmp_path: Path) -> None:
    """This machine through its executor, as a host over SSH is read: which
    programs are there, what one says of itself, the CPUs, memory and free space
    as /proc and statvfs say them."""
    env, absent = "/usr/bin/env", str(tmp_path / "nosuch")
    found = facts.survey(LocalExecutor(), [env, absent], [env], str(tmp_path))
    assert found.python and found.present == {env}
    assert found.versions[env].startswith("env (GNU coreutils)")
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert found.cpus == len(re.findall(r"^processor\s*:", cpuinfo, re.M)) > 0
    meminfo = Path("/proc/meminfo").read_text()
    assert found.memory == int(re.findall(r"^MemTotal:\s+(\d+)", meminfo, re.M)[0]) * 1024
    st = os.statvfs(tmp_path)
    assert abs(found.free - st.f_bavail * st.f_frsize) < 64 * 2**20  # others write meanwhile


class _NoPython:
    """A host without python3, which cannot be made here (the namespace hosts
    share this machine's filesystem): its shell says "command not found", and
    it answers which files exist (over SFTP on a real host)."""

    def __init__(self, name: str, files: set[str]) -> None:
        self.name, self.files = name, files

    def run(self, argv: list[str], **_: object) -> Completed:
        return Completed(argv, 127, "", f"sh: 1: {argv[0]}: not found\n", 0.0)

    def exists(self, path: str) -> bool:
        return path in self.files


def test_a_host_without_python_is_refused_naming_all_it_lacks() -> None:
    tools = [f"/bin/{tool}" for tool in remote.SERVER_TOOLS]
    db = facts.survey(_NoPython("h8", {"/bin/postgres"}), tools, ["/bin/postgres"], "/tmp")  # type: ignore[arg-type]
    assert not db.python and db.present == {"/bin/postgres"}
    load = facts.survey(_NoPython("h9", set()), ["/bin/pgbench"], ["/bin/pgbench"], "/tmp")  # type: ignore[arg-type]
    assert remote._missing(db, [load], "/bin") == [
        "h8 has no /bin/initdb",
        "h8 has no /bin/pg_isready",
        "h8 has no python3 (it reads the host's environment)",
        "load host h9 has no /bin/pgbench",
        "load host h9 has no python3 (the start barrier's waiter)",
    ]
