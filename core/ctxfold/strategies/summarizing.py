"""The summarizing strategy: older messages folded into one running summary."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, ClassVar

from ..contract import Compaction, Conversation
from ..messages import Message, transcript
from ..models.summarizers import Summarizer, as_summarizer, fit_summary, summarize, summarizer_id
from ..models.usage import record
from ..result import Decision, earlier, insert_note, note_message
from ..storage.cache import cache_key
from ..text.scoring import ExtractiveSummarizer
from ..tokens import TokenCounter
from ..units import Unit, newest_units
from .base import BaseCompressor, keep_only, overflow
from .newest import SHORTENED, shown_newest
from .options import CachedOptions, check_choice, check_share

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["SummarizingCompressor", "summary_message"]

_SUMMARY_ROLES = ("system", "developer", "assistant")
_MIN_SUMMARY = 16  # tokens: below this a summary says nothing


def summary_message(text: str, count: int, role: str) -> Message:
    """The message that stands for ``count`` summarized messages: marked as a summary
    in its text and in ``metadata["ctxfold"]``, never posing as the user."""
    return note_message(role, "summary", f"{earlier(count)} summarized", text, summarized=count)


class SummarizingCompressor(BaseCompressor):
    """Keep pinned messages and the newest units; summarize everything older into one
    message, incrementally.

    The summary is a *running* summary: it is stored (in the cache) under a hash of the
    messages it covers, and the next call over a longer history sends the summarizer
    only the earlier summary plus the messages not yet summarized, so the cost per turn
    does not grow with the history. A summarizer failure raises
    :class:`~ctxfold.SummarizerError`; an error text never becomes the summary.

    Args:
        summarizer: a :class:`ctxfold.Summarizer`, an object with async ``asummarize``,
            or a callable taking messages (an LLM); default: extractive (no LLM).
        recent_share: share of the budget (after pinned messages) for the newest
            units, kept verbatim.
        role: the summary message's role (``system``, ``developer`` or ``assistant``).
        pin_roles: roles always kept.
        cache: where running summaries live: ``None`` (the shared memory cache), a
            :class:`ctxfold.Cache`, a backend or spec (``"sqlite:///path.db"``,
            ``"redis://..."``), or ``False`` for none.
        overflow: ``"error"`` or ``"best_effort"`` when pinned messages exceed the budget.
    """

    name: ClassVar[str] = "summarize"

    uses_cache: ClassVar[bool] = True

    def __init__(
        self,
        *,
        summarizer: Any = None,
        recent_share: float = 0.25,
        role: str = "system",
        **options: Unpack[CachedOptions],
    ) -> None:
        super().__init__(**options)
        self.summarizer: Summarizer = (
            ExtractiveSummarizer() if summarizer is None else as_summarizer(summarizer)
        )
        self.recent_share = check_share("recent_share", recent_share)
        check_choice("role", role, _SUMMARY_ROLES)
        self.role = role

    def compact(self, conv: Conversation) -> Compaction:
        messages, tokens, budget, counter = conv.messages, conv.tokens, conv.budget, conv.counter
        pinned, free, pinned_cost = conv.pinned(self.pin_roles)
        if pinned_cost > budget or not free:
            overflow(self.overflow, required=pinned_cost, budget=budget, what="the pinned messages")
            return keep_only(conv, set(pinned), set(pinned), self.name)
        avail = budget - pinned_cost
        # The summary at its shortest: its header, a line break and the least it says.
        header = counter.count_message(summary_message("", len(messages), self.role))
        cut = shown_newest(conv, free, avail, header + 1 + _MIN_SUMMARY)  # no notes carried
        if cut:  # the newest unit alone is over the room: shown cut in place
            messages = [cut.get(i, m) for i, m in enumerate(messages)]
            tokens = [
                counter.count_message(m) if i in cut else t
                for i, (m, t) in enumerate(zip(messages, tokens, strict=True))
            ]
        recent = newest_units(free, tokens, self.recent_share * avail, cap=avail - _MIN_SUMMARY)
        recent.add(free[-1].start)  # the newest unit always: where the conversation is
        while True:
            old_units = [u for u in free if u.start not in recent]
            kept_cost = sum(tokens[i] for u in free if u.start in recent for i in u.indices)
            n_old = sum(len(u) for u in old_units)
            header = counter.count_message(summary_message("", n_old, self.role))
            allowance = avail - kept_cost - header - 1  # the line break after the header
            if allowance >= _MIN_SUMMARY or len(recent) == 1:
                break
            recent.discard(min(recent))  # make room for the summary: the oldest goes
        if not old_units and pinned_cost + kept_cost > budget:  # the newest alone is over
            overflow(
                self.overflow,
                required=pinned_cost + kept_cost + counter.count_messages([]),
                budget=budget,
                what="the pinned messages and the newest unit",
            )
        old = [i for u in old_units for i in u.indices]
        note = None
        if old:
            text = self._running_summary(messages, old_units, max(allowance, 1), counter)
            note = summary_message(text, len(old), self.role)
        if note is not None and pinned_cost + kept_cost + counter.count_message(note) > budget:
            overflow(
                self.overflow,
                required=pinned_cost + kept_cost + counter.count_message(note),
                budget=budget,
                what="the pinned messages, the newest unit and a summary",
            )
        out: list[Message] = []
        trace: list[Decision] = []
        old_set = set(old)
        for i, m in enumerate(messages):
            if i in old_set:
                trace.append(Decision(i, "summarized", "summary", tokens[i], 0, self.name))
            elif i in cut:
                out.append(m)
                before = conv.tokens[i]
                trace.append(Decision(i, "compressed", SHORTENED, before, tokens[i], self.name))
            else:
                out.append(m)
                why = f"pinned:{m.role}" if i in pinned else "recent"
                trace.append(Decision(i, "kept", why, tokens[i], tokens[i], self.name))
        if note is None:
            return Compaction(out, trace, {})
        insert_note(out, note)
        saved = sum(tokens[i] for i in old) - counter.count_message(note)
        return Compaction(out, trace, {"summary": max(saved, 0)})

    def _running_summary(
        self,
        messages: list[Message],
        old_units: list[Unit],
        allowance: int,
        counter: TokenCounter,
    ) -> str:
        """The summary of the older units, extending the longest summarized prefix."""
        sid = summarizer_id(self.summarizer)
        ends: list[int] = []  # message index after each unit
        hashes: list[str] = []
        h = hashlib.sha256(sid.encode("utf-8"))
        for u in old_units:
            for i in u.indices:
                h.update(messages[i].fingerprint.encode("ascii"))
            ends.append(u.indices[-1] + 1)
            hashes.append(h.hexdigest())
        keys = [cache_key("running-summary", sid, hk) for hk in hashes]
        found = self.cache.get_many(keys) if self.cache is not None else [None] * len(keys)
        start, previous = 0, ""
        for k in range(len(keys) - 1, -1, -1):
            hit = found[k]
            if hit is not None:
                start, previous = k + 1, hit.decode("utf-8")
                record("cache_hits")
                break
        new_msgs = [messages[i] for u in old_units[start:] for i in u.indices]
        if new_msgs:
            body = transcript(new_msgs)
            text = f"Earlier summary:\n{previous}\n\nNew messages:\n{body}" if previous else body
        elif counter.count_text(previous) <= allowance:
            return previous  # nothing new, and it still fits
        else:
            text = previous
        summary = summarize(
            self.summarizer,
            text,
            max_tokens=allowance,
            cache=self.cache,
            count=counter.count_text,
        )
        if counter.count_text(summary) > allowance:
            summary = fit_summary(summary, allowance, counter)
        if self.cache is not None:
            self.cache.set(keys[-1], summary.encode("utf-8"))
        return summary
