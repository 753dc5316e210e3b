"""The storage probes (pg_test_timing, pg_test_fsync, fio): their result kinds
and step actions."""

from __future__ import annotations

from pgrig import probe, registry

PARTS = registry.Parts(
    kinds=probe.KINDS,
    actions=(
        ("probe.timing", probe.timing_action),
        ("probe.fsync", probe.fsync_action),
        ("probe.fio", probe.fio_action),
    ),
)
