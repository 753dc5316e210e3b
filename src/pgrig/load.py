"""Load from several hosts at once: one start for all, clocks measured, logs pooled.

On each load host a small Python waiter starts first (``WAITER``): it answers
clock pings, then, told "go <time>", sleeps until that time on its own clock
(the last 2 ms spun), prints the moment it woke, and ``exec``s pgbench in its
place - same PID, so stopping it stops pgbench. The controller:

1. measures each host's clock offset against its own, NTP-style: the ping
   with the smallest round trip wins; offset = host time - midpoint of the
   round trip, uncertain by half that round trip;
2. gives every host one start time (now + ``START_MARGIN_S``), translated to
   the host's clock with its offset;
3. reads back when each host woke, back on the controller's clock: the spread
   of those is the start spread reported with the run (and its uncertainty,
   the two largest half round trips);
4. fetches every host's ``pgbench -l`` log and merges the latency percentiles
   from the pooled samples - each host's HdrHistogram added up (within the
   histograms' 0.1%), never per-host percentiles, which cannot be averaged.

Every host runs the same pgbench: the same clients and threads each (a load
host is added for its CPUs), the same scripts - a custom workload's and
TPC-C's, copied to each host through its executor before the start - except
``-R``, split among the hosts so that the study's rate stays the rate asked.

Ctrl-C, SIGTERM or any error stops every started pgbench (TERM, then KILL, by
PID on its host) and removes the remote log directories.

Each host's ``-P 1`` progress is its heartbeat: a host whose pgbench printed
nothing for ``SILENT_GRACE_S`` past its interval, or whose SSH connection
closed, is lost (``HostLost``, naming it). Its pgbench cannot be stopped
through a network that hangs: a background thread stops it, and removes its
directory, once the host answers again (its owner record names the PID for
``pgrig clean --inventory`` meanwhile).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from pgrig import proc, stats
from pgrig.conninfo import Conn
from pgrig.errors import ParseError, PgrigError, ToolError, UsageError
from pgrig.hosts import owner
from pgrig.hosts.executor import Executor, Started
from pgrig.monitor.hosts import LoadHostWatch, Watcher, client_bound
from pgrig.monitor.verdict import Finding
from pgrig.results import LatencySummary, PgbenchRun, ProgressPoint
from pgrig.tools.pgbench import txlog
from pgrig.tools.pgbench.parse import parse_progress
from pgrig.tools.pgbench.run import (
    RunOptions,
    log_sampling_rate,
    parse_result,
    run_argv,
    run_bench,
)

PROGRESS_EVERY_S = 1.0  # pgbench's -P 1
PROGRESS_TAIL = 20  # stderr lines searched for the newest progress line
START_MARGIN_S = 1.0  # from "go" to the common start: enough to reach every host
PINGS = 12
# A load host silent this long past its -P interval is lost: pgbench prints a
# progress line every second even at 0 tps, so only a hung host or network
# stops them (docs/hosts.md has the times to notice measured here).
SILENT_GRACE_S = 4.0
REAP_FOR_S = 600.0  # how long a lost host's pgbench is tried to be stopped
LOG_PREFIX = "pgbench_log"

WAITER = r"""
import os, sys, time
print("ready", flush=True)
for line in sys.stdin:
    word, _, arg = line.strip().partition(" ")
    if word == "t":
        print("t", repr(time.time()), flush=True)
    elif word == "go":
        deadline = float(arg)
        while True:
            left = deadline - time.time()
            if left <= 0:
                break
            time.sleep(left - 0.002 if left > 0.003 else 0)
        print("started", repr(time.time()), flush=True)
        os.execvp(sys.argv[1], sys.argv[1:])
    else:
        sys.exit("pgrig waiter: unknown word " + word)
