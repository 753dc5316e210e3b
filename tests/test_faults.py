"""Faults a user meets (issue 19), each closed by a test that failed before
its fix: concurrent studies on one store, a refused run beside a live one, a
campaign renamed onto another's study, a probe file left by kill -9, a full
results disk, a failed check listed as ok. The signals - every command, phase
and signal - are tests/test_signals.py's, which uses this file's fixture.

Nothing here starts a PostgreSQL server: the campaigns probe (pg_test_timing, a
real tool) and report.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import full_report, make_disk_dir
from pgrig import campaign, cli, files, ownership, plan, resume, runner, validate
from pgrig.results import Study
from pgrig.store import Store
from pgrig.ui import Ui

CAMPAIGN = """[campaign]
name = "{name}"
[[target]]
name = "t"
directory = "{directory}"
[probes]
timing = 1
fsync = false
fio = false
"""


@pytest.fixture
def place(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = make_disk_dir("pgrig-faults-")
    monkeypatch.chdir(path)
    (path / "data").mkdir()
    (path / "c.toml").write_text(CAMPAIGN.format(name="faults", directory=path / "data"))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    # Ctrl-C as in a terminal, also where the test runner ignores SIGINT (workers)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield path
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _main(*argv: str) -> int:
    try:
        cli.main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _study(store: Store, sid: str, *, status: str, pid: int, directory: str) -> None:
    store.begin_study(
        Study(
            id=sid,
            name=sid,
            target=directory,
            started_at="2026-01-01T00:00:00",
            status=status,
            params={"pid": pid, "targets": [{"name": "t", "directory": directory}]},
            pgrig_version="0",
        )
    )


# -- studies: ids, live studies, mixed records -------------------------------------------


def test_two_studies_begun_in_the_same_second_get_two_ids(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 3: the second died with sqlite3.IntegrityError (UNIQUE studies.id)."""
    monkeypatch.setattr(resume, "new_study_id", lambda name: f"{name}-20260101-000000")
    camp = campaign.load(place / "c.toml")
    with Store.open(place / "s.sqlite") as st:
        params = resume.params(camp, [])  # no target checked: none recorded
        first = runner.CampaignRunner(camp, Ui(quiet=True))._open(st, params)
        second = runner.CampaignRunner(camp, Ui(quiet=True))._open(st, params)
        assert first.id != second.id
        assert {s.id for s in st.studies()} == {first.id, second.id}


