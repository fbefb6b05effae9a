"""contrib: carry patchsets against fast-moving upstreams and get them merged."""

from __future__ import annotations

__version__ = "0.2.1"