sys.exit("pgrig waiter: stdin closed before go")
"""


@dataclass(frozen=True)
class ClockOffset:
    host: str
    offset_ms: float  # the host's clock minus the controller's
    uncertainty_ms: float  # half the best round trip
    pings: int


@dataclass(frozen=True)
class HostLoad:
    host: str
    pgbench: PgbenchRun
    latency: LatencySummary | None
    started_ms: float  # when its pgbench started, controller clock, from the common start
    log_files: tuple[str, ...]  # local copies
    stdout: str = ""  # pgbench's report, for a workload that reads more of it (TPC-C)
    stderr: str = ""


@dataclass(frozen=True)
class MultiLoad:
    hosts: tuple[HostLoad, ...]
    offsets: tuple[ClockOffset, ...]
    start_spread_ms: float  # latest start minus earliest, controller clock
    start_spread_uncertainty_ms: float
    tps: float  # the sum of the hosts' tps
    latency: LatencySummary | None  # from every host's samples pooled
    watches: tuple[LoadHostWatch, ...] = ()
    start_at: float = 0.0  # the common start, epoch seconds on this machine's clock

    def offset_s(self, host: str) -> float:
        """The host's clock minus this machine's, in seconds."""
        return next((o.offset_ms / 1000 for o in self.offsets if o.host == host), 0.0)

    def client_bound(self) -> Finding | None:
        return client_bound(self.watches)

    def describe(self) -> str:
        per_host = ", ".join(f"{h.host} {h.pgbench.tps:,.0f}" for h in self.hosts)
        text = f"{self.tps:,.0f} tps from {len(self.hosts)} hosts ({per_host})"
        text += (
            f"; started within {self.start_spread_ms:.2f} ms "
            f"(+/- {self.start_spread_uncertainty_ms:.2f} ms)"
        )
        if self.latency is not None:
            text += (
                f"; pooled p50 {self.latency.p50_ms:.3f} ms, p99 {self.latency.p99_ms:.3f} ms "
                f"({self.latency.samples:,} samples)"
            )
        for w in self.watches:
            busy, tx = w.median("cpu_busy_pct"), w.median("net_tx_mib_s")
            if busy is not None and tx is not None:
                text += f"; {w.host} CPUs {busy:.0f}% busy, sent {tx:.2f} MiB/s"
        if bound := self.client_bound():
            text += f"; CLIENT-BOUND: {bound.summary}"
        return text

    def raw(self) -> str:
        """What a step keeps as its raw output: the summary, then each host's pgbench."""
        parts = [self.describe() + "\n"]
        for h in self.hosts:
            parts.append(f"--- load host {h.host}\n{h.stdout}{h.stderr}")
        return "".join(parts)


@dataclass(frozen=True)
class LoadJob:
    """One measured pgbench a workload asks of a target's load hosts."""

    opts: RunOptions  # its scripts name files on this machine: copied to every host
    log_root: Path  # where the hosts' logs are copied to, here
    conn: Conn | None = None  # None: the target's server as it is
    extra: tuple[str, ...] = ()  # pgbench options beyond ``opts`` (TPC-C's --max-tries)
    # A figure of each host's run besides tps, named, summed over the hosts for
    # the merged row (TPC-C: tpmC from the host's report).
    figure: tuple[str, Callable[[HostLoad], float]] | None = None
    # The run's progress as it goes: the hosts' latest ``-P`` points, tps summed.
    on_progress: Callable[[ProgressPoint], None] | None = None
    # ``opts.threads`` is not the workload's choice but min(clients, CPUs) of this
    # machine: each load host runs ``threads_on`` its own CPUs instead.
    auto_threads: bool = False


class HostLost(ToolError):
    """A load host that stopped answering mid-run, named; the run is failed."""

    def __init__(self, host: str, message: str, stderr: str = "") -> None:
        super().__init__(
            message,
            stderr=stderr,
            hint=f"the other load hosts were stopped; {host}'s pgbench is stopped once it "
            "answers again (pgrig clean --inventory FILE removes what a lost host kept)",
        )
        self.host = host


def threads_on(clients: int, cpus: int) -> int:
    """pgbench -j on a host with ``cpus`` logical CPUs when the workload does not
    ask: one thread per client up to the CPUs (more only add scheduling noise)."""
    return max(1, min(clients, cpus))


def _expect(waiter: Started, word: str, timeout: float) -> str:
    line = waiter.readline(timeout)
    if line is None or not line.startswith(word):
        done = waiter.wait(10, check=False)
        raise ToolError(
            f"the load waiter on {waiter.host} said {line!r}, not {word!r}",
            argv=waiter.argv,
            returncode=done.returncode,
            stderr=done.stderr,
            hint="python3 must be installed on every load host (pgrig hosts check)",
        )
    return line[len(word) :].strip()


