"""pgbench: load the TPC-B tables (``pgbench -i``) and run timed benchmarks (``-T``).

Two halves, each an argv builder, a runner and pure parsers:

* ``init_argv`` / ``run_init`` / ``parse_init`` (``init``): ``pgbench -i``.
* ``run_argv`` / ``run_bench`` (``run``) and ``parse_run`` / ``parse_progress``
  (``parse``): a timed run. ``-P`` progress lines arrive on stderr while the run
  goes; the report is printed on stdout at the end.

Per-transaction logs (``-l``, ``txlog``) give the latency percentiles pgbench's
report lacks; ``run_bench`` parses and then deletes exactly the files that
pgbench wrote for that run. ``program`` finds the binary and reads its version
and exit codes. This package re-exports the public names of all of them.
"""

# The result types the runners return, for annotations such as ``pgbench.PgbenchRun``.
from pgrig.results import PgbenchInit, PgbenchRun
from pgrig.tools.pgbench.init import (
    BYTES_PER_SCALE,
    ROWS_PER_SCALE,
    InitOptions,
    init_argv,
    load_timeout_s,
    parse_init,
    parse_init_progress,
    run_init,
)
from pgrig.tools.pgbench.parse import (
    BUILTIN_STATEMENTS,
    count_script_statements,
    is_sql_statement,
    parse_progress,
    parse_run,
)
from pgrig.tools.pgbench.program import (
    TOOL,
    ClientConn,
    ConnArgs,
    parse_version,
    pgbench_version,
    script_errors,
)
from pgrig.tools.pgbench.run import (
    AUTO_LOG_TARGET,
    DEFAULT_TPS_GUESS,
    MODES,
    QUERY_MODES,
    RunOptions,
    log_sampling_rate,
    run_argv,
    run_bench,
)
from pgrig.tools.pgbench.txlog import parse_transaction_logs, transaction_log_files

__all__ = [
    "script_errors",
    "AUTO_LOG_TARGET",
    "BUILTIN_STATEMENTS",
    "BYTES_PER_SCALE",
    "DEFAULT_TPS_GUESS",
    "MODES",
    "QUERY_MODES",
    "ROWS_PER_SCALE",
    "TOOL",
    "ClientConn",
    "ConnArgs",
    "InitOptions",
    "PgbenchInit",
    "PgbenchRun",
    "RunOptions",
    "count_script_statements",
    "init_argv",
    "load_timeout_s",
    "is_sql_statement",
    "log_sampling_rate",
    "parse_init",
    "parse_init_progress",
    "parse_progress",
    "parse_run",
    "parse_transaction_logs",
    "parse_version",
    "pgbench_version",
    "run_argv",
    "run_bench",
    "run_init",
    "transaction_log_files",
]
