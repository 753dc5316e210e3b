"""The host executors: this machine (``local``) and a host over SSH (``ssh``)."""

from __future__ import annotations

from pgrig import registry
from pgrig.hosts.local import LocalExecutor
from pgrig.hosts.ssh import SshExecutor


def register() -> None:
    registry.register_executor("local", LocalExecutor)
    registry.register_executor("ssh", SshExecutor)
