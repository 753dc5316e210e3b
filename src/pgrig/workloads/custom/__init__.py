"""The user's own workload: setup SQL and weighted pgbench scripts (seed 001)."""
