"""The ``auto`` strategy: the deterministic compression engine.

1. Pinned messages (system, developer) and a recency window of the newest whole units
   stay verbatim.
2. Older messages go through the encoding layers (dedup, truncation, JSON, whitespace)
   and the format adapters, which mark what to preserve and what is compressible.
3. One global selection keeps the sentences and lines worth the most per token across
   all older messages (identifiers, numbers, names, errors, decisions, the goal), and
   the units that hold them; a unit is never split.
4. What is folded away leaves its identifiers in one short note, so every file path, id
   and name stays findable. The exact count is checked and the selection trimmed until
   the budget holds.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, NamedTuple

from ._adapters import FormatAdapter, Piece, adapters, registry_version, split_message_text
from ._compressor import (
    BaseCompressor,
    Overflow,
    check_cache,
    check_choice,
    check_roles,
    check_share,
    keep_only,
    overflow,
)
from ._layers import (
    Layers,
    _maybe_whitespace,
    build_codebook,
    looks_indentation_sensitive,
    minify_json,
    normalize_whitespace,
    truncate_observation,
)
from ._lru import LRU
from ._messages import ROLES, Message, ToolCall
from ._models import as_summarizer, speaker_tag, summarize, transcript
from ._result import NOTE_KEY, Action, Decision, earlier, note_message
from ._summarize import _ALL as _ALL_FLAGS
from ._summarize import (
    FILLER,
    Features,
    ScoreContext,
    _Flags,
    combine,
    features,
    render,
    segments_of,
)
from ._summarizing import fit_summary
from ._text import KIND_WEIGHT, TokenSet, find_identifiers, json_strings, json_values
from ._tokens import TokenCounter
from ._units import Grouping, Unit, split_pinned
from .exceptions import ConfigurationError

__all__ = ["AutoCompressor", "clear_caches"]

_ID_ITEM = -2  # _Item.plan of an identifier to list in the note
_TAG_COST = 3.0  # tokens a speaker tag and line break cost in the note
_NO_WORDS: frozenset[str] = frozenset()
_REDUNDANCY = 0.6  # how much a sentence loses when its words are already covered
_MIN_COST = 10.0  # a shorter sentence is ranked as if it cost this many tokens
_NOTE_OVERHEAD = 20  # the note's own message overhead and header
_AGENT_RECENT = 0.25  # default recent_share with tool calls in the history
_CHAT_RECENT = 0.1  # and without
_MIN_SUMMARY = 16  # tokens: an LLM summary shorter than this says nothing
_MIN_FILL = 3  # tokens: less room than this holds no identifier
_ALSO = "Also mentioned: "


@dataclass(frozen=True)
class _Analysis:
    """The part of a plan that depends on the message alone (cached across calls)."""

    tag: str
    pieces: tuple[Piece, ...]
    segments: tuple[tuple[str, ...], ...]
    features: tuple[tuple[Features, ...], ...]
    calls: tuple[ToolCall, ...]
    call_features: tuple[Features, ...]
    reasons: tuple[str, ...]
    cpt: float
    identifiers: tuple[tuple[str, str], ...]
    echo: float
    savings: Mapping[str, int]
    words: frozenset[str]  # content words, for the conversation's word rarity


def _lookup(text: str, n: int) -> str | TokenSet:
    """``text`` itself for a few substring tests, its token set for many."""
    return TokenSet(text) if n > 32 and len(text) > 2000 else text


def _id_cost(ident: str) -> float:
    """Estimated tokens of an identifier in the note's list, with its separator."""
    return (len(ident) + 2) / 3.2


def _id_value(ident: str, weight: float) -> float:
    """How much listing an identifier is worth against a sentence's value per token: its
    weight, discounted for a long one (by the square root: a path is worth more than a
    short id, but not in proportion to its length)."""
    return weight * 0.5 * math.sqrt(4.0 / max(_id_cost(ident), 4.0))


_ANALYSES: LRU[_Analysis] = LRU(5_000)


def clear_caches() -> None:
    """Forget the cached analyses of messages, the references found in texts and the
    shortened texts (for cold timings, or to free memory)."""
    from ._references import clear_findings
    from ._summarize import clear_shortened

    _ANALYSES.clear()
    clear_findings()
    clear_shortened()


