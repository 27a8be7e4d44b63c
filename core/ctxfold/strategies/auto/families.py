"""Identifier families: the many identifiers of one shape a tool prints once each
(routes with numbers, request ids, timestamps, hashes), listed in a note as one entry
(the shape, how many, the first and the last) instead of one by one.

A long log names hundreds of ``/api/v1/billing/<n>/rates`` and request ids: listed one
by one they fill a note and crowd out the lines that say what happened. A member the
conversation uses (the task names it, a person or the agent writes it, passes it to a
tool, an earlier note kept it) stays an entry of its own; every member stays findable
in the original, through ``expand`` and the reference index.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["FAMILY_MIN", "Family", "families", "shape"]

#: A shape shared by at least this many identifiers nobody used makes a family.
FAMILY_MIN = 5
#: Hex runs with a digit (ids, hashes) and numbers: what varies between members.
_HEX = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{6,}(?![0-9A-Za-z])")
_DIGITS = re.compile(r"\d+")


def shape(value: str) -> str:
    """``value`` with what varies between members of its family masked: hex ids and
    hashes as ``<hex>``, numbers as ``#`` (``/api/v1/billing/12593/rates`` ->
    ``/api/v#/billing/#/rates``)."""
    return _DIGITS.sub("#", _HEX.sub("<hex>", value))


@dataclass(frozen=True)
class Family:
    """Identifiers of one shape, in the order the conversation shows them."""

    shape: str
    members: tuple[str, ...]

    @property
    def entry(self) -> str:
        """The family as the note lists it: the shape, how many, the first and the last
        member whole (so both are found by a search of the note)."""
        first, last = self.members[0], self.members[-1]
        return f"{self.shape} x{len(self.members)} ({first} ... {last})"


def families(order: Sequence[str], uses: Mapping[str, float]) -> list[Family]:
    """The families among ``order`` (identifiers in the order they first appear):
    identifiers of one :func:`shape` that nobody used (``uses`` 0: no person or agent
    wrote it, no earlier note kept it), at least :data:`FAMILY_MIN` of them. An
    identifier without a digit has no shape to share."""
    by_shape: dict[str, list[str]] = defaultdict(list)
    for value in order:
        if not uses.get(value, 0.0) and any(c.isdigit() for c in value):
            by_shape[shape(value)].append(value)
    return [Family(s, tuple(m)) for s, m in by_shape.items() if len(m) >= FAMILY_MIN]
