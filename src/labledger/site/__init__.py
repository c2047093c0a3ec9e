"""The static site: ``build_site(ledger, out)`` writes a folder that opens from ``file://``.

See :mod:`labledger.site.build` for the layout and ``docs/site.md`` for the pages.
"""

from labledger.site.build import SiteBuild, build_site
from labledger.site.output import load_data_file

__all__ = ["SiteBuild", "build_site", "load_data_file"]
