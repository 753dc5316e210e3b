"""Moved to ``pgrig.registry.workload`` (the plug-in interface); kept so that
``pgrig.workloads.base`` still names it."""

from pgrig.registry.workload import *  # noqa: F403
