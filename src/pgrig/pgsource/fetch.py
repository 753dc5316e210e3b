"""HTTP for the registries: small metadata requests and streamed downloads, each with
a timeout, and errors that name the address and the network's own reason."""

from __future__ import annotations

import hashlib
import http.client
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import IO
from urllib.parse import urlsplit

from pgrig import __version__
from pgrig.errors import DownloadError

USER_AGENT = f"pgrig/{__version__} (PostgreSQL builds for benchmarks)"
OFFLINE_HINT = (
    "check the network (and https_proxy if one is needed), or use an installed version: "
    "pgrig pg list --installed"
)
CHUNK = 256 * 1024
METADATA_LIMIT = 32 * 2**20

Progress = Callable[[int, int | None], None]


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


def _error(url: str, exc: BaseException, timeout: float) -> DownloadError:
    if isinstance(exc, urllib.error.HTTPError):
        return DownloadError(
            f"{url}: the registry answered HTTP {exc.code} {exc.reason}",
            hint="the version may have been withdrawn; see pgrig pg list",
        )
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return DownloadError(
            f"{_host(url)} did not answer within {timeout:.0f} s ({url})", hint=OFFLINE_HINT
        )
    return DownloadError(f"cannot reach {_host(url)}: {reason} ({url})", hint=OFFLINE_HINT)


class Http:
    """``timeout`` bounds every connect and every read; ``deadline`` a whole download."""

    def __init__(self, *, timeout: float = 30.0, deadline: float = 1800.0) -> None:
        self.timeout = timeout
        self.deadline = deadline

    def _open(self, url: str, *, method: str = "GET", accept: str | None = None) -> IO[bytes]:
        headers = {"User-Agent": USER_AGENT}
        if accept:
            headers["Accept"] = accept
        request = urllib.request.Request(url, headers=headers, method=method)
        try:
            return urllib.request.urlopen(request, timeout=self.timeout)  # type: ignore[no-any-return]
        except (urllib.error.URLError, OSError) as exc:
            raise _error(url, exc, self.timeout) from exc

    def get(self, url: str, *, accept: str | None = None) -> bytes:
        """A small document (metadata, a checksum file)."""
        with self._open(url, accept=accept) as response:
            try:
                data = response.read(METADATA_LIMIT + 1)
            except OSError as exc:
                raise _error(url, exc, self.timeout) from exc
        if len(data) > METADATA_LIMIT:
            raise DownloadError(f"{url}: metadata larger than {METADATA_LIMIT} bytes")
        return data

    def size(self, url: str) -> int | None:
        """Content-Length from a HEAD request; None when the server does not say."""
        with self._open(url, method="HEAD") as response:
            length = response.headers.get("Content-Length")  # type: ignore[attr-defined]
        return int(length) if length and length.isdigit() else None

    def download(
        self,
        url: str,
        out: IO[bytes],
        *,
        algorithm: str,
        on_progress: Progress | None = None,
    ) -> tuple[int, str]:
        """Stream ``url`` into ``out``; returns (bytes, hex digest with ``algorithm``).

        A body shorter than its Content-Length is an error here, not later: the
        connection can close early without any exception from the HTTP library.
        """
        digest = hashlib.new(algorithm)
        started = time.monotonic()
        done = 0
        with self._open(url) as response:
            length = response.headers.get("Content-Length")  # type: ignore[attr-defined]
            total = int(length) if length and length.isdigit() else None
            if on_progress:
                on_progress(0, total)
            while True:
                if time.monotonic() - started > self.deadline:
                    raise DownloadError(
                        f"downloading {url} took longer than {self.deadline:.0f} s; stopped "
                        f"after {done} bytes",
                        hint=OFFLINE_HINT,
                    )
                try:
                    chunk = response.read(CHUNK)
                except (OSError, http.client.HTTPException) as exc:  # IncompleteRead, reset
                    raise DownloadError(
                        f"download of {url} broke off after {done} bytes: {exc!r}",
                        hint="run the same command again; nothing was installed",
                    ) from exc
                if not chunk:
                    break
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if on_progress:
                    on_progress(done, total)
        if total is not None and done != total:
            raise DownloadError(
                f"download of {url} was cut short: received {done} of {total} bytes",
                hint="run the same command again; nothing was installed",
            )
        return done, digest.hexdigest()
