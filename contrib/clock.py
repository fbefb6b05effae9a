"""Timestamps contrib records (SOURCE_DATE_EPOCH makes them reproducible)."""

from __future__ import annotations

import os
from datetime import UTC, datetime


def now_iso() -> str:
    """UTC now as ISO-8601 seconds, or SOURCE_DATE_EPOCH when set."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return moment.isoformat(timespec="seconds")
