"""The quick study (``pgrig run`` without a file): its options, and the
campaign document they make.

The options become the document a campaign file would hold - one target, the
probes, one TPC-B workload - and go through the campaign parser, so every
value is checked once, by the key that declares it; ``OPTIONS`` says which
option each key came from, and an error names the option the user typed.
What is checked here is only what a file cannot say: which options were typed
together, and how an option's text is written (``--clients 1,2,4``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pgrig import files
from pgrig.cluster.profiles import parse_overrides
from pgrig.commands.options import F, Opts, given, int_list, names
from pgrig.errors import UsageError
from pgrig.schema import Document, TablePath

if TYPE_CHECKING:
    from pgrig.campaign import Campaign

STEPS = ("timing", "fsync", "fio", "tpcb")

# Each key of the document, by table path, and the option it comes from.
T = ("target", 0)
W = ("workload", 0)
OPTIONS: dict[TablePath, str] = {
    **{(*T, key): option for key, option in (
        ("directory", "--target"), ("dsn", "--dsn"), ("tablespace", "--tablespace"),
        ("index_tablespace", "--index-tablespace"), ("pg_bin", "--pg-bin"),
        ("profile", "--profile"), ("set", "--set"), ("os_user", "--os-user"),
        ("fs", "--fs"), ("size", "--fs-size"), ("mkfs", "--mkfs"), ("mount", "--mount"),
        ("disk", "--disk"), ("memory", "--memory"), ("base", "--target"),
    )},
    **{(*T, "initdb", key): option for key, option in (
        ("encoding", "--encoding"), ("locale", "--locale"), ("wal_segsize", "--wal-segsize"),
    )},
    **{(*W, key): option for key, option in (
        ("scales", "--scale"), ("clients", "--clients"), ("threads", "--threads"),
        ("duration", "--duration"), ("modes", "--modes"), ("query_mode", "--query-mode"),
        ("generate", "--generate"), ("partitions", "--partitions"),
        ("unlogged", "--unlogged-tables"), ("count", "--no-count"),
    )},
    ("campaign", "repeat"): "--repeat",
    ("campaign", "monitor"): "--no-monitor",
    ("probes", "timing"): "--timing-seconds",
    ("probes", "fsync"): "--fsync-seconds",
    ("probes", "fsync_repeat"): "--fsync-repeat",
    **{("probes", "fio", key): option for key, option in (
        ("numjobs", "--fio-numjobs"), ("iodepth", "--fio-iodepth"), ("size", "--fio-size"),
        ("runtime", "--fio-runtime"), ("direct", "--fio-direct"),
    )},
}  # fmt: skip

# Options that configure a cluster pgrig creates (their parameter names).
CLUSTER_ONLY = ("profile", "overrides", "wal_segsize", "encoding", "locale", "os_user")
LAB = ("fs", "fs_size", "mkfs", "mount", "disk", "memory")


# The quick study's options (after --target, --profile, --set, --pg-bin), as
# `pgrig run --help` shows them.
QUICK_OPTIONS = (
    click.option(
        "--dsn",
        default=None,
        help="Use an existing server (URI or key=value) instead of a throwaway cluster.",
    ),
    click.option(
        "--throwaway",
        is_flag=True,
        help="Create a throwaway cluster even when PG* variables are set.",
    ),
    click.option(
        "--yes",
        is_flag=True,
        help="Allow destructive steps (pgbench -i) on an existing server.",
    ),
    click.option(
        "--keep",
        is_flag=True,
        help="Keep the throwaway cluster (stopped) instead of removing it.",
    ),
    click.option(
        "--os-user",
        default=None,
        help="OS user the server runs as when pgrig is root "
        "(default: postgres, else pgrig; created if missing).",
    ),
    click.option(
        "--scale",
        type=int,
        default=10,
        show_default=True,
        help="pgbench scale factor (100,000 accounts each, ~16 MB).",
    ),
    click.option(
        "--clients",
        default="1,2,4,8",
        show_default=True,
        help="Client counts, comma-separated.",
    ),
    click.option(
        "--threads",
        type=int,
        default=None,
        help="pgbench threads (default: min(clients, CPUs)).",
    ),
    click.option(
        "--duration",
        type=int,
        # 5 s, not 10: in paired quick studies the answer moved between studies as
        # much at 10 s as at 5 s, the first 5 s of 10 s runs put the peaks at the
        # same client counts, and 10 s runs kept `make run` over 5 minutes
        # (docs/bench.md, "The quick study's time")
        default=5,
        show_default=True,
        help="Seconds per pgbench run (short, and repeated: see --repeat).",
    ),
    click.option(
        "--modes",
        default="select-only,read-write",
        show_default=True,
        help="TPC-B modes to run.",
    ),
    click.option(
        "--repeat",
        type=int,
        default=3,
        show_default=True,
        help="Runs of every point: the report gives their median, range and, from 3 on, "
        "the 95% confidence interval.",
    ),
    click.option(
        "--query-mode",
        type=click.Choice(["simple", "extended", "prepared"]),
        default="prepared",
        show_default=True,
        help="pgbench -M: how statements are sent to the server.",
    ),
    click.option(
        "--generate",
        type=click.Choice(["client", "server", "parallel"]),
        default="client",
        show_default=True,
        help="pgbench -i data generation, or parallel: pgrig's loader (the same rows, "
        "one connection per CPU).",
    ),
    click.option(
        "--partitions",
        type=int,
        default=0,
        show_default=True,
        help="Partition pgbench_accounts (pgbench --partitions).",
    ),
    click.option(
        "--unlogged-tables",
        is_flag=True,
        help="Create the pgbench tables UNLOGGED (seed 004).",
    ),
    click.option(
        "--tablespace",
        default=None,
        callback=given,
        help="Tables in this tablespace: a directory (pgrig creates the tablespace in its "
        "cluster) or the name of an existing one.",
    ),
    click.option(
        "--index-tablespace",
        default=None,
        callback=given,
        help="Indexes in this tablespace (directory or name), as seed 004 splits two disks.",
    ),
    click.option(
        "--no-count", is_flag=True, help="Skip timing count(*) by index-only and seq scan."
    ),
    click.option("--skip", default="", help="Steps to skip: timing,fsync,fio,tpcb."),
    click.option(
        "--timing-seconds",
        type=int,
        default=3,
        show_default=True,
        help="pg_test_timing duration (-d) in seconds.",
    ),
    click.option(
        "--fsync-seconds",
        type=int,
        default=1,
        show_default=True,
        help="pg_test_fsync seconds per test (the seeds use 5).",
    ),
    click.option(
        "--fsync-repeat",
        type=int,
        default=3,
        show_default=True,
        help="Runs of pg_test_fsync: each method's median and range, and orderings that "
        "contradict physics flagged as noise.",
    ),
    click.option(
        "--fio-size",
        default="256M",
        show_default=True,
        help="Size of fio's test file in the target directory (K, M, G suffixes).",
    ),
    click.option(
        "--fio-runtime",
        type=int,
        default=5,  # fio is not in the answer; its IOPS samples still number 9-10 a pattern
        show_default=True,
        help="Seconds per fio pattern.",
    ),
    click.option(
        "--fio-numjobs",
        type=int,
        default=1,
        show_default=True,
        help="fio --numjobs: parallel jobs.",
    ),
    click.option(
        "--fio-iodepth",
        type=int,
        default=8,
        show_default=True,
        help="fio --iodepth: I/Os in flight per job.",
    ),
    click.option(
        "--fio-direct",
        type=click.IntRange(0, 1),
        default=1,
        show_default=True,
        help="1: O_DIRECT (as the seeds); 0: through the page cache.",
    ),
    click.option(
        "--wal-segsize",
        type=int,
        default=None,
        help="initdb --wal-segsize in MB (the seeds use 1024).",
    ),
    click.option(
        "--encoding",
        default="UTF8",
        show_default=True,
        help="initdb --encoding of the cluster.",
    ),
    click.option(
        "--locale", default="C", show_default=True, help="initdb --locale of the cluster."
    ),
    click.option(
        "--no-monitor",
        is_flag=True,
        help="Do not sample host and server during measured runs.",
    ),
    click.option("-q", "--quiet", is_flag=True, help="No progress output."),
)


def quick_options(fn: F) -> F:
    """Add ``QUICK_OPTIONS`` to a command, in their order."""
    for option in reversed(QUICK_OPTIONS):
        fn = option(fn)
    return fn


def campaign_of(opts: Opts, given: set[str]) -> Campaign:
    """The quick study the options ask for; ``given``: the options typed."""
    from pgrig import campaign  # the registry and the plug-ins: not for --help

    return campaign.from_options(document(opts, given), OPTIONS)


def document(opts: Opts, given: set[str]) -> Document:
    """The campaign document (the dict a campaign file parses to) of the options."""
    skip = names(opts["skip"], "--skip", STEPS)
    data: Document = {
        "campaign": {"name": "quick", "repeat": opts["repeat"], "monitor": not opts["no_monitor"]},
        "target": [target(opts, given)],
        "probes": probes(opts, skip),
    }
    if "tpcb" not in skip:
        data["workload"] = [workload(opts)]
    return data


def _dsn(opts: Opts, given: set[str]) -> str | None:
    """--dsn, or "" when the PG* variables name the server to test (libpq's
    conventions); refused with the options of a cluster pgrig creates."""
    dsn: str | None = opts["dsn"]
    lab = [name for name in LAB if opts[name] is not None]
    if dsn is not None:
        cluster_only = [_option(name) for name in CLUSTER_ONLY if name in given]
        if cluster_only:
            raise UsageError(
                f"--dsn with {', '.join(cluster_only)}: pgrig never reconfigures a server it "
                "did not create",
                hint=f"drop {', '.join(cluster_only)}, or drop --dsn to let pgrig create a "
                "throwaway cluster configured that way",
            )
        if lab:
            raise UsageError(
                "--dsn with --fs/--disk/--memory: the storage lab builds a throwaway cluster "
                "on the storage it emulates; an existing server cannot be moved there",
                hint="drop --dsn to study the emulated storage, or the lab options to test "
                "the server",
            )
    # libpq's conventions: the PG* variables name the server to test - except with
    # the lab's options, which mean a throwaway cluster on the storage they build
    elif not lab and not opts["throwaway"]:
        from pgrig.targets.existing import PG_SERVER_VARS

        if any(os.environ.get(v) for v in PG_SERVER_VARS):
            dsn = ""
    return dsn


def target(opts: Opts, given: set[str]) -> Document:
    """The one ``[[target]]``: this directory (or --target), or the lab's filesystem."""
    dsn = _dsn(opts, given)
    where: Path | None = opts["target"]
    t: Document = {"name": "local", "profile": opts["profile"]}
    if opts["fs"] is not None:
        from pgrig.storage import keys

        t |= {"fs": opts["fs"], "size": opts["fs_size"] or "4GiB"}
        t["base"] = str((where or Path(keys.DEFAULT_BASE)).resolve())
    else:
        t["directory"] = str(where if where is not None else _default_directory(opts))
    for name in ("fs_size", "mkfs", "mount", "disk", "memory"):
        key = "size" if name == "fs_size" else name
        if opts[name] is not None and key not in t:
            t[key] = opts[name]
    if dsn is not None:
        t["dsn"] = dsn
    else:  # initdb: only for a cluster pgrig creates
        initdb: Document = {"encoding": opts["encoding"], "locale": opts["locale"]}
        if opts["wal_segsize"] is not None:
            initdb["wal_segsize"] = opts["wal_segsize"]
        t["initdb"] = initdb
    for name in ("pg_bin", "os_user"):
        if opts[name] is not None:
            t[name] = opts[name]
    for name in ("tablespace", "index_tablespace"):
        if (value := _abs_or_name(opts[name])) is not None:
            t[name] = value
    if settings := parse_overrides(list(opts["overrides"])):
        t["set"] = dict(settings)
    return t


