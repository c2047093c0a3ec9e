"""Reports: documents rendered for people (the Markdown hand-off of ``labledger report``)."""

from labledger.report.markdown import handoff

__all__ = ["handoff"]
