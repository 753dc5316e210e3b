"""``Spool``: per-second records kept on disk while a run goes, not in memory.

A 30-minute run is 1,800 monitor samples; held as Python objects they grew
pgrig's memory by about 1 KiB a second for as long as the run lasted. The
sampler appends each one to an unnamed temporary file instead (pickled: the
file is this process's own, unlinked from the start, so nothing else reads it
and the system removes it even if pgrig is killed), and the samples are read
back one at a time when the run's result is built: ``View`` reads them again
for each pass the verdict makes over them, so a run's samples are never all
in memory at once (issue 18.6).
"""

from __future__ import annotations

import pickle
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator
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
            count = self._count
        # A reader of its own (its own offset, no lock held): passes may nest,
        # and the sampler may go on appending while one reads.
        with open(f"/proc/self/fd/{self._file.fileno()}", "rb") as reader:
            for _ in range(count):
                yield pickle.load(reader)

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


class View(Collection[T]):
    """A collection made anew on every pass by ``make`` (a spool read back,
    aligned, filtered): code written for a list of samples reads it unchanged,
    in constant memory, and pays a read of the spool per pass instead."""

    def __init__(self, make: Callable[[], Iterator[T]]) -> None:
        self._make = make
        self._len: int | None = None

    def __iter__(self) -> Iterator[T]:
        return self._make()

    def __len__(self) -> int:
        if self._len is None:
            self._len = sum(1 for _ in self._make())
        return self._len

    def __contains__(self, item: object) -> bool:
        return any(x == item for x in self._make())

    def __bool__(self) -> bool:
        return next(self._make(), None) is not None
