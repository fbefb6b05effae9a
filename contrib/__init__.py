"""contrib: carry patchsets against fast-moving upstreams and get them merged."""

from __future__ import annotations

__version__ = "0.4.0"
DISTRIBUTION = "contrib-toolkit"  # the name pip knows contrib by ("contrib" is another project)