def clock_offset(waiter: Started, pings: int = PINGS) -> ClockOffset:
    """The host's clock against ours through its waiter (see the module's docstring)."""
    best: tuple[float, float] | None = None  # (round trip, offset), seconds
    for _ in range(pings):
        t0 = time.time()
        waiter.send("t\n")
        remote = float(_expect(waiter, "t", 30))
        t1 = time.time()
        sample = (t1 - t0, remote - (t0 + t1) / 2)
        if best is None or sample[0] < best[0]:
            best = sample
    assert best is not None
    return ClockOffset(waiter.host, best[1] * 1000, best[0] / 2 * 1000, pings)


@dataclass(frozen=True)
class LoadRequest:
    """One pgbench run on every load host at once, as the target resolved a
    workload's ``LoadJob``: what runs (``opts`` and ``extra``, its scripts files
    here, copied to each host; how long: ``opts.duration_s``; the
    per-transaction log: ``opts.transaction_log``), where (the hosts, pgbench's
    ``bin_dir`` on them, the server's ``conn``) and who hears its progress."""

    executors: tuple[Executor, ...]
    bin_dir: str
    conn: Conn
    opts: RunOptions
    extra: tuple[str, ...] = ()  # pgbench options beyond ``opts`` (TPC-C's --max-tries)
    # A host's own -j (from its CPUs), by host name; else ``opts.threads``.
    threads: Mapping[str, int] = field(default_factory=dict)
    # The hosts' latest -P points as they run, tps summed (``progress``).
    on_progress: Callable[[ProgressPoint], None] | None = None

    def on_host(self, ex: Executor, remote_dir: str, opts: RunOptions) -> RunOptions:
        """``opts`` as host ``ex`` runs them: its scripts copied into
        ``remote_dir`` there, its share of ``-R`` and its own ``-j``."""
        host_opts = _on_host(ex, remote_dir, opts, len(self.executors))
        return replace(host_opts, threads=self.threads.get(ex.name, host_opts.threads))


def run_pgbench(req: LoadRequest, log_dir: Path) -> MultiLoad:
    """``req``'s pgbench on every host at once, one start for all; each host's
    logs copied to ``log_dir/<host>/`` and pooled (see the module's docstring)."""
    if not req.opts.transaction_log:
        raise ValueError("multi-host runs need the per-transaction log: the percentiles pool")
    remote_dirs: dict[str, str] = {}
    started: dict[str, Started] = {}  # as each host's waiter starts: what the cleanup stops
    lost: set[str] = set()  # hosts that stopped answering: stopped in the background

    def prepare(ex: Executor) -> tuple[Started, tuple[str, ...]]:
        home = owner.make(ex, "load")
        remote_dirs[ex.name] = home.path
        opts = req.on_host(ex, home.path, req.opts)
        argv = run_argv(req.bin_dir, req.conn, opts, Path(home.path) / LOG_PREFIX, req.extra)
        waiter = ex.start(["python3", "-c", WAITER, *argv], env=req.conn.env(), stdin=True)
        started[ex.name] = waiter
        home.started(waiter.pid)
        _expect(waiter, "ready", 30)
        return waiter, tuple(argv)

    executors = req.executors
    try:
        # The hosts at once: each costs a few SSH round trips. Leaving the pool
        # waits for every host's part, also on an error or a signal, so the
        # cleanup below sees every waiter that started.
        with proc.ContextPool(max_workers=len(executors)) as pool:
            futures = [pool.submit(prepare, ex) for ex in executors]
            waiters, argvs = zip(*(f.result() for f in futures), strict=True)
        offsets, start, woke = _barrier(waiters)
        watchers = [Watcher(ex, w.pid).start() for ex, w in zip(executors, waiters, strict=True)]
        try:
            _first_failure(executors, waiters, req.opts.duration_s + 120, req.on_progress)
            done = [w.wait(60, check=False, what="pgbench") for w in waiters]
        except HostLost as exc:
            lost.add(exc.host)
            raise
        finally:
            # A lost host's watcher may hang in a read of its own: not waited for.
            watches = [w.stop(1, final=False) if w.ex.name in lost else w.stop() for w in watchers]
        parts = [
            _host_load(ex, argv, completed, req.opts, remote_dirs[ex.name], log_dir, at - start)
            for ex, argv, completed, at in zip(executors, argvs, done, woke, strict=True)
        ]
    finally:
        waiting = [started[e.name] for e in executors if e.name in started]
        _clean_up(executors, waiting, remote_dirs, lost)
    loads = [load for load, _ in parts]
    # Each host's histogram added up: the pooled figures, never per-host percentiles.
    pooled = sum((histogram for _, histogram in parts), txlog.Histogram())
    uncertainty = sorted(o.uncertainty_ms for o in offsets)[-2:]
    return MultiLoad(
        hosts=tuple(loads),
        offsets=tuple(offsets),
        start_spread_ms=(max(woke) - min(woke)) * 1000,
        start_spread_uncertainty_ms=sum(uncertainty),
        tps=sum(h.pgbench.tps for h in loads),
        latency=txlog.summary(pooled, log_sampling_rate(req.opts)),
        watches=tuple(watches),
        start_at=start,
    )


