"""The storage lab's errors: all PgrigError subclasses, caught once in the CLI."""

from __future__ import annotations

from pgrig.errors import PgrigError, ToolError


class StorageError(PgrigError):
    """The lab cannot build or use a target here (no root, no loop devices, ...)."""

    exit_code = 1  # 6 means a partial study (docs/exit-codes.md)


class OptionRefused(ToolError):
    """mkfs or the kernel refused an option the user asked for; names it."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        options: tuple[str, ...] = (),
        kernel_messages: tuple[str, ...] = (),
        argv: list[str] | None = None,
        returncode: int | None = None,
        stderr: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, argv=argv, returncode=returncode, stderr=stderr, hint=hint)
        self.options = options
        self.kernel_messages = kernel_messages


class CgroupError(StorageError):
    """A cgroup controller or file is missing, or the kernel refused a limit."""


class LeftoverError(StorageError):
    """Cleanup could not remove everything; the message lists what is left and how."""
