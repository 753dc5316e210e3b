"""The client's heartbeat (pgrig.monitor.client): a pgbench whose -P lines stop,
or whose own measured time is past the planned -T, fails its run (issue 40.2).
The end-to-end SIGSTOP of a real pgbench is in test_cli_faults.py."""

from __future__ import annotations

import time

import pytest

from pgrig.monitor import client
from pgrig.monitor.client import ClientStalled, ClientWatch, check_duration


def test_a_run_that_measured_far_past_its_planned_duration_is_refused() -> None:
    # pgbench's tps is its transactions over the time it measured: a SIGSTOP of
    # 49 s inside a 15-s run shows as 64 s measured.
    with pytest.raises(ClientStalled, match=r"measured 64\.0 s for a planned 15 s run"):
        check_duration("the client pgbench", 15, transactions=64_000, tps=1_000.0, latency_avg_ms=1)


def test_a_run_within_its_tolerance_passes() -> None:
    check_duration("the client pgbench", 15, transactions=15_300, tps=1_000.0, latency_avg_ms=1)
    # a long transaction in flight at -T's end is no stall
    check_duration("the client pgbench", 15, transactions=20, tps=1.0, latency_avg_ms=2_000)
    check_duration("the client pgbench", 15, transactions=0, tps=0.0, latency_avg_ms=0)


def test_silence_mid_run_is_a_stall_and_lines_keep_it_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client, "SILENT_GRACE_S", 0.2)
    watch = ClientWatch("the client pgbench", interval_s=1, duration_s=60)
    watch.heard()
    for _ in range(3):
        time.sleep(0.4)
        watch.heard()
        watch.check()
    time.sleep(1.3)
    with pytest.raises(ClientStalled, match="stopped progressing: no progress line for 1 s"):
        watch.check()


def test_no_first_line_is_a_stall_after_the_connecting_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client, "FIRST_LINE_GRACE_S", 0.1)
    watch = ClientWatch("the client pgbench", interval_s=1, duration_s=60)
    watch.check()
    time.sleep(1.2)
    with pytest.raises(ClientStalled, match="printed no progress line in its first"):
        watch.check()
