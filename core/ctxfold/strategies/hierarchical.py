"""The hierarchical strategy: score whole units, keep the best that fit in time order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from ..contract import Compaction, Conversation
from ..exceptions import ConfigurationError
from ..messages import Message, transcript
from ..models.summarizers import Summarizer, as_summarizer, fit_summary, summarize
from ..result import Action, Decision, from_user, insert_note
from ..text.primitives import find_identifiers, split_sentences
from ..text.scoring import ScoreContext, has_error, mentions_decision, score
from ..units import Unit
from .alternation import alternate
from .base import BaseCompressor, overflow
from .options import CachedOptions, check_share
from .summarizing import summary_message

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DEFAULT_WEIGHTS", "HierarchicalCompressor"]

#: How much each signal adds to a unit's score. ``content`` weighs what the unit's
#: sentences and lines are worth to the engine's extractive scoring (identifiers,
#: numbers, names, rare words, words of the task); the role weights apply to the unit's
#: first message. ``recency`` multiplies the score by ``1 + recency * position``
#: (position 0 for the oldest unit, 1 for the newest), so newer units always score
#: higher, all else equal, without drowning what older units hold.
DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "content": 1.0,
        "recency": 0.5,
        "user": 1.0,
        "assistant": 0.5,
        "tool": 0.2,
        "errors": 1.5,
        "identifiers": 1.0,
        "decisions": 1.0,
        "questions": 0.5,
    }
)


_SCAN_CHARS = 20_000  # a unit's text is scored on its first this many characters
_MIN_COST = 10  # a shorter unit is ranked as if it cost this many tokens
# Units are ranked by score / tokens ** _LENGTH_EXPONENT: below 1, so a long unit full
# of facts is not ranked below a short one holding a single fact.
_LENGTH_EXPONENT = 0.8
_TRIES = 5  # selections, narrowing the room when notes between turns pass the budget
_CLOSE = 8  # tokens: a room this near the best is close enough
_SUMMARY_HEAD = 24  # tokens: the summary's first line and message overhead, and slack


class HierarchicalCompressor(BaseCompressor):
    """Score every unit, keep the highest-scoring units that fit, in time order; with a
    summarizer, the rest is summarized into one message.

    A unit's score is the sum of weighted signals (``weights`` overrides entries of
    :data:`DEFAULT_WEIGHTS`): its content (the extractive scoring of its sentences and
    lines against the conversation's word rarity and the task), the role that opens
    the unit, errors, identifiers (paths, URLs, ids, names; up to ten), decisions and
    questions, times a recency factor. Units are chosen by score per token (tokens to
    the power 0.8, so a long unit full of facts is not ranked below a short one with
    one fact), kept in time order; the newest unit is always kept.

    Args:
        weights: signal weights, merged over the defaults; unknown names are an error.
        summarizer: summarizes the units left out (default: none, they are dropped).
        summary_share: share of the budget reserved for that summary.
        cache: summaries cache (see :class:`ctxfold.SummarizingCompressor`).
    """

    name: ClassVar[str] = "hierarchical"

    uses_cache: ClassVar[bool] = True

    def __init__(
        self,
        *,
        weights: Mapping[str, float] | None = None,
        summarizer: Any = None,
        summary_share: float = 0.2,
        **options: Unpack[CachedOptions],
    ) -> None:
        super().__init__(**options)
        merged = dict(DEFAULT_WEIGHTS)
        for key, value in (weights or {}).items():
            if key not in DEFAULT_WEIGHTS:
                raise ConfigurationError(
                    f"unknown weight {key!r}; use {', '.join(sorted(DEFAULT_WEIGHTS))}"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigurationError(f"weight {key!r} must be a number, got {value!r}")
            merged[key] = float(value)
        self.weights: Mapping[str, float] = MappingProxyType(merged)
        self.summarizer: Summarizer | None = (
            None if summarizer is None else as_summarizer(summarizer)
        )
        self.summary_share = check_share("summary_share", summary_share)

    def score(
        self,
        messages: Sequence[Message],
        unit: Unit,
        position: float,
        ctx: ScoreContext | None = None,
    ) -> float:
        """The unit's score; ``position`` is 0 for the oldest unit, 1 for the newest.

        ``ctx`` holds the conversation's word rarity and goal (built from the units
        when not given): the content signal is the sum of what the unit's sentences
        and lines are worth to the engine's extractive scoring, so it grows with the
        facts a unit holds, not with its length.
        """
        w = self.weights
        first = messages[unit.start]
        text = transcript([messages[i] for i in unit.indices])[:_SCAN_CHARS]
        low = text.lower()
        if ctx is None:
            ctx = ScoreContext.build([text])
        ids = {v for _, v, _, _ in find_identifiers(text)}
        s = w["content"] * sum(score(seg, ctx) for seg in split_sentences(text))
        s += w.get(first.role, 0.0)
        s += w["errors"] * has_error(low)
        s += w["identifiers"] * min(len(ids), 10) / 10
        s += w["decisions"] * mentions_decision(low)
        s += w["questions"] * (first.role == "user" and "?" in first.text)
        return s * (1.0 + w["recency"] * position)

    def compact(self, conv: Conversation) -> Compaction:
        tokens, budget = conv.tokens, conv.budget
        pinned, free, pinned_cost = conv.pinned(self.pin_roles)
        cost = {u.start: sum(tokens[i] for i in u.indices) for u in free}
        newest = cost[free[-1].start] if free else 0
        if pinned_cost + newest > budget:
            overflow(
                self.overflow,
                required=pinned_cost + newest,
                budget=budget,
                what="the pinned messages and the newest unit",
            )
        order = self._ranked(conv, free, cost)
        room = budget - pinned_cost
        reserve = self.summary_share * room if self.summarizer is not None else 0.0
        mine = int(room - reserve)  # what the kept units may take
        chosen = self._fit(conv, pinned, free, cost, order, mine, limit=mine + pinned_cost)
        done = alternate(conv, self._output(conv, pinned, free, chosen), self.name, self.overflow)
        if self.summarizer is None or len(chosen) == len(free):
            return done
        spare = budget - conv.counter.count_messages(done.messages)  # what the notes left
        summarized = self._output(conv, pinned, free, chosen, summary_room=spare)
        return alternate(conv, summarized, self.name, self.overflow)

    def _fit(
        self,
        conv: Conversation,
        pinned: list[int],
        free: list[Unit],
        cost: dict[int, int],
        order: list[int],
        room: int,
        *,
        limit: int,
    ) -> set[int]:
        """The units chosen for ``room`` once the notes that keep turns apart are
        counted too, so that the whole output stays within ``limit``: a few selections,
        the room narrowed between the last that fit and the last that did not (``room``
        itself, when no note is needed)."""
        best: set[int] | None = None
        lo, hi, r = 0, room, room
        for _ in range(_TRIES):
            chosen = self._chosen(free, cost, order, r)
            plain = self._output(conv, pinned, free, chosen)
            done = alternate(conv, plain, self.name, self.overflow, make_room=False)
            total = conv.counter.count_messages(done.messages)
            if total <= limit:
                best, lo = chosen, r
                if len(done.messages) == len(plain.messages) or hi - lo <= _CLOSE:
                    break
                r = (lo + hi) // 2
            else:
                hi = r
                r = max(r - (total - limit), 0) if best is None else (lo + hi) // 2
        return best if best is not None else self._chosen(free, cost, order, 0)

    def _ranked(self, conv: Conversation, free: list[Unit], cost: dict[int, int]) -> list[int]:
        """The free units but the newest, best value per token first."""
        messages = conv.messages
        n = len(free)
        texts = [transcript([messages[i] for i in u.indices])[:_SCAN_CHARS] for u in free]
        task = next((messages[u.start].text for u in free if from_user(messages[u.start])), "")
        ctx = ScoreContext.build(texts, goal=task)
        return sorted(
            range(n - 1),
            key=lambda k: (
                -self.score(messages, free[k], k / max(n - 1, 1), ctx)
                / max(cost[free[k].start], _MIN_COST) ** _LENGTH_EXPONENT,
                -k,
            ),
        )

    def _chosen(
        self, free: list[Unit], cost: dict[int, int], order: list[int], room: int
    ) -> set[int]:
        """The starts of the units kept in ``room``: the newest, then by rank."""
        chosen = {free[-1].start} if free else set()
        used = cost[free[-1].start] if free else 0
        for k in order:
            c = cost[free[k].start]
            if used + c <= room:
                chosen.add(free[k].start)
                used += c
        return chosen

    def _output(
        self,
        conv: Conversation,
        pinned: list[int],
        free: list[Unit],
        chosen: set[int],
        *,
        summary_room: int | None = None,
    ) -> Compaction:
        """The kept units in time order and, given ``summary_room``, the summary of the
        rest in at most that many tokens (when it fits)."""
        messages, tokens, counter = conv.messages, conv.tokens, conv.counter
        left = [u for u in free if u.start not in chosen]
        left_idx = {i for u in left for i in u.indices}
        note: Message | None = None
        if left and summary_room is not None and self.summarizer is not None:
            room = summary_room
            allowance = room - _SUMMARY_HEAD
            if allowance >= 16:
                text = summarize(
                    self.summarizer,
                    transcript([messages[i] for u in left for i in u.indices]),
                    max_tokens=allowance,
                    cache=self.cache,
                    count=counter.count_text,
                )
                if counter.count_text(text) > allowance:
                    text = fit_summary(text, allowance, counter)
                candidate = summary_message(text, sum(len(u) for u in left), "system")
                if text and counter.count_message(candidate) <= room:
                    note = candidate
        out: list[Message] = []
        trace: list[Decision] = []
        pinned_set = set(pinned)
        action: Action = "summarized" if note is not None else "dropped"
        why = "summary" if note is not None else "low_score"
        for i, m in enumerate(messages):
            if i in left_idx:
                trace.append(Decision(i, action, why, tokens[i], 0, self.name))
            else:
                out.append(m)
                kept = f"pinned:{m.role}" if i in pinned_set else "high_score"
                trace.append(Decision(i, "kept", kept, tokens[i], tokens[i], self.name))
        if note is not None:
            insert_note(out, note)
        return Compaction(out, trace, {})
