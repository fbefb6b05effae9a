"""Timestamps contrib records (SOURCE_DATE_EPOCH makes them reproducible)."""

from __future__ import annotations

from datetime import UTC, datetime

from contrib.environ import source_date_epoch


def now_iso() -> str:
    """UTC now as ISO-8601 seconds, or SOURCE_DATE_EPOCH when set."""
    epoch = source_date_epoch()
    moment = datetime.now(UTC) if epoch is None else datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat(timespec="seconds")
