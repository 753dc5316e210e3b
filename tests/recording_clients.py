"""A toy ``pgrig.clients.Clients`` for tests: runs every job through a real
``OneHost`` and records what the workload's step asked of it, as two hosts'
clients would be asked (``names`` has two)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pgrig.clients import Clients, OneHost
from pgrig.load import LoadJob, MultiLoad
from pgrig.results import PgbenchRun

T = TypeVar("T")


@dataclass
class Recording:
    inner: OneHost
    asked: list[tuple[str, LoadJob]] = field(default_factory=list)

    @property
    def names(self) -> tuple[str, ...]:
        return ("toy-a", "toy-b")

    def bench(self, job: LoadJob) -> tuple[PgbenchRun, str]:
        self.asked.append(("bench", job))
        return self.inner.bench(job)

    def warm(self, job: LoadJob) -> None:
        self.asked.append(("warm", job))
        self.inner.warm(job)

    def drive(self, job: LoadJob, one: Callable[[OneHost], T], many: Callable[[MultiLoad], T]) -> T:
        self.asked.append(("drive", job))
        return one(self.inner)


def _conforms(toy: Recording) -> Clients:  # mypy checks the toy against the interface
    return toy
