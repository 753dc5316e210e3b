"""A toy workload, the smallest real one, living only here: the test adds it
through ``pgrig.registry.register`` and nothing else (docs/workloads.md)."""
