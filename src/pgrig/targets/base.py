"""Moved to ``pgrig.registry.target`` (the plug-in interface); kept so that
``pgrig.targets.base`` still names it."""

from pgrig.registry.target import *  # noqa: F403
