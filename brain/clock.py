"""Time as the store keeps it: UTC ISO-8601 with milliseconds and a ``Z``.

Every timestamp column (``created_at``, ``updated_at``, ``expires_at``, ...)
holds ``YYYY-MM-DDTHH:MM:SS.mmmZ``, so timestamps compare as strings. This is
the one place that writes and reads that form.
"""

from __future__ import annotations

from datetime import UTC, datetime


def iso(moment: datetime) -> str:
    """``moment`` as stored: UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (a naive moment is UTC).

    Raises ``OverflowError`` when moving to UTC leaves the representable years.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # isoformat, not strftime: strftime("%Y") drops the zero padding of years < 1000.
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def now_iso() -> str:
    """The current time as stored."""
    return iso(datetime.now(UTC))


def parse(stamp: str) -> datetime:
    """A stored (or any ISO-8601) timestamp as an aware datetime (naive is UTC).

    Raises ``ValueError`` for text that is not ISO-8601.
    """
    parsed = datetime.fromisoformat(stamp)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
