"""pg_basebackup throughput (seed 002): the parser on captured output, the
campaign keys and their errors, the space check before anything runs, and
real copies of real PostgreSQL 15 clusters - measured, removed afterwards,
stopped on Ctrl-C and on timeout."""

from __future__ import annotations

import csv
import io
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import make_disk_dir
from pgrig import campaign, export, plan, registry
from pgrig.clients import OneHost
from pgrig.cluster.server import Cluster, local_access
from pgrig.conninfo import Conn
from pgrig.document.model import Table
from pgrig.errors import (
    BinaryNotFound,
    DiskSpaceError,
    ParseError,
    PartialFailure,
    ToolError,
    ToolTimeout,
    UsageError,
)
from pgrig.pgsource import binaries
from pgrig.plan import PlannedTarget
from pgrig.policy import RunPolicy
from pgrig.report.writer import write as write_report
from pgrig.results import RunRecord, Study, to_dict
from pgrig.runner import run_campaign
from pgrig.step import Context
from pgrig.store import Store
from pgrig.ui import Ui
from pgrig.workloads.basebackup import report as bb_report
from pgrig.workloads.basebackup import spec as bb_spec
from pgrig.workloads.basebackup import steps, tool
from pgrig.workloads.basebackup.model import BasebackupResult
from pgrig.workloads.tpcb.workload import data_bytes

DATA = Path(__file__).parent / "data"
PLAIN = DATA / "pg_basebackup_plain_pg15.stderr.txt"
TAR = DATA / "pg_basebackup_tar_gzip_pg15.stderr.txt"


# -- the parser, on what pg_basebackup 15 printed ------------------------------


def test_plain_output_is_parsed() -> None:
    out = tool.parse_output(PLAIN.read_text())
    assert (out.total_kb, out.done_kb, out.tablespaces) == (53767, 53767, 1)
    assert (out.start_lsn, out.end_lsn, out.timeline) == ("0/3000028", "0/3000100", 1)
    assert out.completed


def test_the_last_of_several_progress_lines_counts() -> None:
    # Not a terminal: one line per report (a terminal gets them redrawn with \r).
    text = TAR.read_text()
    assert "35502/53757 kB (66%)" in text
    out = tool.parse_output(text)
    assert out.total_kb == 53768 and out.start_lsn == "0/4000028" and out.completed


def test_output_without_progress_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="no progress line"):
        tool.parse_output("pg_basebackup: error: connection to server failed\n")


def test_phases_come_from_the_milestones_arrival_times() -> None:
    lines = [line for line in PLAIN.read_text().splitlines() if line]
    times = [0.1, 0.5, 0.6, 0.6, 0.7, 1.0, 3.0, 3.1, 3.2, 3.3, 4.5, 4.6]
    got = tool.phases(list(zip(times, lines, strict=True)), ended=4.8)
    assert got.checkpoint_s == 0.5  # "checkpoint completed" at 0.5 s
    assert got.transfer_s == 2.6  # until "write-ahead log end point" at 3.1 s
    assert got.sync_s == pytest.approx(4.6 - 3.3)  # "syncing" until "completed"
    assert got.finish_s == pytest.approx(4.6 - 3.1)


def test_argv_spells_compression_for_the_client_major() -> None:
    opts = tool.Options(format="tar", compress="gzip:5", max_rate="1024k")
    new = tool.argv(Path("/bin/pg_basebackup"), ["host=/s"], Path("/c"), opts, version_num=150004)
    assert "--compress=gzip:5" in new and new[new.index("-r") + 1] == "1024k"
    old = tool.argv(Path("/bin/pg_basebackup"), [], Path("/c"), opts, version_num=90624)
    assert old[old.index("-z") + 1] == "-Z5" and "-d" not in old
    with pytest.raises(ToolError, match="before PostgreSQL 15"):
        tool.compress_args("zstd", 130000)


def test_tablespaces_of_a_plain_copy_are_relocated() -> None:
    moved = [("/data/t=1", Path("/h/ts/16384"))]
    args = tool.argv(
        Path("pg_basebackup"), [], Path("/c"), tool.Options(), version_num=150000,
        tablespace_map=moved,
    )  # fmt: skip
    assert "-T/data/t\\=1=/h/ts/16384" in args


# -- campaign keys -------------------------------------------------------------

