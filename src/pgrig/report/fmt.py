"""Moved to ``pgrig.document.fmt`` (the document layer plug-ins build on); kept
so that ``pgrig.report.fmt`` still names it."""

from pgrig.document.fmt import *  # noqa: F403
