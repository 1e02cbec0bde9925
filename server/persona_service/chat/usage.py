"""Usage over time (UsageService): tokens, cost and generations of the
caller's workspace by UTC day, persona or key, summed from what each reply
recorded when it was billed. Days are UTC calendar days; a range is at most
366 days, by default the 30 days up to now."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from persona_service.chat.records import UsageRow
from persona_service.chat.usage_repository import UsageRepository
from persona_service.kernel.api import Principal, ValidationFailed, Violation, Work, utcnow

MAX_DAYS = 366
DEFAULT_DAYS = 30
_EPSILON = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class UsageReport:
    start: datetime
    end: datetime
    group_by: str
    buckets: list[UsageRow]
    totals: UsageRow


def _bound(name: str, value: str, *, day_end: bool) -> datetime:
    """A range bound: a date (its midnight UTC; as an end, the midnight after it) or an RFC 3339 timestamp."""
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            return datetime.combine(day + timedelta(days=1 if day_end else 0), time(), UTC)
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ValidationFailed([Violation(name, "format", value, {"format": "YYYY-MM-DD or RFC 3339 with an offset"})])
    return moment.astimezone(UTC)


def _midnight(moment: datetime) -> datetime:
    return datetime.combine(moment.astimezone(UTC).date(), time(), UTC)


def _days(start: datetime, end: datetime) -> list[str]:
    """The UTC days the range touches, oldest first."""
    first, last = start.astimezone(UTC).date(), (end - _EPSILON).astimezone(UTC).date()
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


class UsageService:
    def __init__(self, work: Work, clock: Callable[[], datetime] = utcnow) -> None:
        self._repo = work.of(UsageRepository)
        self.clock = clock

    def range(self, start: str, end: str) -> tuple[datetime, datetime]:
        until = _bound("end", end, day_end=True) if end else self.clock()
        since = _bound("start", start, day_end=False) if start else \
            _midnight(until - _EPSILON) - timedelta(days=DEFAULT_DAYS - 1)
        if until <= since:
            raise ValidationFailed([Violation("end", "after_start", end, {"after": since.isoformat()})])
        if until - since > timedelta(days=MAX_DAYS):
            name = "end" if end else "start"
            raise ValidationFailed([Violation(name, "max_range", end or start, {"maxDays": MAX_DAYS})])
        return since, until

    def usage(self, principal: Principal, start: str, end: str, group_by: str, persona_id: str = "",
              key_id: str = "") -> UsageReport:
        since, until = self.range(start, end)
        group_by = group_by or "day"
        rows = self._repo.usage(principal.workspace_id, since, until, group_by, persona_id, key_id)
        if group_by == "day":
            found = {row.key: row for row in rows}
            rows = [found.get(day) or UsageRow(day, 0, 0, 0, 0) for day in _days(since, until)]
        else:
            rows.sort(key=lambda row: (-row.cost_usd_micros, -row.generations, row.key))
        totals = UsageRow("", *(sum(getattr(row, name) for row in rows) for name in
                                ("input_tokens", "output_tokens", "cost_usd_micros", "generations",
                                 "unpriced_generations")))
        return UsageReport(since, until, group_by, rows, totals)