HEAD = """
[campaign]
name = "bb"
monitor = false

[[target]]
name = "a"
directory = "{dir}"
profile = "stock"

[[target]]
name = "b"
directory = "{dir}"
profile = "stock"

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "basebackup"
"""


def load(tmp_path: Path, workload: str, directory: Path | None = None) -> campaign.Campaign:
    path = tmp_path / "bb.toml"
    path.write_text(HEAD.format(dir=directory or tmp_path) + workload)
    return campaign.load(path)


@pytest.mark.parametrize(
    ("lines", "key", "message"),
    [
        ('format = "zip"', "format", "'zip' is not one of plain, tar"),
        ('compress = "gzip"', "compress", "a plain copy is written as files"),
        ('compress = "brotli"', "compress", "is not a compression"),
        ('max_rate = "2000M"', "max_rate", "32 kB/s to 1024 MB/s"),
        ('max_rate = "fast"', "max_rate", "is not a rate"),
        ('to = "c"', "to", "no target named 'c'"),
        ('to = "./nowhere/"', "to", "does not exist"),
        ("timeout = 0", "timeout", "above 0"),
        ('chekpoint = "spread"', "chekpoint", "unknown key"),
    ],
)
def test_bad_keys_name_the_file_line_and_key(
    tmp_path: Path, lines: str, key: str, message: str
) -> None:
    with pytest.raises(UsageError) as err:
        load(tmp_path, lines)
    text = str(err.value)
    assert f"bb.toml:23: workload[0].{key}" in text and message in text, text


def test_good_keys_become_the_spec(tmp_path: Path) -> None:
    camp = load(tmp_path, 'format = "tar"\ncompress = 5\nmax_rate = "100M"\nto = "b"\nrepeat = 3')
    spec = camp.workloads[0]
    assert isinstance(spec, bb_spec.BasebackupSpec)
    assert (spec.compress, spec.max_rate, spec.to_target, spec.repeat) == (
        "gzip:5", "102400k", "b", 3,
    )  # fmt: skip
    assert [r.key for r in plan.expand(camp).runs][2:] == [
        "a/basebackup/s10/backup/r1", "b/basebackup/s10/backup/r1",
        "a/basebackup/s10/backup/r2", "b/basebackup/s10/backup/r2",
        "a/basebackup/s10/backup/r3", "b/basebackup/s10/backup/r3",
    ]  # fmt: skip


def test_the_copy_counts_in_the_disk_a_target_needs(tmp_path: Path) -> None:
    camp = load(tmp_path, "scale = 20")
    assert plan.disk_needs(camp)["a"] == data_bytes(20) + bb_spec.copy_bytes(20)


def test_not_enough_space_for_the_copies_is_refused_up_front(
    disk_dir: Path, tmp_path: Path
) -> None:
    # 10 million scale units: 160 TB, more than any disk here - refused before
    # a cluster, a directory or a results file is created.
    camp = load(tmp_path, "scale = 10000000", disk_dir)
    results = tmp_path / "results"
    with pytest.raises(DiskSpaceError, match="not enough free disk"):
        run_campaign(camp, Ui(quiet=True), results=results, store=results / "r.sqlite",
                     yes=False, keep=False)  # fmt: skip
    assert list(disk_dir.iterdir()) == [] and not results.exists()
    # A directory as the destination is checked when the file is read, on its key.
    with pytest.raises(DiskSpaceError, match=r"bb.toml:24: workload\[0\].to: not enough free"):
        load(tmp_path, f'scale = 10000000\nto = "{disk_dir}/"', disk_dir)


# -- real copies -----------------------------------------------------------------


