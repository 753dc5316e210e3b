"""Where a target's pgbench clients run: one interface, chosen once per target.

A workload asks its Context's ``clients`` for a measured run (``bench``, or
``drive`` when it reads more of pgbench's output than the run's figures) and
for a warm-up (``warm``), and never asks where they run. The target kind picks
the implementation when it makes the Context:

- ``OneHost``: pgbench on one host through its executor (this machine's for a
  local target), as ``pgrig.tools.pgbench.run_bench`` runs it: per-statement
  latencies and the output in arrival order are kept, as a stored run has them.
- ``pgrig.targets.loadhosts.Driver``: pgbench on every load host of a remote
  target at once, behind one start (``pgrig.load.run_pgbench``), the hosts'
  runs merged and their part recorded beside the step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, TypeVar

from pgrig.conninfo import Conn
from pgrig.hosts.executor import Executor
from pgrig.hosts.local import HERE
from pgrig.load import LoadJob, MultiLoad
from pgrig.results import PgbenchRun
from pgrig.tools.pgbench.run import run_bench

T = TypeVar("T")


class Clients(Protocol):
    """What a workload asks of the machines that run its clients (``Context.clients``)."""

    @property
    def names(self) -> tuple[str, ...]:
        """The hosts: each runs the job's clients (its connections' count once more)."""
        ...

    def bench(self, job: LoadJob) -> tuple[PgbenchRun, str]:
        """A measured run: its result and raw output, as the step records them."""
        ...

    def warm(self, job: LoadJob) -> None:
        """A warm-up: nothing measured or recorded; an exception ``job.on_progress``
        raises (a warm-up that settled) stops it and is raised."""
        ...

    def drive(self, job: LoadJob, one: Callable[[OneHost], T], many: Callable[[MultiLoad], T]) -> T:
        """A measured run read by the workload itself (TPC-C reads its scripts'
        blocks): ``one`` runs it on a single host, ``many`` reads the hosts' runs."""
        ...


@dataclass(frozen=True)
class OneHost:
    """pgbench on one host through its executor. ``bin_dir``: pgbench's directory
    there; ``preexec``: runs in pgbench's process before exec (a storage lab's
    clients' cpuset; this machine only). ``opts.threads`` is used as given (the
    workload's guess from this machine's CPUs)."""

    bin_dir: Path | str
    executor: Executor = HERE
    preexec: Callable[[], None] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.executor.name,)

    def bench(self, job: LoadJob) -> tuple[PgbenchRun, str]:
        return run_bench(
            self.bin_dir,
            _conn(job),
            job.opts,
            job.log_root,
            on_progress=job.on_progress,
            preexec=self.preexec,
            client=self.executor,
            extra=job.extra,
        )

    def warm(self, job: LoadJob) -> None:
        quiet = replace(job.opts, statement_latencies=False, transaction_log=False)
        self.bench(replace(job, opts=quiet))

    def drive(self, job: LoadJob, one: Callable[[OneHost], T], many: Callable[[MultiLoad], T]) -> T:
        return one(self)


def _conn(job: LoadJob) -> Conn:
    if job.conn is None:
        raise ValueError("a job for one host names its server (LoadJob.conn)")
    return job.conn
