"""RFC 3339 timestamps as Kubernetes writes them (``metav1.Time``: seconds, UTC, ``Z``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator

# Later than any timestamp a cluster writes, early enough that adding a threshold or a
# deadline to it stays a date (Python's dates end with the year 9999).
_LATEST_YEAR = 9000


def parse_time(value: str | None) -> datetime | None:
    """None for anything that is not such a timestamp (a broken status is not fatal)."""
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    if parsed.year > _LATEST_YEAR:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read_leniently(value: Any) -> datetime | None:
    """A timestamp's text parsed (a datetime as it is, in UTC if naive; None for text that
    is not a timestamp); a value that is not text is refused."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if value is not None and not isinstance(value, str):
        raise ValueError("Input should be a valid string")
    return parse_time(value)


def _read(value: Any) -> datetime:
    """A timestamp as a model reads it; anything else is refused (the CRDs say
    ``format: date-time``)."""
    parsed = _read_leniently(value)
    if parsed is None:
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp")
    return parsed


# A time in a pydantic model: parsed once where the object is read, written back as the
# same RFC 3339 text (``format_time``: seconds, UTC, ``Z``, as Kubernetes and we write).
Time = Annotated[datetime, PlainValidator(_read), PlainSerializer(format_time, return_type=str)]


def _read_or_none(value: Any) -> datetime | None:
    return None if value is None or value == "" else _read(value)


def _written_or_empty(value: datetime | None) -> str:
    return format_time(value) if value is not None else ""


# A time another writer (the API server) sets, read as None where it is not a timestamp.
ReadTime = Annotated[datetime | None, PlainValidator(_read_leniently)]

# A time that may not be there yet, written as "" then (a migration's ``moves`` entry).
TimeOrEmpty = Annotated[
    datetime | None,
    PlainValidator(_read_or_none),
    PlainSerializer(_written_or_empty, return_type=str),
]
