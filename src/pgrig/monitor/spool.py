"""``Spool``: per-second records kept on disk while a run goes, not in memory.

A 30-minute run is 1,800 monitor samples; held as Python objects they grew
pgrig's memory by about 1 KiB a second for as long as the run lasted. The
sampler appends each one to an unnamed temporary file instead (pickled: the
file is this process's own, unlinked from the start, so nothing else reads it
and the system removes it even if pgrig is killed), and the samples are read
back one at a time when the run's result is built.
"""

from __future__ import annotations

import pickle
import tempfile
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Spool(Generic[T]):
    """Append-only; iterate to read everything back in order. Thread-safe for
    one writer and readers that come after it."""

    def __init__(self) -> None:
        # Lives as long as the spool: closed by close() or when the spool is dropped.
        self._file = tempfile.TemporaryFile(prefix="pgrig-spool-")  # noqa: SIM115
        self._lock = threading.Lock()
        self._count = 0

    def append(self, item: T) -> None:
        data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._file.seek(0, 2)
            self._file.write(data)
            self._count += 1

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[T]:
        with self._lock:
            self._file.flush()
            self._file.seek(0)
            for _ in range(self._count):
                yield pickle.load(self._file)

    def close(self) -> None:
        self._file.close()

    def __del__(self) -> None:
        # Dropped with its owner (a Watch): the file goes, silently.
        if (file := getattr(self, "_file", None)) is not None:
            file.close()

    def __enter__(self) -> Spool[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
