"""Settings the server parses but cannot start with (pgrig.cluster.startable),
refused before initdb; and the start's error that quotes why from the log
(issue 33). Pure checks on real binaries' directories: no server starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig import proc
from pgrig.cluster import startable
from pgrig.cluster.postmaster import Postmaster
from pgrig.cluster.profiles import Machine, Profile
from pgrig.errors import MemoryShortfall, PgrigError, UsageError
from pgrig.hosts.local import LocalExecutor
from pgrig.pgsource import binaries

MACHINE = Machine(ram_bytes=2**30, cpus=2)


def _profile(**settings: str) -> Profile:
    return Profile("stock", "profile stock").with_overrides(settings, "c.toml: target t set")


def _check(bins: binaries.PgBinaries, **settings: str) -> None:
    startable.check(_profile(**settings), bins, None, MACHINE)


def test_what_the_server_starts_with_passes(bins: binaries.PgBinaries, disk_dir: Path) -> None:
    hba = disk_dir / "hba.conf"  # pytest's tmp_path: its parent is mode 700
    hba.write_text("local all all trust\n")
    _check(
        bins,
        shared_buffers="'512MB'",
        hba_file=str(hba),
        ident_file="pg_ident.conf",  # relative: the data directory's
        shared_preload_libraries="'pg_stat_statements, $libdir/auto_explain'",
        logging_collector="on",
        log_directory="log",
        wal_level="minimal",
        max_wal_senders="0",
    )


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        # a memory-limited target's 1 GiB: the limit, not the machine's RAM
        ({"shared_buffers": "2GB"}, "shared_buffers = 2GB is more than the server's 1.0 GiB"),
        # a bare number is 8 kB pages, as the server reads it
        ({"shared_buffers": "262145"}, "shared_buffers = 262145 is more"),
        ({"wal_level": "minimal"}, "wal_level = minimal with max_wal_senders = 10"),
        (
            {"wal_level": "minimal", "max_wal_senders": "0", "archive_mode": "on"},
            "with archive_mode = on",
        ),
        ({"hba_file": "/nonexistent/hba.conf"}, "/nonexistent/hba.conf does not exist"),
        ({"ident_file": "/"}, "/ is a directory"),
        ({"shared_preload_libraries": "'nonexistent_lib'"}, "no library 'nonexistent_lib'"),
        ({"session_preload_libraries": "'$libdir/nope'"}, "no library '$libdir/nope'"),
        (
            {"logging_collector": "on", "log_directory": "/nonexistent/a/b"},
            "/nonexistent/a does not exist",
        ),
    ],
)
def test_what_the_server_cannot_start_with_is_refused(
    bins: binaries.PgBinaries, settings: dict[str, str], says: str
) -> None:
    with pytest.raises(PgrigError) as err:
        _check(bins, **settings)
    # memory the study cannot have is exit 5; every other refusal bad input (2)
    memory = "shared_buffers" in settings
    assert isinstance(err.value, MemoryShortfall if memory else UsageError)
    assert err.value.message.startswith("c.toml: target t set: ")
    assert says in err.value.message
    assert err.value.hint


def test_a_log_directory_only_matters_with_the_collector(bins: binaries.PgBinaries) -> None:
    _check(bins, log_directory="/nonexistent/a/b")


def test_a_failed_start_quotes_why_from_the_log(tmp_path: Path) -> None:
    """The log of a start with a missing hba_file (PostgreSQL 15, captured here):
    the FATAL came after three lines of "starting"; the last five lines alone
    left out half of it."""
    log = tmp_path / "server.log"
    log.write_text(
        "2026-11-27 04:11:36.464 UTC [30142] LOG:  starting PostgreSQL 15.18 (Debian "
        "15.18-0+deb12u1) on x86_64-pc-linux-gnu\n"
        '2026-11-27 04:11:36.470 UTC [30142] LOG:  listening on Unix socket "/tmp/s/.s.PGSQL.1"\n'
        '2026-11-27 04:11:36.479 UTC [30142] LOG:  could not open configuration file "/x/hba.conf":'
        " No such file or directory\n"
        "2026-11-27 04:11:36.479 UTC [30142] FATAL:  could not load pg_hba.conf\n"
        "2026-11-27 04:11:36.514 UTC [30142] LOG:  database system is shut down\n"
    )
    pm = Postmaster(
        LocalExecutor(),
        bin_dir="/nonexistent",
        datadir=str(tmp_path),
        logfile=str(log),
        user=None,
    )
    assert pm.log_tail(why=True).endswith("FATAL:  could not load pg_hba.conf")
    assert "starting PostgreSQL" in pm.log_tail()  # the plain tail, as before


# -- issue 40.4: huge pages, the socket's directory -----------------------------------

HUGE = 2 * 2**20


def test_huge_pages_on_without_the_pages_reserved_is_refused() -> None:
    none_free = {"Hugepagesize": HUGE, "HugePages_Free": 0}
    profile = _profile(huge_pages="on", shared_buffers="128MB")
    with pytest.raises(UsageError, match="huge_pages = on, but this machine has 0 huge") as err:
        startable._huge_pages(profile, none_free)
    assert err.value.message.startswith("c.toml: target t set: ")
    assert "vm.nr_hugepages=96" in (err.value.hint or "")  # (128 + 64) MiB of 2-MiB pages
    enough = {"Hugepagesize": HUGE, "HugePages_Free": 96}
    startable._huge_pages(profile, enough)
    startable._huge_pages(_profile(huge_pages="try"), none_free)


def test_the_meminfo_counts_are_read_in_bytes() -> None:
    info = startable._meminfo()
    assert info["MemTotal"] % 1024 == 0 and "HugePages_Free" in info


def test_a_temporary_directory_too_deep_for_the_socket_is_named(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = disk_dir / ("d" * (startable.SOCKET_PATH_MAX - len(str(disk_dir)) - 30))
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    with pytest.raises(UsageError, match=r"TMPDIR=.*: the server's socket there .* bytes long"):
        startable._socket_directory(None)


def test_a_temporary_directory_the_server_cannot_pass_is_named(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = disk_dir / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr("tempfile.tempdir", str(private))
    nobody = proc.OsUser("nobody", 65534, 65534, "/nonexistent")
    with pytest.raises(UsageError, match=r"TMPDIR=.*private: nobody cannot pass"):
        startable._socket_directory(nobody)
