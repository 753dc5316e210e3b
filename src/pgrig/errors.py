"""One exception hierarchy for pgrig, caught once in ``cli.main``.

Every error says what went wrong *and* how to fix it (``hint``); modules raise,
they never print and exit.
"""

from __future__ import annotations

import re


class PgrigError(Exception):
    """Base class: a problem the user can act on. Printed as ``error: ...``."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(PgrigError):
    """Bad input: a file, key, option or value. Names it and the fix."""

    exit_code = 2


class BinaryNotFound(PgrigError):
    """A PostgreSQL binary or an external tool is missing."""

    exit_code = 3


class WorkdirError(PgrigError):
    """The target or work directory cannot be used safely."""

    exit_code = 4


class MissingDirectory(WorkdirError):
    """A directory the user named does not exist: bad input, not a broken one."""

    exit_code = 2


class DiskSpaceError(PgrigError):
    """Not enough free space for what was asked: refused before starting."""

    exit_code = 5


class MemoryShortfall(PgrigError):
    """Not enough memory for what was asked (one server's shared_buffers, or
    targets' buffers together): refused before starting, with the disk's exit
    code: a resource the study cannot have."""

    exit_code = 5


class HostUnusable(PgrigError):
    """A host of the inventory cannot be used: unreachable, refuses the key, or
    gives neither root nor sudo. Refused before anything is created."""

    exit_code = 7


class ToolError(PgrigError):
    """An external command failed; carries its argv, exit code and stderr excerpt."""

    def __init__(
        self,
        message: str,
        *,
        argv: list[str] | None = None,
        returncode: int | None = None,
        stderr: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.argv = argv or []
        self.returncode = returncode
        self.stderr = stderr

    def __str__(self) -> str:
        text = self.message
        if self.returncode is not None:
            text += f" (exit code {self.returncode})"
        excerpt = stderr_excerpt(self.stderr)
        if excerpt:
            text += f": {excerpt}"
        return text


class ToolTimeout(ToolError):
    """An external command did not finish in time and was stopped."""


class ClusterError(PgrigError):
    """The throwaway cluster or the existing server misbehaved."""


class StoreError(PgrigError):
    """The results store cannot be opened or written."""


class StoreLocked(StoreError):
    """Another process held the store's lock past the bounded wait: nothing of
    the study is wrong, and a rerun resumes it."""


class StudyExists(StoreError):
    """A study id the store already holds (another pgrig took it a moment ago)."""


class UnknownStudy(StoreError):
    """A study id the store does not hold: bad input."""

    exit_code = 2


class DownloadError(PgrigError):
    """A registry could not be reached, or what it sent is cut short or fails its checksum."""


class CacheError(PgrigError):
    """pgrig's download cache cannot be created or written."""


class ParseError(PgrigError):
    """A tool printed something its parser does not understand."""


def stderr_excerpt(text: str, lines: int = 8, width: int = 400) -> str:
    """The last few non-empty lines of a tool's stderr: where the reason usually is."""
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    excerpt = " | ".join(kept[-lines:])
    return excerpt if len(excerpt) <= width else "..." + excerpt[-width:]


class Interrupted(PgrigError):
    """Ctrl-C, SIGTERM or SIGHUP: what finished is recorded; the rest runs on
    resume. Exits 128 + the signal's number, as shells do (130, 143, 129)."""

    def __init__(self, message: str, *, signum: int = 2, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = 128 + signum


class PartialFailure(PgrigError):
    """The study finished, but some of its steps failed (their reasons are recorded)."""

    exit_code = 6


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C would be so that the same cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def signal_number(exc: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: SIGINT unless it was a ``Signalled``."""
    return exc.signum if isinstance(exc, Signalled) else 2


# password=... in a key=value connection string (quoted or not), the password of
# a URI (scheme://user:PASSWORD@host), and PGPASSWORD=... in a shown environment.
_SECRETS = (
    re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'\"]+)", re.IGNORECASE),
    re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^:/@\s]*:)([^\s/]+)(?=@)", re.IGNORECASE),
    re.compile(r"(\bPGPASSWORD\s*=\s*)(\S+)"),
)
MASK = "********"


def mask_secrets(text: str) -> str:
    """Every message pgrig prints goes through here (``cli.main``): passwords in
    connection strings, URIs and environments never reach a terminal or a CI log."""
    for pattern in _SECRETS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text
