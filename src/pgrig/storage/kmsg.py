"""What the kernel said while pgrig did something: the new lines of the kernel log.

``mount`` only says "wrong fs type, bad option, bad superblock"; the reason
("xfs: Unknown parameter 'nobarrier'") is in the kernel log. ``KernelLog``
remembers where the log ended when it was opened and returns only what was
appended afterwards, filtered to the lines that mention what we touched (other
engineers' mounts write to the same log).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from types import TracebackType

KMSG = "/dev/kmsg"


def parse_record(raw: str) -> str | None:
    """One /dev/kmsg record ``"6,1234,5678,-;XFS (loop0): Mounting ..."`` -> the message."""
    head, sep, message = raw.partition(";")
    if not sep or head.count(",") < 2:
        return None
    # Continuation lines (" SUBSYSTEM=...") follow the first line; keep the first only.
    return message.splitlines()[0].rstrip() if message else ""


class KernelLog:
    """Context manager: ``with KernelLog() as log: mount(...); log.new_lines(["loop3"])``.

    Reads /dev/kmsg (root); when that cannot be opened, ``available`` is False
    and ``new_lines`` returns nothing - the caller still has the tool's stderr.
    """

    def __init__(self) -> None:
        self._fd: int | None = None
        self.lines: list[str] = []

    def __enter__(self) -> KernelLog:
        try:
            self._fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self._fd, 0, os.SEEK_END)
        except OSError:
            if self._fd is not None:
                os.close(self._fd)
            self._fd = None
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._drain()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def available(self) -> bool:
        return self._fd is not None

    def _drain(self) -> None:
        if self._fd is None:
            return
        while True:
            try:
                raw = os.read(self._fd, 8192)
            except BlockingIOError:
                return
            except OSError as exc:
                # EPIPE: records were overwritten while we read (ring buffer wrapped).
                if exc.errno == errno.EPIPE:
                    continue
                return
            if not raw:
                return
            message = parse_record(raw.decode("utf-8", errors="replace"))
            if message is not None:
                self.lines.append(message)

    def new_lines(self, mentioning: Iterable[str]) -> list[str]:
        """Lines logged since ``__enter__`` that contain any of ``mentioning`` (case-blind)."""
        self._drain()
        needles = [m.lower() for m in mentioning if m]
        return [line for line in self.lines if any(n in line.lower() for n in needles)]
