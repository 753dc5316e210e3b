"""pg_basebackup throughput per target (seed 002): ``spec`` (its campaign table),
``tool`` (the command and its output), ``steps``, ``report`` and ``workload``."""