@dataclass
class _Plan:
    """How one older message can be shown: its pieces and their selectable segments.

    Every piece is split into segments (sentences or lines); preserved pieces score
    higher. Tool calls are selectable too. A unit whose segments are all chosen stays in
    place (after layers and adapters); any other unit is condensed into the note.
    """

    index: int
    tag: str
    pieces: list[Piece]
    segments: list[list[str]]
    scores: list[list[float]]
    words: list[list[frozenset[str]]]  # content words of each segment
    chosen: list[list[bool]]
    calls: tuple[ToolCall, ...]
    call_scores: list[float]
    call_chosen: list[bool]
    reasons: list[str]
    cpt: float
    identifiers: list[tuple[str, str]] = field(default_factory=list)  # (kind, value)
    echo: float = 1.0  # how much a mention here counts (tool output 1, people 2)
    deduplicated: bool = False
    savings: Counter[str] = field(default_factory=Counter)

    def complete(self) -> bool:
        return all(all(c) for c in self.chosen) and all(self.call_chosen)

    def anything(self) -> bool:
        return any(any(c) for c in self.chosen) or any(self.call_chosen)


class _Fitted(NamedTuple):
    """What the fit loop settled on; ``plans`` holds every message that was folded or
    compressed (the older ones), ``note_at`` the note's position in ``messages``."""

    messages: list[Message]
    trace: list[Decision]
    note_at: int | None
    plans: dict[int, _Plan]
    pool: Sequence[tuple[str, float]] = ()  # identifiers worth listing, best first


class _Item(NamedTuple):
    """One selectable thing; items sort best first (tuples compare in C)."""

    priority: float  # minus value per token
    order: int
    cost: float
    plan: int  # message index, or _ID_ITEM for an identifier to list
    piece: int  # -1 for a tool call
    seg: int
    words: frozenset[str] = frozenset()  # a prose sentence's content words