def files_size(directory: Path) -> int:
    """The copy's size as find(1) sees it: an independent count."""
    out = subprocess.run(["find", str(directory), "-type", "f", "-printf", "%s\\n"],
                         capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    return sum(int(n) for n in out.stdout.split())


@pytest.fixture(scope="module")
def loaded(cluster: Cluster) -> Cluster:
    """The module's cluster with pgbench's tables at scale 1, loaded once: the
    tests copy it and change no row (each loaded it again before)."""
    admin = Conn.socket(str(cluster.socket_dir), cluster.port, "postgres", "postgres")
    subprocess.run([cluster.bins.path("pgbench"), "-i", "-s", "1", "-q", *admin.args()],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    return cluster


def test_a_real_copy_is_measured_as_it_lies_on_disk(loaded: Cluster, disk_dir: Path) -> None:
    cluster = loaded
    admin = Conn.socket(str(cluster.socket_dir), cluster.port, "postgres", "postgres")
    bins = cluster.bins
    copy = disk_dir / "copy"
    os.chown(disk_dir, *(cluster.os_user.uid, cluster.os_user.gid) if cluster.os_user else (0, 0))
    args = tool.argv(bins.path("pg_basebackup"), admin.args(), copy, tool.Options(),
                     version_num=bins.version_num)  # fmt: skip
    ran = tool.run(args, timeout=300, env=admin.env(), user=cluster.os_user)
    copied = tool.measure(copy)
    on_disk = copied.bytes
    assert on_disk == files_size(copy) and copied.files > 100
    # What the tool reports receiving is the copy without its WAL and manifest
    # (tar headers make the tool's count a little larger).
    data = on_disk - files_size(copy / "pg_wal") - (copy / "backup_manifest").stat().st_size
    assert data <= ran.output.total_kb * 1024 <= data * 1.03
    assert ran.output.completed and ran.phases.transfer_s is not None
    assert ran.wall_s > 0 and "base backup completed" in ran.raw


class Interrupting:
    """The progress line of the UI, raising Ctrl-C at the first progress report
    (the only fake here: the key press)."""

    def update(self, **kw: Any) -> None:
        if kw.get("completed") is not None:
            raise KeyboardInterrupt


class Quiet:
    def update(self, **kw: Any) -> None:
        pass


def processes_writing(directory: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "pg_basebackup" in cmdline and str(directory) in cmdline:
                found.append(int(entry.name))
    return found


@pytest.fixture
def ctx(loaded: Cluster, disk_dir: Path) -> Iterator[Context]:
    cluster = loaded
    admin = Conn.socket(str(cluster.socket_dir), cluster.port, "postgres", "postgres")
    yield Context(bins=cluster.bins, target=disk_dir, scratch=disk_dir, conn=admin,
                  cluster=cluster, restartable=cluster,
                  clients=OneHost(cluster.bins.client_bin_dir))  # fmt: skip


def slow_step(ctx: Context, **keys: Any) -> Any:
    spec = bb_spec.BasebackupSpec(scale=1, max_rate="32k", **keys)
    return steps.backup_step(spec, RunPolicy(), PlannedTarget("t"), 1)


def test_ctrl_c_stops_pg_basebackup_and_removes_the_copy(ctx: Context, disk_dir: Path) -> None:
    step = slow_step(ctx)
    with pytest.raises(KeyboardInterrupt):
        registry.resolve(step.action)(ctx, Interrupting())
    assert processes_writing(disk_dir) == []
    assert list(disk_dir.iterdir()) == [], "the copy's directory is removed"


def test_a_timeout_stops_it_and_removes_the_copy(ctx: Context, disk_dir: Path) -> None:
    step = slow_step(ctx, timeout_s=3.0)
    with pytest.raises(ToolTimeout, match="within 3 s"):
        registry.resolve(step.action)(ctx, Quiet())
    assert processes_writing(disk_dir) == [] and list(disk_dir.iterdir()) == []


def test_a_directory_with_files_pgrig_did_not_create_is_left_alone(
    ctx: Context, disk_dir: Path
) -> None:
    theirs = disk_dir / "pgrig-basebackup-t-basebackup-r1"
    theirs.mkdir()
    (theirs / "precious").write_text("not pgrig's")
    step = slow_step(ctx)
    with pytest.raises(Exception, match="pgrig never deletes what it did not create"):
        registry.resolve(step.action)(ctx, Quiet())
    assert (theirs / "precious").read_text() == "not pgrig's"


def test_set_restarts_the_server_for_the_copy_and_back_after(
    ctx: Context, cluster: Cluster, disk_dir: Path
) -> None:
    """Seed 002: TPC-B at 9.5's wal_level = minimal, the backup at hot_standby
    with WAL senders - a server that takes no replication connections is copied
    at the workload's `set`, then runs at the profile's settings again."""
    cluster.restart({"wal_level": "minimal", "max_wal_senders": "0"})
    ctx.running.server_pid = cluster.postmaster_pid()
    backup = {"wal_level": "hot_standby", "max_wal_senders": "4"}
    spec = bb_spec.BasebackupSpec(scale=1, settings=backup)
    step = steps.backup_step(spec, RunPolicy(), PlannedTarget("t"), 1)
    assert step.params["set"] == backup
    res, _ = registry.resolve(step.action)(ctx, Quiet())
    assert res.data_bytes > 15_000_000
    with ctx.conn.connect() as db:
        row = db.execute("SELECT current_setting('max_wal_senders')").fetchone()
    assert row is not None and row[0] == cluster.settings.get("max_wal_senders", "10")
    assert ctx.running.server_pid == cluster.postmaster_pid()
    assert list(disk_dir.iterdir()) == []


def test_pg_hba_gets_a_replication_line_when_initdb_left_none(bins: binaries.PgBinaries,
                                                              tmp_path: Path) -> None:  # fmt: skip
    """The files as initdb before 10 writes them (its replication lines commented
    out), configured twice: the replication line and the include added once."""
    c = Cluster(bins, tmp_path, os_user=None, access=local_access(tmp_path, tcp=False))
    c.datadir.mkdir()
    hba = c.datadir / "pg_hba.conf"
    hba.write_text("local all all trust\n#local   replication     postgres     trust\n")
    (c.datadir / "postgresql.conf").write_text("#port = 5432\n")
    for _ in range(2):
        written = c.pm.configure({"work_mem": "8MB"}, 90600)
    lines = [x.split() for x in hba.read_text().splitlines() if x and not x.startswith("#")]
    assert lines == [["local", "all", "all", "trust"], ["local", "replication", "all", "trust"]]
    assert (c.datadir / "postgresql.conf").read_text() == "#port = 5432\n\ninclude = 'pgrig.conf'\n"
    pgrig_conf = (c.datadir / "pgrig.conf").read_text()
    assert "work_mem = 8MB" in pgrig_conf and written["port"] == str(c.port)
    assert {p.name for p in c.datadir.iterdir()} == {"pg_hba.conf", "postgresql.conf", "pgrig.conf"}
    assert oct((c.datadir / "pgrig.conf").stat().st_mode & 0o777) == "0o600"


def keys(results: Path, study: str) -> list[str]:
    with sqlite3.connect(results / "results.sqlite") as db:
        return [r[0] for r in db.execute("SELECT key FROM runs WHERE study_id = ?", (study,))]


def test_a_two_target_campaign_copies_to_itself_and_to_the_other_target(
    tmp_path: Path,
) -> None:
    a, b = make_disk_dir(), make_disk_dir()
    try:
        path = tmp_path / "bb.toml"
        path.write_text(
            HEAD.format(dir=a).replace(f'directory = "{a}"\nprofile = "stock"\n\n[probes]',
                                       f'directory = "{b}"\nprofile = "stock"\n\n[probes]')
            + 'scale = 1\nrepeat = 2\n\n[[workload]]\ntype = "basebackup"\nname = "tar-to-b"\n'
            'scale = 1\nformat = "tar"\ncompress = "gzip:1"\nto = "b"\n'
        )  # fmt: skip
        camp = campaign.load(path)
        results = tmp_path / "results"
        runner = run_campaign(camp, Ui(quiet=True), results=results,
                              store=results / "results.sqlite", yes=False, keep=False,
                              study_id="bb")  # fmt: skip
        assert runner.failures == 0
        assert list(a.iterdir()) == [] and list(b.iterdir()) == [], "nothing left behind"
        with Store.open(results / "results.sqlite") as st:
            records = st.runs("bb")
            study = st.study("bb")
        runs = {r.key: registry.typed_result(r) for r in records if r.kind == "basebackup"}
        assert len(runs) == 6
        plain: BasebackupResult = runs["a/basebackup/s1/backup/r1"]
        tar: BasebackupResult = runs["a/tar-to-b/s1/backup/r1"]
        assert plain.destination == "same target" and tar.destination == "target b"
        assert plain.tool_version.startswith("15.") and plain.format == "plain"
        # A plain copy holds the data and the WAL of the copy; gzip makes a tar smaller.
        assert plain.copy_bytes > plain.data_bytes > 15_000_000
        assert tar.copy_bytes < tar.data_bytes / 2
        for res in runs.values():
            assert res.mb_per_s == pytest.approx(res.data_bytes / 1e6 / res.wall_s)
            assert 0.1 < res.mb_per_s < 20_000  # plausible for any disk, cache or not
        data = [r for r in records if r.kind == "basebackup_data"]
        assert [r.result["loaded"] for r in data if r.result] == [True, True, False, False]
        md, _ = write_report(study, records, tmp_path / "report")
        text = md.read_text()
        assert "## pg_basebackup throughput" in text
        # seed 002's row in the comparison of the targets, against the baseline
        rows = {x.split("**")[1]: x for x in text.splitlines() if x.startswith("| **pg_base")}
        assert "MB/s (n=2" in rows["pg_basebackup (basebackup)"]  # its own repeat = 2
        # 2 runs a side: the one procedure's "not yet", with the runs that would decide it
        assert "2 vs 2 runs: a verdict needs ≥ 3 a side" in rows["pg_basebackup (basebackup)"]
        assert "1 vs 1 runs" in rows["pg_basebackup (tar-to-b)"]  # the campaign's 1
        assert "| pg_basebackup | a | b |" in text and "| tar-to-b: MB/s |" in text
        assert "| tar-to-b on a | -F t -X stream -c fast --compress=gzip:1 | target b" in text
    finally:
        for d in (a, b):
            subprocess.run(["rm", "-rf", "--one-file-system", str(d)], check=False, timeout=60)


def test_a_server_without_replication_says_which_setting_to_change(
    disk_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "bb.toml"
    text = HEAD.format(dir=disk_dir).split('[[target]]\nname = "b"')[0]
    text += '[target.set]\nwal_level = "minimal"\nmax_wal_senders = "0"\n\n'
    text += "[probes]\ntiming = false\nfsync = false\nfio = false\n\n"
    text += '[[workload]]\ntype = "basebackup"\nscale = 1\n'
    path.write_text(text)
    results = tmp_path / "results"
    with pytest.raises(PartialFailure, match="1 step"):
        run_campaign(campaign.load(path), Ui(quiet=True), results=results,
                     store=results / "results.sqlite", yes=False, keep=False,
                     study_id="bb")  # fmt: skip
    with Store.open(results / "results.sqlite") as st:
        failed = [r for r in st.runs("bb") if r.status == "failed"]
    assert len(failed) == 1
    reason = failed[0].reason or ""
    assert "max_wal_senders = 0" in reason and "set wal_level = replica" in reason, reason
    assert list(disk_dir.iterdir()) == []


def test_a_missing_pg_basebackup_is_refused_before_anything_runs(
    bins: binaries.PgBinaries, disk_dir: Path, tmp_path: Path
) -> None:
    # A PostgreSQL installation without pg_basebackup: the real tools, but that one.
    bin_dir = make_disk_dir("pgrig-test-bin-")  # the server's OS user runs postgres -C
    for name in ("initdb", "pg_ctl", "postgres", "pgbench", "pg_isready", "psql"):
        (bin_dir / name).symlink_to(bins.bin_dir / name)
    camp = load(tmp_path, "scale = 1", disk_dir)
    camp = replace(camp, targets=tuple(replace(t, pg_bin=str(bin_dir)) for t in camp.targets))
    results = tmp_path / "results"
    try:
        with pytest.raises(BinaryNotFound, match="target a: pg_basebackup not found in"):
            run_campaign(camp, Ui(quiet=True), results=results, store=results / "r.sqlite",
                         yes=False, keep=False)  # fmt: skip
    finally:
        shutil.rmtree(bin_dir)
    assert list(disk_dir.iterdir()) == [] and not results.exists()


# -- the report section, from records alone -------------------------------------


def record(target: str, rep: int, wall: float | None, workload: str = "xfs-copy") -> RunRecord:
    result = None
    if wall is not None:
        result = to_dict(
            BasebackupResult(
                data_bytes=74_000_000_000, copy_bytes=74_100_000_000, files=3000, wall_s=wall,
                format="plain", checkpoint="fast", wal_method="stream", compress="none",
                max_rate=None, destination="same target", filesystem="xfs /dev/loop0 at /x",
                tool_version="15.18",
            )
        )  # fmt: skip
    return RunRecord(
        study="s", key=f"{target}/{workload}/s1/backup/r{rep}", kind="basebackup",
        target=target, params={"workload": workload}, status="ok" if result else "failed",
        started_at="", finished_at="", result=result,
        reason=None if result else "pg_basebackup failed (exit code 1): disk full",
    )  # fmt: skip


def test_the_section_is_seed_002s_table_with_spread() -> None:
    # The seed's 74 GB in 93 s (XFS) and 209 s (ext4), three runs each.
    records = [record("xfs", r, w) for r, w in ((1, 93.0), (2, 95.0), (3, 93.5))]
    records += [record("ext4", r, w) for r, w in ((1, 209.0), (2, 212.0), (3, 207.0))]
    records.append(record("ext4", 1, None, workload="tar"))
    study = Study(id="s", name="s", target="", started_at="", status="finished",
                  params={"baseline": "xfs"})  # fmt: skip
    section = bb_report.section(study, records)
    assert section is not None
    summary = section.blocks[0]
    assert isinstance(summary, Table) and summary.columns == ("pg_basebackup", "xfs", "ext4")
    rows = {row.cells[0]: row.cells[1:] for row in summary.rows}
    assert rows["xfs-copy: MB/s"][0] == "791.4 (n=3, 75% CI 778.9–795.7)"
    assert rows["xfs-copy: MB/s"][1] == "354.1 (n=3, 75% CI 349.1–357.5)"
    # The runs' geometric means' ratio, marked a loss: MB/s, higher is better.
    assert rows["xfs-copy: vs xfs"][0] == "baseline"
    assert rows["xfs-copy: vs xfs"][1].startswith("▼ -55.")
    assert rows["xfs-copy: vs xfs"][1].endswith("%; p<0.001)")
    vs = next(row for row in summary.rows if row.cells[0] == "xfs-copy: vs xfs")
    assert vs.marks == ("", "", "worse")
    assert rows["tar: MB/s"] == ("not run", "failed: pg_basebackup failed (exit code 1): disk full")


def test_a_copy_to_a_directory_is_made_there_and_removed(ctx: Context) -> None:
    elsewhere = make_disk_dir("pgrig-test-copies-")
    try:
        spec = bb_spec.BasebackupSpec(scale=1, format="tar", to=f"{elsewhere}/",
                                      to_directory=elsewhere)  # fmt: skip
        step = steps.backup_step(spec, RunPolicy(), PlannedTarget("t"), 1)
        result, raw = registry.resolve(step.action)(ctx, Quiet())
        assert result.destination == f"directory {elsewhere}" and result.format == "tar"
        assert "base backup completed" in raw and result.copy_bytes > result.data_bytes
        assert list(elsewhere.iterdir()) == [] and list(ctx.target.iterdir()) == []
    finally:
        shutil.rmtree(elsewhere)


def test_the_client_version_decides_how_compression_is_spelled() -> None:
    assert tool.version_num("15.18 (Debian 15.18-0+deb12u1)") == 150018
    assert tool.version_num("9.6.24") == 90624


def test_a_96_cluster_is_copied_once_its_settings_allow_replication(
    pg_releases: dict[str, object], disk_dir: Path, tmp_path: Path
) -> None:
    """9.6's initdb leaves pg_hba.conf without a replication line (pgrig adds one)
    and max_wal_senders at 0 (the campaign sets it)."""
    path = tmp_path / "bb.toml"
    text = HEAD.format(dir=disk_dir).split('[[target]]\nname = "b"')[0]
    text = text.replace('profile = "stock"\n', 'profile = "stock"\npg_bin = "9.6"\n')
    text += '[target.set]\nwal_level = "replica"\nmax_wal_senders = "4"\n\n'
    text += "[probes]\ntiming = false\nfsync = false\nfio = false\n\n"
    text += '[[workload]]\ntype = "basebackup"\nscale = 1\n'
    path.write_text(text)
    results = tmp_path / "results"
    run_campaign(campaign.load(path), Ui(quiet=True), results=results,
                 store=results / "results.sqlite", yes=False, keep=False,
                 study_id="bb96")  # fmt: skip
    with Store.open(results / "results.sqlite") as st:
        (rec,) = [r for r in st.runs("bb96") if r.kind == "basebackup"]
    res = registry.typed_result(rec)
    assert res is not None and res.data_bytes > 15_000_000, rec.reason
    assert list(disk_dir.iterdir()) == []


def test_the_csv_export_has_the_headline(tmp_path: Path) -> None:
    rec = record("xfs", 1, 93.0)
    rows = list(csv.DictReader(io.StringIO(export.runs_csv([rec]))))
    assert float(rows[0]["basebackup.mb_per_s"]) == pytest.approx(74_000 / 93.0, abs=0.001)
    assert float(rows[0]["basebackup.elapsed_s"]) == 93.0
