"""The unit the runner executes and the store records: one ``Step`` -> one ``RunRecord``.

Probes and workloads turn a plan into steps; each step's ``action`` runs one
real tool and returns its typed result and raw output. The runner does the
rest (progress, timing, recording, failure handling), so every tool is
recorded the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgrig.cluster.binaries import PgBinaries
from pgrig.conninfo import Conn
from pgrig.ui import Step as ProgressLine


class Skip(Exception):
    """Raised by an action that cannot run here; recorded as status "skipped"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Context:
    """What actions need to reach the machine and the server under test."""

    bins: PgBinaries
    target: Path  # the directory on the storage under test
    scratch: Path  # where tools may write temporary files (logs)
    conn: Conn | None = None  # set once the server is up
    server_pid: int | None = None  # the postmaster, when it runs on this machine
    server_settings: dict[str, str] = field(default_factory=dict)


Action = Callable[[Context, ProgressLine], tuple[Any, str]]


@dataclass(frozen=True)
class Step:
    key: str  # unique within a study
    kind: str  # a key of pgrig.results.RESULT_TYPES
    label: str  # shown on the progress line
    params: dict[str, Any]
    action: Action
    total: float | None = None  # progress total (e.g. seconds) when known up front
    tools: tuple[str, ...] = ()  # names whose versions are recorded with the result
    monitored: bool = False  # a measured run: host and server are sampled while it runs
    # Runs before the measured part and outside the monitor's window (reset,
    # warm-up, CHECKPOINT), on the same progress line.
    prepare: Callable[[Context, ProgressLine], None] | None = None
