"""Moved to ``pgrig.document.model`` (the document layer plug-ins build on); kept
so that ``pgrig.report.model`` still names it."""

from pgrig.document.model import *  # noqa: F403