# Where the quick study goes when the current directory is out of the server
# account's reach (a checkout under root's mode-700 home): a directory every
# account can pass, as Debian makes it.
FALLBACK = Path("/var/tmp")


def _default_directory(opts: Opts) -> Path:
    """The current directory, or FALLBACK when the account the server will run as
    cannot reach it - said on the first line, and the report names the target's
    directory."""
    here = Path.cwd()
    if os.geteuid() != 0:
        return here  # the server runs as this user, who is here
    from pgrig import validate

    account = validate.server_account(opts["os_user"])
    blocked = files.blocked_for(here, account)
    if blocked is None:
        return here
    who = account.name if account is not None else "the server's account"
    if not opts["quiet"]:
        click.echo(
            f"note: {who} cannot pass {blocked}, so the quick study's cluster and probes go "
            f"to {FALLBACK} instead of {here} (--target chooses)",
            err=True,
        )
    return FALLBACK


def probes(opts: Opts, skip: tuple[str, ...]) -> Document:
    """The ``[probes]`` table; a skipped probe is ``false``."""
    return {
        "timing": "timing" not in skip and opts["timing_seconds"],
        "fsync": "fsync" not in skip and opts["fsync_seconds"],
        "fsync_repeat": opts["fsync_repeat"],
        "fio": "fio" not in skip
        and {
            "numjobs": opts["fio_numjobs"],
            "iodepth": opts["fio_iodepth"],
            "size": opts["fio_size"],
            "runtime": opts["fio_runtime"],
            "direct": bool(opts["fio_direct"]),
        },
    }


def workload(opts: Opts) -> Document:
    """The one ``type = "tpcb"`` workload."""
    w: Document = {
        "type": "tpcb",
        "scales": [opts["scale"]],
        "clients": list(int_list(opts["clients"], "--clients")),
        "duration": [opts["duration"]],
        "modes": [m.strip() for m in opts["modes"].split(",") if m.strip()],
        "query_mode": opts["query_mode"],
        "generate": opts["generate"],
        "partitions": opts["partitions"],
        "unlogged": opts["unlogged_tables"],
        "count": not opts["no_count"],
    }
    if opts["threads"] is not None:
        w["threads"] = opts["threads"]
    return w


def _option(name: str) -> str:
    return "--" + name.replace("_", "-").replace("overrides", "set")


def _abs_or_name(value: str | None) -> str | None:
    """A tablespace given as a relative directory becomes absolute; a bare name stays."""
    if value is None or value.startswith("/") or os.sep not in value and not Path(value).is_dir():
        return value
    return str(Path(value).resolve())
