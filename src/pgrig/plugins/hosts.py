"""The host executors: this machine (``local``) and a host over SSH (``ssh``)."""

from __future__ import annotations

from pgrig import registry
from pgrig.hosts.local import LocalExecutor
from pgrig.hosts.ssh import SshExecutor

PARTS = registry.Parts(executors=(("local", LocalExecutor), ("ssh", SshExecutor)))
