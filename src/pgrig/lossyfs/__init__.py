"""A lossy FUSE filesystem that emulates power loss (like Jepsen's LazyFS).

Writes stay in the filesystem process's page cache until fsync; directory
entries stay volatile until their directory is fsynced. ``LossyMount.power_loss``
throws away what was not synced (optionally keeping a random subset of pages, or
tearing one), so a PostgreSQL cluster on the mount can be checked after a real
crash-recovery. See docs/lossyfs.md.

Importing this package does not need the FUSE binding: ``available()`` says why a
mount cannot work here, so callers can skip with that reason.
"""

from pgrig.lossyfs.mount import (
    LossyFsError,
    LossyFsUnavailable,
    LossyMount,
    available,
    require,
    sync_tree,
)
from pgrig.lossyfs.powerloss import MODES, Mode, PowerLossReport
from pgrig.lossyfs.registry import RECORDS, RUN_PREFIX, clean_orphans, clean_run_dirs, is_mounted
from pgrig.lossyfs.volume import METADATA_MODELS, MetadataModel

__all__ = [
    "METADATA_MODELS",
    "MODES",
    "RECORDS",
    "RUN_PREFIX",
    "LossyFsError",
    "LossyFsUnavailable",
    "LossyMount",
    "MetadataModel",
    "Mode",
    "PowerLossReport",
    "available",
    "clean_orphans",
    "clean_run_dirs",
    "is_mounted",
    "require",
    "sync_tree",
]