class _Stopped(Exception):  # noqa: N818 - a signal, not an error
    """Stops a load host's warm-up because another host's stopped."""


def warm_up(req: LoadRequest) -> None:
    """``req``'s pgbench on every host at once, nothing measured or kept (a
    warm-up: no common start, no logs), each host with its options as
    ``run_pgbench`` gives them. ``req.on_progress`` hears the first host's
    points; what it raises (a warm-up that settled) stops every host at its
    next point and is raised once all stopped."""
    quiet = replace(req.opts, statement_latencies=False, transaction_log=False)
    stop: list[BaseException] = []  # what stopped a host: every host stops at its next point

    def heard(first: bool, point: ProgressPoint) -> None:
        if stop:
            raise _Stopped
        if first and req.on_progress is not None:
            req.on_progress(point)

    def warm(first: bool, ex: Executor) -> None:
        try:
            directory = owner.make(ex, "load").path
            try:
                run_bench(
                    req.bin_dir, req.conn, req.on_host(ex, directory, quiet), Path(directory),
                    partial(heard, first), client=ex, extra=req.extra,
                )  # fmt: skip
            finally:
                ex.remove_tree(directory)
        except _Stopped:
            pass
        except BaseException as exc:
            stop.append(exc)
            raise

    with proc.ContextPool(max_workers=max(1, len(req.executors))) as pool:
        for n, ex in enumerate(req.executors):
            pool.submit(warm, n == 0, ex)
    if stop:  # every host done; the first cause
        raise stop[0]


def _barrier(waiters: Sequence[Started]) -> tuple[list[ClockOffset], float, list[float]]:
    """Every host's clock offset, one start for all (now + ``START_MARGIN_S``, sent
    on each host's own clock), and when each woke, back on this machine's clock."""
    offsets = [clock_offset(w) for w in waiters]
    start = time.time() + START_MARGIN_S
    for waiter, off in zip(waiters, offsets, strict=True):
        waiter.send(f"go {start + off.offset_ms / 1000:.6f}\n")
    woke = [
        float(_expect(w, "started", START_MARGIN_S + 30)) - off.offset_ms / 1000
        for w, off in zip(waiters, offsets, strict=True)
    ]
    return offsets, start, woke


def _host_load(
    ex: Executor,
    argv: tuple[str, ...],
    completed: proc.Completed,
    opts: RunOptions,
    remote_dir: str,
    log_dir: Path,
    started_s: float,
) -> tuple[HostLoad, txlog.Histogram]:
    """One load host's part of a run: its pgbench result, its logs fetched here
    (``log_dir/<host>/``) and their histogram; a failure names the host."""
    if completed.returncode != 0:
        raise ToolError(
            f"pgbench failed on load host {ex.name}",
            argv=list(argv),
            returncode=completed.returncode,
            stderr=completed.stderr,
        )
    try:
        # Each host's own command line, kept with its part (issue 30).
        run = replace(parse_result(completed.stdout, completed.stderr, opts), argv=argv)
    except ParseError as exc:
        raise ParseError(f"load host {ex.name}: {exc.message}", hint=exc.hint) from None
    files = _fetch_logs(ex, remote_dir, log_dir / ex.name)
    histogram = txlog.parse_logs(files).pooled()
    load = HostLoad(
        ex.name,
        run,
        txlog.summary(histogram, log_sampling_rate(opts)),
        started_s * 1000,
        tuple(map(str, files)),
        completed.stdout,
        completed.stderr,
    )
    return load, histogram


