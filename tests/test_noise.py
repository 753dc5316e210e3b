"""Per-second noise of a run (pgrig.monitor.noise): pure functions on pgbench -P series,
some from real captured runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig.monitor import noise
from pgrig.tools import pgbench

DATA = Path(__file__).parent / "data"


def test_steady_series() -> None:
    n = noise.noise([100.0, 102.0, 98.0, 100.0])
    assert n is not None
    assert (n.n, n.mean, n.min, n.max) == (4, 100.0, 98.0, 102.0)
    assert n.cv == pytest.approx(0.01633, abs=1e-5)  # stdev 1.633 / mean 100
    assert not noise.is_noisy(n)
    assert noise.advice(n) is None
    assert noise.describe(n) == "CV 1.6%, 98 to 102 tps over 4 s"


def test_a_stall_is_noise_with_advice() -> None:
    n = noise.noise([24_356.0, 0.0, 20_000.0, 22_000.0, 1_000.0])
    assert n is not None and noise.is_noisy(n)
    text = noise.advice(n)
    assert text is not None
    assert text.startswith("tps varied 0–24,356 per second (CV 89%) over 5 s: raise the duration")
    long = noise.noise([24_356.0, 0.0] * 20)
    assert long is not None
    assert "repeat the run" in (noise.advice(long) or "")
    assert "raise the duration" not in (noise.advice(long) or "")


@pytest.mark.parametrize("series", [[], [5.0], [5.0, 6.0], [0.0, 0.0, 0.0]])
def test_too_little_to_say(series: list[float]) -> None:
    """Fewer than 3 seconds, or nothing done at all: no CV to speak of."""
    assert noise.noise(series) is None
    assert not noise.is_noisy(None)


def test_worst_of_several_runs() -> None:
    a = noise.noise([100.0, 101.0, 99.0])
    b = noise.noise([100.0, 150.0, 50.0])
    assert noise.worst([a, None, b]) is b
    assert noise.worst([None]) is None


def test_captured_pgbench_progress() -> None:
    """The -P 1 series of a real read-write run parses into a steady noise."""
    run = pgbench.parse_run(
        (DATA / "pgbench_run_read_write.stdout.txt").read_text(),
        (DATA / "pgbench_run_read_write.stderr.txt").read_text(),
    )
    n = noise.noise([p.tps for p in run.progress])
    assert n is not None and n.n == len(run.progress) == 3
    assert (n.min, n.max) == (2032.0, 2151.9)
    assert n.cv == pytest.approx(0.02869, abs=1e-5) and not noise.is_noisy(n)


def test_a_30_s_run_is_not_told_to_run_30_s() -> None:
    """seed001: "raise the duration (30 s or more)" on a 30 s run, whose pgbench -P 1
    printed 29 seconds."""
    thirty = noise.noise([100.0, 20.0] * 14 + [100.0])
    assert thirty is not None and thirty.n == 29
    text = noise.advice(thirty)
    assert text is not None and "30 s or more" not in text
    ten = noise.noise([100.0, 20.0] * 5)
    assert ten is not None and "raise the duration (30 s or more)" in (noise.advice(ten) or "")
