"""/proc parsers and the iostat/vmstat arithmetic, on files captured on a real
machine (tests/data/monitor/*.1.txt and *.2.txt were read one second apart)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from pgrig.monitor import procfs

DATA = Path(__file__).parent / "data" / "monitor"


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_stat_cpu_line_and_counters() -> None:
    st = procfs.parse_stat(text("stat.1.txt"))
    assert (st.user, st.nice, st.system, st.idle, st.iowait) == (159466, 550, 146084, 258646, 9290)
    assert (st.softirq, st.steal) == (2432, 2499)
    assert st.ctxt == 187766168
    assert st.procs_running == 3 and st.procs_blocked == 0
    assert st.btime == 1795321549
    assert st.ncpu == 2


def test_cpu_rates_are_shares_of_the_whole_machine() -> None:
    a = procfs.parse_stat(text("stat.1.txt"))
    b = procfs.parse_stat(text("stat.2.txt"))
    cpu = procfs.cpu_rates(a, b, 1.0)
    # 205 ticks passed: user 104, system 23, idle 59, iowait 1, softirq 2, steal 16
    assert cpu.user == pytest.approx(100 * 104 / 205)
    assert cpu.system == pytest.approx(100 * 23 / 205)
    assert cpu.idle == pytest.approx(100 * 59 / 205)
    assert cpu.iowait == pytest.approx(100 * 1 / 205)
    assert cpu.irq == pytest.approx(100 * 2 / 205)
    assert cpu.steal == pytest.approx(100 * 16 / 205)
    total = cpu.user + cpu.system + cpu.idle + cpu.iowait + cpu.irq + cpu.steal
    assert total == pytest.approx(100.0)
    assert cpu.busy == pytest.approx(100 * 145 / 205)
    assert cpu.ctxt_s == 6609


def test_diskstats_to_iostat() -> None:
    a = procfs.parse_diskstats(text("diskstats.1.txt"))
    b = procfs.parse_diskstats(text("diskstats.2.txt"))
    assert {"vda", "loop0", "zram0"} <= set(a)
    assert a["vda"].flushes == 1726995  # kernel 5.5+ flush counter
    dev = procfs.disk_rates("vda", a["vda"], b["vda"], 1.0)
    assert dev.reads_s == 0 and dev.read_await_ms == 0
    assert dev.writes_s == 1261
    assert dev.write_mib_s == pytest.approx(10904 * 512 / 2**20)
    assert dev.write_await_ms == pytest.approx(79 / 1261)
    assert dev.util_pct == pytest.approx(6.0)
    assert dev.queue == pytest.approx(0.108)
    assert dev.flushes_s == 578


def test_diskstats_of_an_old_kernel_has_no_flushes() -> None:
    # The 14-field layout of kernels before 4.18: no discard or flush columns.
    old = procfs.parse_diskstats("   8       0 sda 10 0 80 5 20 0 160 7 0 9 12\n")
    assert old["sda"].writes == 20 and old["sda"].flushes == 0


def test_meminfo_in_bytes() -> None:
    info = procfs.parse_meminfo(text("meminfo.2.txt"))
    assert info["Cached"] == 746908 * 1024
    assert info["Dirty"] == 2156 * 1024
    assert info["Writeback"] == 0
    mem = procfs.memory_sample(info)
    assert mem.cached_mib == pytest.approx(746908 / 1024)
    assert mem.available_mib > 0


def test_net_dev_skips_loopback() -> None:
    a = procfs.parse_net_dev(text("net_dev.1.txt"))
    b = procfs.parse_net_dev(text("net_dev.2.txt"))
    assert b["eth0"] == (692924387, 889712)
    assert b["lo"] == (3193, 3193)
    rx, tx = procfs.net_rates(a, b, 1.0)
    eth_rx = (b["eth0"][0] - a["eth0"][0]) / 2**20
    assert rx == pytest.approx(eth_rx)
    assert tx >= 0


def test_pid_stat_with_parentheses_in_the_name() -> None:
    st = procfs.parse_pid_stat(text("pid_stat_parens.txt"))
    assert st.pid == 2035
    assert st.comm == "a) b (c"
    assert st.state == "S" and st.ppid == 1
    assert st.num_threads == 1
    assert st.starttime == 294422


def test_pid_stat_cpu_times() -> None:
    st = procfs.parse_pid_stat(text("pid_stat_init.txt"))
    assert (st.pid, st.comm, st.ppid) == (1, "process_api", 0)
    assert (st.utime, st.stime, st.cutime, st.cstime) == (264, 894, 125729, 122750)
    assert st.ticks == 264 + 894
    assert st.num_threads == 13


def test_schedstat() -> None:
    assert procfs.parse_schedstat(text("pid_schedstat.txt")) == (1546076, 1016186)


def test_descendants_of_this_process() -> None:
    procs = procfs.all_processes()
    assert os.getpid() in procs
    assert os.getpid() in procfs.descendants(procs, [procs[os.getpid()].ppid])
    assert os.getpid() not in procfs.descendants(procs, [os.getpid()])


def test_slaves_of_a_plain_disk_is_itself(tmp_path: Path) -> None:
    (tmp_path / "vda" / "slaves").mkdir(parents=True)
    assert procfs.slaves("vda", tmp_path) == ["vda"]
    # dm-0 on a partition of sdb: both show up, the partition as its disk
    (tmp_path / "dm-0" / "slaves" / "sdb1").mkdir(parents=True)
    (tmp_path / "sdb" / "sdb1").mkdir(parents=True)
    assert procfs.slaves("dm-0", tmp_path) == ["dm-0", "sdb"]


def test_process_tree_finds_a_child_and_its_child() -> None:
    import subprocess

    # sh -> sleep: a grandchild, found through the children files (or the full walk)
    child = subprocess.Popen(["/bin/sh", "-c", "/bin/sleep 5 & wait"], start_new_session=True)
    try:
        for _ in range(100):
            tree = procfs.process_tree(os.getpid())
            if any(st.comm == "sleep" for st in tree.values()):
                break
            threading.Event().wait(0.02)
        assert os.getpid() in tree and child.pid in tree
        sleeper = next(st for st in tree.values() if st.comm == "sleep")
        assert sleeper.ppid == child.pid
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the sleep too
        child.wait()
    assert procfs.process_tree(child.pid) == {}


def test_watch_without_a_server_samples_the_host_and_says_what_is_missing() -> None:
    from pgrig import monitor
    from pgrig.clients import OneHost
    from pgrig.pgsource import binaries
    from pgrig.step import Context

    bins = binaries.PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15", 15)
    ctx = Context(
        clients=OneHost(bins.client_bin_dir),
        bins=bins,
        target=Path("/var/tmp"),
        scratch=Path("/var/tmp"),
    )
    with monitor.Watch(ctx, interval=0.2) as watch:
        threading.Event().wait(1.1)
    mon = watch.result(None)
    assert len(mon.samples) >= 3
    assert all(s.pg is None and s.cpu.server is None for s in mon.samples)
    assert all(0 <= s.cpu.busy <= 100 for s in mon.samples)
    assert any("no server connection" in n for n in mon.notes)
    # Said once: no server at all is not also "a server elsewhere".
    assert not any("does not run on this machine" in n for n in mon.notes)
    # No pgbench ran: no sample is inside a run, so there is nothing to judge.
    assert mon.verdict.cause == "unknown"


def test_one_sampler_reads_a_host_by_the_strategy_its_context_chose() -> None:
    """The sampler never asks which host it samples: the Context's ``sampling``
    (chosen by the target kind with ``host``) decides. This machine read as a
    whole through its executor (what a remote host gets) has the same CPUs and
    no process attribution; read the local way, pgrig's own share is known."""
    from dataclasses import replace

    from pgrig import monitor
    from pgrig.clients import OneHost
    from pgrig.hosts.local import HERE
    from pgrig.monitor.sampling import ProcessesHere, WholeHost
    from pgrig.pgsource import binaries
    from pgrig.step import Context

    bins = binaries.PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15", 15)
    ctx = Context(clients=OneHost(bins.client_bin_dir), bins=bins,
                  target=Path("/var/tmp"), scratch=Path("/var/tmp"))  # fmt: skip
    assert ctx.host is HERE and ctx.sampling is ProcessesHere
    results = {}
    for sampling in (ProcessesHere, WholeHost):
        with monitor.Watch(replace(ctx, sampling=sampling), interval=0.2) as watch:
            threading.Event().wait(0.7)
        results[sampling] = watch.result(None)
    here, whole = results[ProcessesHere], results[WholeHost]
    assert here.ncpu == whole.ncpu == os.cpu_count()
    assert whole.samples and all(s.cpu.other is None for s in whole.samples)
    assert whole.samples and all(s.cpu.pgrig is None for s in whole.samples)
    assert any(s.cpu.pgrig is not None for s in here.samples)
    assert any("are the server's host" in n for n in whole.notes)


