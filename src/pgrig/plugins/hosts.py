"""The host executors: this machine (``local``) and a host over SSH (``ssh``);
the report's section of a remote target's load hosts."""

from __future__ import annotations

from pgrig import registry
from pgrig.hosts.local import LocalExecutor
from pgrig.hosts.ssh import SshExecutor
from pgrig.report import loadhosts

PARTS = registry.Parts(
    executors=(("local", LocalExecutor), ("ssh", SshExecutor)),
    sections=(("load-hosts", loadhosts.section),),
)
