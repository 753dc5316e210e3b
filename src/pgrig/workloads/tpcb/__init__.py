"""TPC-B with pgbench (seed 000): ``spec`` (its campaign table), ``steps`` and ``workload``."""
