"""The models of a run listing: its query, its rows, its page and the opaque cursor.

Owns `RunListQuery` (filters: shared status, effective status, pipeline, submitted-by user,
submitted after / before; page size; a cursor to the older page or one to the newer page),
`RunListRow` (the small row a client or a dashboard shows), `RunListPage`, `RunStatusCounts`
and the cursors' encoding: the (submitted-at ms, SharedRunId) of a page's last (or first) row,
base64url text a caller passes back unchanged. Must not query anything.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime_core.errors import InvalidArgumentError

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200

ListingKey = tuple[int, str]
"""(submitted-at ms, shared run id): newest first means larger keys first."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_ms(value: datetime) -> int:
    """Whole milliseconds since the epoch, exactly (no float rounding), floored."""
    return (value - _EPOCH) // timedelta(milliseconds=1)


def from_epoch_ms(milliseconds: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=milliseconds)


def _aware(value: datetime | None) -> datetime | None:
    """A naive time is read as UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


class RunListQuery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    shared_status: str | None = None
    status: str | None = None
    pipeline: str | None = None
    submitted_by: str | None = None
    submitted_after: datetime | None = None
    submitted_before: datetime | None = None
    limit: int = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    cursor: str | None = None
    prev_cursor: str | None = None

    _utc = field_validator("submitted_after", "submitted_before")(_aware)

    @model_validator(mode="after")
    def _one_direction(self) -> RunListQuery:
        if self.cursor and self.prev_cursor:
            raise ValueError("give `cursor` (older runs) or `prev_cursor` (newer runs), not both")
        return self

    def after_ms(self) -> int | None:
        return epoch_ms(self.submitted_after) if self.submitted_after else None

    def before_ms(self) -> int | None:
        return epoch_ms(self.submitted_before) if self.submitted_before else None


class RunListRow(BaseModel):
    """One run, small: enough to show it in a list and to follow it with run.status."""

    shared_run_id: str
    pipeline: str
    submitted_by: str
    submit_mode: str
    submitted_at: datetime
    shared_status: str
    status: str = Field(
        description="The most advanced of the execution, local and shared statuses; a running run "
        "parked on a human-input gate is WaitingForInput, a paused one Paused."
    )
    local_run_id: str | None = None
    execution_id: str | None = None
    failure_reason: str | None = None
    failed_step: str | None = Field(None, description="The step whose failure failed the run.")
    started_at: datetime | None = None
    ended_at: datetime | None = None
    archived: bool = Field(description="True when the run finished and its durable record answers for it.")

    @property
    def key(self) -> ListingKey:
        return epoch_ms(self.submitted_at), self.shared_run_id


class RunListPage(BaseModel):
    tenant_id: str
    runs: list[RunListRow]
    next_cursor: str | None = Field(
        None, description="Pass it back as `cursor` for the next (older) page; null on the last page."
    )
    prev_cursor: str | None = Field(
        None,
        description="Pass it back as `prev_cursor` for the previous (newer) page; null on the newest page.",
    )


class RunStatusCounts(BaseModel):
    """How many of the tenant's runs match a listing's filters, per status (its status filter
    aside); `partial`: more runs in hot state than are counted, the figures are lower bounds."""

    counts: dict[str, int]
    partial: bool = False


def encode_cursor(key: ListingKey) -> str:
    at_ms, shared_run_id = key
    return base64.urlsafe_b64encode(f"{at_ms}:{shared_run_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> ListingKey:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at_ms, shared_run_id = text.split(":", 1)
        return int(at_ms), shared_run_id
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise InvalidArgumentError(
            "The cursor is not one this listing returned.",
            hint="Pass back `next_cursor` unchanged, or omit `cursor` for the newest runs.",
        ) from exc
