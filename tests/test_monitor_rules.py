"""Each verdict rule on samples shaped to provoke it, and on samples that must
not trigger it. Synthetic samples (the rules are pure functions of them); the
same rules run on real pgbench runs in test_monitor_verdicts.py and
test_monitor_interference.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pgrig.monitor import verdict
from pgrig.monitor.hosts import LoadHostSample, LoadHostWatch, client_bound
from pgrig.monitor.model import (
    CpuSample,
    DeviceSample,
    IoSample,
    Limits,
    OtherLoad,
    OtherProcess,
    PgSample,
    Sample,
)
from pgrig.results import PgbenchRun, from_dict

DATA = Path(__file__).parent / "data" / "monitor"


def run_of(clients: int) -> PgbenchRun:
    data = json.loads((DATA / "result_storage_read.json").read_text())
    run = from_dict(PgbenchRun, data["run"])
    return dataclasses.replace(run, clients=clients, threads=min(clients, 2))


def samples(
    n: int = 8,
    *,
    busy: float = 50.0,
    server: float = 30.0,
    client: float = 10.0,
    other: float | None = 2.0,
    steal: float = 0.0,
    runq: float = 5.0,
    demand: float = 40.0,
    waits: dict[str, int] | None = None,
    states: dict[str, int] | None = None,
    wal_syncs: float | None = None,
    blks_read: float = 0.0,
    io: IoSample | None = None,
    devices: tuple[DeviceSample, ...] = (),
) -> list[Sample]:
    cpu = CpuSample(
        user=busy - steal,
        system=0.0,
        iowait=0.0,
        irq=0.0,
        steal=steal,
        idle=100.0 - busy,
        server=server,
        client=client,
        pgrig=0.5,
        other=other,
        kernel=0.0,
        server_runq_pct=runq,
        client_thread_core_pct=demand * 0.9,
        client_thread_demand_pct=demand,
    )
    pg = PgSample(
        waits=waits if waits is not None else {"CPU": 2, "Client:ClientRead": 2},
        states=states or {},
        wal_syncs_s=wal_syncs,
        commits_s=1000.0,
        blks_hit_s=10_000.0,
        blks_read_s=blks_read,
    )
    return [
        Sample(
            t_s=i + 1.0,
            wall=1.8e9 + i,
            interval_s=1.0,
            cpu=cpu,
            pg=pg,
            tps=1000.0,
            io=io,
            devices=devices,
        )
        for i in range(n)
    ]


def decide(ss: list[Sample], clients: int = 4, **kw: object) -> verdict.Verdict:
    return verdict.decide(ss, (), kw.get("limits"), run_of(clients), kw.get("others"))  # type: ignore[arg-type]


HOG = OtherLoad(
    cpu_pct=78.0,
    cpu_max_pct=85.0,
    steal_pct=0.0,
    top=(OtherProcess("stress-ng", 2, 74.0), OtherProcess("cc1", 9, 4.0)),
)


# --------------------------------------------------------------------------
# starved by other processes


def test_starved_when_others_hold_the_saturated_cpus() -> None:
    """The issue's case: CPUs 100% busy, server 18%, pgbench 4%, others 78%,
    backends 96% Client:ClientRead. Not the server's CPU: others'."""
    ss = samples(
        busy=100, server=18, client=4, other=78, runq=60, waits={"Client:ClientRead": 24, "CPU": 1}
    )
    v = decide(ss, others=HOG)
    assert v.cause == "starved", v
    assert "other processes took 78% of the machine's CPU (stress-ng 74% (2 processes)" in v.summary
    assert "server 18%, pgbench 4%" in v.summary
    assert not any(line.startswith(verdict.CAUSES["cpu"]) for line in v.secondary)


def test_starved_when_the_server_queues_for_cpus_others_hold() -> None:
    ss = samples(busy=70, server=20, client=5, other=40, runq=45)
    assert decide(ss).cause == "starved"


def test_not_starved_when_others_are_few() -> None:
    ss = samples(
        busy=100, server=70, client=25, other=3, runq=30, waits={"CPU": 3, "Client:ClientRead": 1}
    )
    v = decide(ss)
    assert v.cause == "cpu", v


def test_others_that_took_less_than_the_server_still_lead() -> None:
    """Saturated, others 25% and the server 60%: the server's share was set by the
    contention, so the verdict is the contention, and the server is not called
    CPU-bound. (A CPU hog beside a study got 30% against the server's 44% here.)"""
    ss = samples(
        busy=100, server=60, client=12, other=25, runq=50, waits={"CPU": 6, "Client:ClientRead": 2}
    )
    v = decide(ss)
    assert v.cause == "starved", v
    assert "other processes took 25%" in v.summary
    assert not any(line.startswith(verdict.CAUSES["cpu"]) for line in v.secondary), v.secondary


def test_not_starved_when_others_leave_idle_cpus() -> None:
    """Other processes were there (the run is disturbed), but nobody waited for a CPU."""
    ss = samples(busy=60, server=20, client=5, other=30, runq=3)
    assert decide(ss, clients=8).cause != "starved"


def test_not_starved_when_not_attributed() -> None:
    """Results stored before attribution have no ``other``: no starved verdict."""
    ss = samples(busy=100, server=18, client=4, other=None, runq=60)
    assert decide(ss).cause != "starved"


# --------------------------------------------------------------------------
# latency / round trips


def test_latency_bound_with_one_client_and_idle_cpus() -> None:
    ss = samples(busy=40, server=20, client=10, waits={"Client:ClientRead": 1})
    ss[::2] = samples(4, busy=40, server=20, client=10, waits={"CPU": 1})
    v = decide(ss, clients=1)
    assert v.cause == "latency", v
    assert "1 client: the backend waited for it" in v.summary
    assert "ms per transaction" in " ".join(v.evidence)


def test_not_latency_bound_with_many_clients() -> None:
    ss = samples(busy=40, server=20, client=10, waits={"Client:ClientRead": 6, "CPU": 2})
    assert decide(ss, clients=8).cause == "idle"


def test_not_latency_bound_when_the_one_backend_never_waits() -> None:
    ss = samples(busy=55, server=50, client=1, waits={"CPU": 1})
    assert decide(ss, clients=1).cause == "cpu"


# --------------------------------------------------------------------------
# the dominant wait classes


@pytest.mark.parametrize(
    ("cause", "event"),
    [
        ("lock", "Lock:transactionid"),
        ("wal", "IO:WALSync"),
        ("read", "IO:DataFileRead"),
        ("write", "IO:DataFileExtend"),
        ("lwlock", "LWLock:BufferMapping"),
    ],
)
def test_a_dominant_wait_names_its_class(cause: str, event: str) -> None:
    v = decide(samples(waits={event: 6, "Client:ClientRead": 2}))
    assert v.cause == cause, v
    assert event in v.summary


@pytest.mark.parametrize(
    "event",
    [
        "Lock:transactionid",
        "IO:WALSync",
        "IO:DataFileRead",
        "IO:DataFileExtend",
        "LWLock:BufferMapping",
    ],
)
def test_a_rare_wait_is_not_the_cause(event: str) -> None:
    v = decide(samples(waits={event: 1, "Client:ClientRead": 9}))
    assert v.cause == "idle", v


def test_a_wait_its_backends_were_runnable_in_is_not_the_servers() -> None:
    """Issue 41's flake, as the hog test saw it: one read-write client (fsync
    off: no WAL synced) beside a CPU hog, preempted inside XLogWrite's write()
    with IO:WALWrite still set (R in its /proc/<pid>/stat): it waited for a
    CPU, not for the WAL. The same waits blocked in the kernel (D), or runnable
    while the WAL was synced (woken from the device), are the server's own,
    beside the hog too."""
    hogged = {"busy": 100, "server": 30, "client": 5, "other": 62, "runq": 55}
    waits = {"IO:WALWrite": 5, "CPU": 2, "Client:ClientRead": 1}

    def beside_the_hog(states: dict[str, int], syncs: float | None = 0.0) -> verdict.Verdict:
        return decide(samples(**hogged, waits=waits, states=states, wal_syncs=syncs), others=HOG)

    preempted = beside_the_hog({"IO:WALWrite|R": 5})
    assert preempted.cause == "starved", preempted
    assert "runnable under an I/O wait that never reached the storage (on or queued for a " in (
        preempted.summary
    )
    assert "62% IO:WALWrite" in preempted.summary
    assert not any(line.startswith(verdict.CAUSES["wal"]) for line in preempted.secondary)
    waiting = beside_the_hog({"IO:WALWrite|D": 5})
    assert waiting.cause == "wal", waiting
    assert waiting.summary.startswith("WAL / fsync bound: 62% of sampled backends on IO:WALWrite")
    assert any(line.startswith(verdict.CAUSES["starved"]) for line in waiting.secondary)
    # Some runnable, enough still waiting: the waiting ones count, the rest is said.
    mixed = beside_the_hog({"IO:WALWrite|R": 1})
    assert mixed.cause == "wal", mixed
    assert "50% of sampled backends on IO:WALWrite (another 12% runnable with it set" in (
        mixed.summary
    )
    # WAL synced: a runnable backend was woken from the device, still the WAL's.
    synced = beside_the_hog({"IO:WALWrite|R": 5}, syncs=400.0)
    assert synced.cause == "wal" and "runnable" not in synced.summary, synced
    # Without the states, or without WAL counters (before 14), the events as they are.
    assert beside_the_hog({}).cause == "wal"
    assert beside_the_hog({"IO:WALWrite|R": 5}, syncs=None).cause == "wal"


def test_a_read_from_the_device_counts_though_its_backend_was_runnable() -> None:
    """The read-bound test's backends (data evicted, a 0.1-ms disk, load 15):
    85% IO:DataFileRead, 80% of them runnable - woken from the device, queued
    for a CPU. The server read from the device: those are its reads. The same
    waits with nothing read from the device (a page-cache copy, preempted) are not."""
    waits = {"IO:DataFileRead": 17, "Client:ClientRead": 3}
    states = {"IO:DataFileRead|R": 16, "IO:DataFileRead|D": 1}
    hogged = {"busy": 70, "server": 40, "client": 6, "other": 19, "runq": 65}

    def read(mib_s: float) -> IoSample:
        return IoSample("vda", device_read_mib_s=mib_s, server_read_mib_s=mib_s)

    from_device = decide(samples(**hogged, waits=waits, states=states, io=read(30.0)), others=HOG)
    assert from_device.cause == "read", from_device
    cached = decide(samples(**hogged, waits=waits, states=states, io=read(0.0)), others=HOG)
    assert cached.cause == "starved", cached


# --------------------------------------------------------------------------
# load generator, server CPU, not saturated


def test_load_generator_saturated() -> None:
    v = decide(samples(demand=97, waits={"Client:ClientRead": 9, "CPU": 1}))
    assert v.cause == "client", v


def test_a_saturated_load_host_leads_what_the_server_saw() -> None:
    # Load from other machines: the server host idles, its backends wait for the
    # clients; a load host's watch says why.
    host = LoadHostWatch("c1", 4, tuple(LoadHostSample(i, 98, 0, 1, 1, 60, 50) for i in range(5)))
    ss = samples(busy=30, server=15, client=0, waits={"Client:ClientRead": 8, "CPU": 2})
    v = verdict.decide(ss, (), None, run_of(8), None, load_hosts=client_bound([host]))
    assert v.cause == "client_host", v
    assert v.summary.startswith("client-bound: a load host ran out of CPU: load host c1: CPUs 98%")
    assert decide(ss, clients=8).cause == "idle"  # without the load host's watch


def test_load_generator_with_time_to_spare_is_not_the_limit() -> None:
    v = decide(samples(demand=50, waits={"Client:ClientRead": 9, "CPU": 1}))
    assert v.cause == "idle", v


def test_cpu_bound_in_the_server() -> None:
    v = decide(
        samples(busy=95, server=70, client=20, other=2, waits={"CPU": 8, "Client:ClientRead": 2})
    )
    assert v.cause == "cpu", v
    assert "server 70%, pgbench 20%, pgrig 0%, other processes 2%" in v.summary


def test_backends_on_a_cpu_others_hold_do_not_make_the_server_cpu_bound() -> None:
    """Backends "on a CPU" include those queued for one. Others idle enough that
    nobody starved (low run queue), yet they used more CPU than the server."""
    v = decide(
        samples(
            busy=80,
            server=20,
            client=5,
            other=50,
            runq=10,
            waits={"CPU": 8, "Client:ClientRead": 2},
        )
    )
    assert v.cause != "cpu", v
    assert not any(line.startswith(verdict.CAUSES["cpu"]) for line in v.secondary)


def test_not_saturated() -> None:
    v = decide(
        samples(busy=30, server=15, client=10, waits={"Client:ClientRead": 7, "CPU": 3}), clients=8
    )
    assert v.cause == "idle", v
    assert "no wait class dominates" in " ".join(v.evidence)


def test_a_saturated_run_is_not_called_not_saturated() -> None:
    v = decide(samples(busy=95, server=70, client=20, waits={"CPU": 8, "Client:ClientRead": 2}))
    assert v.cause != "idle", v


# --------------------------------------------------------------------------
# device-wide figures are labelled, next to the server's own


def test_device_reads_of_other_processes_are_not_the_databases() -> None:
    """The issue's case: select-only, 100% hit ratio, 0 blocks read/s, while
    the device read 16,979/s for others: the line says device-wide and that
    the server's own reads were nothing."""
    dev = DeviceSample("vda", 16_979.0, 10.0, 132.0, 0.1, 0.1, 0.2, 60.0, 2.0)
    io = IoSample("vda", device_read_mib_s=132.0, server_read_mib_s=0.0, server_write_mib_s=0.0)
    ss = samples(busy=60, devices=(dev,), io=io, blks_read=0.0)
    v = decide(ss, limits=Limits(randread_iops=38_655.0))
    (reads,) = v.against_limits
    assert reads.startswith("device-wide reads on vda (every process): 16,979 r/s median")
    # a named statistic, and no share of nothing (issue 30: "0.0 MiB/s = 100% of")
    assert "the server's own reads: median 0.0 MiB/s" in reads
    assert "of the device's" not in reads


def test_the_servers_own_reads_are_shown_as_its_share() -> None:
    dev = DeviceSample("vda", 5000.0, 0.0, 40.0, 0.0, 0.1, 0.0, 60.0, 2.0)
    io = IoSample("vda", device_read_mib_s=40.0, server_read_mib_s=38.0, server_write_mib_s=0.0)
    ss = samples(devices=(dev,), io=io, waits={"IO:DataFileRead": 6, "CPU": 2})
    v = decide(ss, limits=Limits(randread_iops=10_000.0))
    assert v.cause == "read"
    assert "vda (device-wide) 60% busy" in v.summary
    assert (
        "the server's own reads: median 38.0 MiB/s, 95% of the device's bytes over the run"
        in v.summary
    )


def _checkpointer(active: set[int], counts: set[int], last: int = 200) -> list[Sample]:
    """One sample a second, t = 1..last: the checkpointer busy at ``active``
    seconds, its counter up by one at ``counts``."""
    cpu = CpuSample(user=50.0, system=0.0, iowait=0.0, irq=0.0, steal=0.0, idle=50.0)
    return [
        Sample(
            t_s=float(t),
            wall=1.7e9 + t,
            interval_s=1.0,
            cpu=cpu,
            pg=PgSample(checkpoint_active=t in active, checkpoints=int(t in counts)),
        )
        for t in range(1, last + 1)
    ]


def test_a_checkpoint_counted_when_it_starts_is_one_interval_from_start_to_rest() -> None:
    """Before PostgreSQL 17 the counter goes up as a spread checkpoint starts
    (reported a second or two in, while it writes): what a 30-minute TPC-C run
    showed 24 times. Back-to-back checkpoints split at the second count."""
    from pgrig.monitor.watch import find_checkpoints

    busy = set(range(10, 71)) | set(range(75, 201))
    found = find_checkpoints(_checkpointer(busy, {12, 77, 140}))
    assert [(c.start_s, c.end_s, c.completed) for c in found] == [
        (9.0, 71.0, True),
        (74.0, 139.0, True),
        (139.0, None, False),  # still writing when sampling stopped
    ]
    # Busy without a count: not confirmed as a checkpoint.
    unconfirmed = find_checkpoints(_checkpointer(set(range(20, 26)), set()))
    assert [(c.start_s, c.end_s, c.completed) for c in unconfirmed] == [(19.0, 26.0, False)]
    # Begun and finished between two samples (an immediate CHECKPOINT).
    quick = find_checkpoints(_checkpointer(set(), {50}))
    assert [(c.start_s, c.end_s, c.completed) for c in quick] == [(49.0, 50.0, True)]


def test_a_checkpoint_counted_when_it_ends_closes_at_the_count() -> None:
    """PostgreSQL 17's num_done goes up when a checkpoint ends."""
    from pgrig.monitor.watch import find_checkpoints

    busy = set(range(10, 71)) | set(range(75, 131))
    found = find_checkpoints(_checkpointer(busy, {70, 100}), counted_at_end=True)
    assert [(c.start_s, c.end_s, c.completed) for c in found] == [
        (9.0, 70.0, True),
        (74.0, 100.0, True),
        (100.0, 131.0, False),
    ]