class AutoCompressor(BaseCompressor):
    """Compress hard without an LLM, keeping what matters. The default strategy.

    Args:
        recent_share: share of the budget (after pinned messages) for the newest
            units, kept verbatim. Default ``None``: 0.25 when the history has tool
            calls (the latest results are the agent's working state), 0.1 in a chat
            (older turns are memory, which selection serves better).
        task_share: the first user message (the task) stays verbatim if it needs at
            most this share of the budget.
        digest_share: at most this share of the budget lists the identifiers of
            folded content (``0`` turns the note off).
        layers: which encoding layers run (:class:`ctxfold.Layers`).
        adapters: the format adapters to try, in order (default: the registry).
        summarizer: an LLM (anything :func:`ctxfold.as_summarizer` accepts: a
            :class:`ctxfold.Summarizer`, an object with async ``asummarize``, or a
            callable taking messages) that rewrites the condensed lines of the note
            as one summary in at most as many tokens: one call per compression, on
            the full text of the folded messages, cached by that text (a second pass
            over the same history makes no call). Default: none, the note keeps the
            extractive lines.
        cache: where those summaries are cached (see
            :class:`ctxfold.SummarizingCompressor`).
        pin_roles: roles always kept verbatim.
        note_role: the role of the note that lists folded identifiers.
        overflow: ``"error"`` raises :class:`~ctxfold.BudgetError` when pinned
            messages alone exceed the budget; ``"best_effort"`` returns them anyway.
        reversible: on by default: every original goes to ``store`` and the note
            names the round (``[ctxfold round <id>: ...]``), so
            :func:`ctxfold.expand` gives the input back and the model can read any
            original with :func:`ctxfold.expand_tool`. ``False`` for a plain result.
        store, reference_share, max_references: see
            :meth:`~ctxfold.BaseCompressor.set_reversible`.
    """

    name: ClassVar[str] = "auto"
    lists_identifiers = True

    def __init__(
        self,
        *,
        recent_share: float | None = None,
        task_share: float = 0.25,
        digest_share: float = 0.65,
        layers: Layers | None = None,
        adapters: Sequence[FormatAdapter] | None = None,
        summarizer: Any = None,
        pin_roles: Iterable[str] = ("system", "developer"),
        note_role: str = "system",
        cache: Any = None,
        overflow: Overflow = "error",
        reversible: bool = True,
        store: Any = None,
        reference_share: float = 0.1,
        max_references: int | None = 200,
    ) -> None:
        self.recent_share = (
            None if recent_share is None else check_share("recent_share", recent_share)
        )
        self.task_share = check_share("task_share", task_share)
        self.digest_share = check_share("digest_share", digest_share)
        if layers is not None and not isinstance(layers, Layers):
            raise ConfigurationError("layers must be a ctxfold.Layers instance")
        self.layers = layers or Layers()
        self.adapters = tuple(adapters) if adapters is not None else None
        self.summarizer = None if summarizer is None else as_summarizer(summarizer)
        self.cache = check_cache(cache)
        self.pin_roles = check_roles("pin_roles", pin_roles)
        check_choice("note_role", note_role, sorted(ROLES))
        self.note_role = note_role
        check_choice("overflow", overflow, ("error", "best_effort"))
        self.overflow: Overflow = overflow
        self.set_reversible(
            reversible,
            store=store,
            reference_share=reference_share,
            max_references=max_references,
        )

    # ------------------------------------------------------------------ main flow

    def _compress(
        self,
        messages: list[Message],
        *,
        budget: int,
        counter: TokenCounter,
        grouping: Grouping,
    ) -> tuple[Sequence[Message], list[Decision], Mapping[str, int]]:
        tokens = [counter.count_message(m) for m in messages]
        fitted = self._fit(messages, tokens, budget=budget, counter=counter, grouping=grouping)
        fitted = self._fill(fitted, budget, counter)
        out, trace, note_at = fitted.messages, fitted.trace, fitted.note_at
        if note_at is not None:
            out = self._summarize_note(messages, out, trace, note_at, counter)
        note = None if note_at is None else out[note_at]
        return out, trace, self._savings(fitted.plans, tokens, note, counter)

    def _summarize_note(
        self,
        messages: list[Message],
        out: list[Message],
        trace: list[Decision],
        at: int,
        counter: TokenCounter,
    ) -> list[Message]:
        """Replace the note's extractive lines by the summarizer's summary of the folded
        messages, in at most the tokens those lines took (one call, cached)."""
        folded = [d.index for d in trace if d.reason.startswith("folded:note")]
        summarizer = self.summarizer
        if not folded or summarizer is None:
            return out
        note = out[at]
        listed = list(note.metadata[NOTE_KEY].get("listed", ()))
        others = "\n".join(m.text for k, m in enumerate(out) if k != at)
        room = counter.count_message(note)
        bare = counter.count_message(self._note(len(folded), ["."], listed, others, counter, True))
        allowance = room - bare
        if allowance < _MIN_SUMMARY:
            return out
        text = summarize(
            summarizer,
            transcript([messages[i] for i in folded]),
            max_tokens=allowance,
            cache=self.cache,
            count=counter.count_text,
        )
        for _ in range(4):
            new = self._note(len(folded), [text], listed, others + "\n" + text, counter, True)
            over = counter.count_message(new) - room
            if over <= 0:
                return [*out[:at], new, *out[at + 1 :]]
            text = fit_summary(text, counter.count_text(text) - over - 2, counter)
            if not text:
                break
        return out  # the summary cannot be made to fit: the extractive note stands

    def _fit(
        self,
        messages: list[Message],
        tokens: list[int],
        *,
        budget: int,
        counter: TokenCounter,
        grouping: Grouping,
    ) -> _Fitted:
        """Select, assemble and check the exact count until the budget holds."""
        n = len(messages)
        base = counter.count_messages([])
        pinned_list, free = split_pinned(messages, grouping, self.pin_roles)
        pinned = set(pinned_list)
        pinned_cost = base + sum(tokens[i] for i in pinned)
        if pinned_cost > budget or not free:
            overflow(self.overflow, required=pinned_cost, budget=budget, what="the pinned messages")
            return _Fitted(*keep_only(messages, tokens, pinned, pinned, self.name), None, {})
        avail = budget - pinned_cost - _NOTE_OVERHEAD

        # The task (the first user message) and the newest units stay verbatim.
        verbatim: dict[int, str] = {}
        used = 0
        recent_share = self.recent_share
        if recent_share is None:
            agentic = any(m.tool_calls or m.role == "tool" for m in messages)
            recent_share = _AGENT_RECENT if agentic else _CHAT_RECENT
        first_user = next((u for u in free if messages[u.start].role == "user"), None)
        if first_user is not None and len(first_user) == 1:
            cost = tokens[first_user.start]
            if cost <= self.task_share * avail:
                verbatim[first_user.start] = "task"
                used += cost
        for k, u in enumerate(reversed(free)):
            if u.start in verbatim:
                continue
            cost = sum(tokens[i] for i in u.indices)
            limit = recent_share * avail if k else max(recent_share, 0.6) * avail
            if used + cost > limit:
                break
            for i in u.indices:
                verbatim[i] = "recent"
            used += cost
        old_units = [u for u in free if u.start not in verbatim]
        old_idx = [i for u in old_units for i in u.indices]

        users = [i for i in range(n) if messages[i].role == "user"]
        goal = " ".join(messages[i].text for i in {users[0], users[-1]}) if users else ""
        ctx = ScoreContext.from_words(
            [self._analysis(messages[i], tokens[i]).words for i in old_idx], goal
        )
        ctx.repeated_later = frozenset(self._lines_repeated_later(messages, old_idx))
        plans = {i: self._plan(messages[i], i, tokens[i], ctx) for i in old_idx}
        self._mark_duplicates(messages, plans, old_idx)

        pool = self._identifier_pool(plans, old_idx, first_user.start if first_user else -1)
        verbatim_text = "\n".join(
            messages[i].text + " ".join(c.arguments for c in messages[i].tool_calls)
            for i in verbatim
        )
        in_verbatim = _lookup(verbatim_text, len(pool))
        pool = [(v, w) for v, w in pool if v not in in_verbatim]
        chosen_ids = [False] * len(pool)
        items = self._items(plans, old_idx, first_user.start if first_user else -1, n, pool)
        self._select(items, plans, avail - used, chosen_ids, self.digest_share * avail)

        topped_up = False
        free_room = budget - pinned_cost  # a result within 3% of it is full enough
        while True:
            for attempt in range(6):
                out, trace, note_at = self._assemble(
                    messages, tokens, counter, old_units, plans, pinned, verbatim, pool, chosen_ids
                )
                total = counter.count_messages(out)
                if total <= budget and (topped_up or budget - total <= 0.03 * free_room):
                    return _Fitted(out, trace, note_at, plans, pool)
                if total <= budget:  # estimates ran low: fill the room left, once
                    topped_up = True
                    best = _Fitted(out, trace, note_at, plans, pool)
                    self._select(
                        items,
                        plans,
                        (budget - total) * 0.9,
                        chosen_ids,
                        (budget - total) * 0.9,  # room no sentence fits goes to ids
                        top_up=True,
                    )
                    continue
                excess = (total - budget) * 1.15 + 2
                if topped_up:  # the top-up overshot: give back the least valuable picks
                    if attempt == 5 or not self._trim(items, plans, chosen_ids, excess):
                        return best  # or let the fitting result stand
                    continue
                if not self._trim(items, plans, chosen_ids, excess):
                    break
            if not verbatim:
                break
            # Still over: fold the oldest verbatim unit too (the task first).
            oldest = min(
                (u for u in free if u.start in verbatim),
                key=lambda u: (verbatim[u.start] != "task", u.start),
                default=None,
            )
            if oldest is None:
                break
            for i in oldest.indices:
                del verbatim[i]
                plans[i] = self._plan(messages[i], i, tokens[i], ctx)
            old_units = sorted([*old_units, oldest], key=lambda u: u.start)
        out, trace, note_at = self._assemble(
            messages, tokens, counter, old_units, plans, pinned, {}, [], [], force_fold=True
        )
        required = counter.count_messages(out)
        if required > budget:
            if len(out) > 1 and note_at is not None:  # the pinned messages alone, then
                out, note_at = [m for k, m in enumerate(out) if k != note_at], None
                trace = [
                    replace(d, action="dropped", reason="over_budget")
                    if d.action in ("summarized", "deduplicated")
                    else d
                    for d in trace
                ]
            else:  # nothing at all would fit: never return [] silently
                overflow(
                    self.overflow,
                    required=required,
                    budget=budget,
                    what="the shortest note on the folded messages",
                )
        return _Fitted(out, trace, note_at, plans)

    @staticmethod
    def _fill(fitted: _Fitted, budget: int, counter: TokenCounter) -> _Fitted:
        """Room the selection's estimates left: the next identifiers of the pool that
        fit, counted exactly, added to the note's list."""
        out, at = fitted.messages, fitted.note_at
        if at is None or not fitted.pool:
            return fitted
        note = out[at]
        meta = dict(note.metadata[NOTE_KEY])
        room = budget - counter.count_messages(out)
        if room < _MIN_FILL or "codebook" in meta or not isinstance(note.content, str):
            return fitted  # a codebook note is decoded as a whole: leave it be
        text = note.content
        shown = "\n".join(
            m.text + " " + " ".join(c.arguments for c in m.tool_calls)
            for k, m in enumerate(out)
            if k != at
        )
        seen = _lookup(shown, len(fitted.pool))
        listing = text.rsplit("\n", 1)[-1].startswith(_ALSO)
        added: list[str] = []
        misses = 0
        ranked = sorted(fitted.pool, key=lambda vw: -_id_value(*vw))  # as the selection does
        for value, _ in ranked:
            if room < _MIN_FILL or misses > 20:
                break
            if value in seen or value in text:  # shown, listed, or inside a listed one
                continue
            piece = (", " if listing else f"\n{_ALSO}") + value
            cost = counter.count_text(piece)
            if cost > room:
                misses += 1
                continue
            text += piece
            listing = True
            room -= cost
            added.append(value)
        listed = list(meta.get("listed", ()))
        while added:  # pieces counted alone may merge differently: check the whole
            meta["listed"] = [*listed, *added]
            filled = [
                *out[:at],
                replace(note, content=text, metadata={NOTE_KEY: meta}),
                *out[at + 1 :],
            ]
            if counter.count_messages(filled) <= budget:
                return fitted._replace(messages=filled)
            text = text[: text.rindex(added.pop())].removesuffix(", ").removesuffix(f"\n{_ALSO}")
        return fitted

    # --------------------------------------------------------------- phase A: plans

    def _plan(self, m: Message, i: int, tok: int, ctx: ScoreContext) -> _Plan:
        """How message ``i`` can be shown, scored for this conversation."""
        a = self._analysis(m, tok)
        scores = [[combine(f, ctx) for f in fs] for fs in a.features]
        call_scores = [combine(f, ctx) + 1.0 for f in a.call_features]
        return _Plan(
            i,
            a.tag,
            list(a.pieces),
            [list(x) for x in a.segments],
            scores,
            [[f.content for f in fs] for fs in a.features],
            [[False] * len(x) for x in a.segments],
            a.calls,
            call_scores,
            [False] * len(a.calls),
            list(a.reasons),
            a.cpt,
            list(a.identifiers),
            a.echo,
            savings=Counter(a.savings),
        )

    def _analysis(self, m: Message, tok: int) -> _Analysis:
        """What does not depend on the rest of the conversation, cached by content."""
        key = (m.fingerprint, tok, self.layers, self._adapter_key())
        hit = _ANALYSES.get(key)
        if hit is None:
            hit = self._analyse(m, tok)
            _ANALYSES.put(key, hit)
        return hit

    def _adapter_key(self) -> tuple[Any, ...]:
        if self.adapters is not None:
            return self.adapters
        return ("registry", registry_version())

    def _analyse(self, m: Message, tok: int) -> _Analysis:
        layers = self.layers
        reasons: list[str] = []
        savings: Counter[str] = Counter()
        calls = m.tool_calls
        if layers.json and calls:
            calls = tuple(
                ToolCall(c.id, c.name, minify_json(c.arguments) or c.arguments, c.type)
                for c in calls
            )
        call_texts = [f"{c.name}({c.arguments})" for c in calls]
        identifiers: list[tuple[str, str]] = []
        for c in calls:  # what the assistant acted on counts twice
            acted = [(k, v) for k, v, _, _ in find_identifiers(json_strings(c.arguments))]
            acted += json_values(c.arguments, names=True)
            identifiers += acted + acted  # what the assistant acted on counts twice
        call_features = tuple(features(t[:1500]) for t in call_texts)
        text = m.content if isinstance(m.content, str) else m.text
        cpt = max(len(text) + sum(len(t) for t in call_texts), 1) / max(tok - 3, 1)
        cpt = max(cpt, 1.0)
        strings = json_strings(text) if text[:1] in "[{" else text
        is_json = strings is not text
        if is_json:  # ids live in the values; the keys are schema
            identifiers += json_values(text)
            identifiers += [(k, v) for k, v, _, _ in find_identifiers(strings)]
        if layers.json:
            mini = minify_json(text)
            if mini is not None:
                savings["json"] += round((len(text) - len(mini)) / cpt)
                text = mini
                reasons.append("layer:json")
        truncated = False
        if layers.truncate and m.role == "tool":
            cut = truncate_observation(
                text,
                max_lines=layers.truncate_lines,
                head=layers.truncate_head,
                tail=layers.truncate_tail,
            )
            if cut is not None:
                identifiers += [(k, v) for k, v, _, _ in find_identifiers(text)]
                truncated = True
                savings["truncate"] += round((len(text) - len(cut)) / cpt)
                text = cut
                reasons.append("layer:truncate")
        if layers.whitespace and _maybe_whitespace(text):
            norm = normalize_whitespace(text, prose=not looks_indentation_sensitive(text))
            if norm != text:
                savings["whitespace"] += round((len(text) - len(norm)) / cpt)
                text = norm
                reasons.append("layer:whitespace")
        builtin_only = self.adapters is None and registry_version() == 0
        if builtin_only and "\n" not in text and text[:1] not in "[{<":
            pieces, used = [Piece(text, keep=False)], list[str]()  # one line: no format
        else:
            pieces, used = split_message_text(text, self.adapters or adapters())
        rebuilt = "".join(p.text for p in pieces)
        if len(rebuilt) > len(text):  # an adapter must never make things bigger
            pieces = [Piece(text, keep=False)]
            reasons.append(f"adapter_reverted:{'+'.join(used)}")
        else:
            reasons.extend(f"adapter:{a}" for a in used if a != "prose")
            if rebuilt != text:
                savings["adapters"] += round((len(text) - len(rebuilt)) / cpt)
        segments: list[tuple[str, ...]] = []
        feats: list[tuple[Features, ...]] = []
        # One identifier scan for the whole text when the pieces tile it exactly.
        whole = list(find_identifiers(text)) if rebuilt == text and len(pieces) > 1 else None
        offset = 0
        next_id = 0
        for p in pieces:
            segs = (
                segments_of(p)
                if not p.keep
                else (p.text.splitlines(keepends=True) if "\n" in p.text.rstrip("\n") else [p.text])
            )
            if whole is None:
                found = list(find_identifiers(p.text))
            else:
                stop = offset + len(p.text)
                found = []
                while next_id < len(whole) and whole[next_id][2] < stop:
                    k, v, a, b = whole[next_id]
                    found.append((k, v, a - offset, b - offset))
                    next_id += 1
                offset = stop
            if not truncated and not is_json:
                identifiers += [(kind, value) for kind, value, _, _ in found]
            flags = _Flags.of(p.text) if len(segs) > 4 else _ALL_FLAGS
            weight = p.weight * (2.0 if p.keep else 1.0)
            if not found:
                seg_feats = [features(seg, (), flags, weight) for seg in segs]
            else:
                seg_feats = []
                pos = 0
                at = 0
                for seg in segs:
                    end = pos + len(seg)
                    kinds: list[str] = []
                    while at < len(found) and found[at][2] < end:
                        kinds.append(found[at][0])
                        at += 1
                    seg_feats.append(features(seg, kinds, flags, weight))
                    pos = end
            segments.append(tuple(segs))
            feats.append(tuple(seg_feats))
        echo = 1.0 if m.role == "tool" else 2.0  # ids a person or the agent repeats matter
        tag = speaker_tag(m)
        words: frozenset[str] = frozenset().union(*(f.content for fs in feats for f in fs))
        return _Analysis(
            tag,
            tuple(pieces),
            tuple(segments),
            tuple(feats),
            calls,
            call_features,
            tuple(reasons),
            cpt,
            tuple(identifiers),
            echo,
            dict(savings),
            words,
        )

    @staticmethod
    def _lines_repeated_later(messages: list[Message], old_idx: list[int]) -> set[str]:
        """Lines of older messages that appear again in a later message."""
        seen: set[str] = set()
        repeated: set[str] = set()
        old = set(old_idx)
        for i in range(len(messages) - 1, -1, -1):
            text = messages[i].text
            if "\n" not in text:
                continue
            lines = {ln.strip() for ln in text.splitlines() if len(ln) >= 20}
            if i in old:
                repeated |= lines & seen
            seen |= lines
        return repeated

    def _mark_duplicates(
        self, messages: list[Message], plans: dict[int, _Plan], old_idx: list[int]
    ) -> None:
        """An older message whose whole text appears again later is left out."""
        if not self.layers.dedup:
            return
        later: set[str] = set()
        for i in range(len(messages) - 1, -1, -1):
            text = messages[i].text
            if len(text) < 200:
                continue
            if i in plans and text in later:
                p = plans[i]
                pointer = "[same content as a later message]"
                p.pieces = [Piece(pointer, keep=True)]
                p.segments, p.scores, p.chosen = [[pointer]], [[50.0]], [[False]]
                p.words = [[frozenset()]]
                p.deduplicated = True
                p.reasons = ["dedup:repeated_later"]
            later.add(text)

    # ------------------------------------------------------------- phase B: select

    @staticmethod
    def _items(
        plans: dict[int, _Plan],
        old_idx: list[int],
        first_user: int,
        n: int,
        pool: list[tuple[str, float]],
    ) -> list[_Item]:
        items: list[_Item] = []
        order = 0
        for k, (ident, weight) in enumerate(pool):
            cost = _id_cost(ident)
            items.append(_Item(-_id_value(ident, weight), order, cost, _ID_ITEM, 0, k))
            order += 1
        for i in old_idx:
            p = plans[i]
            recency = 0.9 + 0.2 * (i / max(n, 1))  # newer counts a little more
            boost = recency * (2.5 if i == first_user else 1.0)
            for pi, segs in enumerate(p.segments):
                for si, seg in enumerate(segs):
                    cost = len(seg) / p.cpt
                    if p.scores[pi][si] < FILLER:
                        continue  # greetings and filler are never worth a token
                    value = p.scores[pi][si] * boost
                    words = p.words[pi][si] if p.pieces[pi].mode == "prose" else _NO_WORDS
                    items.append(
                        _Item(-value / max(cost, _MIN_COST), order, cost, i, pi, si, words)
                    )
                    order += 1
            for ci, call_score in enumerate(p.call_scores):
                cost = (len(p.calls[ci].name) + len(p.calls[ci].arguments) + 4) / p.cpt
                items.append(
                    _Item(-call_score * boost / max(cost, _MIN_COST), order, cost, i, -1, ci)
                )
                order += 1
        items.sort()
        return items

    @staticmethod
    def _select(
        items: list[_Item],
        plans: dict[int, _Plan],
        room: float,
        chosen_ids: list[bool],
        id_cap: float,
        *,
        top_up: bool = False,
    ) -> None:
        """Greedy by value per token, with a discount for sentences whose words are
        already covered (lazily re-ranked), so the note says more different things."""
        tagged: set[int] = set()
        covered: set[str] = set()
        if top_up:  # what the first pass chose counts as said
            tagged = {i for i, p in plans.items() if p.anything()}
            for i in tagged:
                p = plans[i]
                for pi, flags in enumerate(p.chosen):
                    covered.update(*(p.words[pi][si] for si, ok in enumerate(flags) if ok))
        # Walk the sorted items; a discounted item waits in a small heap of deferred ones
        # and comes back when it is again the best on offer.
        deferred: list[tuple[float, int, int]] = []
        j = 0
        while j < len(items) or deferred:
            if deferred and (j >= len(items) or deferred[0][:2] < items[j][:2]):
                priority, _, k = heapq.heappop(deferred)
                rescored = True
            else:
                k = j
                priority = items[j].priority
                rescored = False
                j += 1
            it = items[k]
            if it.plan == _ID_ITEM:
                if not chosen_ids[it.seg] and it.cost <= min(room, id_cap):
                    chosen_ids[it.seg] = True
                    room -= it.cost
                    id_cap -= it.cost
                continue
            p = plans[it.plan]
            if p.call_chosen[it.seg] if it.piece < 0 else p.chosen[it.piece][it.seg]:
                continue
            words = it.words
            if words and not rescored:
                overlap = len(words & covered) / len(words)
                if overlap:
                    discounted = priority * (1.0 - _REDUNDANCY * overlap)
                    heapq.heappush(deferred, (discounted, it.order, k))
                    continue
            add = it.cost + (0.0 if it.plan in tagged else _TAG_COST)
            if add > room:
                continue
            room -= add
            tagged.add(it.plan)
            covered.update(words)
            if it.piece < 0:
                p.call_chosen[it.seg] = True
            else:
                p.chosen[it.piece][it.seg] = True

    @staticmethod
    def _trim(
        items: list[_Item], plans: dict[int, _Plan], chosen_ids: list[bool], excess: float
    ) -> bool:
        """Unselect the least valuable chosen content worth about ``excess`` tokens."""
        freed = 0.0
        for it in reversed(items):
            if it.plan == _ID_ITEM:
                flags = chosen_ids
            else:
                p = plans[it.plan]
                flags = p.call_chosen if it.piece < 0 else p.chosen[it.piece]
            if not flags[it.seg]:
                continue
            flags[it.seg] = False
            freed += it.cost
            if freed >= excess:
                return True
        return False

    # ----------------------------------------------------------------- assembling

    def _condensed(self, p: _Plan) -> str:
        """The chosen parts of a message, for the note (nothing for a copy of a later
        message: in the note, a pointer to it says nothing)."""
        if p.deduplicated:
            return ""
        parts: list[str] = []
        for pi, piece in enumerate(p.pieces):
            segs, chosen = p.segments[pi], p.chosen[pi]
            if not any(chosen):
                if parts and piece.mode == "lines" and not parts[-1].endswith("... "):
                    parts.append(" ... ")
                continue
            parts.append(render(replace(piece, keep=False), segs, chosen, marks=False))
        body = "".join(parts).strip()
        calls = [
            f"-> {c.name}({c.arguments})"
            for c, ok in zip(p.calls, p.call_chosen, strict=True)
            if ok
        ]
        return " ".join(x for x in (body, *calls) if x)

    def _assemble(
        self,
        messages: list[Message],
        tokens: list[int],
        counter: TokenCounter,
        old_units: list[Unit],
        plans: dict[int, _Plan],
        pinned: set[int],
        verbatim: dict[int, str],
        pool: list[tuple[str, float]],
        chosen_ids: list[bool],
        *,
        force_fold: bool = False,
    ) -> tuple[list[Message], list[Decision], int | None]:
        """The output for the current selection, its trace and where the note is."""
        in_place: set[int] = set()
        if not force_fold:
            for u in old_units:
                if all(plans[i].complete() for i in u.indices):
                    in_place.update(u.indices)
        out: list[Message] = []
        trace: list[Decision] = []
        lines: list[str] = []
        folded = 0
        last_tag = ""
        note_at: int | None = None
        for i, m in enumerate(messages):
            t = tokens[i]
            if i in pinned:
                out.append(m)
                trace.append(Decision(i, "kept", f"pinned:{m.role}", t, t, self.name))
            elif i in verbatim:
                out.append(m)
                trace.append(Decision(i, "kept", verbatim[i], t, t, self.name))
            elif i in in_place:
                p = plans[i]
                text = "".join(pc.text for pc in p.pieces)
                new = (
                    replace(m, content=text, tool_calls=p.calls)
                    if isinstance(m.content, str)
                    else replace(m, tool_calls=p.calls)
                )
                after = counter.count_message(new)
                if new == m or after >= t:
                    out.append(m)
                    trace.append(Decision(i, "kept", "selected", t, t, self.name))
                else:
                    out.append(new)
                    done: Action = "deduplicated" if p.deduplicated else "compressed"
                    trace.append(Decision(i, done, ",".join(p.reasons), t, after, self.name))
            else:
                p = plans[i]
                folded += 1
                if note_at is None:
                    note_at = len(out)
                shown = self._condensed(p) if not force_fold else ""
                if shown and lines and last_tag == p.tag and not p.tag.startswith("tool"):
                    lines[-1] += " " + shown  # the same speaker again: one tag for both
                elif shown:
                    lines.append(f"{p.tag}: {shown}")
                    last_tag = p.tag
                action: Action = "deduplicated" if p.deduplicated else "summarized"
                reason = ",".join(["folded:note", *p.reasons])
                trace.append(Decision(i, action, reason, t, 0, self.name))
        if note_at is not None:
            shown_text = "\n".join(
                m.text + " " + " ".join(c.arguments for c in m.tool_calls) for m in out
            ) + "\n".join(lines)
            listed = [v for (v, _), ok in zip(pool, chosen_ids, strict=True) if ok]
            out.insert(note_at, self._note(folded, lines, listed, shown_text, counter))
        return out, trace, note_at

    @staticmethod
    def _savings(
        plans: dict[int, _Plan],
        tokens: list[int],
        note: Message | None,
        counter: TokenCounter,
    ) -> dict[str, int]:
        """Tokens each layer saved on the older messages, and what selection saved."""
        total: Counter[str] = Counter()
        for i, plan in plans.items():
            total.update(plan.savings)
            if plan.deduplicated:
                total["dedup"] += tokens[i]
        meta = {} if note is None else note.metadata[NOTE_KEY]
        if "codebook" in meta:
            total["codebook"] += meta["codebook_saved"]
        old_after = 0 if note is None else counter.count_message(note)
        layered = sum(total.values())
        total["selection"] = max(sum(tokens[i] for i in plans) - layered - old_after, 0)
        return {k: v for k, v in total.items() if v}

    def _note(
        self,
        folded: int,
        lines: list[str],
        candidates: list[str],
        shown: str,
        counter: TokenCounter,
        summarized: bool = False,
    ) -> Message:
        how = "summarized" if summarized else "condensed"
        in_shown = _lookup(shown, len(candidates))
        listed = list(dict.fromkeys(v for v in candidates if v not in in_shown))
        joined = "\n".join(listed)  # a value inside another listed one is found there
        listed = [v for v in listed if joined.count(v) == 1]
        body = list(lines)
        if listed:
            body.append(_ALSO + ", ".join(listed))
        meta: dict[str, Any] = {"folded": folded, "listed": candidates}
        text = "\n".join(body)
        layers = self.layers
        if text and (layers.codebook or layers.static_codebook or layers.path_aliases):
            book = build_codebook(
                [text],
                counter.count_text,
                static=layers.static_codebook,
                dynamic=layers.codebook,
                paths=layers.path_aliases,
            )
            encoded, used = book.encode(text)
            header = book.header(used)
            saved = counter.count_text(text) - counter.count_text(encoded + "\n" + header)
            if used and saved > 0:
                meta["codebook"] = {k: book.entries[k] for k in sorted(used)}
                meta["codebook_saved"] = saved
                text = header + "\n" + encoded
        return note_message(self.note_role, "note", f"{earlier(folded)} {how}", text, **meta)

    # ---------------------------------------------------------------------- digest

    @staticmethod
    def _identifier_pool(
        plans: dict[int, _Plan], old_idx: list[int], task: int
    ) -> list[tuple[str, float]]:
        """Identifiers of older messages, the most worth listing first: by kind, by how
        often they recur, and those of the task statement before all others."""
        freq: dict[str, float] = defaultdict(float)
        kind_of: dict[str, str] = {}
        first: dict[str, int] = {}
        for i in old_idx:
            echo = plans[i].echo
            for kind, value in plans[i].identifiers:
                freq[value] += echo
                kind_of.setdefault(value, kind)
                first.setdefault(value, i)
        weight = {
            v: KIND_WEIGHT.get(kind_of[v], 1.0)
            * (1 + math.log(freq[v]))
            * (3.0 if first[v] == task else 1.0)
            for v in freq
        }
        return [(v, weight[v]) for v in sorted(freq, key=lambda v: (-weight[v], first[v], v))]
