"""Campaign files: parsing, every kind of bad input (with file and line), the plan,
and two-target campaigns end to end - interleaved, killed and resumed."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import test_history
from conftest import full_report
from pgrig import campaign, plan
from pgrig.errors import UsageError
from pgrig.store import Store
from pgrig.workloads.tpcb.spec import TpcbSpec
from pgrig.workloads.tpcb.workload import BYTES_PER_SCALE
from test_cli import recorded
from test_history import Done
from test_report_rerun import no_temporary_paths, replanned

GOOD = """\
[campaign]
name = "two-disks"
baseline = "disk-a"
repeat = 2
warmup = 0
reset = "restore"

[[target]]
name = "disk-a"
directory = "{a}"
profile = "stock"
[target.set]
fsync = false
shared_buffers = "64MB"

[[target]]
name = "disk-b"
directory = "{b}"
profile = "stock"
[target.initdb]
wal_segsize = 32
[target.set]
fsync = false
shared_buffers = "64MB"

[probes]
timing = 1
fsync = false
fio = false

[[workload]]
type = "tpcb"
scales = [1]
modes = ["select-only", "read-write"]
clients = [1, 2]
duration = 3
count = false
"""


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def good(tmp_path: Path, a: Path | None = None, b: Path | None = None) -> str:
    return GOOD.format(a=a or tmp_path, b=b or tmp_path)


def test_parse_a_full_campaign(tmp_path: Path) -> None:
    camp = campaign.load(write(tmp_path, good(tmp_path)))
    assert camp.name == "two-disks" and camp.baseline == "disk-a"
    assert [t.name for t in camp.targets] == ["disk-a", "disk-b"]
    assert camp.targets[0].settings == {"fsync": "off", "shared_buffers": "64MB"}
    assert camp.targets[1].initdb.wal_segsize_mb == 32
    assert camp.policy.repeat == 2 and camp.policy.reset == "restore"
    assert camp.probes is not None and camp.probes.fio is None and camp.probes.fsync_s is None
    (wl,) = camp.workloads
    assert isinstance(wl, TpcbSpec) and wl.clients == (1, 2) and wl.durations == (3,)


def test_plan_expands_interleaved_runs_and_disk(tmp_path: Path) -> None:
    camp = campaign.load(write(tmp_path, good(tmp_path)))
    exp = plan.expand(camp)
    runs = [r.key for r in exp.runs if re.search(r"/r\d+$", r.key)]
    # 2 modes x 2 client counts x 2 repeats x 2 targets, targets alternating
    assert len(runs) == 16
    assert runs[0].startswith("disk-a/") and runs[1].startswith("disk-b/")
    assert runs[0] == "disk-a/tpcb/s1/select-only/c1/d3/r1"
    assert runs[2].startswith("disk-b/") and runs[2].endswith("/r2"), "order rotates"
    assert set(exp.disk) == {"disk-a", "disk-b"}
    assert exp.disk["disk-a"] >= 2 * BYTES_PER_SCALE  # pristine copy for restore


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("clients = [1, 2]", "clientz = [1, 2]"),
            r"c.toml:35: workload\[0\].clientz: unknown "
            r"key 'clientz'.*\n?.*did you mean 'clients'",
        ),
        (
            ("scales = [1]", 'scales = "big"'),
            r"c.toml:33: workload\[0\].scales: expected an "
            "integer or a list",
        ),
        (
            ('name = "disk-b"', 'name = "disk-a"'),
            r"c.toml:\d+: target\[1\].name: target name "
            "'disk-a' is used twice",
        ),
        (
            ("clients = [1, 2]", "clients = [1, 2]\nthreads = 4"),
            r"c.toml:36: workload\[0\]."
            r"threads: 4 is greater than "
            "the largest client count 2",
        ),
        (
            ('baseline = "disk-a"', 'baseline = "disk-c"'),
            r"c.toml:3: campaign.baseline: "
            "baseline target 'disk-c' is not in the campaign",
        ),
        (("duration = 3", "duration = 0"), r"workload\[0\].duration: 0 is less than 1"),
        (('reset = "restore"', 'reset = "sometimes"'), r"campaign.reset: 'sometimes' is not one"),
        (("wal_segsize = 32", "wal_segsize = 33"), r"target\[1\].initdb.wal_segsize: 33"),
        (("[probes]", "[probez]"), r"unknown key 'probez'"),
        (("scales = [1]", "scales = [1, 1]"), r"workload\[0\].scales: 1 is given twice"),
        (("clients = [1, 2]", "clients = [2, 1, 2]"), r"clients: 2 is given twice"),
        (("fio = false", 'fio = { cpus_allowed = "0-x" }'), r"'0-x' is not a CPU list"),
        (("fio = false", 'fio = { cpus_allowed = "4096" }'), r"CPUs \[4096\] are not this"),
        (
            ("fio = false", 'fio = { numjobs = 2, cpus_allowed = "0" }'),
            r"1 CPU\(s\) for numjobs = 2: one job per CPU",
        ),
    ],
)
def test_bad_input_names_file_line_and_fix(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    text = good(tmp_path).replace(*edit)
    with pytest.raises(UsageError) as err:
        campaign.load(write(tmp_path, text))
    full = f"{err.value}\n{err.value.hint or ''}"
    assert re.search(message, full), full


def test_custom_script_that_does_not_exist(tmp_path: Path) -> None:
    text = good(tmp_path) + (
        '\n[[workload]]\ntype = "custom"\nname = "login"\n'
        'scripts = [{ file = "nope/login.sql", weight = 1 }]\n'
    )
    with pytest.raises(
        UsageError,
        match=r"c.toml:\d+: workload\[1\].scripts: script file .*"
        r"nope/login.sql does not exist",
    ):
        campaign.load(write(tmp_path, text))


def test_toml_syntax_error_has_a_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"c.toml: not valid TOML: .*line 2"):
        campaign.load(write(tmp_path, "[campaign]\nname = \n"))


def test_target_needs_a_place(tmp_path: Path) -> None:
    text = good(tmp_path).replace(
        f'directory = "{tmp_path}"\nprofile = "stock"\n[target.initdb]',
        'profile = "stock"\n[target.initdb]',
    )
    with pytest.raises(UsageError, match="needs a directory, a dsn or fs"):
        campaign.load(write(tmp_path, text))


# -- end to end --------------------------------------------------------------


def pgrig(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgrig", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# `pgrig` in this process (cli.main): `plan`, and a run of a finished campaign
# that finds nothing to do, need no process of their own (a start ~1.2 s of CPU)
here = test_history.pgrig


def two_dirs(disk_dir: Path) -> tuple[Path, Path]:
    a, b = disk_dir / "a", disk_dir / "b"
    for d in (a, b):
        d.mkdir()
        d.chmod(0o755)
    return a, b


# 1-second runs: what these tests check is the order, the records and the
# resume, not the numbers (the suite's time, issues 18.8 and 41).
SMALL = GOOD.replace('modes = ["select-only", "read-write"]', 'modes = ["select-only"]').replace(
    "duration = 3", "duration = 1"
)


def test_two_target_campaign_end_to_end(disk_dir: Path, here: Callable[..., Done]) -> None:
    a, b = two_dirs(disk_dir)
    file = write(disk_dir, SMALL.format(a=a, b=b))
    results = disk_dir / "r"
    planned = here("plan", file)
    assert planned.returncode == 0, planned.stderr
    assert "disk-a/tpcb/s1/select-only/c2/d1/r2" in planned.stdout
    done = pgrig("run", file, "--results", results)
    assert done.returncode == 0, done.stderr
    with Store.open(results / "results.sqlite") as store:
        (study,) = store.studies()
        runs = store.runs(study.id)
    assert study.id == "two-disks" and study.status == "finished"
    measured = [r for r in runs if r.kind == "pgbench_run"]
    assert len(measured) == 8 and all(r.status == "ok" for r in measured), [
        (r.key, r.reason) for r in measured if r.status != "ok"
    ]
    # interleaved: the targets alternate, and the order rotates every repeat
    order = [r.target for r in measured]
    assert order[:4] == ["disk-a", "disk-b", "disk-b", "disk-a"]
    assert set(study.target_environments) == {"disk-a", "disk-b"}
    assert study.target_environments["disk-b"].postgres is not None
    report = full_report(results, "*.md").read_text()
    assert "| disk-a | disk-b |" in report.replace(" (baseline)", "") or "disk-b" in report
    assert "vs disk-a" in report
    # table and index sizes after the load and after the runs, side by side
    sized = {(r.target, r.params["when"]) for r in runs if r.kind == "relation_sizes"}
    assert sized == {(t, w) for t in ("disk-a", "disk-b") for w in ("after load", "after runs")}
    assert "## Table and index sizes" in report and "| disk-b: after runs |" in report
    # The summary's command, on a fresh directory, plans the study's steps (issue 42.4).
    (summary_file,) = results.glob("*.summary.md")
    summary = summary_file.read_text()
    fresh = disk_dir / "fresh"
    fresh.mkdir()
    assert replanned(summary, fresh) == plan.step_ids(campaign.load(file))
    assert {r.key for r in runs} >= replanned(summary, fresh)
    no_temporary_paths(summary)
    assert "pgbench -i -s 1" in summary and "initdb -D" in summary
    assert "p95 " in summary and "p99 " in summary
    # Running the finished campaign again records nothing twice, and finds that
    # before anything is started: no storage, no idle machine sampled, no server
    # (it took about 17 s to find nothing to do).
    t0 = time.monotonic()
    again = here("run", file, "--results", results)
    print(f"the finished campaign run again: {time.monotonic() - t0:.1f} s")
    assert again.returncode == 0, again.stderr
    said = " ".join(again.stderr.split())
    steps = len([line for line in planned.stdout.splitlines() if "two-disks" not in line
                 and " s  " in line])  # fmt: skip
    md = full_report(results, "*.md")
    assert f"all {steps} steps of two-disks (8 measured runs) are recorded in " in said, said
    assert f"the report: {md}" in said and f"report: {md}" in again.stdout
    assert "sampling the idle machine" not in said and "capturing the environment" not in said
    assert "resuming" not in said
    with Store.open(results / "results.sqlite") as store:
        assert len(store.runs("two-disks")) == len(runs)
        after = store.study("two-disks")
    assert after.status == "finished"
    assert after.target_environments == study.target_environments, "the ones measured in"
    assert not list(a.glob("pgrig-*")) and not list(b.glob("pgrig-*"))


def test_killed_campaign_resumes_and_records_each_run_once(
    disk_dir: Path, here: Callable[..., Done]
) -> None:
    a, b = two_dirs(disk_dir)
    # no probe: the kill comes during the measured runs (the end-to-end test above has one)
    file = write(disk_dir, SMALL.replace("timing = 1", "timing = false").format(a=a, b=b))
    results = disk_dir / "r"
    child = subprocess.Popen(
        [sys.executable, "-m", "pgrig", "run", str(file), "--results", str(results)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def measured() -> int:
        return recorded(results, "pgbench_run")

    try:
        deadline = time.monotonic() + 180
        while measured() < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:  # also when the wait fails: a live child would disturb the next test
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    before = measured()
    assert 3 <= before < 8, "killed half way"

    done = pgrig("run", file, "--results", results)
    assert done.returncode == 0, done.stderr
    # counted in the plan's steps: with each run's monitor record it said
    # "19 steps already recorded" of a 14-step campaign
    planned = here("plan", file).stdout
    total = re.search(r"(\d+) steps, about", planned)
    assert total is not None, planned
    steps = int(total[1])
    resumed = re.search(r"resuming two-disks: (\d+) of (\d+) steps", " ".join(done.stderr.split()))
    assert resumed is not None, done.stderr
    assert int(resumed[2]) == steps and before <= int(resumed[1]) < steps, resumed[0]
    assert "orphan" in done.stderr
    with Store.open(results / "results.sqlite") as store:
        runs = store.runs("two-disks")
        study = store.study("two-disks")
    keys = [r.key for r in runs]
    assert len(keys) == len(set(keys)), "no run recorded twice"
    assert len([r for r in runs if r.kind == "pgbench_run"]) == 8
    assert study.status == "finished"
    report = full_report(results, "*.md").read_text()
    assert "disk-a" in report and "disk-b" in report
    assert not list(a.glob("pgrig-*")) and not list(b.glob("pgrig-*"))


def test_steady_detection() -> None:
    from pgrig.results import ProgressPoint
    from pgrig.workloads.common import steady

    ramp = [ProgressPoint(float(i), tps, 1.0) for i, tps in enumerate([10, 50, 90, 100, 101])]
    assert not steady(ramp)
    flat = ramp + [ProgressPoint(float(i), 100.0 + i % 2, 1.0) for i in range(5, 10)]
    assert steady(flat)


def test_the_schema_reads_a_table_in_one_pass_and_calls_no_reader_of_its_owner() -> None:
    """A key with a reader of its owner's (``custom``) is checked by the schema
    as the TOML type it declares and handed over; its owner makes the value
    (issue 43: the schema called its callers' readers back, 24 of the run
    route's climbs; then the owners called it key by key). ``Schema.read``
    refuses such a schema, naming the key, before it calls any reader."""
    from pgrig.schema import REFUSED, Context, Locator, Schema, Table, custom, integer, text

    called: list[tuple[str, object]] = []

    def mine(t: Table, key: str, value: str) -> str:
        called.append((key, value))
        if value == "bad":
            raise t.error(key, "a bad value")
        return value.upper()

    schema = Schema(
        "[t]", text("a", "x", "a key"), custom("b", "y", "an owner's key", mine, kind=str),
        integer("c", 1, "a number"),
    )  # fmt: skip
    ctx = Context("c.toml", Path("."), Locator(""))
    table = Table({"a": "1", "b": "two"}, ("t",), ctx)
    with pytest.raises(TypeError, match=r"\[t\]: the keys b have readers"):
        schema.read(table)
    assert called == []
    read = schema.checked(table)
    assert called == [] and read.refused is None
    assert [(k.name, v) for k, v in read.owned] == [("b", "two")]
    values = read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}
    assert values == {"a": "1", "b": "TWO", "c": 1} and called == [("b", "two")]
    # absent: the default; of another type: refused as Table.get refuses it
    assert schema.checked(Table({}, ("t",), ctx)).values["b"] == "y"
    read = schema.checked(Table({"b": 2}, ("t",), ctx))
    assert read.owned == ((REFUSED, read.refused),)  # what the owner reads: the refusal
    with pytest.raises(UsageError, match="t.b: expected a string, got an integer 2"):
        read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}
    # two bad keys: the first in the keys' order is refused, whoever checks it
    for data, said in (
        ({"b": "bad", "c": 0, "d": 1}, "a bad value"),  # the owner's, before the schema's
        ({"a": 2, "b": "bad"}, "expected a string"),  # the schema's, before the owner's
        ({"b": "bad", "d": 1}, "a bad value"),  # an undeclared key: after every declared one
        ({"d": 1}, "unknown key 'd'"),
    ):
        read = schema.checked(Table(data, ("t",), ctx))
        with pytest.raises(UsageError, match=said):
            read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}


def test_a_kind_and_the_common_keys_are_read_in_one_pass_each_part_by_its_owner(
    tmp_path: Path,
) -> None:
    """A target's table holds its kind's keys and the common ones: one pass of
    both (``Schema.after``), split (``Checked.split``): the kind's part with the
    refusal of one of its keys, the common part with any refusal, as it cannot
    be read past it (issue 43: two passes, the kind's and the campaign's). Two
    bad keys: the first in the keys' order, and the kind's checks before the
    common keys' readers, as when the kind read its keys first."""
    from pgrig.schema import Checked, Context, Locator, Schema, Table, custom, integer, port, text

    def upper(t: Table, key: str, value: str | None) -> str | None:
        if value == "bad":
            raise t.error(key, "a bad host")
        return value and value.upper()

    common = Schema("[[target]]", text("name", None, "n"), integer("cpus", 1, "c"), also=("fs",))
    kind = Schema("[[target]] k", custom("host", None, "h", upper, kind=str), port("port", 1, "p"))
    joined = common.after(kind)
    assert joined.names == ("host", "port", "name", "cpus")
    ctx = Context("c.toml", Path("."), Locator(""))

    def made(read: Checked, t: Table) -> dict[str, object]:
        return read.values | {k.attr: k.read(t, k.name, v) for k, v in read.owned}

    t = Table({"host": "db1", "name": "a", "fs": "xfs"}, ("target", 0), ctx)
    mine, rest = joined.checked(t).split(kind, common)
    assert made(mine, t) == {"host": "DB1", "port": 1} and made(rest, t) == {"name": "a", "cpus": 1}
    for data, kind_says, common_says in (
        ({"host": "bad", "port": 70000, "cpus": 0}, "a bad host", "65535"),
        ({"host": "db1", "port": 70000, "cpus": 0}, "65535", "65535"),
        ({"host": "bad", "cpus": 0}, "a bad host", "less than 1"),
        ({"host": "db1", "other": 1}, None, "unknown key 'other'"),
    ):
        t = Table(data, ("target", 0), ctx)
        mine, rest = joined.checked(t).split(kind, common)
        if kind_says is None:
            made(mine, t)
        else:
            with pytest.raises(UsageError, match=kind_says):
                made(mine, t)
        with pytest.raises(UsageError, match=common_says):
            made(rest, t)
    # a key of both (a plug-in's kind declaring a common key): read once, in both parts
    both = Schema("[[target]] k", text("name", None, "n"), text("label", "x", "l"))
    t = Table({"name": "a", "label": "b"}, ("target", 0), ctx)
    mine, rest = common.after(both).checked(t).split(both, common)
    assert made(mine, t) == {"name": "a", "label": "b"}
    assert made(rest, t) == {"name": "a", "cpus": 1}
    # a remote target: its refusals before the common keys' ones, as before the one pass
    for keys, said in (
        ('kind = "remote"\npg_bin = 5', "a remote target needs the host"),
        ('host = "db1"\nport = 70000\nprofile = 5', "target\\[0\\].port: 70000"),
    ):
        text_ = f'[campaign]\nname = "c"\n[[target]]\nname = "a"\n{keys}\n'
        with pytest.raises(UsageError, match=said):
            campaign.load(write(tmp_path, text_))


def test_a_table_key_and_a_name_are_checked_in_the_schemas_one_pass() -> None:
    """A table-valued key (``kind=Table``) reaches its owner's reader as a Table
    whose errors name its keys, and a name (``naming``) is checked in the
    schema's pass: the owner's reader gets a good or missing name and is not
    called for a bad one (issue 43: both readers called the schema back)."""
    from pgrig.schema import Context, Locator, Schema, Table, custom, naming

    seen: dict[str, object] = {}

    def keep(t: Table, key: str, value: object) -> object:
        seen[key] = value
        return value

    schema = Schema(
        "[t]", naming("name", "a name", keep, example='"db1"'),
        custom("set", None, "a table", keep, kind=Table),
        custom("fio", None, "a table or off", keep, kind=(Table, bool)),
    )  # fmt: skip
    ctx = Context("c.toml", Path("."), Locator(""))

    def values(data: dict[str, object]) -> dict[str, object]:
        seen.clear()
        table = Table(data, ("t",), ctx)
        read = schema.checked(table)
        return read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}

    got = values({"name": "db1", "set": {"a": 1}, "fio": False})
    assert isinstance(got["set"], Table) and got["set"].data == {"a": 1}
    assert got["set"].where("a") == "c.toml: t.set.a" and got["fio"] is False
    assert got["name"] == "db1" and seen["name"] == "db1"
    assert values({}) == {"name": None, "set": None, "fio": None} and seen["name"] is None
    with pytest.raises(UsageError, match="t.name: 'bad name': use letters") as refused:
        values({"name": "bad name", "set": {}})
    assert refused.value.hint == 'name = "db1"' and seen == {}
    with pytest.raises(UsageError, match="t.set: expected a table, got an integer 3"):
        values({"name": "db1", "set": 3})
    assert seen == {"name": "db1"}  # the owner's key before it: read first


def test_a_good_file_is_not_scanned_for_lines_and_a_bad_one_names_its_line(tmp_path: Path) -> None:
    """The campaign's text is scanned for key lines when an error asks for one
    (``Locator``), not for every file read: a [target.set] asked for its
    settings' lines on the good path."""
    import tomllib

    from pgrig.schema import Context, Locator

    good = (
        '[campaign]\nname = "c"\n[[target]]\nname = "a"\ndirectory = "/tmp"\n'
        '[target.set]\nfsync = "off"\n[[workload]]\ntype = "tpcb"\nclients = [1]\n'
    )
    for text, line in ((good, None), (good.replace("clients = [1]", "clients = [0]"), 10)):
        ctx = Context("c.toml", tmp_path, Locator(text))
        if line is None:
            campaign.read(tomllib.loads(text), ctx)
        else:
            with pytest.raises(UsageError, match=rf"c\.toml:{line}: workload\[0\]\.clients: 0"):
                campaign.read(tomllib.loads(text), ctx)
        assert ("_places" in vars(ctx.locator)) is (line is not None)