def test_a_refused_run_leaves_the_live_study_running(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 4: the refusal (exit 4) used to mark the live study failed."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Store.open(place / "pgrig-results" / "results.sqlite") as st:
            _study(st, "faults", status="running", pid=live.pid, directory=str(place))
        assert _main("run", "c.toml") == 4
        assert f"pgrig process {live.pid}" in capsys.readouterr().err
        with Store.open(place / "pgrig-results" / "results.sqlite") as st:
            assert st.study("faults").status == "running"
            assert st.runs("faults") == []
    finally:
        live.kill()
        live.wait()


def test_a_campaign_of_the_same_name_on_another_disk_is_not_resumed_into(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 5: it resumed the old study and added runs measured elsewhere."""
    assert _main("run", "c.toml", "-q") == 0
    other = place / "elsewhere"
    other.mkdir()
    (other / "c.toml").write_text(CAMPAIGN.format(name="faults", directory=other))
    capsys.readouterr()
    assert _main("run", str(other / "c.toml"), "-q") == 2
    err = capsys.readouterr().err
    assert "other targets" in err and "directory" in err and str(other) in err
    assert "another name" in err and "--results" in err
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        assert [r.target for r in st.runs("faults")] == ["t"]
        assert st.study("faults").status == "finished"
    # the same campaign again resumes: nothing left to run, nothing recorded twice
    assert _main("run", "c.toml", "-q") == 0
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        assert len(st.runs("faults")) == 1


# -- files pgrig leaves in a target ---------------------------------------------------


def test_a_probe_file_left_by_kill_9_is_cleaned_and_only_that_file(place: Path) -> None:
    """Defect 6: pgrig_fio.tmp blocked the resume and `pgrig clean` ignored it."""
    ours, theirs = place / "data" / "pgrig_fio.tmp", place / "data" / "other.tmp"
    for path in (ours, theirs):
        code = (
            "import os, sys; from pathlib import Path; from pgrig import ownership; "
            f"ownership.create_exclusively(Path({str(path)!r})); os._exit(0)"
        )
        subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))
    assert ours.exists() and theirs.exists()
    # someone replaced the second file since: same name, not the file pgrig made
    theirs.unlink()
    theirs.write_text("someone's data")
    assert _main("clean") == 0
    assert not ours.exists()
    assert theirs.read_text() == "someone's data"
    ownership.create_exclusively(ours)  # the next fio step can create it again
    ownership.remove_file(ours)


# -- the results directory ------------------------------------------------------------


def test_a_full_results_disk_is_refused_before_the_study(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 13: the whole study ran, then the HTML write failed with ENOSPC."""
    real = validate.shutil.disk_usage

    def full(path: Any) -> Any:
        usage = real(path)
        return usage._replace(free=1024 * 1024) if "res" in str(path) else usage

    (place / "res").mkdir()
    monkeypatch.setattr(validate.shutil, "disk_usage", full)
    assert _main("run", "c.toml", "--results", "res") == 5
    err = capsys.readouterr().err
    assert "--results" in err and "MiB free" in err
    assert list((place / "res").iterdir()) == []


def test_two_targets_that_fit_alone_but_not_together_on_one_filesystem_are_refused(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31: two targets needing 51 GiB each on one 73.6 GiB filesystem passed
    `pgrig plan`. Each alone fits (the kind's own check sees the real disk); the
    filesystem they share is shown with room for one and a half (a stand-in for a
    large disk: the figures are this campaign's own needs)."""
    (place / "data2").mkdir()
    text = CAMPAIGN.format(name="shared", directory=place / "data")
    text += '[[target]]\nname = "u"\ndirectory = "{}"\n'.format(place / "data2")
    text += '[[workload]]\ntype = "tpcb"\nscales = [5]\nclients = [1]\nduration = [1]\n'
    (place / "two.toml").write_text(text)
    needs = plan.disk_needs(campaign.load(place / "two.toml"))
    assert needs["t"] == needs["u"] > 0
    real = validate.shutil.disk_usage

    def room_for_one_and_a_half(path: Any) -> Any:
        usage = real(path)
        return usage._replace(free=needs["t"] * 3 // 2) if str(place) in str(path) else usage

    monkeypatch.setattr(validate.shutil, "disk_usage", room_for_one_and_a_half)
    assert _main("plan", "two.toml") == 5
    err = capsys.readouterr().err
    assert "targets t and u share the filesystem" in err, err
    assert "hint:" in err
    monkeypatch.setattr(validate.shutil, "disk_usage", real)
    assert _main("plan", "two.toml") == 0, "on the real disk they fit"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs")
def test_a_store_that_fills_mid_study_says_so_and_the_resume_runs_it(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33: the disk of the results filled during a run; the only word was
    "cannot write the report ... what was measured is in the store", which it
    was not. A real SQLite store on a full tmpfs: the store's own error (exit 5,
    what is not recorded, how to resume) comes out, not the report's."""
    res = place / "res"
    res.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(res)], check=True)
    try:
        real = Store.record

        def fill_then_record(self: Store, *args: Any, **kw: Any) -> Any:
            filler = res / "filler"
            # the disk fills while the run is measured
            with open(filler, "wb") as out, contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * 65536)
            return real(self, *args, **kw)

        monkeypatch.setattr(Store, "record", fill_then_record)
        assert _main("run", "c.toml", "--results", str(res)) == 5
        err = capsys.readouterr().err
        assert "results store" in err and "is full" in err and "not recorded" in err, err
        assert "run the same command again" in err
        monkeypatch.setattr(Store, "record", real)
        (res / "filler").unlink()
        assert _main("run", "c.toml", "--results", str(res), "-q") == 0
        with Store.open(res / "results.sqlite") as st:
            assert [r.kind for r in st.runs("faults")] == ["pg_test_timing"]
    finally:
        subprocess.run(["umount", str(res)], check=True)


def test_a_report_write_that_fails_leaves_no_temporary_file(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 13: a 0-byte .report-*.html.tmp was left, and the hint named --out."""
    assert _main("run", "c.toml", "-q") == 0
    real = files.os.replace

    def enospc(src: Any, dst: Any) -> None:
        if str(dst).endswith(".html"):  # the temporary file is written, the disk then fills
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(files.os, "replace", enospc)
    capsys.readouterr()
    assert _main("report", "--out", "again") == 1
    err = capsys.readouterr().err
    assert "No space left" in err and "--out" in err
    assert [p.name for p in (place / "again").iterdir() if "tmp" in p.name] == []


# -- list -------------------------------------------------------------------------


def test_list_does_not_call_a_failed_check_ok(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 18: a durability check that lost commits was listed "1/1 ok"."""
    from dataclasses import asdict

    from pgrig.durability.model import DurabilityResult
    from pgrig.results import RunRecord

    lost = DurabilityResult("immediate", 4, 3, 5.0, 1, "15", lost=2, failures=("2 lost",))
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        _study(st, "d", status="finished", pid=1, directory=str(place))
        st.record(
            RunRecord(
                study="d",
                key="local/durability",
                kind="durability",
                target="local",
                params={},
                status="ok",
                started_at="2026-01-01T00:00:00",
                finished_at="2026-01-01T00:00:09",
                result=asdict(lost),
            )
        )
    assert _main("list") == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("d\t")]
    assert "0/1 ok, 1 check(s) failed" in line


def test_list_counts_the_plans_steps_of_an_interrupted_study(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interrupted study was listed "1/1 ok": records out of records. Where its
    campaign file is known it says how many of the plan's steps are recorded."""
    from pgrig.results import RunRecord

    assert _main("run", "c.toml", "-q") == 0  # the runner notes where its campaign is
    md = full_report(place / "pgrig-results", "**/*.md")
    assert "How it was obtained" in md.read_text()
    assert "campaign_file" not in md.read_text()  # bookkeeping, not a parameter
    two = place / "two.toml"
    two.write_text(
        CAMPAIGN.format(name="half", directory=place / "data").replace("fsync = false", "fsync = 1")
    )
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        st.begin_study(
            Study(
                id="half",
                name="half",
                target="t",
                started_at="2026-01-01T00:00:00",
                status="interrupted",
                params={"pid": 1, "campaign": "half", "campaign_file": str(two)},
            )
        )
        for key in ("t/probe/pg_test_timing", "t/probe/pg_test_timing/extra"):
            st.record(
                RunRecord(
                    study="half",
                    key=key,
                    kind="note",
                    target="t",
                    params={},
                    status="ok",
                    started_at="2026-01-01T00:00:00",
                    finished_at="2026-01-01T00:00:01",
                    result=None,
                )
            )
    capsys.readouterr()
    assert _main("list") == 0
    lines = {ln.split("\t")[0]: ln.split("\t") for ln in capsys.readouterr().out.splitlines()}
    assert lines["faults"][2] == "1 of 1 steps recorded, 1 ok"
    assert lines["half"][1:3] == ["interrupted", "1 of 2 steps recorded, 1 ok"]
    two.unlink()  # the plan is no longer known: records, as before
    assert _main("list") == 0
    lines = {ln.split("\t")[0]: ln.split("\t") for ln in capsys.readouterr().out.splitlines()}
    assert lines["half"][2] == "2/2 ok"


def test_a_profile_file_edited_between_a_stop_and_a_resume_is_refused(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33: the report said synchronous_commit=on for every run though the
    first ran with off; the profile's settings are the study's as a `set` is."""
    profile = place / "p.conf"
    profile.write_text("synchronous_commit = off\n")
    text = CAMPAIGN.format(name="faults", directory=place / "data")
    (place / "c.toml").write_text(text.replace('name = "t"\n', 'name = "t"\nprofile = "p.conf"\n'))
    assert _main("run", "c.toml", "-q") == 0
    profile.write_text("synchronous_commit = on\n")
    capsys.readouterr()
    assert _main("run", "c.toml", "-q") == 2
    err = capsys.readouterr().err
    assert "profile_settings.synchronous_commit: 'off' then, 'on' now" in err


def test_a_study_whose_server_never_came_up_still_says_where_it_ran(place: Path) -> None:
    """A one-target study takes its server's environment, read as it starts, so
    the runner reads this machine's only when nothing else will
    (``CampaignRunner._environment``): a server that fails to start leaves the
    study this machine's environment, not none."""
    (place / "c.toml").write_text(
        f'[campaign]\nname = "nostart"\n[[target]]\nname = "t"\ndirectory = "{place / "data"}"\n'
        '[target.set]\nssl = "on"\n'
        "[probes]\ntiming = false\nfsync = false\nfio = false\n"
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nclients = [1]\nduration = [1]\n'
    )
    assert _main("run", "c.toml", "-q") != 0
    with Store.open(place / "pgrig-results" / "results.sqlite") as st:
        study = st.study("nostart")
    assert study.status == "failed"
    assert study.environment is not None and study.environment.postgres is None
