"""What the user sees while a study runs: progress bars and messages, on stderr.

Data goes to stdout, diagnostics and progress to stderr. Rich handles
``NO_COLOR`` and non-terminal output (no live redraw when piped).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

# rich is imported when a Ui is made (its console) and when a step shows a
# line (its progress), not with this module: every pgrig process imports this
# one (through pgrig.step and the registry) and most of them show no progress
# (docs/bench.md, "Starting a pgrig process").

# A step's line changes once a second (pgbench -P): redrawing it more often is
# CPU taken from the server (rich rebuilds the line's table at every redraw,
# about 0.8 ms to a terminal; bench/harness_overhead.py --costs).
REFRESH_PER_SECOND = 2.0


class Step:
    """Handle to one running step's progress line."""

    def __init__(self, progress: Progress, task_id: int, label: str) -> None:
        self._progress = progress
        self._task = task_id
        self.label = label

    def update(
        self,
        *,
        completed: float | None = None,
        total: float | None = None,
        detail: str | None = None,
    ) -> None:
        kwargs: dict[str, object] = {}
        if completed is not None:
            kwargs["completed"] = completed
        if total is not None:
            kwargs["total"] = total
        if detail is not None:
            kwargs["description"] = f"{self.label} [dim]{detail}[/dim]"
        self._progress.update(self._task, **kwargs)  # type: ignore[arg-type]

    def redraw(self) -> None:
        """Draw the line now, as the refresh thread does ``REFRESH_PER_SECOND`` times a second."""
        self._progress.refresh()


def _width() -> int | None:
    """The console's width: rich's own choice (COLUMNS, the terminal), except a
    COLUMNS it would print nothing at: COLUMNS=0 emptied stderr of progress,
    failures and warnings."""
    columns = os.environ.get("COLUMNS", "")
    if columns.strip().lstrip("-").isdigit() and int(columns) < MIN_COLUMNS:
        return MIN_COLUMNS
    return None


# Narrower than this, rich breaks a message a word or two a line.
MIN_COLUMNS = 40


class Ui:
    def __init__(self, *, quiet: bool = False, console: Console | None = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True, highlight=False, width=_width())
        self.quiet = quiet
        # Steps running at once (targets measured concurrently) share one live
        # display, a line each: rich allows one live display at a time.
        self._lock = threading.Lock()
        self._live: Progress | None = None
        self._lines = 0

    def data(self, text: str) -> None:
        """A result on stdout (a report's path), quiet or not: what scripts read."""
        print(text, flush=True)

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(message)

    def ok(self, message: str) -> None:
        if not self.quiet:
            self.console.print(f"[green]✓[/green] {message}")

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/yellow] {message}")

    def fail(self, message: str) -> None:
        self.console.print(f"[red]✗[/red] {message}")

    @contextmanager
    def step(self, label: str, total: float | None = None) -> Iterator[Step]:
        """A live progress line; with ``total`` a bar and a remaining-time estimate."""
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = [
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        ]
        with self._lock:
            if self._live is None:
                self._live = Progress(
                    *columns,
                    console=self.console,
                    transient=True,
                    disable=self.quiet,
                    # Not a terminal: nothing is redrawn, so no thread builds the line either.
                    auto_refresh=self.console.is_terminal,
                    refresh_per_second=REFRESH_PER_SECOND,
                )
                self._live.start()
            progress = self._live
            self._lines += 1
            task = progress.add_task(label, total=total)
        try:
            yield Step(progress, task, label)
        finally:
            with self._lock:
                progress.remove_task(task)
                self._lines -= 1
                if not self._lines:
                    progress.stop()
                    self._live = None


def count(n: int, noun: str) -> str:
    """'1 step', '7 steps': the plan and the run say how many of a thing."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def estimate(seconds: float) -> str:
    """An estimate of a whole campaign: '23 s' under 100 s (not 'about 0 min'),
    else whole minutes."""
    return duration(seconds) if seconds < 100 else f"{seconds / 60:.0f} min"


def duration(seconds: float) -> str:
    """'0.42 s', '3.1 s', '31 s', '6 min 20 s': a step that took less than a
    second does not show as '0 s' next to its 421 ms headline."""
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 100:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def format_option(
    choices: Sequence[str], help: str | None = None
) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """``--format`` (the parameter ``fmt``): how a command writes its data on
    stdout, the first of ``choices`` by default."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=choices[0],
        show_default=True,
        help=help,
    )