def test_a_host_read_as_a_whole_builds_nothing_of_this_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What only this machine's strategy needs (its process meter, the
    interference ledger in it) is that strategy's own: a watch of a host read
    as a whole never starts them (a tripwire in their place, not a mock of
    something that cannot run here), and still samples that host's CPUs."""
    from pgrig import monitor
    from pgrig.clients import OneHost
    from pgrig.monitor import interference
    from pgrig.monitor.sampling import WholeHost
    from pgrig.pgsource import binaries
    from pgrig.step import Context

    def tripwire(*_: object) -> None:
        raise AssertionError("this machine's process meter built for another host")

    monkeypatch.setattr(interference.Ledger, "start", classmethod(tripwire))
    bins = binaries.PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15", 15)
    ctx = Context(clients=OneHost(bins.client_bin_dir), bins=bins, sampling=WholeHost,
                  target=Path("/var/tmp"), scratch=Path("/var/tmp"))  # fmt: skip
    with monitor.Watch(ctx, interval=0.2) as watch:
        threading.Event().wait(0.5)
    whole = watch.result(None)
    assert whole.samples and all(0 <= s.cpu.busy <= 100 for s in whole.samples)
    assert whole.others is None and whole.ncpu == os.cpu_count()


def test_watch_refuses_a_silly_interval() -> None:
    from pgrig import monitor
    from pgrig.errors import UsageError

    with pytest.raises(UsageError, match="between 0.1 and 60 seconds"):
        monitor.Watch(None, interval=0)  # type: ignore[arg-type]