def _on_host(ex: Executor, remote_dir: str, opts: RunOptions, hosts: int) -> RunOptions:
    """``opts`` as one of ``hosts`` load hosts runs them: its scripts copied into
    ``remote_dir`` there (named by their position: two files may share a name),
    and its share of ``-R``."""
    scripts = []
    for number, (path, weight) in enumerate(opts.scripts):
        remote = f"{remote_dir}/script{number}-{Path(path).name}"
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise UsageError(
                f"pgbench script {path} cannot be read: {exc.strerror}",
                hint="the scripts are read here and copied to every load host",
            ) from None
        ex.write_bytes(remote, data)
        scripts.append((remote, weight))
    rate = opts.rate / hosts if opts.rate is not None else None
    return replace(opts, scripts=tuple(scripts), rate=rate)


def merged(multi: MultiLoad) -> PgbenchRun:
    """One run of all load hosts: counts and tps summed, the mean latency (and
    schedule lag) weighted by transactions, the percentiles pooled, per-second tps
    summed where every host reported that second; the command line the first
    host's (each host's own is kept in its part, ``multi.hosts``)."""
    runs = [h.pgbench for h in multi.hosts]
    first = runs[0]
    done = sum(r.transactions for r in runs)

    def weighted(values: Sequence[tuple[float | None, int]]) -> float | None:
        known = [(v, n) for v, n in values if v is not None]
        count = sum(n for _, n in known)
        return sum(v * n for v, n in known) / count if known and count else None

    seconds = [{p.t_s: p for p in r.progress} for r in runs]
    common = sorted(set.intersection(*(set(s) for s in seconds)))
    progress = []
    for t in common:
        tps = sum(s[t].tps for s in seconds)
        latency = sum(s[t].latency_ms * s[t].tps for s in seconds) / tps if tps else 0.0
        progress.append(ProgressPoint(t, tps, latency))
    connecting = [r.initial_connection_ms for r in runs if r.initial_connection_ms is not None]
    lag_max = [r.lag_max_ms for r in runs if r.lag_max_ms is not None]
    return replace(
        first,
        clients=sum(r.clients for r in runs),
        threads=sum(r.threads for r in runs),
        transactions=done,
        failed=sum(r.failed for r in runs),
        tps=multi.tps,
        latency_avg_ms=weighted([(r.latency_avg_ms, r.transactions) for r in runs]) or 0.0,
        latency_stddev_ms=stats.pooled_stddev(
            [(r.latency_avg_ms, r.latency_stddev_ms, r.transactions) for r in runs]
        ),
        initial_connection_ms=max(connecting) if connecting else None,
        statements=(),
        progress=tuple(progress),
        latency=multi.latency,
        lag_avg_ms=weighted([(r.lag_avg_ms, r.transactions) for r in runs]),
        lag_max_ms=max(lag_max) if lag_max else None,
        skipped=_total([r.skipped for r in runs]),
        late=_total([r.late for r in runs]),
    )


