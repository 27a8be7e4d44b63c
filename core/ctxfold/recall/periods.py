"""The periods a query names ("on 16 November, 2023", "in August 2023", "in May") and
the day a time context falls on, so that a question scoped in time finds what was said
then: a message counts as said on its stamp's day (see :mod:`.stamps`)."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import NamedTuple

__all__ = ["TOLD_WITHIN", "Period", "day_of", "periods"]

_MONTHS = {
    name: k
    for k, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# "16 November, 2023", "November 16, 2023", "16 Nov", "November 2023", "November";
# an ISO date "2023-11-16".
_NAMED = [
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?\b(?!:)", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}(?:,?\s+(?:of\s+)?{_YEAR})?\b", re.IGNORECASE),
]
_ISO = re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b")


#: Days after a period in which what was said may still tell of it ("last night",
#: "last week"): a message said up to this long after a period counts as said in it.
TOLD_WITHIN = 3


class Period(NamedTuple):
    """A span of days a query names: ``year`` and ``day`` may be unknown (``None``):
    "in May" is May of any year, "in May 2023" the whole month."""

    month: int
    year: int | None = None
    day: int | None = None

    def holds(self, when: date) -> bool:
        """Whether what was said on ``when`` may tell of this period: it is in it, or
        at most :data:`TOLD_WITHIN` days after it."""
        for year in (when.year, when.year - 1) if self.year is None else (self.year,):
            start, end = self._span(year)
            if start is not None and 0 <= (when - start).days < (end - start).days + TOLD_WITHIN:
                return True
        return False

    def _span(self, year: int) -> tuple[date | None, date]:
        """The first day of this period in ``year`` and the day after its last."""
        try:
            if self.day is not None:
                start = date(year, self.month, self.day)
                return start, start + timedelta(days=1)
            start = date(year, self.month, 1)
        except ValueError:  # 30 February
            return None, date(year, 1, 1)
        after = date(year + self.month // 12, self.month % 12 + 1, 1)
        return start, after


def periods(text: str) -> tuple[Period, ...]:
    """The periods ``text`` names, each once, the most precise reading of each
    mention ("16 November, 2023" is that day, not November)."""
    found: list[Period] = []
    taken: list[range] = []
    for m in _ISO.finditer(text):
        found.append(Period(int(m["month"]), int(m["year"]), int(m["day"])))
        taken.append(range(m.start(), m.end()))
    for pattern in _NAMED:
        for m in pattern.finditer(text):
            if any(m.start() in r for r in taken) or not _plausible(m):
                continue
            groups = m.groupdict()
            day = int(groups["day"]) if groups.get("day") else None
            if day is not None and not 1 <= day <= 31:
                continue
            year = int(groups["year"]) if groups.get("year") else None
            found.append(Period(_MONTHS[m["month"].lower()], year, day))
            taken.append(range(m.start(), m.end()))
    return tuple(dict.fromkeys(found))


def _plausible(m: re.Match[str]) -> bool:
    """Whether a month name alone (no day, no year) is a month: "may" and "mar" are
    words more often ("it may rain"), and so are "march" and abbreviations written
    in lower case."""
    groups = m.groupdict()
    if groups.get("day") or groups.get("year"):
        return True
    word = m["month"].lower()
    if word in ("may", "mar"):
        return False
    return not (m["month"].islower() and (word == "march" or len(word) <= 4))


def day_of(stamp: str | None) -> date | None:
    """The day a time context names (``1:56 pm on 8 May, 2023``, ``2023-05-08 13:56
    UTC``), or ``None`` when it names no whole date."""
    if not stamp:
        return None
    for p in periods(stamp):
        if p.year is not None and p.day is not None:
            try:
                return date(p.year, p.month, p.day)
            except ValueError:
                return None
    return None