def _total(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _clean_up(
    executors: Sequence[Executor],
    waiters: Sequence[Started],
    remote_dirs: dict[str, str],
    lost: Collection[str] = (),
) -> None:
    """Stop every pgbench and remove every log directory, each host tried even
    when another fails (a host that went away); the first failure is raised
    after all were tried, unless an error is already on its way. A ``lost``
    host is left to ``_reap_later``: waiting for it would hang the study."""
    by_host = {w.host: w for w in waiters}

    def one(ex: Executor) -> list[PgrigError]:
        failed: list[PgrigError] = []
        if ex.name in lost:
            if ex.name in by_host:
                _reap_later(ex, by_host[ex.name], remote_dirs.get(ex.name))
            return failed
        try:
            if ex.name in by_host:
                by_host[ex.name].stop()
        except PgrigError as exc:
            failed.append(exc)
        try:
            if ex.name in remote_dirs:
                ex.remove_tree(remote_dirs[ex.name])
        except PgrigError as exc:
            failed.append(exc)
        return failed

    with proc.ContextPool(max_workers=max(1, len(executors))) as pool:
        failures = [exc for found in pool.map(one, executors) for exc in found]
    if failures and sys.exc_info()[1] is None:
        raise failures[0]


def _reap_later(ex: Executor, waiter: Started, remote_dir: str | None) -> None:
    """Kill a lost host's pgbench and remove its directory once the host answers
    again (through a new connection if the old one closed); tried for
    ``REAP_FOR_S`` in a daemon thread, whose failures stay quiet: the owner
    record left on the host names the PID for ``pgrig clean --inventory``."""

    def reap() -> None:
        deadline = time.monotonic() + REAP_FOR_S
        fresh = waiter.lost is not None  # its connection closed: through a new one
        while time.monotonic() < deadline:
            host = ex
            try:
                if fresh:
                    host = ex.reconnected()
                host.run(["kill", "-KILL", str(waiter.pid)], timeout=30, check=False, what="kill")
                if remote_dir is not None:
                    host.remove_tree(remote_dir)
                return
            except Exception:  # noqa: BLE001 - not back yet: try again, never a traceback
                fresh = True  # the old connection may have closed meanwhile (keepalive)
                time.sleep(1)
            finally:
                if host is not ex:
                    host.close()

    if waiter.pid:
        threading.Thread(target=reap, name=f"reap-{ex.name}", daemon=True).start()


def _first_failure(
    executors: Sequence[Executor],
    waiters: Sequence[Started],
    limit: float,
    on_progress: Callable[[ProgressPoint], None] | None = None,
) -> None:
    """Wait until every pgbench ended; raise at once, naming the host, when one
    fails: the others' run no longer measures what was asked (the caller stops them).
    Meanwhile ``on_progress`` gets the hosts' progress about once a second."""
    deadline = time.monotonic() + limit
    shown = 0.0
    heard = {w.host: (w.stderr_lines(), time.monotonic()) for w in waiters}
    while time.monotonic() < deadline:
        proc.raise_if_cancelled()
        if on_progress is not None and time.monotonic() - shown >= PROGRESS_EVERY_S:
            shown = time.monotonic()
            if (point := progress(waiters)) is not None:
                on_progress(point)
        codes = [w.poll() for w in waiters]
        for ex, waiter, code in zip(executors, waiters, codes, strict=True):
            _heartbeat(waiter, code, heard)
            if code not in (None, 0):
                done = waiter.wait(10, check=False)
                raise ToolError(
                    f"pgbench failed on load host {ex.name}",
                    argv=waiter.argv,
                    returncode=code,
                    stderr=done.stderr,
                    hint=f"the other load hosts were stopped; check {ex.name} and the server",
                )
        if all(code is not None for code in codes):
            return
        time.sleep(0.05)


def _heartbeat(waiter: Started, code: int | None, heard: dict[str, tuple[int, float]]) -> None:
    """Raise ``HostLost`` when ``waiter``'s host stopped answering: its SSH
    connection closed, or its pgbench, still running, printed no progress line
    for ``SILENT_GRACE_S`` past its interval. ``heard``: per host, the stderr
    lines counted and when that count last grew."""
    if waiter.lost is not None:
        raise HostLost(
            waiter.host,
            f"lost {waiter.host}: the SSH connection closed ({waiter.lost})",
            "".join(waiter.stderr_tail(PROGRESS_TAIL)),
        )
    now = time.monotonic()
    count, since = heard[waiter.host]
    if waiter.stderr_lines() != count:
        heard[waiter.host] = (waiter.stderr_lines(), now)
    elif code is None and now - since > PROGRESS_EVERY_S + SILENT_GRACE_S:
        raise HostLost(
            waiter.host,
            f"lost {waiter.host}: no progress for {now - since:.0f} s (network or host hung)",
            "".join(waiter.stderr_tail(PROGRESS_TAIL)),
        )


def progress(waiters: Sequence[Started]) -> ProgressPoint | None:
    """The run as the hosts' pgbench ``-P`` lines show it so far: the latest point
    of each host that printed one, tps summed, latency weighted by each host's
    tps (the hosts started together: their seconds are comparable). For the
    progress line only: the recorded figures come from the whole output and logs."""
    latest = []
    for w in waiters:
        # pgbench prints a progress line a second and little else on stderr: the
        # newest is among its last lines (a whole run's parsed each second would
        # grow with the run's square).
        for line in reversed(w.stderr_tail(PROGRESS_TAIL)):
            if (point := parse_progress(line)) is not None:
                latest.append(point)
                break
    if not latest:
        return None
    tps = sum(p.tps for p in latest)
    return ProgressPoint(
        t_s=min(p.t_s for p in latest),
        tps=tps,
        latency_ms=sum(p.latency_ms * p.tps for p in latest) / tps if tps else 0.0,
    )


def _fetch_logs(ex: Executor, remote_dir: str, local: Path) -> list[Path]:
    local.mkdir(parents=True, exist_ok=True)
    names = txlog.log_names(ex.listdir(remote_dir), LOG_PREFIX)
    return [ex.fetch(f"{remote_dir}/{name}", local) for name in names]
